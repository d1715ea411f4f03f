"""Attacks on the toolbelt's D-Bus client (vm-images/toolbelt/envmgr_guest/dbusraw.py).

An application on the guest's accessibility bus is the guest's: it may answer
anything.  A peer on a socket pair plays a hostile application and sends
replies a real one never would; the client must count an error or fail with
OSError, never hang past its deadline, crash or grow without bound.
Usage: dbusraw_check.py TOOLBELT_DIR.  Prints "ok   ..." / "FAIL ..." lines.
"""
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
from envmgr_guest import dbusraw  # noqa: E402


def result(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else ": " + detail))


def client_and_peer():
    """A Connection (no auth, no Hello) wired to the other end of a socket pair."""
    a, b = socket.socketpair()
    c = dbusraw.Connection.__new__(dbusraw.Connection)
    c.sock, c.serial, c.rbuf, c.rpos, c.unique = a, 0, bytearray(), 0, None
    a.settimeout(5)
    b.settimeout(5)
    return c, b


def reply(serial, sig, body, mtype=2, error=None):
    """A reply message built by hand (so it can be wrong)."""
    fields = bytearray()

    def field(code, t, raw):
        fields.extend(b"\0" * (-len(fields) % 8))
        fields.extend(bytes((code, 1)) + t + b"\0" + raw)
    field(5, b"u", struct.pack("<I", serial))
    if sig:
        fields.extend(b"\0" * (-len(fields) % 8))
        s = sig.encode()
        fields.extend(bytes((8, 1)) + b"g\0" + bytes((len(s),)) + s + b"\0")
    if error:
        e = error.encode()
        field(4, b"s", struct.pack("<I", len(e)) + e + b"\0")
    head = struct.pack("<cBBBIII", b"l", mtype, 0, 1, len(body), 1000 + serial, len(fields)) + fields
    head += b"\0" * (-len(head) % 8)
    return head + body


def serve(peer, answers, close_after):
    """Read requests; answer the i-th with answers[i](serial) (bytes), in
    order; then close the peer's sending side if close_after."""
    def run():
        serve_all()
        if close_after:
            try:
                peer.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def serve_all():
        buf = bytearray()
        i = 0
        try:
            while i < len(answers):
                chunk = peer.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while len(buf) >= 16 and i < len(answers):
                    blen, serial, flen = struct.unpack_from("<III", buf, 4)
                    total = 16 + flen + (-(16 + flen) % 8) + blen
                    if len(buf) < total:
                        break
                    del buf[:total]
                    data = answers[i](serial)
                    i += 1
                    if data:
                        peer.sendall(data)
        except OSError:
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def pipeline(c, n, deadline_s=5.0):
    got = []
    calls = [(None, "/o", "org.x", "M", "", (), got.append) for _ in range(n)]
    t0 = time.monotonic()
    try:
        errors, timed_out = c.pipeline(calls, time.monotonic() + deadline_s)
        return got, errors, timed_out, None, time.monotonic() - t0
    except OSError as e:
        return got, None, None, e, time.monotonic() - t0


def case(what, answers, n, expect, close_after=False):
    c, peer = client_and_peer()
    serve(peer, answers, close_after)
    got, errors, timed_out, exc, took = pipeline(c, n)
    try:
        ok, detail = expect(got, errors, timed_out, exc, took)
    except Exception as e:      # a wrong expectation is a failed check, not a crash
        ok, detail = False, repr(e)
    result(ok, what, detail or "got=%r errors=%r timed_out=%r exc=%r" % (got[:3], errors, timed_out, exc))
    c.close()
    peer.close()


# A well-formed exchange first, so the checks below fail for the right reason.
case("a good reply of each common shape decodes",
     [lambda s: reply(s, "a{ss}", struct.pack("<I", 12) + b"\0" * 4 + struct.pack("<I", 1) + b"k\0\0\0"
                      + struct.pack("<I", 1) + b"v\0"),
      lambda s: reply(s, "(iiii)", struct.pack("<iiii", 1, -2, 3, 4))], 2,
     lambda g, e, t, x, took: (g == [({"k": "v"},), ((1, -2, 3, 4),)] and e == 0, None))

def strings(*serial_text):
    return b"".join(reply(s, "s", struct.pack("<I", len(t)) + t + b"\0") for s, t in serial_text)


# Replies back to back in one write, of lengths that are no multiple of 8: each
# message's alignment counts from its own start, not from the buffer's.
case("replies of odd lengths in one write decode, each aligned to its own start",
     [lambda s: strings((1, b"a"), (2, b"bc"), (3, b"def")), lambda s: None, lambda s: None], 3,
     lambda g, e, t, x, took: (g == [("a",), ("bc",), ("def",)] and e == 0, None))

case("an error reply is counted, not raised",
     [lambda s: reply(s, "s", struct.pack("<I", 3) + b"bad\0", mtype=3, error="org.x.Error")], 1,
     lambda g, e, t, x, took: (g == [] and e == 1 and x is None, None))

case("a string longer than its body is an error, not a crash",
     [lambda s: reply(s, "s", struct.pack("<I", 1 << 30) + b"abc\0")], 1,
     lambda g, e, t, x, took: (x is None and e == 1 and g == [], None))

