"""A pass/fail tally for the small check programs (kazoo_tls.py, kazoo_sasl.py, ...): each check
is a function that raises on failure; the program prints "N passed, N failed" last."""

import sys

passed = 0
failed = 0


def check(name, fn):
    """Runs one check and records its outcome (every failure is reported, none hides)."""
    global passed, failed
    try:
        fn()
        passed += 1
        print(f"ok   {name}", flush=True)
    except Exception as e:  # noqa: BLE001
        failed += 1
        print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)


def finish():
    """Prints the summary line and exits 0 only if nothing failed."""
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(0 if failed == 0 else 1)
