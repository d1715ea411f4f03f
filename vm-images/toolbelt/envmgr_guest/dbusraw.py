"""A minimal D-Bus client on a plain socket, for many pipelined method calls.

Why not GLib/GIO through PyGObject: under TCG its per-call cost (an ffi
closure per callback, GVariant built and unpacked in Python, the gi import
itself) was ~12 ms of CPU per call, more than the applications take to
answer.  Here a call is a struct.pack and a reply a small unmarshaller; calls
are written while earlier replies are read (select), at most IN_FLIGHT
outstanding (dbus-daemon's default limit of pending replies per connection
is 128).

Supports: unix:path= and unix:abstract= addresses, EXTERNAL auth, method
calls with basic argument types, replies and errors.  Signals are skipped.
"""
import os
import select
import socket
import struct

IN_FLIGHT = 96


class DBusError(Exception):
    def __init__(self, name, message=""):
        super().__init__("%s: %s" % (name, message))
        self.name = name


# ---------------------------------------------------------------- marshalling
_ALIGN = {"y": 1, "b": 4, "n": 2, "q": 2, "i": 4, "u": 4, "x": 8, "t": 8, "d": 8, "h": 4,
          "s": 4, "o": 4, "g": 1, "v": 1, "a": 4, "(": 8, "{": 8}
_FIXED = {"y": "B", "b": "I", "n": "h", "q": "H", "i": "i", "u": "I", "x": "q", "t": "Q", "d": "d", "h": "I"}


def _split_sig(sig):
    """Complete types of a signature string."""
    out, i = [], 0
    while i < len(sig):
        j = _end_of(sig, i)
        out.append(sig[i:j])
        i = j
    return out


def _end_of(sig, i):
    c = sig[i]
    if c == "a":
        return _end_of(sig, i + 1)
    if c in "({":
        close = ")" if c == "(" else "}"
        j = i + 1
        while sig[j] != close:
            j = _end_of(sig, j)
        return j + 1
    return i + 1


class _Writer:
    def __init__(self):
        self.buf = bytearray()

    def pad(self, n):
        self.buf += b"\0" * (-len(self.buf) % n)

    def put(self, t, v):
        c = t[0]
        self.pad(_ALIGN[c])
        if c in _FIXED:
            self.buf += struct.pack("<" + _FIXED[c], int(v) if c != "d" else float(v))
        elif c in "so":
            b = v.encode()
            self.buf += struct.pack("<I", len(b)) + b + b"\0"
        elif c == "g":
            b = v.encode()
            self.buf += struct.pack("<B", len(b)) + b + b"\0"
        elif c == "v":
            sig, val = v
            self.put("g", sig)
            self.put(sig, val)
        elif c == "(":
            for tt, vv in zip(_split_sig(t[1:-1]), v):
                self.put(tt, vv)
        elif c == "a":
            et = t[1:]
            at = len(self.buf)
            self.buf += b"\0\0\0\0"
            self.pad(_ALIGN[et[0]])
            start = len(self.buf)
            items = v.items() if et[0] == "{" else v
            for item in items:
                if et[0] == "{":
                    self.pad(8)
                    kt, vt = _split_sig(et[1:-1])
                    self.put(kt, item[0])
                    self.put(vt, item[1])
                else:
                    self.put(et, item)
            struct.pack_into("<I", self.buf, at, len(self.buf) - start)
        else:
            raise ValueError("cannot marshal type %r" % t)


class _Reader:
    def __init__(self, data, pos=0):
        self.d = data
        self.p = pos

    def align(self, n):
        self.p += -self.p % n

    def get(self, t):
        c = t[0]
        self.align(_ALIGN[c])
        d = self.d
        if c in _FIXED:
            f = _FIXED[c]
            v = struct.unpack_from("<" + f, d, self.p)[0]
            self.p += struct.calcsize(f)
            return bool(v) if c == "b" else v
        if c in "so":
            n = struct.unpack_from("<I", d, self.p)[0]
            s = d[self.p + 4:self.p + 4 + n].decode("utf-8", "replace")
            self.p += 5 + n
            return s
        if c == "g":
            n = d[self.p]
            s = d[self.p + 1:self.p + 1 + n].decode()
            self.p += 2 + n
            return s
        if c == "v":
            sig = self.get("g")
            return self.get(sig)
        if c == "(":
            return tuple(self.get(tt) for tt in _split_sig(t[1:-1]))
        if c == "a":
            n = struct.unpack_from("<I", d, self.p)[0]
            self.p += 4
            et = t[1:]
            self.align(_ALIGN[et[0]])
            end = self.p + n
            if et[0] == "{":
                kt, vt = _split_sig(et[1:-1])
                out = {}
                while self.p < end:
                    self.align(8)
                    k = self.get(kt)
                    out[k] = self.get(vt)
                return out
            if et == "y":
                self.p = end
                return bytes(d[end - n:end])
            out = []
            while self.p < end:
                out.append(self.get(et))
            return out
        raise ValueError("cannot unmarshal type %r" % t)


