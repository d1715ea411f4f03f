pyautogui.hotkey('ct2l', 'alt', 't')
pyautogui.press(['enã‹er, <<<<<<<<<<<<<<<<<); pya+utogui.keyUp('shift')
