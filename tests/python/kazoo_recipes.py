"""kazoo's recipes against a live server, with their guarantees checked, not just called:
Lock (mutual exclusion across clients, fairness, contenders, release on session close),
ReadLock/WriteLock, Semaphore, Election, Queue, LockingQueue, Counter, Barrier,
DoubleBarrier, Party and ShallowParty.

Usage: python3 kazoo_recipes.py host:port [check-name ...]
Driven by tests/tests/clients/kazoo.rs; prints PASS/FAIL per check and "N passed, N failed" last.
"""

import struct
import threading
import time

from kazoo.recipe.barrier import Barrier, DoubleBarrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.party import Party, ShallowParty

from kazoo.exceptions import LockTimeout

import zkcheck
from zkcheck import (
    OP_TIMEOUT,
    CheckFailed,
    check,
    expect,
    expect_eq,
    join_all,
    new_client,
    stop_client,
    wait_for,
    wait_until,
)

# Quick, bounded retries for recipes that retry on BadVersion (Counter).
FAST_RETRY = {"max_tries": 200, "delay": 0.005, "backoff": 1.2, "max_delay": 0.05}


class Occupancy:
    """Counts how many threads are inside a critical section, and the most ever at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self.inside = 0
        self.max_inside = 0
        self.entries = 0

    def enter(self):
        with self._lock:
            self.inside += 1
            self.entries += 1
            self.max_inside = max(self.max_inside, self.inside)

    def leave(self):
        with self._lock:
            self.inside -= 1


class Errors:
    """Collects exceptions from worker threads so the check can fail with them."""

    def __init__(self):
        self.items = []
        self._lock = threading.Lock()

    def run(self, fn, *args):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - reported by raise_any
            with self._lock:
                self.items.append("%s: %s" % (type(e).__name__, e))

    def thread(self, name, fn, *args):
        t = threading.Thread(target=self.run, args=(fn,) + args, name=name, daemon=True)
        t.start()
        return t

    def raise_any(self):
        if self.items:
            raise CheckFailed("worker errors: %s" % self.items)


@check
def lock_mutual_exclusion():
    """4 clients x 10 increments of a znode counter under the lock: exactly 40, never two
    holders at once (a lost update or an overlap would show)."""
    clients = [new_client() for _ in range(4)]
    clients[0].create("/lock-counter", b"0")
    occ = Occupancy()
    errors = Errors()
    rounds = 10

    def worker(i):
        c = clients[i]
        lock = c.Lock("/locks/res", "worker-%d" % i)
        for _ in range(rounds):
            if not lock.acquire(timeout=OP_TIMEOUT * 2):
                raise CheckFailed("worker %d could not get the lock" % i)
            try:
                occ.enter()
                value = int(c.get("/lock-counter")[0])
                time.sleep(0.002)
                c.set("/lock-counter", str(value + 1).encode())
                occ.leave()
            finally:
                lock.release()

    threads = [errors.thread("lock-%d" % i, worker, i) for i in range(4)]
    join_all(threads, "lock workers", timeout=45)
    errors.raise_any()
    expect_eq(occ.max_inside, 1, "most holders at once")
    expect_eq(occ.entries, 4 * rounds, "critical sections entered")
    expect_eq(int(clients[0].get("/lock-counter")[0]), 4 * rounds, "counter under the lock")
    expect_eq(clients[0].get_children("/locks/res"), [], "no lock nodes left")


@check
def lock_contenders_fairness_and_session_release():
    holder_client = new_client()
    b_client = new_client()
    c_client = new_client()
    observer = new_client()
    holder = holder_client.Lock("/locks/fair", "holder")
    expect(holder.acquire(timeout=OP_TIMEOUT), "holder acquires a free lock")
    expect(holder.is_acquired, "is_acquired")
    # A second Lock object on another client cannot take it without blocking.
    probe = observer.Lock("/locks/fair", "probe")
    expect(not probe.acquire(blocking=False), "non-blocking acquire fails while held")

    order = []
    acquired = {"b": threading.Event(), "c": threading.Event()}
    release = {"b": threading.Event(), "c": threading.Event()}
    errors = Errors()

    def waiter(name, client):
        lock = client.Lock("/locks/fair", name)
        if not lock.acquire(timeout=OP_TIMEOUT * 2):
            raise CheckFailed("%s timed out" % name)
        order.append(name)
        acquired[name].set()
        wait_for(release[name], "release signal for %s" % name)
        lock.release()

    tb = errors.thread("waiter-b", waiter, "b", b_client)
    wait_until(lambda: len(observer.Lock("/locks/fair").contenders()) == 2, "b queued")
    tc = errors.thread("waiter-c", waiter, "c", c_client)
    view = observer.Lock("/locks/fair")
    wait_until(lambda: len(view.contenders()) == 3, "c queued")
    expect_eq(view.contenders(), ["holder", "b", "c"], "contenders in queue order")
    time.sleep(0.2)
    expect_eq(order, [], "nobody acquires while the holder holds")

    # The holder's session closes: its node goes, the next in line (b) acquires.
    stop_client(holder_client)
    wait_for(acquired["b"], "b acquires after the holder's session closed")
    expect_eq(view.contenders(), ["b", "c"], "contenders after the holder left")
    time.sleep(0.2)
    expect(not acquired["c"].is_set(), "c still waits while b holds")
    release["b"].set()
    wait_for(acquired["c"], "c acquires after b releases")
    release["c"].set()
    join_all([tb, tc], "waiters")
    errors.raise_any()
    expect_eq(order, ["b", "c"], "acquisition order is queue order")
    wait_until(lambda: view.contenders() == [], "no contenders at the end")


def times_out(lock, seconds):
    """True if `lock` cannot be acquired within `seconds` (kazoo raises LockTimeout)."""
    try:
        got = lock.acquire(timeout=seconds)
    except LockTimeout:
        return True
    if got:
        lock.release()
    return not got


@check
def read_write_lock():
    r1c, r2c, wc = new_client(), new_client(), new_client()
    r1 = r1c.ReadLock("/locks/rw", "r1")
    r2 = r2c.ReadLock("/locks/rw", "r2")
    w = wc.WriteLock("/locks/rw", "w")
    expect(r1.acquire(timeout=OP_TIMEOUT), "first reader")
    expect(r2.acquire(timeout=OP_TIMEOUT), "second reader shares the lock")
    expect(times_out(w, 0.5), "writer excluded while readers hold")
    r1.release()
    expect(times_out(w, 0.3), "writer excluded while one reader holds")
    r2.release()
    expect(w.acquire(timeout=OP_TIMEOUT), "writer acquires once readers are gone")
    r3 = r1c.ReadLock("/locks/rw", "r3")
    expect(times_out(r3, 0.3), "reader excluded while the writer holds")
    w.release()
    expect(r3.acquire(timeout=OP_TIMEOUT), "reader after the writer")
    r3.release()


@check
def semaphore_limits_holders():
    clients = [new_client() for _ in range(5)]
    occ = Occupancy()
    errors = Errors()

    def worker(i):
        sem = clients[i].Semaphore("/semaphore", "s%d" % i, max_leases=2)
        for _ in range(3):
            if not sem.acquire(timeout=OP_TIMEOUT * 2):
                raise CheckFailed("s%d timed out" % i)
            occ.enter()
            time.sleep(0.02)
            occ.leave()
            sem.release()

    threads = [errors.thread("sem-%d" % i, worker, i) for i in range(5)]
    join_all(threads, "semaphore workers", timeout=45)
    errors.raise_any()
    expect_eq(occ.entries, 15, "leases taken")
    expect(occ.max_inside <= 2, "at most 2 holders at once, saw %d" % occ.max_inside)
    expect(occ.max_inside == 2, "the two leases were used together (saw %d)" % occ.max_inside)


@check
def election():
    clients = [new_client() for _ in range(3)]
    observer = new_client()
    occ = Occupancy()
    leaders = []
    errors = Errors()
    view = observer.Election("/election")

    def lead(name):
        occ.enter()
        leaders.append(name)
        if len(leaders) == 1:
            # The first leader holds office until every contender (3 + the one we cancel)
            # is queued, so contenders() shows them all with the leader first.
            wait_until(lambda: len(view.contenders()) == 4, "all contenders queued")
            cs = view.contenders()
            expect_eq(cs[0], name, "the leader heads contenders()")
            expect_eq(sorted(cs), sorted(["e0", "e1", "e2", "quitter"]), "contenders")
            quitter.cancel()
            wait_for(quitter_done, "cancelled contender returns")
        time.sleep(0.05)
        occ.leave()

    elections = [c.Election("/election", "e%d" % i) for i, c in enumerate(clients)]
    threads = [
        errors.thread("elect-%d" % i, e.run, lead, "e%d" % i) for i, e in enumerate(elections)
    ]
    wait_until(lambda: len(view.contenders()) == 3, "three contenders")
    quitter_client = new_client()
    quitter = quitter_client.Election("/election", "quitter")
    quitter_done = threading.Event()

    def quit_run():
        quitter.run(lambda: leaders.append("quitter"))
        quitter_done.set()

    tq = errors.thread("quitter", quit_run)
    join_all(threads + [tq], "elections", timeout=45)
    errors.raise_any()
    expect_eq(sorted(leaders), ["e0", "e1", "e2"], "everyone but the quitter led once")
    expect_eq(occ.max_inside, 1, "one leader at a time")


@check
def queue_priority_and_concurrency():
    c = new_client()
    q = c.Queue("/queue")
    q.put(b"a")
    q.put(b"b", priority=10)
    q.put(b"c")
    q.put(b"d", priority=50)
    expect_eq(len(q), 4, "queue length")
    got = [q.get() for _ in range(4)]
    expect_eq(got, [b"b", b"d", b"a", b"c"], "priority then FIFO order")
    expect_eq(q.get(), None, "empty queue")

    # Two producers, two consumers: every item is consumed exactly once.
    clients = [new_client() for _ in range(4)]
    items = 60
    consumed = []
    clock = threading.Lock()
    errors = Errors()

    def produce(i):
        pq = clients[i].Queue("/queue")
        for k in range(items // 2):
            pq.put(("p%d-%d" % (i, k)).encode())

    def consume(i):
        cq = clients[i].Queue("/queue")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with clock:
                if len(consumed) >= items:
                    return
            v = cq.get()
            if v is None:
                time.sleep(0.01)
                continue
            with clock:
                consumed.append(v)

    threads = [errors.thread("prod-%d" % i, produce, i) for i in (0, 1)]
    threads += [errors.thread("cons-%d" % i, consume, i) for i in (2, 3)]
    join_all(threads, "queue workers", timeout=45)
    errors.raise_any()
    expect_eq(len(consumed), items, "items consumed")
    expect_eq(len(set(consumed)), items, "no item consumed twice")
    expect_eq(len(q), 0, "queue drained")


@check
def locking_queue():
    c1, c2 = new_client(), new_client()
    q1 = c1.LockingQueue("/lqueue")
    q2 = c2.LockingQueue("/lqueue")
    q1.put_all([b"1", b"2", b"3"])
    expect_eq(len(q1), 3, "length after put_all")
    expect_eq(q1.get(timeout=OP_TIMEOUT), b"1", "first entry")
    expect(q1.holds_lock(), "q1 holds its entry")
    expect_eq(q2.get(timeout=OP_TIMEOUT), b"2", "a locked entry is skipped")
    expect(q1.release(), "release puts the entry back")
    expect(q2.consume(), "consume")
    expect_eq(len(q1), 2, "one entry consumed")
    expect_eq(q1.get(timeout=OP_TIMEOUT), b"1", "released entry is available again")
    expect(q1.consume(), "consume 1")
    expect_eq(q2.get(timeout=OP_TIMEOUT), b"3", "last entry")
    expect(q2.consume(), "consume 3")
    expect_eq(len(q1), 0, "empty")
    expect_eq(q1.get(timeout=0.3), None, "get on an empty queue times out")
    # get() blocks until a put from another client arrives.
    result = {}

    def getter():
        result["v"] = q1.get(timeout=OP_TIMEOUT)

    t = threading.Thread(target=getter, daemon=True)
    t.start()
    time.sleep(0.2)
    q2.put(b"late", priority=1)
    t.join(OP_TIMEOUT + 1)
    expect_eq(result.get("v"), b"late", "blocked get wakes on put")
    expect(q1.consume(), "consume late")


@check
def counter_is_exact_under_contention():
    clients = [new_client(command_retry=FAST_RETRY) for _ in range(4)]
    errors = Errors()
    per_client = 25

    def bump(i):
        counter = Counter(clients[i], "/counter")
        for _ in range(per_client):
            counter += 1

    threads = [errors.thread("count-%d" % i, bump, i) for i in range(4)]
    join_all(threads, "counter workers", timeout=45)
    errors.raise_any()
    counter = Counter(clients[0], "/counter")
    expect_eq(counter.value, 4 * per_client, "counter after concurrent increments")
    counter -= 5
    expect_eq(counter.value, 4 * per_client - 5, "counter after a decrement")
    data, stat = clients[0].get("/counter")
    expect_eq(stat.version, 4 * per_client + 1, "one successful set per change")

    # Curator-compatible encoding: a 4-byte big-endian int.
    cc = Counter(clients[1], "/curator-counter", support_curator=True)
    for _ in range(7):
        cc += 3
    raw = clients[1].get("/curator-counter")[0]
    expect_eq(struct.unpack(">i", raw)[0], 21, "curator-style counter bytes")


@check
def barrier():
    c1, c2 = new_client(), new_client()
    expect(Barrier(c2, "/barrier").wait(0.1), "no barrier node: wait returns at once")
    b = Barrier(c1, "/barrier")
    b.create()
    waiter = Barrier(c2, "/barrier")
    expect(not waiter.wait(0.3), "wait times out while the barrier stands")
    result = {}

    def wait():
        result["cleared"] = waiter.wait(OP_TIMEOUT)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    time.sleep(0.2)
    expect(b.remove(), "remove")
    t.join(OP_TIMEOUT + 1)
    expect_eq(result.get("cleared"), True, "waiter released by remove")


@check
def double_barrier():
    n = 3
    clients = [new_client() for _ in range(n)]
    state = {"arrived": 0, "left": 0, "entered_early": 0, "left_early": 0}
    slock = threading.Lock()
    errors = Errors()

    def member(i):
        db = DoubleBarrier(clients[i], "/dbarrier", n, identifier="m%d" % i)
        time.sleep(0.1 * i)  # arrive one by one
        with slock:
            state["arrived"] += 1
        db.enter()
        with slock:
            if state["arrived"] < n:
                state["entered_early"] += 1
        time.sleep(0.1 * (n - i))  # leave in another order
        with slock:
            state["left"] += 1
        db.leave()
        with slock:
            if state["left"] < n:
                state["left_early"] += 1

    threads = [errors.thread("db-%d" % i, member, i) for i in range(n)]
    join_all(threads, "double barrier members", timeout=40)
    errors.raise_any()
    expect_eq(state["entered_early"], 0, "nobody passed enter() before all arrived")
    expect_eq(state["left_early"], 0, "nobody passed leave() before all left")
    expect_eq(clients[0].exists("/dbarrier/ready"), None, "ready node cleaned up")


@check
def parties():
    for cls, path in ((Party, "/party"), (ShallowParty, "/shallow-party")):
        members = [new_client() for _ in range(3)]
        observer = new_client()
        view = cls(observer, path)
        parties_ = [cls(m, path, "member-%d" % i) for i, m in enumerate(members)]
        for p in parties_:
            p.join()
        wait_until(lambda: len(view) == 3, "%s has 3 members" % cls.__name__)
        expect_eq(sorted(view), ["member-0", "member-1", "member-2"], cls.__name__ + " members")
        parties_[0].leave()
        wait_until(lambda: len(view) == 2, "%s after a leave" % cls.__name__)
        stop_client(members[1])  # ephemeral membership ends with the session
        wait_until(lambda: len(view) == 1, "%s after a session close" % cls.__name__)
        expect_eq(list(view), ["member-2"], cls.__name__ + " remaining member")


if __name__ == "__main__":
    zkcheck.main()
