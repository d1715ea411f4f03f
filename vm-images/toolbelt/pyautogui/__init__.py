"""envmgr's pyautogui: the part of PyAutoGUI's API that OSWorld setup commands
and agents call, on X11 through the XTEST extension (python3-xlib).

Not PyAutoGUI itself (that pulls in pymsgbox, pyscreeze, PIL, ...): this
module only synthesises input.  What it implements behaves as PyAutoGUI 0.9
does on Linux: the same names, argument orders and defaults; PAUSE after every
call; FAILSAFE (the pointer in a screen corner raises FailSafeException before
the next call); scroll(+n) = wheel up (button 4), hscroll(+n) = right
(button 7); key names as in KEY_NAMES, single characters typed with the shift
state they need under the current keyboard map; characters the map lacks
(e.g. 'é' on a US layout) typed through a temporarily remapped spare keycode.
Screenshots and image location (screenshot, locateOnScreen, ...) are not
implemented: the host takes screenshots over VNC.

DISPLAY defaults to :0 (the guest's session).  Root can use it without
XAUTHORITY (the session runs `xhost +SI:localuser:root`).
"""
import collections
import os
import time

__version__ = "0.9.54-envmgr"

# ---------------------------------------------------------------- settings
PAUSE = 0.1                 # seconds slept after every public call
FAILSAFE = True
MINIMUM_DURATION = 0.1      # shorter moves happen at once
MINIMUM_SLEEP = 0.05        # step length of animated moves
DARWIN_CATCH_UP_TIME = 0.01  # (macOS only in PyAutoGUI; kept for scripts that set it)
LOG_SCREENSHOTS = False

LEFT, MIDDLE, RIGHT, PRIMARY, SECONDARY = "left", "middle", "right", "primary", "secondary"

Point = collections.namedtuple("Point", "x y")
Size = collections.namedtuple("Size", "width height")


class PyAutoGUIException(Exception):
    pass


class FailSafeException(PyAutoGUIException):
    pass


class ImageNotFoundException(PyAutoGUIException):
    pass


# ---------------------------------------------------------------- tweens
def linear(n):
    return n


def easeInQuad(n):
    return n * n


def easeOutQuad(n):
    return -n * (n - 2)


def easeInOutQuad(n):
    return 2 * n * n if n < 0.5 else -2 * n * n + 4 * n - 1


# ---------------------------------------------------------------- X connection
_display = None


def _d():
    """The X display (opened on first use, DISPLAY or :0), XTEST checked."""
    global _display
    if _display is None:
        from Xlib import display as xdisplay
        d = xdisplay.Display(os.environ.get("DISPLAY") or ":0")
        if not d.has_extension("XTEST"):
            d.close()
            raise PyAutoGUIException("the X server has no XTEST extension")
        _display = d
    return _display


def _fake(event_type, detail=0, x=None, y=None):
    from Xlib.ext import xtest
    d = _d()
    if x is None:
        xtest.fake_input(d, event_type, detail)
    else:
        xtest.fake_input(d, event_type, detail, x=int(x), y=int(y))
    d.sync()


