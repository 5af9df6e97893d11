"""kazoo's side of the console's browser test.

    console_locks.py <hosts> <lock path> <payload parent>

Two kazoo clients contend for one Lock: "kazoo-a" holds it, kazoo-b (whose identifier is an
HTML payload) waits behind it;
kazoo-a also holds a lease of a Semaphore at <lock path>-sem ("kazoo-sem"), and has added
the digest identity console-user. A
node whose name and data are HTML/script payloads is created under <payload parent>. Prints
"READY 0x<session a> 0x<session b>"; a "release" line on stdin makes kazoo-a release (and
prints "RELEASED"), after which kazoo-b holds the lock ("B-HELD"). End of input stops both.
"""

import sys
import threading

from kazoo.client import KazooClient

NAME = "<img src=x onerror=\"window.pwned=1\">"
# kazoo-b's identifier (the lock node's data, shown as its owner label) is a payload too.
WAITER = "<img src=x onerror=\"window.pwned=3\">kazoo-b"
DATA = b"<script>window.pwned=2</script><b>bold</b>"


def client(hosts):
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=30)
    return zk


def main():
    hosts, path, payload = sys.argv[1], sys.argv[2], sys.argv[3]
    a, b = client(hosts), client(hosts)
    a.add_auth("digest", "console-user:console-password")
    a.ensure_path(payload)
    a.create(payload + "/" + NAME, DATA)
    lock_a = a.Lock(path, "kazoo-a")
    if not lock_a.acquire(timeout=30):
        sys.exit("kazoo-a did not get the lock")
    semaphore = a.Semaphore(path + "-sem", "kazoo-sem", max_leases=2)
    if not semaphore.acquire(timeout=30):
        sys.exit("kazoo-a did not get a lease")
    lock_b = b.Lock(path, WAITER)
    got_b = threading.Event()

    def wait_b():
        if lock_b.acquire(timeout=120):
            got_b.set()
            print("B-HELD", flush=True)

    threading.Thread(target=wait_b, daemon=True).start()
    # kazoo-b's node exists before READY is said, so the page shows it waiting.
    while len(a.get_children(path)) < 2:
        threading.Event().wait(0.02)
    print("READY 0x%x 0x%x" % (a.client_id[0], b.client_id[0]), flush=True)
    for line in sys.stdin:
        if line.strip() == "release":
            lock_a.release()
            print("RELEASED", flush=True)
    got_b.wait(1)
    for zk in (a, b):
        zk.stop()
        zk.close()


if __name__ == "__main__":
    main()
