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
import functools
import os
import select
import socket
import struct

IN_FLIGHT = 96
MAX_MESSAGE = 64 << 20      # the D-Bus specification's limit is 128 MiB


class DBusError(Exception):
    def __init__(self, name, message=""):
        super().__init__("%s: %s" % (name, message))
        self.name = name


# ---------------------------------------------------------------- marshalling
_ALIGN = {"y": 1, "b": 4, "n": 2, "q": 2, "i": 4, "u": 4, "x": 8, "t": 8, "d": 8, "h": 4,
          "s": 4, "o": 4, "g": 1, "v": 1, "a": 4, "(": 8, "{": 8}
_FIXED = {"y": "B", "b": "I", "n": "h", "q": "H", "i": "i", "u": "I", "x": "q", "t": "Q", "d": "d", "h": "I"}


@functools.lru_cache(maxsize=512)
def _split_sig(sig):
    """Complete types of a signature string (a tuple)."""
    out, i = [], 0
    while i < len(sig):
        j = _end_of(sig, i)
        out.append(sig[i:j])
        i = j
    return tuple(out)


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


# Readers are compiled once per signature into closures f(data, pos) ->
# (value, pos): the generic type walk per value cost most of the client's
# CPU under TCG.  Unknown type codes raise KeyError, short data struct.error.
_U32 = struct.Struct("<I").unpack_from


def _compile(t):
    c = t[0]
    if c in _FIXED:
        st = struct.Struct("<" + _FIXED[c])
        unpack, size, al = st.unpack_from, st.size, _ALIGN[c]
        if c == "b":
            return lambda d, p: (bool(unpack(d, p + (-p % al))[0]), p + (-p % al) + size)
        return lambda d, p: (unpack(d, p + (-p % al))[0], p + (-p % al) + size)
    if c in "so":
        def rs(d, p):
            p += -p % 4
            n = _U32(d, p)[0]
            p += 4
            if p + n >= len(d):
                raise ValueError("string past the end of the message")
            return d[p:p + n].decode("utf-8", "replace"), p + n + 1
        return rs
    if c == "g":
        def rg(d, p):
            n = d[p]
            if p + 1 + n >= len(d):
                raise ValueError("signature past the end of the message")
            return d[p + 1:p + 1 + n].decode("ascii"), p + 2 + n
        return rg
    if c == "v":
        def rv(d, p):
            sig, p = rg_(d, p)
            return _reader(sig)(d, p)
        rg_ = _compile("g")
        return rv
    if c == "(":
        subs = [_compile(x) for x in _split_sig(t[1:-1])]

        def rt(d, p):
            p += -p % 8
            out = []
            for f in subs:
                v, p = f(d, p)
                out.append(v)
            return tuple(out), p
        return rt
    if c == "a":
        et = t[1:]
        al = _ALIGN[et[0]]
        if et == "y":
            def ry(d, p):
                p += -p % 4
                n = _U32(d, p)[0]
                if p + 4 + n > len(d):
                    raise ValueError("array past the end of the message")
                return bytes(d[p + 4:p + 4 + n]), p + 4 + n
            return ry
        if et[0] == "{":
            kf, vf = [_compile(x) for x in _split_sig(et[1:-1])]

            def rd(d, p):
                p += -p % 4
                n = _U32(d, p)[0]
                p += 4
                p += -p % 8
                end = p + n
                if end > len(d):
                    raise ValueError("array past the end of the message")
                out = {}
                while p < end:
                    p += -p % 8
                    k, p = kf(d, p)
                    out[k], p = vf(d, p)
                return out, end
            return rd
        ef = _compile(et)

        def ra(d, p):
            p += -p % 4
            n = _U32(d, p)[0]
            p += 4
            p += -p % al
            end = p + n
            if end > len(d):
                raise ValueError("array past the end of the message")
            out = []
            while p < end:
                q = p
                v, p = ef(d, p)
                if p <= q:
                    raise ValueError("array element of no size")
                out.append(v)
            return out, end
        return ra
    raise KeyError("cannot unmarshal type %r" % t)


_reader = functools.lru_cache(maxsize=512)(_compile)   # signatures are the peer's choice: bounded


