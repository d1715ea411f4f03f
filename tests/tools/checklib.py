"""What the check scripts test_toolbelt.sh runs share: one line per check, "ok   NAME" or
"FAIL NAME: why" (lib.sh's tally counts them), and a check that never stops the others."""


def report(name, ok, why=""):
    print(("ok   %s" % name) if ok else ("FAIL %s: %s" % (name, why)), flush=True)


def check(name, fn):
    """fn() -> (ok, why); an exception is a failure with its type and message."""
    try:
        ok, why = fn()
    except Exception as e:  # a failing check must not stop the others
        ok, why = False, "%s: %s" % (type(e).__name__, e)
    report(name, ok, why)
