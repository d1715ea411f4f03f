"""envmgr_rl: drive envmgr desktop envs from an RL trainer, with gymnasium's shapes (docs/rl.md).

    from envmgr_rl import EnvmgrRLEnv, EnvmgrVectorEnv

    with EnvmgrRLEnv(url, token, task=task) as env:
        obs, info = env.reset()                       # or reset(options={"state": "k3"}): a saved state
        obs, reward, terminated, truncated, info = env.step({"action_type": "CLICK", "x": 640, "y": 400})

    with EnvmgrVectorEnv(url, token, n=4, task=task, from_state="k3") as vec:   # a group from one state
        obs, infos = vec.reset()
        obs, rewards, terminateds, truncateds, infos = vec.step([a0, a1, a2, a3])

gymnasium's Env and VectorEnv API (reset -> (obs, info), step -> (obs, reward, terminated, truncated,
info), observation_space, action_space) over envmgr's HTTP API (`envmgr serve`, docs/http-api.md),
without depending on gymnasium: Python 3 standard library only. Where gymnasium is importable the envs
are gymnasium.Env / gymnasium.vector.VectorEnv subclasses with real gymnasium spaces; where numpy is
importable obs["image"] can carry the decoded frame (decode_image=True). Neither is ever required.

Rules (docs/rl.md has them whole):
- reward is 0.0 on every step but the last of an episode, and there the task's evaluate() score.
- terminated: the agent said DONE or FAIL. truncated: the task's limits.max_steps or
  limits.episode_timeout_s ended it, the client's max_steps did, or the env failed (env_error).
- an episode without a score (EnvmgrNoScore: env_error, a failed setup or postconfig step, an
  evaluator error) is never a reward of 0: EnvmgrRLEnv raises EnvmgrNoScore by default (no_score="raise",
  the exception carries .obs and .info), or with no_score="flag" returns a reward of NaN with
  info["no_score"] True. EnvmgrVectorEnv flags by default, so one env's failure does not lose the batch.
- EnvmgrVectorEnv autoresets on the next step, gymnasium's default (AutoresetMode.NEXT_STEP), or not at
  all with autoreset_mode="disabled" (an ended env is left alone until reset: group rollouts).
"""
import base64
import math
import random
import struct
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

from envmgr_client import EnvmgrEnv, EnvmgrError, EnvmgrNoScore

try:  # optional: the decoded frame (decode_image=True) and Box samples
    import numpy as _np
except ImportError:
    _np = None
try:  # optional: real gymnasium base classes and spaces
    import gymnasium as _gym
    import gymnasium.spaces  # noqa: F401
    import gymnasium.vector  # noqa: F401
except ImportError:
    _gym = None

__all__ = ["EnvmgrRLEnv", "EnvmgrVectorEnv", "EnvmgrError", "EnvmgrNoScore", "ActionSpace", "PNGFrame",
           "Box", "Text", "Discrete", "Dict", "Tuple", "check_action", "png_to_array", "HAVE_GYMNASIUM",
           "HAVE_NUMPY"]

HAVE_GYMNASIUM = _gym is not None
HAVE_NUMPY = _np is not None

OBSERVATIONS = ("screenshot", "screenshot_a11y_tree", "a11y_tree")
ACTION_SPACES = ("computer_13", "pyautogui")
DEFAULT_MAX_STEPS = 15      # a task's limits.max_steps when it sets none (docs/task-format.md)
MAX_STEPS_LIMIT = 1000      # the most a task may set
INSTRUCTION_MAX = 65536     # the Text spaces' max_length: larger than any instruction or tree we expect
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------
# Spaces: plain objects shaped like gymnasium's (shape, dtype, contains, sample, seed). With
# gymnasium importable the envs use gymnasium's own Box, Text, Discrete, Dict and Tuple instead; the
# two spaces gymnasium has no class for (a PNG-encoded frame, a computer_13 action) derive from
# gymnasium.spaces.Space then.

class Space:
    """The plain base: gymnasium.spaces.Space's attributes without gymnasium."""

    def __init__(self, shape=None, dtype=None, seed=None):
        self._shape = None if shape is None else tuple(shape)
        self.dtype = dtype
        self._rng = random.Random(seed)

    @property
    def shape(self):
        return self._shape

    def seed(self, seed=None):
        """Seeds sample(); returns the seed (gymnasium 1.x's convention)."""
        self._rng = random.Random(seed)
        return seed

    def contains(self, x):
        raise NotImplementedError

    def sample(self, mask=None, probability=None):
        raise NotImplementedError

    def __contains__(self, x):
        return self.contains(x)


class Box(Space):
    """An array of `shape` with values in [low, high] (gymnasium.spaces.Box)."""

    def __init__(self, low, high, shape, dtype="uint8", seed=None):
        super().__init__(shape, dtype, seed)
        self.low, self.high = low, high

    def contains(self, x):
        shape = getattr(x, "shape", None)
        return shape is not None and tuple(shape) == self.shape and str(getattr(x, "dtype", "")) == str(self.dtype)

    def sample(self, mask=None, probability=None):
        if _np is None:
            raise NotImplementedError("Box.sample needs numpy")
        rng = _np.random.default_rng(self._rng.getrandbits(32))
        return rng.integers(self.low, self.high, size=self.shape, endpoint=True).astype(self.dtype)

    def __repr__(self):
        return "Box(%s, %s, %s, %s)" % (self.low, self.high, self.shape, self.dtype)


