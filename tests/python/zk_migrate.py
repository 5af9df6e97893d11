"""kazoo's part in the migration tests (tests/tests/disk/migrate.rs).

Modes (the server's connect string is always the last argument):
  load HOSTS             every node kind and ACL kind kazoo can make, deep and wide trees,
                         sequential counters advanced by creates and deletes, a multi, a
                         failed multi, setACL, several setData; prints "loaded N".
  hold FILE GO HOSTS     connects (30 s sessions), creates ephemerals, writes its session id
                         to FILE, then waits (bounded) until the file GO exists, i.e. the
                         server behind HOSTS has been replaced, and checks that the same
                         session is connected and its ephemerals still there; prints
                         PASS/FAIL lines and "N passed, N failed".
  abandon FILE HOSTS     connects with a short session, creates an ephemeral, writes its
                         session id to FILE and sleeps until killed.
  write SECONDS HOSTS    writes (creates, setData, deletes) for SECONDS or until killed.
  write_at ROOT SECONDS HOSTS
                         the same under ROOT instead of /load, and prints how many writes
                         were acknowledged ("acked N") when it ends.
"""

import os
import sys
import time

from kazoo.client import KazooClient
from kazoo.security import ACL, Id, Permissions, make_digest_acl, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE


def connect(hosts, timeout):
    zk = KazooClient(hosts=hosts, timeout=timeout)
    zk.start(timeout=30)
    return zk


def load(hosts):
    zk = connect(hosts, 10.0)
    zk.add_auth("digest", "creator:pw")
    n = 0
    zk.create("/app", b"application root")
    zk.create("/app/binary", bytes(range(256)))
    zk.create("/app/empty", b"")
    zk.create("/app/versions", b"v0")
    for i in range(1, 6):
        zk.set("/app/versions", ("v%d" % i).encode())
    n += 4
    # ACL kinds: world read-only, digest, ip, auth (the creator's digest), mixed.
    zk.create("/acl", b"")
    zk.create("/acl/world_read", b"r", acl=READ_ACL_UNSAFE)
    zk.create("/acl/digest", b"d", acl=[make_digest_acl("user", "secret", all=True)])
    zk.create("/acl/ip", b"i", acl=[ACL(Permissions.ALL, Id("ip", "127.0.0.1"))])
    zk.create("/acl/auth", b"a", acl=[ACL(Permissions.ALL, Id("auth", ""))])
    zk.create("/acl/mixed", b"m", acl=[ACL(Permissions.READ, Id("world", "anyone")),
                                       make_digest_acl("admin", "pw", all=True)])
    zk.create("/acl/changed", b"c")
    zk.set_acls("/acl/changed", READ_ACL_UNSAFE + [make_digest_acl("creator", "pw", all=True)])
    zk.set_acls("/acl/changed", OPEN_ACL_UNSAFE, version=1)
    n += 7
    # Deep and wide.
    path = "/deep"
    for i in range(40):
        path += "/d%d" % i
        zk.create(path, str(i).encode(), makepath=True)
    zk.create("/wide", b"")
    tx = zk.transaction()
    for i in range(600):
        tx.create("/wide/c%04d" % i, ("%d" % i).encode())
    tx.commit()
    n += 641
    # Sequential counters advanced by creates and deletes.
    zk.create("/seq", b"")
    made = [zk.create("/seq/s-", b"", sequence=True) for _ in range(9)]
    for p in made[:4]:
        zk.delete(p)
    zk.create("/seq/plain", b"")
    zk.delete("/seq/plain")
    zk.create("/seq/plain2", b"")
    n += 7
    # A multi that succeeds and one that fails (logged as an error transaction).
    tx = zk.transaction()
    tx.create("/multi", b"m")
    tx.create("/multi/a", b"a")
    tx.set_data("/app", b"changed by multi")
    tx.check("/app", 1)
    tx.delete("/app/empty")
    tx.commit()
    tx = zk.transaction()
    tx.create("/multi/b", b"b")
    tx.check("/app", 99)
    tx.commit()
    n += 2
    zk.stop()
    zk.close()
    print("loaded %d" % n)


