// Curator's connection-state handling across server restarts, driven through stdin/stdout:
//
//   program: READY_FOR_STOP   -> driver stops the server,   answers STOPPED
//   program: READY_FOR_START  -> driver restarts the server (same port, same data), answers STARTED
//
// Phase 1 (restart within the 60 s session timeout): a client holding a LeaderLatch, an
// InterProcessMutex, an ephemeral node, one-shot data/exists/child watches and a CuratorCache
// sees SUSPENDED then RECONNECTED (never LOST); afterwards it has the same session id, its
// ephemeral and lock nodes are still there, it leads again, the lock still excludes others, and
// every watch fires for changes made after the restart (the ZooKeeper client re-registered them
// with SetWatches).
//
// Phase 2 (server down past the session timeout): a client with a 4 s session sees SUSPENDED
// then LOST (Curator simulates expiry once the negotiated timeout elapses while suspended), its
// latch loses leadership, and after the restart it reconnects with a new session while the
// server expires the old one (its ephemeral disappears). The long sessions of phase 1 survive
// this second restart too.
//
// Usage: CuratorConnectionState <connect>

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.data.Stat;

public class CuratorConnectionState {
    static final String BASE = "/curator-cs";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorConnectionState", 160);
        try {
            run(args[0]);
        } catch (Throwable t) {
            CuratorSupport.abort("cs_unexpected", t);
        }
        CuratorSupport.finish();
    }

    /** Connection states seen by one client, in order. */
    static final class States {
        final List<ConnectionState> seen = Collections.synchronizedList(new ArrayList<>());
        final BlockingQueue<ConnectionState> queue = new LinkedBlockingQueue<>();

        States(CuratorFramework c) {
            c.getConnectionStateListenable().addListener((client, state) -> {
                seen.add(state);
                queue.add(state);
            });
        }

        /** Waits for {@code wanted}, skipping other states; false after {@code seconds}. */
        boolean await(ConnectionState wanted, long seconds) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (true) {
                long left = deadline - System.nanoTime();
                ConnectionState s = left > 0 ? queue.poll(left, TimeUnit.NANOSECONDS) : null;
                if (s == null) {
                    return false;
                }
                if (s == wanted) {
                    return true;
                }
            }
        }

        List<ConnectionState> list() {
            synchronized (seen) {
                return new ArrayList<>(seen);
            }
        }
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static void run(String connect) throws Exception {
        // ------------------------------------------------------------------ phase 1
        // Long sessions (the driver raises maxSessionTimeout), so that a slow restart on a busy
        // machine still falls well within them.
        CuratorFramework a = CuratorSupport.client(connect, 60000);
        CuratorFramework b = CuratorSupport.client(connect, 60000);
        States statesA = new States(a);
        long sessionA = CuratorSupport.sessionId(a);
        long sessionB = CuratorSupport.sessionId(b);

        LeaderLatch latch = new LeaderLatch(a, BASE + "/latch", "A");
        latch.start();
        boolean leads = latch.await(15, TimeUnit.SECONDS);
        InterProcessMutex lock = new InterProcessMutex(a, BASE + "/lock");
        boolean locked = lock.acquire(15, TimeUnit.SECONDS);
        a.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL).forPath(BASE + "/eph-a", b("a"));
        b.create().creatingParentsIfNeeded().forPath(BASE + "/watched", b("0"));
        b.create().creatingParentsIfNeeded().forPath(BASE + "/kids");
        b.create().creatingParentsIfNeeded().forPath(BASE + "/cache");

        CountDownLatch dataFired = new CountDownLatch(1);
        CountDownLatch existsFired = new CountDownLatch(1);
        CountDownLatch childFired = new CountDownLatch(1);
        List<String> watchEvents = Collections.synchronizedList(new ArrayList<>());
        a.getData().usingWatcher((Watcher) e -> {
            // Connection events (type None) reach path watchers too: only count the real one.
            watchEvents.add("data:" + e.getType());
            if (e.getType() == Watcher.Event.EventType.NodeDataChanged) {
                dataFired.countDown();
            }
        }).forPath(BASE + "/watched");
        a.checkExists().usingWatcher((Watcher) e -> {
            // Connection events (type None) reach path watchers too: only count the real one.
            watchEvents.add("exists:" + e.getType());
            if (e.getType() == Watcher.Event.EventType.NodeCreated) {
                existsFired.countDown();
            }
        }).forPath(BASE + "/appears");
        a.getChildren().usingWatcher((Watcher) e -> {
            // Connection events (type None) reach path watchers too: only count the real one.
            watchEvents.add("child:" + e.getType());
            if (e.getType() == Watcher.Event.EventType.NodeChildrenChanged) {
                childFired.countDown();
            }
        }).forPath(BASE + "/kids");
        BlockingQueue<String> cacheEvents = new LinkedBlockingQueue<>();
        CountDownLatch cacheReady = new CountDownLatch(1);
        CuratorCache cache = CuratorCache.build(a, BASE + "/cache");
        cache.listenable().addListener(new CuratorCacheListener() {
            @Override
            public void event(Type type, org.apache.curator.framework.recipes.cache.ChildData oldData,
                    org.apache.curator.framework.recipes.cache.ChildData data) {
                cacheEvents.add(type + " " + (data != null ? data.getPath() : oldData.getPath()));
            }

            @Override
            public void initialized() {
                cacheReady.countDown();
            }
        });
        cache.start();
        boolean cacheInit = CuratorSupport.await(cacheReady, 15);
        if (!CuratorSupport.check(leads && locked && cacheInit, "cs_setup",
                "leader=" + leads + " locked=" + locked + " cache_initialized=" + cacheInit
                        + String.format(" session_a=0x%x session_b=0x%x negotiated_timeout_ms=%d", sessionA, sessionB,
                                a.getZookeeperClient().getZooKeeper().getSessionTimeout()))) {
            return;
        }

        if (!CuratorSupport.handshake("READY_FOR_STOP", "STOPPED", 60)) {
            return;
        }
        boolean suspended = statesA.await(ConnectionState.SUSPENDED, 20);
        CuratorSupport.check(suspended, "cs_suspended_on_stop", "states=" + statesA.list());
        boolean stepDown = CuratorSupport.waitFor(10000, () -> !latch.hasLeadership());
        CuratorSupport.check(stepDown, "cs_latch_suspends_leadership",
                "hasLeadership=false while SUSPENDED (StandardConnectionStateErrorPolicy)");

        if (!CuratorSupport.handshake("READY_FOR_START", "STARTED", 90)) {
            return;
        }
        boolean reconnected = statesA.await(ConnectionState.RECONNECTED, 40);
        List<ConnectionState> seq = statesA.list();
        // The listener was added once connected; whether it also saw CONNECTED is a race.
        seq.remove(ConnectionState.CONNECTED);
        CuratorSupport.check(reconnected && seq.equals(List.of(ConnectionState.SUSPENDED, ConnectionState.RECONNECTED)),
                "cs_suspended_then_reconnected", "states=" + seq);
        long sessionA2 = CuratorSupport.sessionId(a);
        long sessionB2 = CuratorSupport.sessionId(b);
        CuratorSupport.check(sessionA2 == sessionA && sessionB2 == sessionB, "cs_same_session_after_restart",
                String.format("a: 0x%x -> 0x%x, b: 0x%x -> 0x%x", sessionA, sessionA2, sessionB, sessionB2));
        Stat eph = a.checkExists().forPath(BASE + "/eph-a");
        CuratorSupport.check(eph != null && eph.getEphemeralOwner() == sessionA, "cs_ephemeral_survives_restart",
                eph == null ? "ephemeral gone" : String.format("ephemeralOwner=0x%x", eph.getEphemeralOwner()));
        boolean leadsAgain = latch.await(20, TimeUnit.SECONDS);
        CuratorSupport.check(leadsAgain, "cs_latch_leads_again", "hasLeadership=" + latch.hasLeadership());
        InterProcessMutex other = new InterProcessMutex(b, BASE + "/lock");
        boolean stolen = other.acquire(1, TimeUnit.SECONDS);
        CuratorSupport.check(!stolen && lock.isAcquiredInThisProcess() && lock.getParticipantNodes().size() == 1,
                "cs_lock_survives_restart", "other_acquired=" + stolen + " nodes=" + lock.getParticipantNodes());
        if (stolen) {
            other.release();
        }

        b.setData().forPath(BASE + "/watched", b("1"));
        b.create().forPath(BASE + "/appears");
        b.create().forPath(BASE + "/kids/k1");
        b.create().forPath(BASE + "/cache/after");
        boolean dataOk = CuratorSupport.await(dataFired, 10);
        boolean existsOk = CuratorSupport.await(existsFired, 10);
        boolean childOk = CuratorSupport.await(childFired, 10);
        CuratorSupport.check(dataOk && existsOk && childOk
                        && watchEvents.containsAll(List.of("data:NodeDataChanged", "exists:NodeCreated",
                                "child:NodeChildrenChanged")),
                "cs_watches_survive_restart", "events=" + watchEvents);
        String cacheEvent = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            String e = cacheEvents.poll(100, TimeUnit.MILLISECONDS);
            if (e != null && e.endsWith("/cache/after")) {
                cacheEvent = e;
                break;
            }
        }
        CuratorSupport.check(("NODE_CREATED " + BASE + "/cache/after").equals(cacheEvent), "cs_cache_after_restart",
                "event=" + cacheEvent);

        // ------------------------------------------------------------------ phase 2
        CuratorFramework c = CuratorSupport.client(connect, 4000);
        States statesC = new States(c);
        long sessionC = CuratorSupport.sessionId(c);
        int negotiated = c.getZookeeperClient().getZooKeeper().getSessionTimeout();
        c.create().withMode(CreateMode.EPHEMERAL).forPath(BASE + "/eph-c", b("c"));
        LeaderLatch latchC = new LeaderLatch(c, BASE + "/latch-c", "C");
        latchC.start();
        boolean cLeads = latchC.await(15, TimeUnit.SECONDS);
        CuratorSupport.check(cLeads, "cs_short_session_setup",
                String.format("session_c=0x%x negotiated_timeout_ms=%d", sessionC, negotiated));

        if (!CuratorSupport.handshake("READY_FOR_STOP", "STOPPED", 60)) {
            return;
        }
        long t0 = System.nanoTime();
        boolean cSuspended = statesC.await(ConnectionState.SUSPENDED, 20);
        long t1 = System.nanoTime();
        boolean cLost = cSuspended && statesC.await(ConnectionState.LOST, 30);
        long t2 = System.nanoTime();
        CuratorSupport.check(cSuspended && cLost, "cs_lost_after_session_timeout",
                "states=" + statesC.list() + " suspended_to_lost_ms=" + TimeUnit.NANOSECONDS.toMillis(t2 - t1)
                        + " stop_to_suspended_ms=" + TimeUnit.NANOSECONDS.toMillis(t1 - t0));
        boolean cStepDown = CuratorSupport.waitFor(10000, () -> !latchC.hasLeadership());
        CuratorSupport.check(cStepDown, "cs_latch_lost_leadership", "hasLeadership=" + latchC.hasLeadership());

        if (!CuratorSupport.handshake("READY_FOR_START", "STARTED", 90)) {
            return;
        }
        boolean cBack = statesC.await(ConnectionState.RECONNECTED, 40);
        long sessionC2 = CuratorSupport.sessionId(c);
        CuratorSupport.check(cBack && sessionC2 != sessionC && sessionC2 != 0, "cs_new_session_after_lost",
                String.format("states=%s session 0x%x -> 0x%x", statesC.list(), sessionC, sessionC2));
        // The server restored the old session on restart and expires it after its timeout.
        boolean oldGone = CuratorSupport.waitFor(40000, () -> {
            try {
                return c.checkExists().forPath(BASE + "/eph-c") == null;
            } catch (Exception e) {
                return false;
            }
        });
        CuratorSupport.check(oldGone, "cs_old_session_expired", "ephemeral of the old session removed=" + oldGone);
        c.create().withMode(CreateMode.EPHEMERAL).forPath(BASE + "/eph-c2", b("c2"));
        Stat eph2 = c.checkExists().forPath(BASE + "/eph-c2");
        CuratorSupport.check(eph2 != null && eph2.getEphemeralOwner() == sessionC2, "cs_new_session_usable",
                eph2 == null ? "missing" : String.format("ephemeralOwner=0x%x", eph2.getEphemeralOwner()));

        // The 60 s sessions rode out the second outage as well.
        boolean aBack = CuratorSupport.waitFor(60000, () -> a.getZookeeperClient().isConnected());
        Stat ephA = a.checkExists().forPath(BASE + "/eph-a");
        CuratorSupport.check(aBack && CuratorSupport.sessionId(a) == sessionA && ephA != null
                        && ephA.getEphemeralOwner() == sessionA && !statesA.list().contains(ConnectionState.LOST),
                "cs_long_session_survives_second_restart", "states=" + statesA.list());

        latchC.close();
        c.close();
        lock.release();
        latch.close();
        cache.close();
        a.close();
        b.close();
    }
}
