__import__('os').system('id')
pyautogui.click(os.getpid())