class Text(Space):
    """A string of min_length..max_length characters (gymnasium.spaces.Text; any character)."""

    def __init__(self, max_length, min_length=0, seed=None):
        super().__init__(None, str, seed)
        self.max_length, self.min_length = max_length, min_length

    def contains(self, x):
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask=None, probability=None):
        n = self._rng.randint(self.min_length, min(self.max_length, 32))
        return "".join(self._rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(n))

    def __repr__(self):
        return "Text(%d, %d)" % (self.min_length, self.max_length)


class Discrete(Space):
    """An integer in start..start+n-1 (gymnasium.spaces.Discrete)."""

    def __init__(self, n, start=0, seed=None):
        super().__init__((), "int64", seed)
        self.n, self.start = n, start

    def contains(self, x):
        return isinstance(x, int) and not isinstance(x, bool) and self.start <= x < self.start + self.n

    def sample(self, mask=None, probability=None):
        return self.start + self._rng.randrange(self.n)

    def __repr__(self):
        return "Discrete(%d)" % self.n


class Dict(Space):
    """A dict of spaces (gymnasium.spaces.Dict): .spaces, space["key"], keys()."""

    def __init__(self, spaces, seed=None):
        super().__init__(None, None, seed)
        self.spaces = dict(spaces)

    def __getitem__(self, key):
        return self.spaces[key]

    def keys(self):
        return self.spaces.keys()

    def items(self):
        return self.spaces.items()

    def seed(self, seed=None):
        super().seed(seed)
        return {k: s.seed(None if seed is None else seed + i + 1) for i, (k, s) in enumerate(self.spaces.items())}

    def contains(self, x):
        return isinstance(x, dict) and set(x) == set(self.spaces) and all(self.spaces[k].contains(x[k]) for k in x)

    def sample(self, mask=None, probability=None):
        return {k: s.sample() for k, s in self.spaces.items()}

    def __repr__(self):
        return "Dict(%s)" % ", ".join("%r: %r" % kv for kv in self.spaces.items())


class Tuple(Space):
    """A tuple of spaces (gymnasium.spaces.Tuple): a vector env's batched space."""

    def __init__(self, spaces, seed=None):
        super().__init__(None, None, seed)
        self.spaces = tuple(spaces)

    def __getitem__(self, i):
        return self.spaces[i]

    def __len__(self):
        return len(self.spaces)

    def contains(self, x):
        return isinstance(x, (tuple, list)) and len(x) == len(self.spaces) and \
            all(s.contains(v) for s, v in zip(self.spaces, x))

    def sample(self, mask=None, probability=None):
        return tuple(s.sample() for s in self.spaces)

    def __repr__(self):
        return "Tuple(%s)" % ", ".join(map(repr, self.spaces))


_SpaceBase = _gym.spaces.Space if _gym is not None else Space


class _OwnSpace(_SpaceBase):
    """What envmgr's own spaces share: a seeded sampler of their own, and no numpy flattening."""

    def seed(self, seed=None):
        self._rng = random.Random(seed)
        if _gym is not None:  # gymnasium's np_random too
            return _SpaceBase.seed(self, seed)
        return seed

    @property
    def is_np_flattenable(self):
        return False


class PNGFrame(_OwnSpace):
    """The screenshot as the API sends it: an HxWx3 uint8 frame (the Box of shape (H, W, 3), low 0,
    high 255) encoded as PNG bytes. contains() checks the PNG signature and its IHDR's size."""

    def __init__(self, height, width, seed=None):
        _SpaceBase.__init__(self, shape=(height, width, 3), dtype="uint8")
        self.low, self.high, self.encoding = 0, 255, "png"
        self.seed(seed)

    def contains(self, x):
        size = png_size(x) if isinstance(x, (bytes, bytearray)) else None
        return size == (self.shape[1], self.shape[0])

    def sample(self, mask=None, probability=None):
        """A frame of one random colour, PNG-encoded."""
        return _png_solid(self.shape[1], self.shape[0], bytes(self._rng.randrange(256) for _ in range(3)))

    def to_jsonable(self, sample_n):
        return [base64.b64encode(s).decode("ascii") for s in sample_n]

    def from_jsonable(self, sample_n):
        return [base64.b64decode(s) for s in sample_n]

    def __eq__(self, other):
        return isinstance(other, PNGFrame) and other.shape == self.shape

    def __hash__(self):
        return hash(("PNGFrame", self.shape))

    def __repr__(self):
        return "PNGFrame(Box(0, 255, %s, uint8), encoding=png)" % (self.shape,)


# ---------------------------------------------------------------------------------------------
# The action space: computer_13 objects (docs/actions.md), pyautogui code, "DONE"/"FAIL"/"WAIT".

