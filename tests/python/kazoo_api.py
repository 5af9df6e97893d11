"""kazoo's core API against a live server: CRUD with stats, ephemeral and sequential nodes,
ensure_path, transactions, watches, sync, session states and four-letter words.

Usage: python3 kazoo_api.py host:port [check-name ...]
Driven by tests/tests/clients/kazoo.rs; prints PASS/FAIL per check and "N passed, N failed" last.
"""

import threading
import time

from kazoo.exceptions import (
    BadVersionError,
    InvalidACLError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import EventType, KazooState

import zkcheck
from zkcheck import (
    OP_TIMEOUT,
    check,
    expect,
    expect_eq,
    expect_raises,
    new_client,
    stop_client,
    wait_for,
    wait_until,
)


def now_ms():
    return int(time.time() * 1000)


@check
def crud_with_stats():
    c = new_client()
    before = now_ms()
    expect_eq(c.create("/crud", b"v0"), "/crud", "create returns the path")
    data, st = c.get("/crud")
    expect_eq(data, b"v0", "data after create")
    expect_eq(st.version, 0, "version after create")
    expect_eq(st.cversion, 0, "cversion after create")
    expect_eq(st.aversion, 0, "aversion after create")
    expect_eq(st.dataLength, 2, "dataLength")
    expect_eq(st.numChildren, 0, "numChildren")
    expect_eq(st.ephemeralOwner, 0, "ephemeralOwner of a persistent node")
    expect_eq(st.mzxid, st.czxid, "mzxid == czxid after create")
    expect_eq(st.pzxid, st.czxid, "pzxid == czxid after create")
    expect_eq(st.mtime, st.ctime, "mtime == ctime after create")
    expect(abs(st.ctime - before) < 60_000, "ctime %d is near now %d" % (st.ctime, before))

    st2 = c.set("/crud", b"value-1")
    expect_eq(st2.version, 1, "version after set")
    expect_eq(st2.czxid, st.czxid, "czxid unchanged by set")
    expect(st2.mzxid > st.mzxid, "mzxid grows on set (%d > %d)" % (st2.mzxid, st.mzxid))
    expect(st2.mtime >= st.mtime, "mtime does not go back")
    expect_eq(st2.dataLength, 7, "dataLength after set")
    data, st3 = c.get("/crud")
    expect_eq(data, b"value-1", "data after set")
    expect_eq(st3, st2, "get's stat equals set's stat")
    expect_eq(c.exists("/crud"), st2, "exists' stat equals set's stat")
    expect_eq(c.exists("/crud-missing"), None, "exists on a missing node")

    # Versioned set and delete.
    expect_raises(BadVersionError, c.set, "/crud", b"x", version=0)
    st4 = c.set("/crud", b"", version=1)
    expect_eq(st4.version, 2, "version after versioned set")
    expect_eq(st4.dataLength, 0, "empty data length")
    expect_eq(c.get("/crud")[0], b"", "empty data reads back empty")

    # Children and the parent's stat.
    expect_eq(c.create("/crud/a", b"1"), "/crud/a", "child create")
    child_st = c.exists("/crud/a")
    c.create("/crud/b")
    pst = c.exists("/crud")
    expect_eq(pst.numChildren, 2, "parent numChildren")
    expect_eq(pst.cversion, 2, "parent cversion after two child creates")
    expect_eq(pst.version, 2, "parent data version unchanged by children")
    expect(pst.pzxid > child_st.czxid, "pzxid follows the last child create")
    expect_eq(sorted(c.get_children("/crud")), ["a", "b"], "get_children")
    kids, kst = c.get_children("/crud", include_data=True)
    expect_eq(sorted(kids), ["a", "b"], "get_children with stat")
    expect_eq(kst, pst, "getChildren2 stat equals exists stat")
    expect_eq(c.get_children("/crud/a"), [], "leaf has no children")

    # Errors.
    expect_raises(NodeExistsError, c.create, "/crud/a")
    expect_raises(NoNodeError, c.create, "/nope/child")
    expect_raises(NoNodeError, c.get, "/crud/zzz")
    expect_raises(NoNodeError, c.set, "/crud/zzz", b"")
    expect_raises(NoNodeError, c.delete, "/crud/zzz")
    expect_raises(NoNodeError, c.get_children, "/crud/zzz")
    expect_raises(NotEmptyError, c.delete, "/crud")
    expect_raises(BadVersionError, c.delete, "/crud/a", version=5)

    # Delete and the parent's stat.
    c.delete("/crud/a", version=0)
    c.delete("/crud/b")
    pst2 = c.exists("/crud")
    expect_eq(pst2.numChildren, 0, "numChildren after deletes")
    expect_eq(pst2.cversion, 4, "cversion counts deletes too")
    expect(pst2.pzxid > pst.pzxid, "pzxid moves on child delete")
    c.delete("/crud")
    expect_eq(c.exists("/crud"), None, "gone after delete")

    # create2: path and stat in one reply.
    path, cst = c.create("/crud2", b"abc", include_data=True)
    expect_eq(path, "/crud2", "create2 path")
    expect_eq(cst.dataLength, 3, "create2 stat dataLength")
    expect_eq(cst, c.exists("/crud2"), "create2 stat equals exists stat")

    # A large value round-trips (just under the 1 MiB default jute.maxbuffer).
    big = bytes(range(256)) * 2000
    c.set("/crud2", big)
    expect_eq(c.get("/crud2")[0], big, "512000-byte value")


@check
def zxids_increase_and_root_exists():
    c = new_client()
    expect(c.exists("/") is not None, "root exists")
    expect("zookeeper" in c.get_children("/"), "/zookeeper is listed under /")
    zxids = []
    c.create("/z")
    for i in range(5):
        zxids.append(c.set("/z", str(i).encode()).mzxid)
    expect(all(a < b for a, b in zip(zxids, zxids[1:])), "mzxids strictly increase: %r" % zxids)


@check
def ephemeral_and_sequential():
    c = new_client()
    sid = c.client_id[0]
    c.create("/seq")
    p0 = c.create("/seq/n-", b"a", ephemeral=True, sequence=True)
    p1 = c.create("/seq/n-", b"b", ephemeral=True, sequence=True)
    expect_eq(p0, "/seq/n-0000000000", "first sequential name")
    expect_eq(p1, "/seq/n-0000000001", "second sequential name")
    st = c.exists(p0)
    expect_eq(st.ephemeralOwner, sid, "ephemeralOwner is the session id")
    expect_raises(NoChildrenForEphemeralsError, c.create, p0 + "/kid")
    # Clients see cversion = creates + deletes, but the sequence counter counts creates only
    # (ZooKeeper's persisted cversion; see notes/zookeeper-semantics.md).
    c.delete(p1)
    expect_eq(c.exists("/seq").cversion, 3, "visible cversion after 2 creates and 1 delete")
    p2 = c.create("/seq/x", sequence=True)
    expect_eq(p2, "/seq/x0000000002", "sequence counts creates only, never reuses")

    # create("/folder/", sequence=True): the name is only the counter.
    c.create("/folder")
    f0 = c.create("/folder/", sequence=True)
    f1 = c.create("/folder/", sequence=True)
    expect_eq(f0, "/folder/0000000000", "folder sequential 0")
    expect_eq(f1, "/folder/0000000001", "folder sequential 1")
    expect_eq(sorted(c.get_children("/folder")), ["0000000000", "0000000001"], "folder children")

    # Ephemerals of another session disappear when it closes; this session's stay.
    other = new_client()
    op = other.create("/seq/other-", ephemeral=True, sequence=True)
    expect(c.exists(op) is not None, "other's ephemeral visible")
    osid = other.client_id[0]
    expect(osid != sid, "two sessions have distinct ids")
    expect_eq(c.exists(op).ephemeralOwner, osid, "other's ephemeralOwner")
    stop_client(other)
    expect_eq(c.exists(op), None, "ephemeral removed when its session closed")
    expect(c.exists(p0) is not None, "own ephemeral still there")


@check
def ensure_path_and_recursive_delete():
    c = new_client()
    c.ensure_path("/ep/a/b/c")
    expect(c.exists("/ep/a/b/c") is not None, "ensure_path created the leaf")
    c.ensure_path("/ep/a/b/c")  # idempotent
    c.create("/ep/a/x/y", b"d", makepath=True)
    expect_eq(c.get("/ep/a/x/y")[0], b"d", "makepath create")
    c.delete("/ep", recursive=True)
    expect_eq(c.exists("/ep"), None, "recursive delete")


@check
def transactions():
    c = new_client()
    c.create("/tx", b"")
    t = c.transaction()
    t.create("/tx/a", b"1")
    t.check("/tx", 0)
    t.set_data("/tx/a", b"2")
    t.create("/tx/b")
    t.delete("/tx/b")
    res = t.commit()
    expect_eq(len(res), 5, "five results")
    expect_eq(res[0], "/tx/a", "create result")
    expect_eq(res[1], True, "check result")
    expect_eq(res[2].version, 1, "set_data result stat version")
    expect_eq(res[2].czxid, res[2].mzxid, "all ops of a multi share one zxid")
    expect_eq(res[3], "/tx/b", "second create result")
    expect_eq(res[4], True, "delete result")
    expect_eq(c.get("/tx/a")[0], b"2", "transaction applied")
    expect_eq(c.exists("/tx/b"), None, "created-and-deleted in one transaction")

    # A failing op rolls everything back.
    t = c.transaction()
    t.create("/tx/c")
    t.check("/tx/a", 7)
    t.set_data("/tx/a", b"3")
    res = t.commit()
    expect_eq(len(res), 3, "three results on failure")
    expect(isinstance(res[0], RolledBackError), "op before the failure: %r" % (res[0],))
    expect(isinstance(res[1], BadVersionError), "failing op: %r" % (res[1],))
    expect(isinstance(res[2], RuntimeInconsistency), "op after the failure: %r" % (res[2],))
    expect_eq(c.exists("/tx/c"), None, "rolled back create")
    expect_eq(c.get("/tx/a")[0], b"2", "rolled back set")

    t = c.transaction()
    t.create("/tx/a")
    res = t.commit()
    expect(isinstance(res[0], NodeExistsError), "NodeExists inside a multi: %r" % (res,))


@check
def one_shot_watches():
    c = new_client()
    writer = new_client()
    c.create("/w", b"0")
    events = []
    fired = threading.Event()

    def on_event(ev):
        events.append(ev)
        fired.set()

    c.get("/w", watch=on_event)
    writer.set("/w", b"1")
    wait_for(fired, "data watch")
    expect_eq((events[0].type, events[0].path), (EventType.CHANGED, "/w"), "data event")
    fired.clear()
    writer.set("/w", b"2")  # the watch was one-shot
    c.sync("/w")
    time.sleep(0.3)
    expect_eq(len(events), 1, "one-shot watch fired once")

    # exists() on a missing node fires CREATED.
    events.clear()
    expect_eq(c.exists("/w/new", watch=on_event), None, "missing")
    writer.create("/w/new")
    wait_for(fired, "exists watch")
    expect_eq((events[0].type, events[0].path), (EventType.CREATED, "/w/new"), "created event")

    # Child watch, and a data watch firing DELETED.
    fired.clear()
    events.clear()
    c.get_children("/w", watch=on_event)
    writer.create("/w/kid")
    wait_for(fired, "child watch")
    expect_eq((events[0].type, events[0].path), (EventType.CHILD, "/w"), "child event")

    fired.clear()
    events.clear()
    c.get("/w/kid", watch=on_event)
    writer.delete("/w/kid")
    wait_for(fired, "delete watch")
    expect_eq((events[0].type, events[0].path), (EventType.DELETED, "/w/kid"), "deleted event")

    # A session's own write fires its own watch.
    got = []
    c.get("/w", watch=lambda ev: got.append(ev))
    c.set("/w", b"own")
    wait_until(lambda: len(got) == 1, "own write's event")
    expect_eq((got[0].type, got[0].path), (EventType.CHANGED, "/w"), "own write's event")


@check
def data_and_children_watch_recipes():
    c = new_client()
    writer = new_client()
    seen = []
    lock = threading.Lock()

    @c.DataWatch("/dw")
    def on_data(data, stat, event=None):
        with lock:
            seen.append((data, stat.version if stat else None))

    wait_until(lambda: seen == [(None, None)], "DataWatch on missing node")
    writer.create("/dw", b"a")
    wait_until(lambda: (b"a", 0) in seen, "DataWatch sees create")
    writer.set("/dw", b"b")
    wait_until(lambda: (b"b", 1) in seen, "DataWatch sees set")
    writer.delete("/dw")
    wait_until(lambda: seen[-1] == (None, None), "DataWatch sees delete")

    kids = []
    c.create("/cw")
    c.ChildrenWatch("/cw", lambda ch: kids.append(sorted(ch)))
    wait_until(lambda: kids == [[]], "ChildrenWatch initial call")
    writer.create("/cw/x")
    wait_until(lambda: kids[-1] == ["x"], "ChildrenWatch sees create")
    writer.create("/cw/y")
    wait_until(lambda: kids[-1] == ["x", "y"], "ChildrenWatch sees second create")
    writer.delete("/cw/x")
    wait_until(lambda: kids[-1] == ["y"], "ChildrenWatch sees delete")


@check
def sync_and_read_your_writes():
    a = new_client()
    b = new_client()
    a.create("/sy", b"0")
    for i in range(20):
        a.set("/sy", str(i).encode())
        expect_eq(b.sync("/sy"), "/sy", "sync returns the path")
        expect_eq(b.get("/sy")[0], str(i).encode(), "read after sync sees the write")


@check
def session_state_listener():
    from kazoo.client import KazooClient

    states = []
    changed = threading.Event()

    def listener(state):
        states.append(state)
        changed.set()

    c = KazooClient(hosts=zkcheck.HOSTS, timeout=10.0)
    c.add_listener(listener)
    c.start(timeout=OP_TIMEOUT)
    try:
        wait_until(lambda: KazooState.CONNECTED in states, "CONNECTED state")
        expect_eq(c.state, KazooState.CONNECTED, "client state")
        expect(c.connected, "client.connected")
        sid, passwd = c.client_id
        expect(sid != 0, "non-zero session id")
        expect_eq(len(passwd), 16, "16-byte session password")
        c.create("/ls-eph", ephemeral=True)
    finally:
        c.stop()
        c.close()
    wait_until(lambda: states[-1] == KazooState.LOST, "LOST state after stop")
    d = new_client()
    expect_eq(d.exists("/ls-eph"), None, "ephemeral gone after stop")


@check
def resume_session_with_id_and_password():
    from kazoo.client import KazooClient

    a = new_client()
    a.create("/resume-eph", ephemeral=True)
    sid, passwd = a.client_id
    # A second client object takes over the session from its id and password.
    b = KazooClient(hosts=zkcheck.HOSTS, timeout=10.0, client_id=(sid, passwd))
    b.start(timeout=OP_TIMEOUT)
    try:
        expect_eq(b.client_id[0], sid, "same session id after resume")
        expect_eq(b.exists("/resume-eph").ephemeralOwner, sid, "ephemeral owned by resumed session")
        b.create("/resume-eph2", ephemeral=True)
    finally:
        b.stop()  # closes the session
        b.close()
    c = new_client()
    expect_eq(c.exists("/resume-eph"), None, "ephemerals gone after the resumed session closed")
    expect_eq(c.exists("/resume-eph2"), None, "second ephemeral gone too")


@check
def creator_all_acl():
    # kazoo's CREATOR_ALL_ACL is ACL(ALL, Id("auth", "")), which kazoo sends with a null id.
    from kazoo.security import CREATOR_ALL_ACL, make_digest_acl_credential

    anonymous = new_client()
    expect_raises(
        InvalidACLError,
        anonymous.create,
        "/creator-all-anon",
        b"x",
        acl=CREATOR_ALL_ACL,
    )
    owner = new_client()
    owner.add_auth("digest", "alice:secret")
    owner.create("/creator-all", b"private", acl=CREATOR_ALL_ACL)
    acls, _ = owner.get_acls("/creator-all")
    expected = make_digest_acl_credential("alice", "secret")
    expect_eq(
        [(a.perms, a.id.scheme, a.id.id) for a in acls],
        [(31, "digest", expected)],
        "the ACL names the creator's digest identity",
    )
    expect_eq(owner.get("/creator-all")[0], b"private", "the creator reads it")
    expect_raises(NoAuthError, anonymous.get, "/creator-all")


@check
def four_letter_words():
    c = new_client()
    expect_eq(c.command(b"ruok"), "imok", "ruok")
    srvr = c.command(b"srvr")
    expect("Mode: " in srvr, "srvr names a Mode: %r" % srvr)
    version = c.server_version()
    expect(isinstance(version, tuple) and len(version) >= 3, "server_version tuple: %r" % (version,))
    expect_eq(version[:2], (3, 8), "server_version speaks for ZooKeeper 3.8")


if __name__ == "__main__":
    zkcheck.main()