@functools.lru_cache(maxsize=8192)
def _field(code, t, val):
    """One header field (code, variant), padded to 8 bytes; and that padding,
    which the last field's array length leaves out."""
    v = val.encode()
    if t == b"g":
        f = bytes((code, 1)) + t + bytes((0, len(v))) + v + b"\0"
    else:
        f = bytes((code, 1)) + t + b"\0" + struct.pack("<I", len(v)) + v + b"\0"
    pad = -len(f) % 8
    return f + b"\0" * pad, pad


_FIXED_HEADER = struct.Struct("<cBBBIII")


def _header(serial, body_len, dest, path, iface, member, sig):
    """A method call's header: fixed part, then the (code, variant) fields
    path (1), member (3), interface (2), destination (6), signature (8).
    Fields start at offset 16, 8-aligned, so each is cached whole."""
    parts = [_field(1, b"o", path), _field(3, b"s", member)]
    if iface:
        parts.append(_field(2, b"s", iface))
    if dest:
        parts.append(_field(6, b"s", dest))
    if sig:
        parts.append(_field(8, b"g", sig))
    fields = b"".join(f for f, _ in parts)
    return _FIXED_HEADER.pack(b"l", 1, 0x2, 1, body_len, serial, len(fields) - parts[-1][1]) + fields


_HEADER_NUMBERS = struct.Struct("<III").unpack_from


def _header_fields(m, end):
    """The header's fields by code: reply serial (5), signature (8), error
    name (4), ...  m is one whole message.  The three a reply has are read
    inline (the generic readers' calls were a tenth of a dump's CPU)."""
    p = 16
    out = {}
    while p < end:
        p += -p % 8
        code, n = m[p], m[p + 1]
        t = m[p + 2:p + 2 + n]
        p += 3 + n
        if t == b"u":
            p += -p % 4
            out[code] = _U32(m, p)[0]
            p += 4
        elif t == b"g":
            n = m[p]
            if p + 1 + n >= len(m):
                raise ValueError("signature past the end of the message")
            out[code] = m[p + 1:p + 1 + n].decode("ascii")
            p += 2 + n
        else:
            out[code], p = _reader(t.decode("ascii"))(m, p)
    return out


# ---------------------------------------------------------------- connection
def _address_socket(address, timeout):
    for part in address.split(";"):
        kind, _, rest = part.partition(":")
        if kind != "unix":
            continue
        kv = dict(x.split("=", 1) for x in rest.split(",") if "=" in x)
        if "path" not in kv and "abstract" not in kv:
            continue
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(kv["path"] if "path" in kv else "\0" + kv["abstract"])
        except OSError:
            s.close()
            raise
        return s
    raise OSError("no usable unix address in %r" % address)