_BUTTONS = ("left", "middle", "right")
_XY = ("x", "y")
# action_type: (allowed fields, required fields)
_ACTION_FIELDS = {
    "MOVE_TO": (_XY, _XY), "CLICK": (_XY + ("button", "num_clicks"), ()),
    "MOUSE_DOWN": (("button",), ()), "MOUSE_UP": (("button",), ()),
    "RIGHT_CLICK": (_XY, ()), "DOUBLE_CLICK": (_XY, ()), "DRAG_TO": (_XY, _XY),
    "SCROLL": (("dx", "dy"), ()), "TYPING": (("text",), ("text",)),
    "PRESS": (("key",), ("key",)), "KEY_DOWN": (("key",), ("key",)), "KEY_UP": (("key",), ("key",)),
    "HOTKEY": (("keys",), ("keys",)), "WAIT": (("seconds",), ()), "FAIL": ((), ()), "DONE": ((), ()),
    "PYAUTOGUI": (("code",), ("code",)),
}
_SPECIAL_ANSWERS = ("DONE", "FAIL", "WAIT")


def _bad(field, message):
    return EnvmgrError(400, "%s: %s (refused by the client: nothing was sent)" % (field, message), field)


def _number(action, k, lo, hi, whole=True, what="out of range"):
    v = action[k]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        raise _bad("action." + k, "expected a number, got %s" % type(v).__name__)
    if whole and v != int(v):
        raise _bad("action." + k, "expected a whole number, got %g" % v)
    if not lo <= v <= hi:
        raise _bad("action." + k, "%g is %s (%g..%g)" % (v, what, lo, hi))


def check_action(action, width, height):
    """Raise EnvmgrError (status 400, .field naming the culprit, as the server would) when `action` is not
    of a shape the API takes: a computer_13 object, {"pyautogui": code}, or a string (pyautogui code or
    "DONE"/"FAIL"/"WAIT"). Checks types, fields and screen bounds; key names and typeable characters are
    left to the server (its 400 names the field too). Nothing is sent either way."""
    if isinstance(action, str):
        if not action.strip():
            raise _bad("action", "empty pyautogui code")
        return
    if not isinstance(action, dict):
        raise _bad("action", "expected an object (computer_13) or a string (pyautogui code), got %s"
                   % type(action).__name__)
    if "pyautogui" in action:
        if len(action) != 1 or not isinstance(action["pyautogui"], str) or not action["pyautogui"].strip():
            raise _bad("action.pyautogui", "expected a string of code, alone")
        return
    at = action.get("action_type")
    if not isinstance(at, str):
        raise _bad("action.action_type", "missing" if at is None else "expected a string")
    if at not in _ACTION_FIELDS:
        raise _bad("action.action_type", "unknown action type `%s`" % at[:32])
    allowed, required = _ACTION_FIELDS[at]
    for k in action:
        if k != "action_type" and k not in allowed:
            raise _bad("action." + str(k)[:64], "unknown field for this action type")
    for k in required:
        if k not in action:
            raise _bad("action." + k, "missing")
    if ("x" in action) != ("y" in action):
        raise _bad("action." + ("y" if "x" in action else "x"), "missing (x and y go together)")
    if "x" in action:
        _number(action, "x", 0, width - 1, what="off-screen")
        _number(action, "y", 0, height - 1, what="off-screen")
    if "button" in action and action["button"] not in _BUTTONS:
        raise _bad("action.button", "expected left, middle or right")
    if "num_clicks" in action:
        _number(action, "num_clicks", 1, 3)
    if at == "SCROLL":
        if "dx" not in action and "dy" not in action:
            raise _bad("action.dy", "missing (SCROLL needs dx or dy)")
        for k in ("dx", "dy"):
            if k in action:
                _number(action, k, -50, 50)
    if "seconds" in action:
        _number(action, "seconds", 0, 60, whole=False)
    for k in ("text", "key", "code"):
        if k in action and not isinstance(action[k], str):
            raise _bad("action." + k, "expected a string")
    if "text" in action and len(action["text"].encode()) > 8192:
        raise _bad("action.text", "more than 8192 bytes")
    if "code" in action and not action["code"]:
        raise _bad("action.code", "empty")
    if "keys" in action:
        keys = action["keys"]
        if not isinstance(keys, list) or not 1 <= len(keys) <= 8:
            raise _bad("action.keys", "expected an array of 1 to 8 key names")
        for i, k in enumerate(keys):
            if not isinstance(k, str):
                raise _bad("action.keys[%d]" % i, "expected a string")


