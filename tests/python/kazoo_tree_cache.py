"""A kazoo TreeCache beside the recipes' own on the same subtree (the cache interop test).

Usage: kazoo_tree_cache.py <connect string> <path>

Prints `kazoo-cache-ready` once the cache is initialized; then, for every line `dump` on
stdin, prints every cached node as `node <path> <data as hex>` (sorted by path) and `end`.
Exits when stdin closes.
"""

import sys
import threading

from kazoo.client import KazooClient
from kazoo.recipe.cache import TreeCache, TreeEvent


def walk(cache, path, out):
    node = cache.get_data(path)
    if node is None:
        return
    out[path] = "x" + (node.data or b"").hex()
    for name in cache.get_children(path) or ():
        walk(cache, path.rstrip("/") + "/" + name, out)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    hosts, root = sys.argv[1:]
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=30)
    initialized = threading.Event()

    def listener(event):
        if event.event_type == TreeEvent.INITIALIZED:
            initialized.set()

    cache = TreeCache(client, root)
    cache.listen(listener)
    cache.start()
    if not initialized.wait(120):
        print("the cache did not load in time", file=sys.stderr)
        sys.exit(1)
    print("kazoo-cache-ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "dump":
            continue
        nodes = {}
        walk(cache, root, nodes)
        lines = ["node %s %s" % (p, d) for p, d in sorted(nodes.items())]
        print("\n".join(lines + ["end"]), flush=True)
    cache.close()
    client.stop()


if __name__ == "__main__":
    main()
