// Curator's LeaderLatch against a live server: one leader at a time among N participants
// (separate sessions), the leader owns the lowest latch node, every participant agrees on who
// leads, and when the leader closes the next node in order takes over, down to the last one.
//
// Usage: CuratorLeaderLatch <connect> <participants>

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.utils.ZKPaths;

public class CuratorLeaderLatch {
    static final String PATH = "/curator-latch/election";

    /** Closes happen under this monitor, and so does every sample of who leads. */
    static final Object SAMPLE = new Object();

    public static void main(String[] args) {
        CuratorSupport.init("CuratorLeaderLatch", 100);
        try {
            run(args[0], Integer.parseInt(args[1]));
        } catch (Throwable t) {
            CuratorSupport.abort("latch_unexpected", t);
        }
        CuratorSupport.finish();
    }

    static void run(String connect, int n) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        List<LeaderLatch> latches = new ArrayList<>();
        AtomicInteger[] isLeaderCalls = new AtomicInteger[n];
        for (int i = 0; i < n; i++) {
            CuratorFramework c = CuratorSupport.client(connect);
            cs.add(c);
            LeaderLatch latch = new LeaderLatch(c, PATH, "p" + i);
            AtomicInteger calls = new AtomicInteger();
            isLeaderCalls[i] = calls;
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    calls.incrementAndGet();
                }