case("an array longer than its body is an error",
     [lambda s: reply(s, "ai", struct.pack("<I", 4000) + struct.pack("<ii", 1, 2))], 1,
     lambda g, e, t, x, took: (x is None and e == 1 and g == [], None))

case("an unknown type code in the signature is an error",
     [lambda s: reply(s, "Z", b"\0" * 8)], 1,
     lambda g, e, t, x, took: (x is None and e == 1, None))

case("an unbalanced signature is an error",
     [lambda s: reply(s, "(ii", b"\0" * 8)], 1,
     lambda g, e, t, x, took: (x is None and e == 1, None))

nested = b""
for _ in range(2000):            # variant in a variant in ... (a recursion bomb)
    nested = b"\x01v\0" + nested
case("a variant nested 2000 deep is an error, not a crash",
     [lambda s: reply(s, "v", nested + b"\x01u\0\0" + b"\0" * 8)], 1,
     lambda g, e, t, x, took: (x is None and e == 1, None))

case("an array whose elements take no space is refused",
     [lambda s: reply(s, "a()", struct.pack("<I", 64) + b"\0" * 4 + b"\0" * 64)], 1,
     lambda g, e, t, x, took: (x is None and e == 1, None))

case("a message claiming 3 GiB is refused at once (no buffering toward it)",
     [lambda s: struct.pack("<cBBBIII", b"l", 2, 0, 1, 3 << 30, 7, 0)], 1,
     lambda g, e, t, x, took: (isinstance(x, OSError) and "limit" in str(x) and took < 2, None))

case("a malformed header is an OSError",
     [lambda s: struct.pack("<cBBBIII", b"l", 2, 0, 1, 0, 7, 8) + bytes((5, 200)) + b"\0" * 6], 1,
     lambda g, e, t, x, took: (isinstance(x, OSError) and "header" in str(x), None))

case("a peer that never answers ends at the deadline",
     [lambda s: b""], 1,
     lambda g, e, t, x, took: (t is True and 4.5 < took < 7, "took %.1f s" % took))

case("a peer that closes mid-message is an OSError",
     [lambda s: reply(s, "u", struct.pack("<I", 5))[:20]], 1,
     lambda g, e, t, x, took: (isinstance(x, OSError) and took < 2, None), close_after=True)

# Several connections in one round (dbusraw.pipeline): each answers in its
# own time, and one that closes ends only its own flight.
def slow(delay):
    def answer(s):
        time.sleep(delay)
        return reply(s, "u", struct.pack("<I", 7))
    return answer


fast_c, fast_peer = client_and_peer()
slow_c, slow_peer = client_and_peer()
dead_c, dead_peer = client_and_peer()
serve(fast_peer, [lambda s: reply(s, "u", struct.pack("<I", 1))] * 50, False)
serve(slow_peer, [slow(1.0)] * 2, False)
serve(dead_peer, [lambda s: reply(s, "u", struct.pack("<I", 5))[:20]], True)
done = {}


def recorder(name):
    def on_reply(v):
        done.setdefault(name, []).append((v, time.monotonic()))
    return on_reply


flights = [dbusraw.Flight(c, [(None, "/o", "org.x", "M", "", (), recorder(name))] * n)
           for c, name, n in ((slow_c, "slow", 2), (dead_c, "dead", 1), (fast_c, "fast", 50))]
t0 = time.monotonic()
timed_out = dbusraw.pipeline(flights, t0 + 5.0)
took = time.monotonic() - t0
fast_last = max(t for _, t in done.get("fast", [(None, t0 + 99)])) - t0
result(len(done.get("fast", [])) == 50 and fast_last < 0.9,
       "pipeline over connections at once: a slow peer does not hold up a fast one",
       "fast answers %d, the last at %.2f s" % (len(done.get("fast", [])), fast_last))
result(len(done.get("slow", [])) == 2 and not timed_out and 1.8 < took < 4,
       "pipeline over connections at once: the slow peer's answers all arrive",
       "slow answers %d, timed_out=%r, took %.2f s" % (len(done.get("slow", [])), timed_out, took))
result(isinstance(flights[1].failed, OSError) and flights[0].failed is None and flights[2].failed is None,
       "pipeline over connections at once: a peer that closes ends only its own flight",
       "failed: %r" % [f.failed for f in flights])
for c, peer in ((fast_c, fast_peer), (slow_c, slow_peer), (dead_c, dead_peer)):
    c.close()
    peer.close()

# Authentication: a line that never ends is cut at 16 KiB.
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock_path = "/tmp/dbusraw-check-%d.sock" % os.getpid()
try:
    srv.bind(sock_path)
    srv.listen(1)

    def flood():
        conn, _ = srv.accept()
        try:
            conn.recv(1024)
            conn.sendall(b"x" * (1 << 20))
        except OSError:
            pass
        time.sleep(1)
        conn.close()
    threading.Thread(target=flood, daemon=True).start()
    try:
        dbusraw.Connection("unix:path=" + sock_path, timeout=5)
        result(False, "an endless authentication line is refused", "connected")
    except OSError as e:
        result("too long" in str(e), "an endless authentication line is refused", str(e))
finally:
    srv.close()
    try:
        os.unlink(sock_path)
    except OSError:
        pass
