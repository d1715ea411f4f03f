"""A few X11 reads on a plain socket: window properties, the screen's size,
the pointer's position, the work area.

Why not python3-xlib here: importing it and opening its Display costs over a
second under TCG, paid on every accessibility observation only to learn which
process owns the active window (and by the screen-size and cursor-position
getters for two numbers each).  The server must let this user in without a
cookie (the session grants SI:localuser to its user and to root).
"""
import os
import socket
import struct

ANY_PROPERTY_TYPE = 0


class X11Error(Exception):
    pass


def _pad4(n):
    return -n % 4


class Connection:
    def __init__(self, display=None, timeout=5.0):
        display = display or os.environ.get("DISPLAY") or ":0"
        host, _, rest = display.rpartition(":")
        if host not in ("", "unix"):
            raise X11Error("only local displays are supported, not %r" % display)
        num = rest.split(".", 1)[0]
        if not num.isdigit():
            raise X11Error("bad DISPLAY %r" % display)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect("/tmp/.X11-unix/X" + num)
            # little-endian, protocol 11.0, no authorization
            self.sock.sendall(struct.pack("<cxHHHHxx", b"l", 11, 0, 0, 0))
            head = self._read(8)
            extra = self._read(4 * struct.unpack_from("<H", head, 6)[0])
        except OSError as e:
            self.sock.close()
            raise X11Error("cannot connect to display %s: %s" % (display, e))
        if head[0] != 1:
            self.sock.close()
            reason = extra[:head[1]].decode("latin-1", "replace")
            raise X11Error("display %s refused the connection: %s" % (display, reason.strip()))
        vendor_len, = struct.unpack_from("<H", extra, 16)
        n_formats = extra[21]
        screen = 32 + vendor_len + _pad4(vendor_len) + 8 * n_formats
        if len(extra) < screen + 24:
            self.sock.close()
            raise X11Error("short connection setup from display %s" % display)
        # the first screen: root, colormap, white and black pixels, input
        # masks, then its width and height in pixels
        self.root, = struct.unpack_from("<I", extra, screen)
        self.width, self.height = struct.unpack_from("<HH", extra, screen + 20)
        self.seq = 0

    def close(self):
        self.sock.close()

    def _read(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise OSError("the X server closed the connection")
            buf += chunk
        return bytes(buf)

    def _request(self, data):
        """Send one request and return its reply (32 bytes + extra)."""
        self.seq = (self.seq + 1) & 0xFFFF
        try:
            self.sock.sendall(data)
            while True:
                head = self._read(32)
                if head[0] == 0:
                    raise X11Error("X request failed (error code %d)" % head[1])
                if head[0] == 1:
                    extra = self._read(4 * struct.unpack_from("<I", head, 4)[0])
                    if struct.unpack_from("<H", head, 2)[0] == self.seq:
                        return head, extra
                if head[0] & 0x7F == 35:    # a generic event carries more
                    self._read(4 * struct.unpack_from("<I", head, 4)[0])
                # an event: not asked for, skip it
        except OSError as e:
            raise X11Error("X server: %s" % e)

    def atom(self, name):
        b = name.encode()
        req = struct.pack("<BBHHxx", 16, 1, 2 + (len(b) + _pad4(len(b))) // 4, len(b))
        head, _ = self._request(req + b + b"\0" * _pad4(len(b)))
        return struct.unpack_from("<I", head, 8)[0]

    def cardinal(self, window, prop):
        """The first 32-bit value of a window property, or None."""
        v = self.cardinals(window, prop, 1)
        return v[0] if v else None

    def cardinals(self, window, prop, n):
        """The first n 32-bit values of a window property, or None when it has fewer."""
        atom = self.atom(prop)
        if not atom:
            return None
        req = struct.pack("<BBHIIIII", 20, 0, 6, window, atom, ANY_PROPERTY_TYPE, 0, n)
        head, extra = self._request(req)
        fmt, got = head[1], struct.unpack_from("<I", head, 16)[0]
        if fmt != 32 or got < n or len(extra) < 4 * n:
            return None
        return list(struct.unpack_from("<%dI" % n, extra, 0))

    def pointer(self):
        """(x, y) of the pointer on the root window (QueryPointer)."""
        head, _ = self._request(struct.pack("<BxHI", 38, 2, self.root))
        return struct.unpack_from("<hh", head, 16)


def screen_size(display=None):
    """(width, height) of the display's first screen; X11Error if none."""
    c = Connection(display)
    c.close()
    return c.width, c.height


def pointer_position(display=None):
    """(x, y) of the pointer; X11Error if no display answers."""
    c = Connection(display)
    try:
        return c.pointer()
    finally:
        c.close()


def workarea(display=None):
    """(x, y, width, height) of the first desktop's _NET_WORKAREA (the screen less the panels), or
    None; X11Error if no display answers."""
    c = Connection(display)
    try:
        v = c.cardinals(c.root, "_NET_WORKAREA", 4)
        return tuple(v) if v else None
    finally:
        c.close()


def active_window_pid(display=None):
    """_NET_WM_PID of the root window's _NET_ACTIVE_WINDOW, or None."""
    try:
        c = Connection(display)
    except X11Error:
        return None
    try:
        win = c.cardinal(c.root, "_NET_ACTIVE_WINDOW")
        if not win:
            return None
        return c.cardinal(win, "_NET_WM_PID")
    except X11Error:
        return None
    finally:
        c.close()
