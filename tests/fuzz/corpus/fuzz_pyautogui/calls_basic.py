import pyautogui
import time
pyautogui.click(100, 200)
time.sleep(0.5); pyautogui.typewrite("hello\n", interval=0.1)