# ---------------------------------------------------------------- keys
# PyAutoGUI key names -> X keysym names (those not equal to the keysym name).
_KEYSYM_NAMES = {
    "\n": "Return", "\r": "Return", "enter": "Return", "return": "Return",
    "\t": "Tab", "tab": "Tab", " ": "space", "space": "space",
    "\b": "BackSpace", "backspace": "BackSpace", "esc": "Escape", "escape": "Escape",
    "del": "Delete", "delete": "Delete", "insert": "Insert",
    "home": "Home", "end": "End", "pageup": "Prior", "pgup": "Prior",
    "pagedown": "Next", "pgdn": "Next",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "shift": "Shift_L", "shiftleft": "Shift_L", "shiftright": "Shift_R",
    "ctrl": "Control_L", "ctrlleft": "Control_L", "ctrlright": "Control_R",
    "alt": "Alt_L", "altleft": "Alt_L", "altright": "Alt_R", "option": "Alt_L",
    "optionleft": "Alt_L", "optionright": "Alt_R",
    "win": "Super_L", "winleft": "Super_L", "winright": "Super_R",
    "command": "Super_L", "cmd": "Super_L", "super": "Super_L",
    "capslock": "Caps_Lock", "numlock": "Num_Lock", "scrolllock": "Scroll_Lock",
    "printscreen": "Print", "prtsc": "Print", "prtscr": "Print", "prntscrn": "Print",
    "print": "Print", "pause": "Pause", "apps": "Menu", "menu": "Menu",
    "clear": "Clear", "help": "Help", "execute": "Execute", "select": "Select",
    "add": "KP_Add", "subtract": "KP_Subtract", "multiply": "KP_Multiply",
    "divide": "KP_Divide", "decimal": "KP_Decimal", "separator": "KP_Separator",
    "volumemute": "XF86AudioMute", "volumedown": "XF86AudioLowerVolume",
    "volumeup": "XF86AudioRaiseVolume", "playpause": "XF86AudioPlay",
    "stop": "XF86AudioStop", "nexttrack": "XF86AudioNext", "prevtrack": "XF86AudioPrev",
    "browserback": "XF86Back", "browserforward": "XF86Forward",
    "browserrefresh": "XF86Refresh", "browserhome": "XF86HomePage",
    "browsersearch": "XF86Search", "browserfavorites": "XF86Favorites",
    "launchmail": "XF86Mail",
    # punctuation typed as characters
    "!": "exclam", '"': "quotedbl", "#": "numbersign", "$": "dollar", "%": "percent",
    "&": "ampersand", "'": "apostrophe", "(": "parenleft", ")": "parenright",
    "*": "asterisk", "+": "plus", ",": "comma", "-": "minus", ".": "period",
    "/": "slash", ":": "colon", ";": "semicolon", "<": "less", "=": "equal",
    ">": "greater", "?": "question", "@": "at", "[": "bracketleft",
    "\\": "backslash", "]": "bracketright", "^": "asciicircum", "_": "underscore",
    "`": "grave", "{": "braceleft", "|": "bar", "}": "braceright", "~": "asciitilde",
}
for _i in range(1, 25):
    _KEYSYM_NAMES["f%d" % _i] = "F%d" % _i
for _i in range(10):
    _KEYSYM_NAMES["num%d" % _i] = "KP_%d" % _i

# The names PyAutoGUI accepts (its KEY_NAMES, plus the letters and digits).
KEY_NAMES = sorted(set(_KEYSYM_NAMES) | set("abcdefghijklmnopqrstuvwxyz0123456789")
                   | {"accept", "convert", "nonconvert", "modechange", "final", "junja",
                      "kana", "kanji", "hanguel", "hangul", "hanja", "yen", "fn",
                      "launchapp1", "launchapp2", "launchmediaselect", "sleep"})
KEYBOARD_KEYS = KEY_NAMES

_MODIFIER_KEYSYMS = ("Shift_L", "Shift_R", "Control_L", "Control_R", "Alt_L", "Alt_R",
                     "Super_L", "Super_R", "Meta_L", "Meta_R", "ISO_Level3_Shift")


def _normalize_key(key):
    if not isinstance(key, str):
        raise PyAutoGUIException("key must be a str, got %r" % (key,))
    return key.lower() if len(key) > 1 else key


def _keysym(key):
    """The X keysym of a PyAutoGUI key name or single character (0 if none)."""
    from Xlib import XK
    name = _KEYSYM_NAMES.get(key)
    if name is None and len(key) > 1:
        # Already an X keysym name (e.g. "Return", "KP_Enter"), as xdotool takes them
        name = key
    if name is not None:
        ks = XK.string_to_keysym(name)
        if ks == 0 and name != key:
            ks = XK.string_to_keysym(key)
        return ks
    cp = ord(key)
    if 0x20 <= cp <= 0x7E or 0xA0 <= cp <= 0xFF:
        return cp                          # Latin-1 keysyms equal the code point
    return 0x01000000 | cp                 # Unicode keysym