                @Override
                public void notLeader() {}
            });
            latches.add(latch);
        }

        // A sampler counts leaders among open latches, all the time.
        AtomicBoolean sampling = new AtomicBoolean(true);
        AtomicInteger maxLeaders = new AtomicInteger();
        AtomicLong samples = new AtomicLong();
        List<LeaderLatch> open = Collections.synchronizedList(new ArrayList<>());
        Thread sampler = new Thread(() -> {
            while (sampling.get()) {
                synchronized (SAMPLE) {
                    int leaders = 0;
                    for (LeaderLatch l : open) {
                        if (l.hasLeadership()) {
                            leaders++;
                        }
                    }
                    maxLeaders.accumulateAndGet(leaders, Math::max);
                    samples.incrementAndGet();
                }
                try {
                    Thread.sleep(2);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "sampler");
        sampler.start();

        // All but the last start together; the last joins once a leader is established.
        for (int i = 0; i < n - 1; i++) {
            synchronized (SAMPLE) {
                open.add(latches.get(i));
            }
            latches.get(i).start();
        }
                boolean first = CuratorSupport.waitFor(15000, () -> leaders(open).size() == 1);
        CuratorSupport.check(first, "latch_first_leader", "leader=" + ids(leaders(open)));
        // A leader can be chosen before every early latch has created its node: the late
        // joiner starts only once all of theirs exist, so "last" is well defined.
                CuratorSupport.waitFor(15000, () -> children(cs.get(0)).size() == n - 1
                && latches.subList(0, n - 1).stream().allMatch(l -> l.getOurPath() != null));
        LeaderLatch late = latches.get(n - 1);
        synchronized (SAMPLE) {
            open.add(late);
        }
        late.start();
                // getOurPath() is set by the create's callback, which may run after the node shows.
        boolean allNodes = CuratorSupport.waitFor(15000,
                () -> children(cs.get(0)).size() == n && late.getOurPath() != null);
        List<String> order = sortedBySequence(children(cs.get(0)));
        CuratorSupport.check(allNodes && late.getOurPath() != null
                        && order.get(n - 1).equals(ZKPaths.getNodeFromPath(late.getOurPath())),
                "latch_late_joiner_queued_last", "nodes=" + order);

        // Expected leadership order: node order.
        List<String> expectedOrder = new ArrayList<>();
        for (String node : order) {
            for (LeaderLatch l : latches) {
                if (l.getOurPath() != null && ZKPaths.getNodeFromPath(l.getOurPath()).equals(node)) {
                    expectedOrder.add(l.getId());
                }
            }
        }
        List<String> actualOrder = new ArrayList<>();
        boolean everyRoundOneLeader = true;
        boolean lowestAlways = true;
        boolean agreeAlways = true;
        boolean awaitOk = true;
        StringBuilder trouble = new StringBuilder();
        while (!open.isEmpty()) {
            boolean one = CuratorSupport.waitFor(15000, () -> leaders(open).size() == 1);
            List<LeaderLatch> ls = leaders(open);
            if (!one || ls.size() != 1) {
                everyRoundOneLeader = false;
                trouble.append(" no_single_leader_among=").append(ids(open));
                break;
            }
            // Stable: still exactly one leader a little later.
            Thread.sleep(100);
            if (leaders(open).size() != 1 || leaders(open).get(0) != ls.get(0)) {
                everyRoundOneLeader = false;
                trouble.append(" unstable");
            }
            LeaderLatch leader = ls.get(0);
            actualOrder.add(leader.getId());
            List<String> now = sortedBySequence(children(cs.get(0)));
            if (now.isEmpty() || !now.get(0).equals(ZKPaths.getNodeFromPath(leader.getOurPath()))) {
                lowestAlways = false;
                trouble.append(" leader_").append(leader.getId()).append("_not_lowest=").append(now);
            }
            for (LeaderLatch l : new ArrayList<>(open)) {
                String seen = l.getLeader().getId();
                if (!leader.getId().equals(seen)) {
                    agreeAlways = false;
                    trouble.append(" ").append(l.getId()).append("_sees_").append(seen);
                }
                if (l != leader && l.await(100, TimeUnit.MILLISECONDS)) {
                    awaitOk = false;
                    trouble.append(" ").append(l.getId()).append("_await_true");
                }
            }
            if (!leader.await(1, TimeUnit.SECONDS)) {
                awaitOk = false;
                trouble.append(" leader_await_false");
            }
            synchronized (SAMPLE) {
                open.remove(leader);
                leader.close();
            }
        }
        sampling.set(false);
        sampler.join(5000);

        CuratorSupport.check(everyRoundOneLeader, "latch_one_leader_each_round",
                "rounds=" + actualOrder.size() + trouble);
        CuratorSupport.check(maxLeaders.get() == 1, "latch_never_two_leaders",
                "max_leaders_sampled=" + maxLeaders.get() + " samples=" + samples.get());
        CuratorSupport.check(lowestAlways, "latch_leader_owns_lowest_node",
                lowestAlways ? "in all " + actualOrder.size() + " rounds" : trouble.toString().trim());
        CuratorSupport.check(agreeAlways, "latch_participants_agree", "getLeader() on every open latch");
        CuratorSupport.check(awaitOk, "latch_await", "await true only for the leader");
        CuratorSupport.check(actualOrder.equals(expectedOrder) && actualOrder.size() == n, "latch_handover_in_order",
                "leaders=" + actualOrder + " node_order=" + expectedOrder);
        boolean onceEach = true;
        for (AtomicInteger c : isLeaderCalls) {
            onceEach &= c.get() == 1;
        }
        CuratorSupport.check(onceEach, "latch_listener_once_each", "isLeader calls per participant "
                + java.util.Arrays.toString(isLeaderCalls));
        List<String> left = children(cs.get(0));
        CuratorSupport.check(left.isEmpty(), "latch_nodes_cleaned", "children_after_close=" + left);
        for (CuratorFramework c : cs) {
            c.close();
        }
    }

    static List<LeaderLatch> leaders(List<LeaderLatch> open) {
        List<LeaderLatch> out = new ArrayList<>();
        synchronized (open) {
            for (LeaderLatch l : open) {
                if (l.hasLeadership()) {
                    out.add(l);
                }
            }
        }
        return out;
    }

    static List<String> ids(List<LeaderLatch> ls) {
        List<String> out = new ArrayList<>();
        synchronized (ls) {
            for (LeaderLatch l : ls) {
                out.add(l.getId());
            }
        }
        return out;
    }

    static List<String> children(CuratorFramework c) {
        try {
            return CuratorSupport.children(c, PATH);
        } catch (Exception e) {
            CuratorSupport.fail("latch_children", CuratorSupport.describe(e));
            return Collections.emptyList();
        }
    }

    /** Curator's order: by the sequence suffix, ignoring the protection prefix. */
    static List<String> sortedBySequence(List<String> nodes) {
        List<String> out = new ArrayList<>(nodes);
        out.sort((a, b) -> a.substring(a.lastIndexOf("latch-")).compareTo(b.substring(b.lastIndexOf("latch-"))));
        return out;
    }
}