def wait_for(path, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.1)
    return False


def hold(session_file, go_file, hosts):
    zk = connect(hosts, 30.0)
    zk.create("/held", b"")
    zk.create("/held/e1", b"one", ephemeral=True)
    zk.create("/held/e-", b"seq", ephemeral=True, sequence=True)
    session_id, _ = zk.client_id
    with open(session_file + ".tmp", "w") as f:
        f.write("%x\n" % session_id)
    os.rename(session_file + ".tmp", session_file)
    passed, failed = 0, 0

    def result(ok, name, why=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("PASS %s" % name, flush=True)
        else:
            failed += 1
            print("FAIL %s: %s" % (name, why), flush=True)

    if not wait_for(go_file, 240):
        result(False, "server replaced", "the go file never appeared")
    else:
        deadline = time.time() + 60
        while time.time() < deadline and not zk.connected:
            time.sleep(0.1)
        result(zk.connected, "reconnected")
        result(zk.client_id is not None and zk.client_id[0] == session_id, "same session",
               "session %r, expected %x" % (zk.client_id, session_id))
        try:
            kids = sorted(zk.get_children("/held"))
            result(len(kids) == 2 and "e1" in kids, "ephemerals kept", repr(kids))
            data, stat = zk.get("/held/e1")
            result(data == b"one" and stat.ephemeralOwner == session_id, "ephemeral owner",
                   "%r %x" % (data, stat.ephemeralOwner))
            zk.create("/held/e2", b"after", ephemeral=True)
            result(zk.exists("/held/e2").ephemeralOwner == session_id, "new ephemeral")
        except Exception as e:  # noqa: BLE001 - any failure is reported, not raised
            result(False, "session usable", repr(e))
    zk.stop()
    zk.close()
    print("%d passed, %d failed" % (passed, failed), flush=True)


def abandon(session_file, hosts):
    zk = connect(hosts, 20.0)
    zk.create("/abandoned", b"", makepath=True) if not zk.exists("/abandoned") else None
    zk.create("/abandoned/e", b"gone soon", ephemeral=True)
    with open(session_file + ".tmp", "w") as f:
        f.write("%x\n" % zk.client_id[0])
    os.rename(session_file + ".tmp", session_file)
    time.sleep(600)


def write(seconds, hosts, root="/load"):
    zk = connect(hosts, 10.0)
    states = []
    zk.add_listener(lambda state: states.append(state))
    zk.ensure_path(root)
    session = zk.client_id[0]
    end = time.time() + float(seconds)
    i = 0
    acked, errors, last_set = 0, 0, None
    while time.time() < end:
        step = "create n%06d" % i
        try:
            zk.create("%s/n%06d" % (root, i), b"x" * (i % 50))
            step = "set %d" % i
            zk.set(root, str(i).encode())
            last_set = i
            if i % 3 == 0 and i >= 3:
                step = "delete n%06d" % (i - 3)
                zk.delete("%s/n%06d" % (root, i - 3))
            step = "create q-"
            zk.create("%s/q-" % root, b"", sequence=True)
            acked += 1
        except Exception as e:  # noqa: BLE001 - the server is killed under us; keep going
            errors += 1
            print("error in %s at %.3f: %r" % (step, time.time(), e), flush=True)
            time.sleep(0.05)
        i += 1
    same = zk.client_id is not None and zk.client_id[0] == session
    print("acked %d errors %d last_set %s same_session %s states %s"
          % (acked, errors, last_set, same, ",".join(str(s) for s in states) or "-"), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "load":
        load(sys.argv[2])
    elif mode == "hold":
        hold(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "abandon":
        abandon(sys.argv[2], sys.argv[3])
    elif mode == "write":
        write(sys.argv[2], sys.argv[3])
    elif mode == "write_at":
        write(sys.argv[3], sys.argv[4], root=sys.argv[2])
    else:
        sys.exit("unknown mode %s" % mode)