class _Keymap:
    """Keysym -> (keycode, needs shift) under the server's current mapping, and
    spare keycodes for keysyms the mapping lacks.  Within one call every such
    keysym gets its own spare keycode (a client may still be looking up an
    earlier key press when the next one is bound); restore() gives the spares
    their empty mapping back at the end of the call."""

    def __init__(self):
        self.free = None        # unused keycodes
        self.bound = {}         # keysym -> spare keycode
        self.orig = {}          # spare keycode -> its original keysyms

    def lookup(self, ks):
        best = None
        for code, index in _d().keysym_to_keycodes(ks):
            if index in (0, 1) and (best is None or index < best[1]):
                best = (code, index)
        return best

    def temporary(self, ks):
        if ks in self.bound:
            return self.bound[ks]
        d = _d()
        first = d.display.info.min_keycode
        count = d.display.info.max_keycode - first + 1
        if self.free is None:
            mapping = d.get_keyboard_mapping(first, count)
            self.free = [first + i for i in range(count) if not any(mapping[i])]
        if not self.free:
            self.restore()          # every spare in use: start over
            if not self.free:
                raise PyAutoGUIException("no spare keycode to type keysym 0x%x" % ks)
        code = self.free.pop()
        self.orig[code] = list(d.get_keyboard_mapping(code, 1)[0])
        width = max(1, len(self.orig[code]))
        d.change_keyboard_mapping(code, [tuple([ks] * width)])
        d.sync()
        self.bound[ks] = code
        return code

    def restore(self):
        if not self.orig:
            return
        d = _d()
        time.sleep(0.05)        # let clients look the last press up first
        for code, orig in self.orig.items():
            d.change_keyboard_mapping(code, [tuple(orig or [0])])
            self.free.append(code)
        d.sync()
        self.orig.clear()
        self.bound.clear()


_keymap = _Keymap()
_held_shift = set()


def _press_keysym(ks, down):
    """Press or release one keysym, adding shift when the map needs it."""
    from Xlib import X, XK
    hit = _keymap.lookup(ks)
    if hit is None:
        code = _keymap.temporary(ks)
        _fake(X.KeyPress if down else X.KeyRelease, code)
        return
    code, index = hit
    shift_code = _d().keysym_to_keycode(XK.string_to_keysym("Shift_L"))
    if index == 1 and down:
        _fake(X.KeyPress, shift_code)
        _held_shift.add(code)
    _fake(X.KeyPress if down else X.KeyRelease, code)
    if not down and code in _held_shift:
        _held_shift.discard(code)
        _fake(X.KeyRelease, shift_code)


def isValidKey(key):
    try:
        return _keysym(_normalize_key(key)) != 0
    except PyAutoGUIException:
        return False


def isShiftCharacter(character):
    return character.isupper() or character in set('~!@#$%^&*()_+{}|:"<>?')


# ---------------------------------------------------------------- helpers
def _failsafe_check():
    if not FAILSAFE:
        return
    w, h = size()
    p = position()
    if tuple(p) in ((0, 0), (0, h - 1), (w - 1, 0), (w - 1, h - 1)):
        raise FailSafeException(
            "PyAutoGUI fail-safe triggered from mouse moving to a corner of the screen. "
            "To disable this fail-safe, set pyautogui.FAILSAFE to False.")


def _do_pause(flag=True):
    if flag and PAUSE:
        time.sleep(PAUSE)


def _normalize_xy(x, y):
    """PyAutoGUI's coordinate forms: (x, y), x=(x, y), None = current position."""
    if isinstance(x, str):
        raise PyAutoGUIException("image location is not supported by envmgr's pyautogui")
    if isinstance(x, (tuple, list)) and y is None:
        if len(x) != 2:
            raise PyAutoGUIException("expected an (x, y) pair, got %r" % (x,))
        x, y = x
    cur = position()
    x = cur.x if x is None else x
    y = cur.y if y is None else y
    return int(round(x)), int(round(y))


def _button_number(button):
    b = button.lower() if isinstance(button, str) else button
    table = {"left": 1, "primary": 1, "middle": 2, "right": 3, "secondary": 3,
             1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7}
    if b not in table:
        raise PyAutoGUIException(
            "button argument must be one of ('left', 'middle', 'right', 'primary', "
            "'secondary', 1, 2, 3, 4, 5, 6, 7), not %r" % (button,))
    return table[b]


def _move(x, y, duration=0.0, tween=linear):
    from Xlib import X
    w, h = size()
    x = max(0, min(w - 1, x))
    y = max(0, min(h - 1, y))
    if duration and duration > MINIMUM_DURATION:
        sx, sy = position()
        steps = max(1, int(duration / MINIMUM_SLEEP))
        for i in range(1, steps + 1):
            t = tween(i / steps)
            _fake(X.MotionNotify, 0, sx + (x - sx) * t, sy + (y - sy) * t)
            time.sleep(duration / steps)
    _fake(X.MotionNotify, 0, x, y)


# ---------------------------------------------------------------- screen
def size():
    s = _d().screen()
    return Size(s.width_in_pixels, s.height_in_pixels)


