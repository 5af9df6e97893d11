"""A tiny, bounded check runner shared by the kazoo test programs.

Each program registers check functions with @check and calls main(). Every check runs in
its own daemon thread and is joined with a timeout, so a server that never answers fails
the check instead of hanging the program; a global watchdog ends the whole process if
anything else hangs. The last line printed is always "N passed, N failed", which the Rust
driver (tests/tests/clients/kazoo.rs) parses; the exit status is 0 only if nothing failed.
"""

import logging
import os
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient

# Bounds: one check, and the whole program (the Rust side kills us later still).
CHECK_TIMEOUT = float(os.environ.get("ZKCHECK_CHECK_TIMEOUT", "60"))
PROGRAM_TIMEOUT = float(os.environ.get("ZKCHECK_PROGRAM_TIMEOUT", "240"))
# Bound for a single client operation or event wait inside a check.
OP_TIMEOUT = 10.0

_CHECKS = []
HOSTS = None


def check(fn):
    """Registers a check; checks run in registration order."""
    _CHECKS.append(fn)
    return fn


class CheckFailed(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def expect_eq(actual, expected, what):
    if actual != expected:
        raise CheckFailed("%s: expected %r, got %r" % (what, expected, actual))


def expect_raises(exc_type, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    except Exception as e:  # noqa: BLE001 - report the wrong exception
        raise CheckFailed(
            "%s(%r) raised %s, expected %s"
            % (fn.__name__, args, type(e).__name__, exc_type.__name__)
        )
    raise CheckFailed("%s(%r) did not raise %s" % (fn.__name__, args, exc_type.__name__))


def wait_for(event, what, timeout=OP_TIMEOUT):
    """Waits on a threading.Event with a bound."""
    if not event.wait(timeout):
        raise CheckFailed("timed out after %ss waiting for %s" % (timeout, what))


def wait_until(pred, what, timeout=OP_TIMEOUT, interval=0.02):
    """Polls pred() until true, with a bound."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise CheckFailed("timed out after %ss waiting for %s" % (timeout, what))


def join_all(threads, what, timeout=OP_TIMEOUT * 3):
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        raise CheckFailed("timed out waiting for %s: %s still running" % (what, alive))


_clients = []
_clients_lock = threading.Lock()


def new_client(timeout=10.0, **kwargs):
    """A started KazooClient (session timeout `timeout` seconds); stopped after the check."""
    c = KazooClient(hosts=HOSTS, timeout=timeout, **kwargs)
    c.start(timeout=OP_TIMEOUT)
    with _clients_lock:
        _clients.append(c)
    return c


def stop_client(c):
    try:
        c.stop()
        c.close()
    except Exception:  # noqa: BLE001 - best-effort cleanup
        pass


def _stop_all_clients():
    with _clients_lock:
        cs = list(_clients)
        _clients.clear()
    for c in cs:
        stop_client(c)


def main():
    global HOSTS
    if len(sys.argv) < 2:
        print("usage: %s host:port [check-name ...]" % sys.argv[0])
        sys.exit(2)
    HOSTS = sys.argv[1]
    only = set(sys.argv[2:])
    logging.basicConfig(level=os.environ.get("ZKCHECK_LOG", "ERROR"))

    def watchdog():
        print("WATCHDOG: program exceeded %ss" % PROGRAM_TIMEOUT, flush=True)
        print("0 passed, 1 failed", flush=True)
        os._exit(3)

    dog = threading.Timer(PROGRAM_TIMEOUT, watchdog)
    dog.daemon = True
    dog.start()

    passed = failed = 0
    for fn in _CHECKS:
        name = fn.__name__
        if only and name not in only:
            continue
        outcome = {}

        def run(fn=fn, outcome=outcome):
            try:
                fn()
                outcome["ok"] = True
            except Exception as e:  # noqa: BLE001 - every failure is reported
                outcome["err"] = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())

        start = time.monotonic()
        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        t.join(CHECK_TIMEOUT)
        elapsed = time.monotonic() - start
        if t.is_alive():
            outcome["err"] = "timed out after %ss" % CHECK_TIMEOUT
        _stop_all_clients()
        if outcome.get("ok"):
            passed += 1
            print("PASS %s (%.2fs)" % (name, elapsed), flush=True)
        else:
            failed += 1
            print("FAIL %s (%.2fs): %s" % (name, elapsed, outcome.get("err")), flush=True)
    print("%d passed, %d failed" % (passed, failed), flush=True)
    # Daemon threads of hung clients must not keep us alive.
    os._exit(0 if failed == 0 else 1)
