"""envmgr-clockd: the guest's clock, set by the host with no process started.

A restored guest wakes with the clock of the moment its state was saved. The QEMU guest agent's
guest-set-time sets it, then runs hwclock, and the first process a restored guest starts costs
hundreds of milliseconds under TCG (its translation cache starts empty). So this resident root
daemon reads "<seconds>.<nanoseconds>" lines from a FIFO and sets CLOCK_REALTIME itself; the host
writes a line with the agent's guest-file-write (no process either) and checks the result with
guest-get-time. The FIFO is root's, mode 0600: no user in the guest can set the clock through it.

    python3 -I -m envmgr_guest.clockd [FIFO]     (default /run/envmgr-clock)
"""
import os
import sys
import time

LINE_MAX = 64  # "<seconds>.<nanoseconds>\n" is 31 bytes; anything longer is dropped


def parse(line):
    """Nanoseconds since the epoch, or None for a malformed line."""
    try:
        sec, nsec = line.decode("ascii").strip().split(".")
        if not (sec.isdigit() and nsec.isdigit() and len(nsec) == 9):
            return None
        return int(sec) * 1000000000 + int(nsec)
    except (UnicodeDecodeError, ValueError):
        return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else "/run/envmgr-clock"
    os.umask(0o077)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.mkfifo(path, 0o600)
    # Read and write: the pipe always has a writer (this process), so read() blocks until the
    # host writes rather than returning end-of-file after each writer closes.
    fd = os.open(path, os.O_RDWR)
    buf = b""
    while True:
        buf += os.read(fd, 256)
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            ns = parse(line)
            if ns is not None:
                try:
                    time.clock_settime_ns(time.CLOCK_REALTIME, ns)
                except OSError as e:
                    print("envmgr-clockd: setting the clock: %s" % e, file=sys.stderr, flush=True)
        if len(buf) > LINE_MAX:
            buf = b""


if __name__ == "__main__":
    sys.exit(main())