def action_schema(name, width, height):
    """The action space as a JSON-schema-like dict: what check_action accepts, for a prompt or a parser."""
    xy = {"x": {"type": "integer", "minimum": 0, "maximum": width - 1},
          "y": {"type": "integer", "minimum": 0, "maximum": height - 1}}
    props = dict(xy, button={"enum": list(_BUTTONS)}, num_clicks={"type": "integer", "minimum": 1, "maximum": 3},
                 dx={"type": "integer", "minimum": -50, "maximum": 50},
                 dy={"type": "integer", "minimum": -50, "maximum": 50},
                 text={"type": "string", "maxLength": 8192, "description": "printable ASCII, newline, tab"},
                 key={"type": "string", "description": "a key name (docs/actions.md)"},
                 keys={"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 8},
                 seconds={"type": "number", "minimum": 0, "maximum": 60},
                 code={"type": "string", "minLength": 1})
    objects = [{"type": "object",
                "properties": dict({"action_type": {"const": at}}, **{k: props[k] for k in allowed}),
                "required": ["action_type"] + list(required), "additionalProperties": False}
               for at, (allowed, required) in _ACTION_FIELDS.items()]
    code = [{"type": "string", "description": "pyautogui code, or DONE / FAIL / WAIT (OSWorld's answers)"},
            {"type": "object", "properties": {"pyautogui": {"type": "string"}}, "required": ["pyautogui"],
             "additionalProperties": False}]
    return {"name": name, "screen": {"width": width, "height": height},
            "oneOf": objects + code if name == "computer_13" else code + objects}


class ActionSpace(_OwnSpace):
    """The env's actions: .name ("computer_13" or "pyautogui": what the agent speaks; both forms are
    accepted, as by the API), .schema (action_schema), contains(action) (check_action without raising),
    sample() (a random computer_13 action on the screen, or pyautogui code)."""

    def __init__(self, name, width, height, seed=None):
        _SpaceBase.__init__(self, shape=None, dtype=None)
        self.name, self.width, self.height = name, width, height
        self.schema = action_schema(name, width, height)
        self.seed(seed)

    def contains(self, x):
        try:
            check_action(x, self.width, self.height)
        except EnvmgrError:
            return False
        return True

    def check(self, action):
        """check_action on this screen: raises EnvmgrError naming the field."""
        check_action(action, self.width, self.height)

    def sample(self, mask=None, probability=None):
        r = self._rng
        x, y = r.randrange(self.width), r.randrange(self.height)
        kind = r.choice(("MOVE_TO", "CLICK", "SCROLL", "TYPING", "PRESS", "WAIT", "DONE"))
        if self.name == "pyautogui":
            return {"MOVE_TO": "pyautogui.moveTo(%d, %d)" % (x, y), "CLICK": "pyautogui.click(%d, %d)" % (x, y),
                    "SCROLL": "pyautogui.scroll(%d)" % r.randint(-5, 5),
                    "TYPING": "pyautogui.typewrite('envmgr')", "PRESS": "pyautogui.press('esc')",
                    "WAIT": "WAIT", "DONE": "DONE"}[kind]
        return {"MOVE_TO": {"action_type": "MOVE_TO", "x": x, "y": y},
                "CLICK": {"action_type": "CLICK", "x": x, "y": y},
                "SCROLL": {"action_type": "SCROLL", "dy": r.randint(-5, 5) or 1},
                "TYPING": {"action_type": "TYPING", "text": "envmgr"},
                "PRESS": {"action_type": "PRESS", "key": "esc"},
                "WAIT": {"action_type": "WAIT", "seconds": 0.5},
                "DONE": {"action_type": "DONE"}}[kind]

    def to_jsonable(self, sample_n):
        return list(sample_n)

    def from_jsonable(self, sample_n):
        return list(sample_n)

    def __eq__(self, other):
        return isinstance(other, ActionSpace) and (other.name, other.width, other.height) == \
            (self.name, self.width, self.height)

    def __hash__(self):
        return hash(("ActionSpace", self.name, self.width, self.height))

    def __repr__(self):
        return "ActionSpace(%s, %dx%d)" % (self.name, self.width, self.height)


def observation_space(height, width, max_steps, tree=False, image=False):
    """The observation: {"screenshot": PNGFrame, "instruction": Text, "step": Discrete(max_steps + 1)},
    with "accessibility_tree": Text for a tree observation and "image": Box(0, 255, (H, W, 3), uint8) with
    decode_image. Gymnasium's classes when it is importable, else this module's plain ones."""
    if _gym is not None:
        sp = _gym.spaces
        text = lambda: _AnyText(INSTRUCTION_MAX, min_length=0, charset=_PRINTABLE)  # noqa: E731
        d = {"screenshot": PNGFrame(height, width), "instruction": text(), "step": sp.Discrete(max_steps + 1)}
        if tree:
            d["accessibility_tree"] = text()
        if image:
            d["image"] = sp.Box(0, 255, (height, width, 3), _np.uint8)
        return sp.Dict(d)
    d = {"screenshot": PNGFrame(height, width), "instruction": Text(INSTRUCTION_MAX),
         "step": Discrete(max_steps + 1)}
    if tree:
        d["accessibility_tree"] = Text(INSTRUCTION_MAX)
    if image:
        d["image"] = Box(0, 255, (height, width, 3), "uint8")
    return Dict(d)


_PRINTABLE = "".join(chr(c) for c in range(32, 127)) + "\n\t"

if _gym is not None:
    class _AnyText(_gym.spaces.Text):
        """gymnasium's Text, whose contains() takes any character: instructions and trees are not
        limited to a charset (the charset, printable ASCII, is what sample() draws from)."""

        def contains(self, x):
            return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


# ---------------------------------------------------------------------------------------------
# PNG: the size from its header (standard library), the pixels (numpy, optional).

def png_size(data):
    """(width, height) from a PNG's IHDR, or None when data is not a PNG."""
    if len(data) < 24 or data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", bytes(data[16:24]))


def png_to_array(data):
    """The PNG's pixels as a numpy array of shape (H, W, 3), dtype uint8 (needs numpy). Decodes 8-bit RGB
    and RGBA (alpha dropped), non-interlaced, every filter type; envmgr's frames are RGB with the Sub
    filter on every row, which decodes in a few milliseconds."""
    if _np is None:
        raise ImportError("png_to_array needs numpy (python3-numpy); obs['screenshot'] is the PNG itself")
    size = png_size(data)
    if size is None:
        raise ValueError("not a PNG")
    width, height = size
    pos, idat, bpp = 8, [], None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            depth, ctype, _, _, interlace = struct.unpack(">BBBBB", body[8:13])
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError("png_to_array: only 8-bit RGB/RGBA, non-interlaced (depth %d, colour type %d)"
                                 % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    raw = _np.frombuffer(zlib.decompress(b"".join(idat)), dtype=_np.uint8)
    stride = width * bpp
    rows = raw[:height * (stride + 1)].reshape(height, stride + 1)
    out = _np.empty((height, stride), dtype=_np.uint8)
    prev = _np.zeros(stride, dtype=_np.uint8)
    for y in range(height):
        f, line = rows[y, 0], rows[y, 1:]
        if f == 0:
            cur = line.copy()
        elif f == 1:    # Sub: a running sum per channel, modulo 256
            cur = _np.cumsum(line.reshape(width, bpp), axis=0, dtype=_np.uint8).reshape(stride)
        elif f == 2:    # Up
            cur = line + prev
        else:           # Average, Paeth: pixel by pixel
            cur = _np.zeros(stride, dtype=_np.uint8)
            lp = [int(v) for v in prev]
            lc = [0] * stride
            ln = [int(v) for v in line]
            for i in range(stride):
                a = lc[i - bpp] if i >= bpp else 0
                b = lp[i]
                if f == 3:
                    lc[i] = (ln[i] + (a + b) // 2) & 255
                else:
                    c = lp[i - bpp] if i >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                    lc[i] = (ln[i] + pred) & 255
            cur[:] = lc
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)[:, :, :3].copy()


def _png_solid(width, height, rgb):
    """A PNG of one colour (standard library): a sample of PNGFrame."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)
    row = b"\x00" + rgb * width
    return (PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(row * height, 6)) + chunk(b"IEND", b""))


# ---------------------------------------------------------------------------------------------
# One env

_EnvBase = _gym.Env if _gym is not None else object


class EnvmgrRLEnv(_EnvBase):
    """One envmgr env as a gymnasium-style Env. The env is created on the server at once and deleted by
    close() (or the with-block).

    url, token: the server and its bearer token (token None: $ENVMGR_TOKEN or the file $ENVMGR_TOKEN_FILE
      names).
    task: the task (an OSWorld task dict, or a path inside the server's --task-root). A reward needs one:
      reset() refuses to start an episode without a task (here or in its options).
    from_state: a saved state (docs/states.md): the env is started from it, and every reset() restores it
      (the API's restore: the task's setup is not run again) unless options say otherwise.
    action_space: "computer_13" (dicts) or "pyautogui" (code strings); both forms are accepted either way
      (the API takes both), the name says what the agent speaks and what action_space.sample() returns.
    observation: "screenshot" (default), "screenshot_a11y_tree" or "a11y_tree": with a tree,
      obs["accessibility_tree"] is OSWorld's XML (the image needs the guest toolbelt: image="apps"); the
      screenshot is always there.
    max_steps: the client's own step limit (None: the task's limits.max_steps alone); reaching it ends the
      episode (it is evaluated) as truncated.
    decode_image: obs["image"] is the frame as a numpy array (H, W, 3) uint8, decoded from the PNG (needs
      numpy: ImportError here without it).
    no_score: "raise" (default): step() raises EnvmgrNoScore (.obs, .info, .terminated, .truncated set) for
      an episode that has no score; "flag": step() returns reward NaN and info["no_score"] True.
    image, timeout: the guest image (else the task's), the HTTP timeout per request (s).
    """

    metadata = {"render_modes": []}
    render_mode = None

    def __init__(self, url, token=None, task=None, from_state=None, action_space="computer_13",
                 observation="screenshot", max_steps=None, decode_image=False, no_score="raise", image=None,
                 timeout=600):
        if action_space not in ACTION_SPACES:
            raise ValueError("action_space: expected computer_13 or pyautogui")
        if observation not in OBSERVATIONS:
            raise ValueError("observation: expected one of " + ", ".join(OBSERVATIONS))
        if no_score not in ("raise", "flag"):
            raise ValueError("no_score: expected raise or flag")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError("max_steps: expected a positive integer or None")
        if decode_image and _np is None:
            raise ImportError("decode_image=True needs numpy (python3-numpy); obs['screenshot'] is the PNG")
        self.observation, self.max_steps, self.decode_image = observation, max_steps, decode_image
        self.no_score, self.task, self.from_state = no_score, task, from_state
        self._lock = threading.Lock()
        self._started = self._ended = False
        self._last_obs = None
        self._steps = 0
        self.seed_value = None
        self.api_env = EnvmgrEnv(url, token, image=image, task_config=task, action_space=action_space,
                                 observation_type=observation, from_state=from_state, timeout=timeout)
        self.env_id = self.api_env.env_id
        try:
            width, height = self.api_env.screen_size
            self.action_space = ActionSpace(action_space, width, height)
            self.observation_space = observation_space(height, width, self._step_limit(task),
                                                       tree=observation != "screenshot", image=decode_image)
        except BaseException:
            self.api_env.close()
            raise

    def _step_limit(self, task):
        limits = [self.max_steps] if self.max_steps else []
        if isinstance(task, dict):
            limits.append((task.get("limits") or {}).get("max_steps", DEFAULT_MAX_STEPS))
        return min(limits) if limits else MAX_STEPS_LIMIT

    # -- gymnasium's Env ---------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        """Start an episode; returns (obs, info).

        options: {"task": TASK} starts TASK (it becomes the env's task: the golden state and its setup, or
        its cached setup); {"state": NAME} starts from saved state NAME (the API's restore, with the env's
        task: its setup is not run again); both: the task is set first (one reset, its setup) and the state
        restored. The state defaults to from_state (so {"task": TASK} on such an env sets TASK and restores
        the state); {"state": None} starts from the golden state. Without options: from_state if the env
        has one, else the task from the golden state.
        seed is recorded (info["seed"]) and changes nothing: envmgr has no random number generator of its
        own, and an episode starts from the same restored snapshot (RAM, disk, devices, screen) whatever
        the seed; what follows depends on the actions (and the guest's own timing)."""
        opts = dict(options or {})
        unknown = sorted(set(opts) - {"task", "state"})
        if unknown:
            raise ValueError("reset: unknown option %r (task, state)" % unknown[0])
        task, state = opts.get("task"), opts.get("state", self.from_state)
        if task is None and self.task is None:
            raise ValueError("reset: no task (task= or options={'task': ...}): the reward is its evaluate() score")
        obs_body = {} if self.observation == "screenshot" else {"observation": "screenshot_a11y_tree"}
        if _gym is not None:  # gymnasium's Env.reset seeds self.np_random (for a policy's own use)
            _EnvBase.reset(self, seed=seed)
        with self._lock:
            self._started = self._ended = False
            if state:
                if task is not None and task != self.task:  # a restore runs the env's task: make it this one
                    self._post("reset", dict(obs_body, task=task))
                    self.task = task
                r = self._post("restore", dict(obs_body, name=state))
            else:
                r = self._post("reset", dict(obs_body, task=task) if task is not None else obs_body)
                if task is not None:
                    self.task = task
            if task is not None:
                self.observation_space = observation_space(
                    self.action_space.height, self.action_space.width, self._step_limit(task),
                    tree=self.observation != "screenshot", image=self.decode_image)
            self._started, self._steps, self.seed_value = True, 0, seed
            o = r["observation"]
            obs = self._obs(o)
        info = {"env_id": self.env_id, "episode": r.get("episode"), "task_id": r.get("task_id"),
                "state": r.get("state"), "seed": seed, "timings": r.get("timings"),
                "screenshot_sha256": o.get("screenshot_sha256")}
        return obs, info

    def step(self, action):
        """One action; returns (obs, reward, terminated, truncated, info). A badly shaped action raises
        EnvmgrError naming the field before anything is sent (and the server's own 400s change nothing):
        the episode is as it was. On the episode's last step the episode is evaluated: reward is the score,
        info["score"], info["evaluation"] (the whole answer) and info["no_score"] say how it went."""
        with self._lock:
            if not self._started:
                raise EnvmgrError(409, "no episode on this env: call reset() first")
            if self._ended:
                raise EnvmgrError(409, "the episode has ended: call reset()")
            self.action_space.check(action)
            t0 = time.monotonic()
            r = self._post("step", {"action": action})
            info = dict(r.get("info") or {})
            info.update(env_id=self.env_id, step_s=time.monotonic() - t0)
            o = r.get("observation")
            if o:
                obs = self._obs(o)
                info["screenshot_sha256"] = o.get("screenshot_sha256")
            else:  # the env failed after the action ran: no new frame
                obs = dict(self._last_obs)
                info["stale_observation"] = True
            self._steps = info.get("step", self._steps + 1)
            cause = info.get("exit_cause")
            terminated = truncated = False
            if r.get("done"):
                terminated = cause in ("done", "fail")
                truncated = not terminated  # max_steps, timeout, env_error
            elif self.max_steps is not None and self._steps >= self.max_steps:
                truncated = True
                info["truncated_by"] = "client max_steps"
            if not (terminated or truncated):
                return obs, 0.0, False, False, info
            self._ended = True
            reward = self._score(obs, info, terminated, truncated)
            return obs, reward, terminated, truncated, info

    def _score(self, obs, info, terminated, truncated):
        try:
            score = self.api_env.evaluate()
        except EnvmgrNoScore as e:
            info.update(score=None, no_score=True, evaluation=e.evaluation)
            if self.no_score == "raise":
                e.obs, e.info, e.terminated, e.truncated = obs, info, terminated, truncated
                raise
            return float("nan")
        info.update(score=score, no_score=False, evaluation=self.api_env.last_evaluation)
        return float(score)

    def close(self):
        """DELETE the env on the server (its episode's trace stays under the server's --out)."""
        self.api_env.close()

    @property
    def unwrapped(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- more ----------------------------------------------------------------------------------
    def save_state(self, name):
        """Save this moment (screen, memory, disk) as state `name` (docs/states.md); the episode goes on."""
        with self._lock:
            return self.api_env.save_state(name)

    def trace(self, path):
        """The current (or last) episode's trace as a tar (trace/trace.jsonl, trace/frames/) at path."""
        with self._lock:
            return self.api_env.trace(path)

    @property
    def steps(self):
        """Steps taken in this episode."""
        return self._steps

    @property
    def episode_over(self):
        return self._ended

    def _post(self, what, body):
        return self.api_env.api.request("POST", self.api_env._path(what), body)

    def _obs(self, o):
        shot = o.get("screenshot")
        png = base64.b64decode(shot) if shot else None
        obs = {"screenshot": png, "instruction": o.get("instruction") or "", "step": int(o.get("step") or 0)}
        if self.observation != "screenshot":
            obs["accessibility_tree"] = o.get("accessibility_tree") or ""
        if self.decode_image:
            obs["image"] = png_to_array(png)
        self._last_obs = obs
        return obs

    def __repr__(self):
        return "EnvmgrRLEnv(%s, task %s)" % (self.env_id, self.task if isinstance(self.task, str) else
                                              (self.task or {}).get("id"))


# ---------------------------------------------------------------------------------------------
# N envs

_VecBase = _gym.vector.VectorEnv if _gym is not None else object


def _autoreset_mode(mode):
    m = str(getattr(mode, "value", mode)).lower().replace("_", "").replace("-", "")
    if m not in ("nextstep", "disabled"):
        raise ValueError("autoreset_mode: expected next_step (gymnasium's default) or disabled")
    name = "NEXT_STEP" if m == "nextstep" else "DISABLED"
    enum = getattr(getattr(_gym, "vector", None), "AutoresetMode", None) if _gym is not None else None
    return name, getattr(enum, name) if enum is not None else ("NextStep" if name == "NEXT_STEP" else "Disabled")


class EnvmgrVectorEnv(_VecBase):
    """N envmgr envs (N envs on the server) stepped together: gymnasium's VectorEnv shape, with lists.

    reset() -> (list of obs, list of infos); step(actions) -> (obs, rewards, terminateds, truncateds,
    infos), each a list of N, the N steps sent at once from N threads (a step blocks on its env; the server
    runs different envs in parallel). from_state: all N start from one saved state, and every reset
    restores it: group rollouts. Other arguments as EnvmgrRLEnv's (each env gets the same).

    autoreset_mode:
      "next_step" (default, gymnasium's AutoresetMode.NEXT_STEP): the step after an env's episode ended
        resets that env (its action is ignored) and returns the new episode's first observation with
        reward 0.0, terminated and truncated False, info["autoreset"] True. It starts as the last reset()
        did (the same options: the state, the task).
      "disabled": an env whose episode ended is left alone until reset() (options={"reset_mask": [...]}
        resets only some); step() ignores its action (pass None) and repeats its last observation with
        reward 0.0, its terminated/truncated as they ended (so `while not all(t or u for ...)` ends) and
        info["ended"] True. The scored step is the one where info["ended"] is absent.
    no_score: "flag" (default here: one env's failure does not lose the other envs' step) or "raise":
      the whole step is done, then EnvmgrNoScore is raised for the first env without a score, with
      .index and .batch (the step's five lists) set.
    A failed request on one env (an EnvmgrError, a connection error) is raised after every env's step
    has finished, with .index (which env) and .results (each env's tuple, or its exception).
    close() deletes every env, also when some of them fail to delete (the first error is raised after).
    """

    def __init__(self, url, token=None, n=4, from_state=None, task=None, autoreset_mode="next_step",
                 no_score="flag", **env_kwargs):
        if not isinstance(n, int) or n < 1:
            raise ValueError("n: expected a positive integer")
        if no_score not in ("raise", "flag"):
            raise ValueError("no_score: expected raise or flag")
        self.closed = True  # until every env is up
        self.autoreset, mode = _autoreset_mode(autoreset_mode)
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.render_mode = None
        self.num_envs, self.no_score = n, no_score
        self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="envmgr-rl")
        made = self._map(lambda i: EnvmgrRLEnv(url, token, task=task, from_state=from_state, no_score="flag",
                                                **env_kwargs), range(n))
        self.envs = [m for m in made if not isinstance(m, BaseException)]
        failed = [m for m in made if isinstance(m, BaseException)]
        if failed:
            self._close_envs()
            self._pool.shutdown(wait=True)
            raise failed[0]
        self.closed = False
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        Tup = _gym.spaces.Tuple if _gym is not None else Tuple
        self.observation_space = Tup([e.observation_space for e in self.envs])
        self.action_space = Tup([e.action_space for e in self.envs])
        self._needs_reset = [False] * n    # next_step: ended on the last step
        self._ended = [False] * n          # disabled: ended and not reset since
        self._flags = [(False, False)] * n
        self._reset_options = [None] * n
        self._started = [False] * n

    @property
    def env_ids(self):
        return [e.env_id for e in self.envs]

    def _map(self, fn, items):
        """fn over items on the pool, in order; each result or the exception it raised."""
        futures = [self._pool.submit(fn, it) for it in items]
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except BaseException as e:  # noqa: B902 (every env's outcome is reported)
                out.append(e)
        return out

    def reset(self, *, seed=None, options=None):
        """Reset every env (at once); returns (list of obs, list of infos). seed: an int (env i gets
        seed + i, as gymnasium's), a list of N, or None. options: EnvmgrRLEnv.reset's (the same for every
        env), plus "reset_mask": N booleans, to reset only those envs (the others' entries are their
        current observation and an info of {"reset": False})."""
        opts = dict(options or {})
        mask = opts.pop("reset_mask", None)
        if mask is not None and len(mask) != self.num_envs:
            raise ValueError("reset_mask: expected %d booleans" % self.num_envs)
        mask = [True] * self.num_envs if mask is None else [bool(m) for m in mask]
        if isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        elif seed is None:
            seeds = [None] * self.num_envs
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError("seed: expected an int or %d seeds" % self.num_envs)
        idx = [i for i in range(self.num_envs) if mask[i]]
        res = self._map(lambda i: self.envs[i].reset(seed=seeds[i], options=opts or None), idx)
        errors = [(i, r) for i, r in zip(idx, res) if isinstance(r, BaseException)]
        obs, infos = [None] * self.num_envs, [None] * self.num_envs
        for i in range(self.num_envs):
            obs[i], infos[i] = self.envs[i]._last_obs, {"reset": False, "env_id": self.envs[i].env_id}
        for i, r in zip(idx, res):
            if not isinstance(r, BaseException):
                obs[i], infos[i] = r
                self._needs_reset[i] = self._ended[i] = False
                self._flags[i] = (False, False)
                self._reset_options[i] = opts or None
                self._started[i] = True
        if errors:
            i, e = errors[0]
            e.index, e.results = i, res
            raise e
        return obs, infos

    def step(self, actions):
        """Step every env at once with actions[i]; returns (obs, rewards, terminateds, truncateds, infos),
        lists of N. Every action is checked first: a badly shaped one raises EnvmgrError (.index, .field)
        and no env is stepped."""
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError("step: expected %d actions, got %d" % (self.num_envs, len(actions)))
        if not all(self._started):
            raise EnvmgrError(409, "no episode yet on env %d: call reset() first" % self._started.index(False))
        plan = []
        for i, a in enumerate(actions):
            if self.autoreset == "NEXT_STEP" and self._needs_reset[i]:
                plan.append("autoreset")
            elif self.autoreset == "DISABLED" and self._ended[i]:
                plan.append("ended")
            else:
                try:
                    self.envs[i].action_space.check(a)
                except EnvmgrError as e:
                    e.index = i
                    e.args = ("actions[%d]: %s" % (i, e.args[0]),)
                    raise
                plan.append("step")

        def one(i):
            env = self.envs[i]
            if plan[i] == "autoreset":
                o, info = env.reset(options=self._reset_options[i])
                info["autoreset"] = True
                return o, 0.0, False, False, info
            if plan[i] == "ended":
                te, tr = self._flags[i]
                return env._last_obs, 0.0, te, tr, {"ended": True, "env_id": env.env_id}
            return env.step(actions[i])

        res = self._map(one, range(self.num_envs))
        for i, r in enumerate(res):
            if isinstance(r, BaseException):
                continue
            if plan[i] == "autoreset":
                self._needs_reset[i] = False
                self._flags[i] = (False, False)
            elif plan[i] == "step" and (r[2] or r[3]):
                self._needs_reset[i] = self.autoreset == "NEXT_STEP"
                self._ended[i] = self.autoreset == "DISABLED"
                self._flags[i] = (r[2], r[3])
        errors = [(i, r) for i, r in enumerate(res) if isinstance(r, BaseException)]
        if errors:
            i, e = errors[0]
            e.index, e.results = i, res
            raise e
        batch = tuple(list(col) for col in zip(*res))
        obs, rewards, terminateds, truncateds, infos = batch
        if self.no_score == "raise":
            for i, info in enumerate(infos):
                if plan[i] == "step" and info.get("no_score"):
                    e = EnvmgrNoScore(info["evaluation"])
                    e.index, e.batch = i, batch
                    raise e
        return obs, rewards, terminateds, truncateds, infos

    def _close_envs(self):
        res = self._map(lambda e: e.close(), self.envs)
        return [r for r in res if isinstance(r, BaseException)]

    def close(self, **kwargs):
        """Delete every env on the server, each tried even when another fails; then raises the first
        failure, if any."""
        if getattr(self, "closed", True):
            return
        self.closed = True
        try:
            errors = self._close_envs()
        finally:
            self._pool.shutdown(wait=True)
        if errors:
            raise errors[0]

    @property
    def unwrapped(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if not getattr(self, "closed", True):
            try:
                self.close()
            except Exception:  # noqa: BLE001 (interpreter exit)
                pass

    def __repr__(self):
        return "EnvmgrVectorEnv(num_envs=%d, %s)" % (self.num_envs, ", ".join(self.env_ids))