# ---------------------------------------------------------------- connection
def _address_socket(address):
    for part in address.split(";"):
        kind, _, rest = part.partition(":")
        if kind != "unix":
            continue
        kv = dict(x.split("=", 1) for x in rest.split(",") if "=" in x)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if "path" in kv:
            s.connect(kv["path"])
            return s
        if "abstract" in kv:
            s.connect("\0" + kv["abstract"])
            return s
    raise OSError("no usable unix address in %r" % address)


class Connection:
    def __init__(self, address, timeout=10.0):
        self.sock = _address_socket(address)
        self.sock.settimeout(timeout)
        self.serial = 0
        self.rbuf = bytearray()
        self.sock.sendall(b"\0AUTH EXTERNAL %s\r\n" % str(os.geteuid()).encode().hex().encode())
        line = self._line()
        if not line.startswith(b"OK"):
            raise OSError("D-Bus authentication refused: %r" % line)
        self.sock.sendall(b"BEGIN\r\n")
        self.unique = self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                "org.freedesktop.DBus", "Hello")[0]

    def _line(self):
        while b"\r\n" not in self.rbuf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("D-Bus connection closed during authentication")
            self.rbuf += chunk
        line, _, rest = bytes(self.rbuf).partition(b"\r\n")
        self.rbuf = bytearray(rest)
        return line

    def close(self):
        self.sock.close()

    def message(self, dest, path, iface, member, sig="", args=()):
        self.serial += 1
        body = _Writer()
        for t, v in zip(_split_sig(sig), args):
            body.put(t, v)
        fields = [(1, ("o", path)), (3, ("s", member))]
        if iface:
            fields.append((2, ("s", iface)))
        if dest:
            fields.append((6, ("s", dest)))
        if sig:
            fields.append((8, ("g", sig)))
        h = _Writer()
        h.buf += struct.pack("<cBBBII", b"l", 1, 0x2, 1, len(body.buf), self.serial)
        h.put("a(yv)", fields)
        h.pad(8)
        return self.serial, bytes(h.buf) + bytes(body.buf)

    def _parse(self):
        """One complete message from rbuf: (type, reply_serial, sig, body, error) or None."""
        b = self.rbuf
        if len(b) < 16:
            return None
        blen, _serial, flen = struct.unpack_from("<III", b, 4)
        hend = 16 + flen
        total = hend + (-hend % 8) + blen
        if len(b) < total:
            return None
        mtype = b[1]
        r = _Reader(b, 12)
        fields = dict(r.get("a(yv)"))
        body_start = hend + (-hend % 8)
        msg = (mtype, fields.get(5), fields.get(8, ""), bytes(b[body_start:total]), fields.get(4))
        del b[:total]
        return msg

    def _decode(self, msg):
        mtype, _rs, sig, body, err = msg
        r = _Reader(body)
        vals = tuple(r.get(t) for t in _split_sig(sig)) if sig else ()
        if mtype == 3:
            raise DBusError(err or "error", vals[0] if vals and isinstance(vals[0], str) else "")
        return vals

    def call(self, dest, path, iface, member, sig="", args=()):
        """One blocking call."""
        serial, data = self.message(dest, path, iface, member, sig, args)
        self.sock.sendall(data)
        while True:
            msg = self._parse()
            if msg is None:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise OSError("D-Bus connection closed")
                self.rbuf += chunk
                continue
            if msg[0] in (2, 3) and msg[1] == serial:
                return self._decode(msg)

    def pipeline(self, calls, deadline):
        """calls: list of (dest, path, iface, member, sig, args, on_reply).
        on_reply(values) for every reply; errors are counted.  Returns
        (number of errors, timed_out).  on_reply may append more calls to the
        same list (they are sent in turn)."""
        import time
        pending = {}
        out = bytearray()
        i = 0
        errors = 0
        while i < len(calls) or pending or out:
            now = time.monotonic()
            if now >= deadline:
                return errors, True
            while i < len(calls) and len(pending) < IN_FLIGHT:
                dest, path, iface, member, sig, args, cb = calls[i]
                i += 1
                serial, data = self.message(dest, path, iface, member, sig, args)
                pending[serial] = cb
                out += data
            rl, wl, _ = select.select([self.sock], [self.sock] if out else [], [],
                                      max(0.0, deadline - now))
            if wl:
                n = self.sock.send(out)
                del out[:n]
            if rl:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise OSError("D-Bus connection closed")
                self.rbuf += chunk
                while True:
                    msg = self._parse()
                    if msg is None:
                        break
                    if msg[0] not in (2, 3) or msg[1] not in pending:
                        continue
                    cb = pending.pop(msg[1])
                    try:
                        vals = self._decode(msg)
                    except (DBusError, ValueError, struct.error, IndexError):
                        errors += 1
                        continue
                    try:
                        cb(vals)
                    except (TypeError, ValueError, IndexError, KeyError):
                        errors += 1
        return errors, False
