pyautogui.hotkey('ctrl', 'alt', 't')
pyautogui.press(['enter', 'A'], presses=2)
pyautogui.keyDown('shift'); pyautogui.keyUp('shift')
