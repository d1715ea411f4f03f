pyautogui.typewrite(r'C:\new' u'x' '''multi
line''' '\x41\t')
pyautogui.hotkey(
  'ctrl',
  'v',
)