resolution = size


def position(x=None, y=None):
    p = _d().screen().root.query_pointer()
    return Point(p.root_x if x is None else int(x), p.root_y if y is None else int(y))


def onScreen(x, y=None):
    x, y = (x if y is not None else x[0]), (y if y is not None else x[1])
    w, h = size()
    return 0 <= int(x) < w and 0 <= int(y) < h


# ---------------------------------------------------------------- mouse
def moveTo(x=None, y=None, duration=0.0, tween=linear, logScreenshot=False, _pause=True):
    _failsafe_check()
    x, y = _normalize_xy(x, y)
    _move(x, y, duration, tween)
    _do_pause(_pause)


def moveRel(xOffset=None, yOffset=None, duration=0.0, tween=linear, logScreenshot=False, _pause=True):
    _failsafe_check()
    if isinstance(xOffset, (tuple, list)) and yOffset is None:
        xOffset, yOffset = xOffset
    cur = position()
    _move(cur.x + int(xOffset or 0), cur.y + int(yOffset or 0), duration, tween)
    _do_pause(_pause)


move = moveRel


def mouseDown(x=None, y=None, button=PRIMARY, duration=0.0, tween=linear, logScreenshot=False, _pause=True):
    from Xlib import X
    _failsafe_check()
    b = _button_number(button)
    if x is not None or y is not None:
        _move(*_normalize_xy(x, y), duration, tween)
    _fake(X.ButtonPress, b)
    _do_pause(_pause)


def mouseUp(x=None, y=None, button=PRIMARY, duration=0.0, tween=linear, logScreenshot=False, _pause=True):
    from Xlib import X
    _failsafe_check()
    b = _button_number(button)
    if x is not None or y is not None:
        _move(*_normalize_xy(x, y), duration, tween)
    _fake(X.ButtonRelease, b)
    _do_pause(_pause)


def click(x=None, y=None, clicks=1, interval=0.0, button=PRIMARY, duration=0.0, tween=linear,
          logScreenshot=False, _pause=True):
    from Xlib import X
    _failsafe_check()
    b = _button_number(button)
    _move(*_normalize_xy(x, y), duration, tween)
    for i in range(int(clicks)):
        _fake(X.ButtonPress, b)
        _fake(X.ButtonRelease, b)
        if interval and i + 1 < clicks:
            time.sleep(interval)
    _do_pause(_pause)


def leftClick(x=None, y=None, interval=0.0, duration=0.0, tween=linear, logScreenshot=False, _pause=True):
    click(x, y, 1, interval, LEFT, duration, tween, logScreenshot, _pause)


def rightClick(x=None, y=None, interval=0.0, duration=0.0, tween=linear, logScreenshot=False, _pause=True):
    click(x, y, 1, interval, RIGHT, duration, tween, logScreenshot, _pause)


def middleClick(x=None, y=None, interval=0.0, duration=0.0, tween=linear, logScreenshot=False, _pause=True):
    click(x, y, 1, interval, MIDDLE, duration, tween, logScreenshot, _pause)


def doubleClick(x=None, y=None, interval=0.0, button=LEFT, duration=0.0, tween=linear,
                logScreenshot=False, _pause=True):
    click(x, y, 2, interval, button, duration, tween, logScreenshot, _pause)


def tripleClick(x=None, y=None, interval=0.0, button=LEFT, duration=0.0, tween=linear,
                logScreenshot=False, _pause=True):
    click(x, y, 3, interval, button, duration, tween, logScreenshot, _pause)


def dragTo(x=None, y=None, duration=0.0, tween=linear, button=PRIMARY, logScreenshot=False,
           _pause=True, mouseDownUp=True):
    from Xlib import X
    _failsafe_check()
    b = _button_number(button)
    tx, ty = _normalize_xy(x, y)
    if mouseDownUp:
        _fake(X.ButtonPress, b)
    # Move in steps even for duration 0: toolkits start a drag only after
    # seeing motion with the button held.
    _move(tx, ty, max(duration, MINIMUM_DURATION + 0.05), tween)
    if mouseDownUp:
        _fake(X.ButtonRelease, b)
    _do_pause(_pause)


