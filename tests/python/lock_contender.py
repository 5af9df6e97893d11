"""A kazoo Lock contender for the recipes' interop tests.

Usage: lock_contender.py <connect string> <lock path> <threads> <iterations> <log file>

Each thread has its own kazoo Lock (recognising Curator-style `-lock-` nodes as contenders)
and acquires it <iterations> times. Every critical section appends one line to the log:
    kazoo <pid> <thread> <token> <sequence> <start ns> <end ns> <node>
where token is the lock node's czxid and times come from time.monotonic_ns()
(CLOCK_MONOTONIC, the clock the Rust and Java contenders use).
"""

import os
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.lock import Lock


def main():
    if len(sys.argv) != 6:
        print("usage: lock_contender.py <connect> <path> <threads> <iterations> <log>", file=sys.stderr)
        sys.exit(2)
    connect, path, threads, iterations, log_path = sys.argv[1:]
    threads, iterations = int(threads), int(iterations)
    client = KazooClient(hosts=connect, timeout=10.0)
    client.start(timeout=30)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    failures = []

    def work(thread):
        lock = Lock(client, path, "kazoo-%d-%d" % (os.getpid(), thread), extra_lock_patterns=["-lock-"])
        try:
            for _ in range(iterations):
                if not lock.acquire(timeout=120):
                    raise RuntimeError("acquire timed out")
                try:
                    node = lock.node
                    stat = client.exists(path + "/" + node)
                    start = time.monotonic_ns()
                    time.sleep(0.002)
                    end = time.monotonic_ns()
                    seq = int(node[node.rindex("__lock__") + len("__lock__"):])
                    line = "kazoo %d %d %d %d %d %d %s\n" % (
                        os.getpid(), thread, stat.czxid, seq, start, end, node)
                    os.write(fd, line.encode())
                finally:
                    lock.release()
        except Exception as e:  # reported by the exit code
            failures.append(e)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    os.close(fd)
    client.stop()
    client.close()
    if failures:
        print("lock_contender.py: %r" % failures, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
