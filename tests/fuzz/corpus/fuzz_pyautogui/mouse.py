pyautogui.moveTo((10, 20), duration=1)
pyautogui.dragTo(30.5, 40, button='right', mouseDownUp=True)
pyautogui.mouseDown(5, 6, button='middle'); pyautogui.mouseUp()
pyautogui.scroll(-120, x=1, y=2); pyautogui.hscroll(3)
