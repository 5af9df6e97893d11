"""A kazoo barrier member for the recipes' barrier interop tests.

Usage:
    barrier_member.py wait <connect string> <path>
        Prints `kazoo-barrier waiting` once it has seen the Barrier up, waits for it to be
        removed (at most 120 s) and prints `kazoo-barrier passed` (exit 1 on timeout).
    barrier_member.py double <connect string> <path> <member qty> <threads> <log file>
        Each thread is one DoubleBarrier member: enter, then leave. Each member appends to
        the shared log, with time.monotonic_ns() (CLOCK_MONOTONIC):
            kazoo enter-start <ns> / kazoo entered <ns> / kazoo leave-start <ns> / kazoo left <ns>
"""

import os
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.barrier import Barrier, DoubleBarrier


def connect(hosts):
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=30)
    return client


def wait(hosts, path):
    client = connect(hosts)
    if client.exists(path) is None:
        print("the barrier is not up", file=sys.stderr)
        sys.exit(1)
    print("kazoo-barrier waiting", flush=True)
    if not Barrier(client, path).wait(timeout=120):
        print("Barrier.wait timed out", file=sys.stderr)
        sys.exit(1)
    print("kazoo-barrier passed", flush=True)
    client.stop()


def double(hosts, path, qty, threads, log_path):
    client = connect(hosts)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    lock = threading.Lock()
    failures = []

    def log(event):
        with lock:
            os.write(fd, ("kazoo %s %d\n" % (event, time.monotonic_ns())).encode())

    def member():
        try:
            barrier = DoubleBarrier(client, path, qty)
            log("enter-start")
            barrier.enter()
            if not barrier.participating:
                raise RuntimeError("enter failed")
            log("entered")
            log("leave-start")
            barrier.leave()
            log("left")
        except Exception as e:  # reported below; the process fails
            failures.append(e)

    workers = [threading.Thread(target=member) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=240)
        if w.is_alive():
            failures.append(RuntimeError("a member did not finish"))
    os.close(fd)
    client.stop()
    if failures:
        print("kazoo barrier member failed: %r" % failures, file=sys.stderr)
        sys.exit(1)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "wait":
        wait(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 7 and sys.argv[1] == "double":
        double(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
