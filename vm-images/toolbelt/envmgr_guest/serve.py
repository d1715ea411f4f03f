"""The session's resident envmgr-guest: it answers the session commands
(a11y-tree, terminal-output) with Python and the dumper already loaded.

Why: under TCG a Python start costs ~0.3 s and importing the dumper ~0.4 s,
paid on every accessibility observation beside dumps of 0.2-3 s.  The apps
image starts this server with the desktop session (session.d/20-envmgr-guest);
the envmgr-guest launcher hands it a session command over a Unix socket of
the session user's (socat), and runs the command itself when no server
answers.

Each request is served by a child forked for it, so that a dump's state, a
crash or a hang stays in that child as in a fresh process.  Protocol: the
client sends its arguments as NUL-terminated UTF-8 strings and shuts its side
down; the child writes what the command prints (one JSON line) and closes."""
import os
import signal
import socket
import sys
import time

SOCKET_NAME = "envmgr-guest.sock"
REQUEST_MAX = 1 << 16     # bytes of arguments
REQUEST_TIMEOUT_S = 5.0   # to send them
CHILD_LIMIT_S = 600       # a served command's life, whatever its client does


def socket_path():
    return "/run/user/%d/%s" % (os.getuid(), SOCKET_NAME)


class BadRequest(Exception):
    pass


def read_request(conn):
    """The arguments a client sent (list of str); BadRequest says why not."""
    conn.settimeout(REQUEST_TIMEOUT_S)
    data = b""
    try:
        while len(data) <= REQUEST_MAX:
            chunk = conn.recv(REQUEST_MAX + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as e:
        raise BadRequest("reading the arguments: %s" % e)
    finally:
        # blocking again: stdout is this socket, and a timeout made it non-blocking
        conn.settimeout(None)
    if len(data) > REQUEST_MAX:
        raise BadRequest("arguments over %d bytes" % REQUEST_MAX)
    if not data.endswith(b"\0"):
        raise BadRequest("arguments not NUL-terminated")
    try:
        return [a.decode("utf-8") for a in data[:-1].split(b"\0")]
    except UnicodeDecodeError:
        raise BadRequest("arguments not UTF-8")


def serve(path=None):
    """Serve until killed (the session's end)."""
    from . import a11y, calc_cells, calc_model, cli   # noqa: F401  loaded once: the point
    try:
        # the Calc probe's pyuno too (~0.5 s of the guest's CPU a Calc dump); no bridge is
        # opened here, so the probe's child still has its own and ends it when it exits
        import uno  # noqa: F401
    except ImportError:
        pass
    path = path or socket_path()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        srv.bind(path)
    finally:
        os.umask(old)
    srv.listen(16)
    parser = cli.build_parser()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # the kernel reaps the children
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            time.sleep(0.1)         # out of descriptors or memory: no busy loop meanwhile
            continue
        try:
            pid = os.fork()
        except OSError:
            conn.close()
            continue
        if pid == 0:
            code = 1
            try:
                srv.close()
                code = _serve_one(conn, cli, parser)
            finally:
                os._exit(code)
        conn.close()


def _serve_one(conn, cli, parser):
    # the dumper waits for its own probe child: waitpid needs SIGCHLD's default
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.alarm(CHILD_LIMIT_S)
    os.dup2(conn.fileno(), 1)
    try:
        argv = read_request(conn)
    except BadRequest as e:
        return cli.emit({"error": "envmgr-guest server: %s" % e}, cli.DEFAULT_MAX_BYTES, 2)
    try:
        return cli.main(argv, served=True, parser=parser)
    except SystemExit as e:                 # --help
        return e.code if isinstance(e.code, int) else 2
    finally:
        sys.stdout.flush()
