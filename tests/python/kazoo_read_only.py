"""kazoo's read-only mode against a member cut off from its quorum.

Usage: kazoo_read_only.py HOSTS. Run while only one member of HOSTS is up (read-only):
connects with read_only=True, reads, has a write refused, prints "READ-ONLY DONE", waits
for a line on stdin (the quorum is back), then waits for kazoo to find the read-write
member by itself (its isro pinger), writes, and prints "N passed, N failed".
"""

import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    NotReadOnlyCallError,
    SessionExpiredError,
)
from kazoo.protocol.states import KeeperState

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name} {detail}", flush=True)


def wait_for(cond, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def main():
    zk = KazooClient(
        hosts=sys.argv[1],
        read_only=True,
        timeout=10,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1},
    )
    zk.start(timeout=60)
    check(
        "connected read-only",
        zk.client_state == KeeperState.CONNECTED_RO,
        zk.client_state,
    )
    data, _ = zk.get("/ro")
    check("read on the read-only member", data == b"v", data)
    try:
        zk.create("/kazoo-ro", b"x")
        check("write refused", False, "the create succeeded")
    except NotReadOnlyCallError:
        check("write refused", True)
    print("READ-ONLY DONE", flush=True)
    sys.stdin.readline()
    back = wait_for(lambda: zk.client_state == KeeperState.CONNECTED, 90)
    check("back to read-write by itself", back, zk.client_state)
    created = False
    deadline = time.time() + 60
    while not created and time.time() < deadline:
        try:
            zk.create("/kazoo-rw", b"x")
            created = True
        except (ConnectionLoss, SessionExpiredError, NotReadOnlyCallError):
            time.sleep(0.2)
    check("write after the quorum is back", created)
    zk.stop()
    zk.close()
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
