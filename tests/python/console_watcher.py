"""A kazoo session connected to one chosen member, for the console's browser test: another
member's Sessions page must show its client address, watches and auth ids.

    console_watcher.py <host:port>

Adds the digest identity elsewhere-user, sets two data watches (on /console and on /), prints "READY 0x<session>", and stays connected until its standard input ends.
"""

import sys

from kazoo.client import KazooClient


def main():
    zk = KazooClient(hosts=sys.argv[1], timeout=10.0)
    zk.start(timeout=30)
    zk.add_auth("digest", "elsewhere-user:elsewhere-password")
    zk.ensure_path("/console")
    zk.get("/console", watch=lambda event: None)
    zk.exists("/", watch=lambda event: None)
    print("READY 0x%x" % zk.client_id[0], flush=True)
    sys.stdin.read()
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