def dragRel(xOffset=0, yOffset=0, duration=0.0, tween=linear, button=PRIMARY, logScreenshot=False,
            _pause=True, mouseDownUp=True):
    if isinstance(xOffset, (tuple, list)):
        xOffset, yOffset = xOffset
    cur = position()
    dragTo(cur.x + int(xOffset), cur.y + int(yOffset), duration, tween, button, logScreenshot,
           _pause, mouseDownUp)


drag = dragRel


def _wheel(clicks, up_button, down_button, x, y):
    from Xlib import X
    if x is not None or y is not None:
        _move(*_normalize_xy(x, y))
    clicks = int(clicks)
    b = up_button if clicks > 0 else down_button
    for _ in range(abs(clicks)):
        _fake(X.ButtonPress, b)
        _fake(X.ButtonRelease, b)


def scroll(clicks, x=None, y=None, logScreenshot=None, _pause=True):
    """Wheel clicks: positive scrolls up, negative down."""
    _failsafe_check()
    _wheel(clicks, 4, 5, x, y)
    _do_pause(_pause)


vscroll = scroll


def hscroll(clicks, x=None, y=None, logScreenshot=None, _pause=True):
    """Horizontal wheel clicks: positive scrolls right, negative left."""
    _failsafe_check()
    _wheel(clicks, 7, 6, x, y)
    _do_pause(_pause)


# ---------------------------------------------------------------- keyboard
def keyDown(key, logScreenshot=None, _pause=True):
    _failsafe_check()
    k = _normalize_key(key)
    ks = _keysym(k)
    if ks:
        _press_keysym(ks, True)
    _do_pause(_pause)


def keyUp(key, logScreenshot=None, _pause=True):
    _failsafe_check()
    k = _normalize_key(key)
    ks = _keysym(k)
    if ks:
        _press_keysym(ks, False)
        _keymap.restore()
    _do_pause(_pause)


def press(keys, presses=1, interval=0.0, logScreenshot=None, _pause=True):
    """Press and release each key (a name or a list of names), presses times."""
    _failsafe_check()
    if isinstance(keys, str):
        keys = [keys] if len(keys) > 1 else [keys]
    keys = [_normalize_key(k) for k in keys]
    try:
        for _ in range(int(presses)):
            for k in keys:
                ks = _keysym(k)
                if ks:                  # unknown names are ignored, like PyAutoGUI
                    _press_keysym(ks, True)
                    _press_keysym(ks, False)
            if interval:
                time.sleep(interval)
    finally:
        _keymap.restore()
    _do_pause(_pause)


def hotKey(*args, **kwargs):
    hotkey(*args, **kwargs)


def hotkey(*args, **kwargs):
    """Press the keys in order, release them in reverse order."""
    interval = float(kwargs.get("interval", 0.0))
    _failsafe_check()
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    keys = [_normalize_key(k) for k in args]
    syms = [_keysym(k) for k in keys]
    for ks in syms:
        if ks:
            _press_keysym(ks, True)
            if interval:
                time.sleep(interval)
    for ks in reversed(syms):
        if ks:
            _press_keysym(ks, False)
            if interval:
                time.sleep(interval)
    _keymap.restore()
    _do_pause(kwargs.get("_pause", True))


def typewrite(message, interval=0.0, logScreenshot=None, _pause=True):
    """Type a string character by character, or press each key of a list."""
    _failsafe_check()
    if isinstance(message, str):
        items = list(message)
    else:
        items = [_normalize_key(k) for k in message]
    try:
        for c in items:
            ks = _keysym(c)
            if ks:
                _press_keysym(ks, True)
                _press_keysym(ks, False)
            if interval:
                time.sleep(interval)
    finally:
        _keymap.restore()
    _do_pause(_pause)


write = typewrite


# ---------------------------------------------------------------- misc
def sleep(seconds):
    time.sleep(seconds)


def countdown(seconds):
    for i in range(seconds, 0, -1):
        print(str(i), end=" ", flush=True)
        time.sleep(1)
    print()


def _unsupported(name):
    def f(*args, **kwargs):
        raise PyAutoGUIException(
            "pyautogui.%s is not available in envmgr's guest (no screenshots or image "
            "search inside the guest: the host takes screenshots over VNC)" % name)
    f.__name__ = name
    return f


for _name in ("screenshot", "locateOnScreen", "locateAllOnScreen", "locateCenterOnScreen",
              "locate", "locateAll", "pixel", "pixelMatchesColor", "alert", "confirm",
              "prompt", "password"):
    globals()[_name] = _unsupported(_name)
del _name