class Connection:
    """hello=False for a peer-to-peer connection (no bus daemon to greet)."""

    def __init__(self, address, timeout=10.0, hello=True):
        self.sock = _address_socket(address, timeout)
        self.serial = 0
        self.rbuf = bytearray()
        self.rpos = 0              # rbuf[:rpos] is parsed
        self.unique = None
        try:
            self.sock.sendall(b"\0AUTH EXTERNAL %s\r\n" % str(os.geteuid()).encode().hex().encode())
            line = self._line()
            if not line.startswith(b"OK"):
                raise OSError("D-Bus authentication refused: %r" % line[:200])
            self.sock.sendall(b"BEGIN\r\n")
            if hello:
                self.unique = self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                        "org.freedesktop.DBus", "Hello")[0]
        except BaseException:
            self.sock.close()
            raise

    def _line(self):
        while b"\r\n" not in self.rbuf:
            if len(self.rbuf) > 16384:
                raise OSError("D-Bus authentication line too long")
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
        if not sig:
            return self.serial, _header(self.serial, 0, dest, path, iface, member, sig)
        body = _Writer()
        for t, v in zip(_split_sig(sig), args):
            body.put(t, v)
        return self.serial, _header(self.serial, len(body.buf), dest, path, iface, member, sig) + body.buf

    def _parse(self):
        """One complete message from rbuf at rpos: (type, reply_serial, sig,
        message, body offset, error) or None.  The message is copied out and
        rpos moves past it; compact() drops what was read (deleting each
        message from the buffer's front moved all the rest every time)."""
        b, p0 = self.rbuf, self.rpos
        if len(b) - p0 < 16:
            return None
        blen, _serial, flen = _HEADER_NUMBERS(b, p0 + 4)
        hend = 16 + flen
        body_start = hend + (-hend % 8)
        total = body_start + blen
        if total > MAX_MESSAGE:
            raise OSError("D-Bus message of %d bytes, over the %d limit" % (total, MAX_MESSAGE))
        if len(b) - p0 < total:
            return None
        m = bytes(b[p0:p0 + total])
        self.rpos = p0 + total
        try:
            fields = _header_fields(m, hend)
        except (struct.error, ValueError, IndexError, KeyError, TypeError, RecursionError) as e:
            raise OSError("malformed D-Bus message header: %s" % e)
        return (m[1], fields.get(5), fields.get(8, ""), m, body_start, fields.get(4))

    def compact(self):
        del self.rbuf[:self.rpos]
        self.rpos = 0

    def _decode(self, msg):
        mtype, _rs, sig, m, p, err = msg
        vals = []
        for t in _split_sig(sig):
            v, p = _reader(t)(m, p)
            vals.append(v)
        vals = tuple(vals)
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
                self.compact()
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
        (number of errors, timed_out); raises OSError when the connection
        closes.  on_reply may append more calls to the same list (they are
        sent in turn)."""
        f = Flight(self, calls)
        timed_out = pipeline([f], deadline)
        if f.failed is not None:
            raise f.failed
        return f.errors, timed_out


class Flight:
    """One connection's calls in a pipelined round (see pipeline)."""

    def __init__(self, conn, calls):
        self.conn = conn
        self.calls = calls
        self.sent = 0              # calls[:sent] are written or being written
        self.pending = {}          # serial -> on_reply
        self.out = bytearray()
        self.errors = 0
        self.failed = None         # the OSError that ended the connection

    def busy(self):
        return self.failed is None and bool(self.sent < len(self.calls) or self.pending or self.out)

    def fill(self):
        while self.sent < len(self.calls) and len(self.pending) < IN_FLIGHT:
            dest, path, iface, member, sig, args, cb = self.calls[self.sent]
            self.sent += 1
            serial, data = self.conn.message(dest, path, iface, member, sig, args)
            self.pending[serial] = cb
            self.out += data

    def send(self):
        n = self.conn.sock.send(self.out)
        del self.out[:n]

    def receive(self):
        conn = self.conn
        chunk = conn.sock.recv(1 << 20)
        if not chunk:
            raise OSError("D-Bus connection closed")
        conn.rbuf += chunk
        while True:
            msg = conn._parse()
            if msg is None:
                conn.compact()
                break
            if msg[0] not in (2, 3) or msg[1] not in self.pending:
                continue
            cb = self.pending.pop(msg[1])
            try:
                vals = conn._decode(msg)
            except (DBusError, ValueError, struct.error, IndexError, KeyError, RecursionError):
                self.errors += 1
                continue
            try:
                cb(vals)
            except (TypeError, ValueError, IndexError, KeyError):
                self.errors += 1


def pipeline(flights, deadline):
    """Every flight's calls at once, over all their connections together:
    an application slow to answer no longer holds up the others' answers
    (one at a time, each small application's round trip added to a dump's
    time per tree level).  A connection that closes ends only its own
    flight (its .failed).  Returns True if the deadline came first."""
    import time
    while True:
        live = [f for f in flights if f.busy()]
        if not live:
            return False
        now = time.monotonic()
        if now >= deadline:
            return True
        for f in live:
            f.fill()
        rl, wl, _ = select.select([f.conn.sock for f in live],
                                  [f.conn.sock for f in live if f.out], [],
                                  max(0.0, deadline - now))
        for f in live:
            try:
                if f.conn.sock in wl:
                    f.send()
                if f.conn.sock in rl:
                    f.receive()
            except OSError as e:
                f.failed = e
