// Curator's LeaderSelector (autoRequeue) against a live server: never two leaders, leadership
// rotates through all participants (the lock queue is fair), hasLeadership() is
// consistent, and closing the leader interrupts it and hands leadership on.
//
// Usage: CuratorLeaderSelector <connect> <participants> <rounds>

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;

public class CuratorLeaderSelector {
    static final String PATH = "/curator-selector/election";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorLeaderSelector", 100);
        try {
            run(args[0], Integer.parseInt(args[1]), Integer.parseInt(args[2]));
        } catch (Throwable t) {
            CuratorSupport.abort("selector_unexpected", t);
        }
        CuratorSupport.finish();
    }

    static void run(String connect, int n, int rounds) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        List<LeaderSelector> selectors = new ArrayList<>();
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger maxInside = new AtomicInteger();
        AtomicInteger selfNotLeader = new AtomicInteger();
        AtomicInteger othersLeader = new AtomicInteger();
        AtomicInteger interrupted = new AtomicInteger();
        List<String> sequence = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch roundsDone = new CountDownLatch(1);
        CountDownLatch allQueued = new CountDownLatch(1);
        // In hold mode a leader keeps leadership until it is interrupted (by close()).
        AtomicReference<String> holding = new AtomicReference<>();
        AtomicInteger holdEntries = new AtomicInteger();
        for (int i = 0; i < n; i++) {
            CuratorFramework c = CuratorSupport.client(connect);
            cs.add(c);
            String id = "s" + i;
            LeaderSelector[] self = new LeaderSelector[1];
            LeaderSelector sel = new LeaderSelector(c, PATH, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework client) throws Exception {
                    maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                    try {
                        if (!self[0].hasLeadership()) {
                            selfNotLeader.incrementAndGet();
                        }
                        for (LeaderSelector other : selectors) {
                            if (other != self[0] && other.hasLeadership()) {
                                othersLeader.incrementAndGet();
                            }
                        }
                        // The first leader waits until everyone is queued behind it.
                        CuratorSupport.await(allQueued, 20);
                        if (roundsDone.getCount() == 0) {
                            holding.set(id);
                            holdEntries.incrementAndGet();
                            try {
                                Thread.sleep(60000);
                            } catch (InterruptedException e) {
                                interrupted.incrementAndGet();
                                throw e;
                            } finally {
                                holding.compareAndSet(id, null);
                            }
                            return;
                        }
                        sequence.add(id);
                        Thread.sleep(50);
                        if (sequence.size() >= rounds) {
                            roundsDone.countDown();
                        }
                    } finally {
                        inside.decrementAndGet();
                    }
                }
            });
            self[0] = sel;
            sel.setId(id);
            sel.autoRequeue();
            selectors.add(sel);
        }
        for (LeaderSelector s : selectors) {
            s.start();
        }
        boolean queued = CuratorSupport.waitFor(15000, () -> {
            try {
                return selectors.get(0).getParticipants().size() == n;
            } catch (Exception e) {
                return false;
            }
        });
        CuratorSupport.check(queued, "selector_all_queued", "participants=" + n);
        allQueued.countDown();
        boolean done = CuratorSupport.await(roundsDone, 60);
        List<String> seq;
        synchronized (sequence) {
            seq = new ArrayList<>(sequence.subList(0, Math.min(rounds, sequence.size())));
        }
        CuratorSupport.check(done, "selector_rounds_completed", "rounds=" + seq.size() + " of " + rounds);
        // The lock queue is fair and a requeued leader goes to the back, so the order is
        // round-robin; allowing for a slow requeue, every participant leads at least once in
        // every 2n consecutive turns.
        boolean rotates = seq.size() >= 2 * n;
        for (int i = 0; i + 2 * n <= seq.size(); i++) {
            Set<String> window = new HashSet<>(seq.subList(i, i + 2 * n));
            rotates &= window.size() == n;
        }
        CuratorSupport.check(rotates, "selector_rotates", "leaders=" + seq);

        // Close the leader while it holds: it is interrupted and the next participant leads.
        boolean held = CuratorSupport.waitFor(15000, () -> holding.get() != null);
        String first = holding.get();
        if (held && first != null) {
            int idx = Integer.parseInt(first.substring(1));
            int entriesBefore = holdEntries.get();
            selectors.get(idx).close();
            boolean next = CuratorSupport.waitFor(15000,
                    () -> holdEntries.get() > entriesBefore && holding.get() != null && !first.equals(holding.get()));
            CuratorSupport.check(next && interrupted.get() >= 1, "selector_close_hands_over",
                    "closed=" + first + " interrupted=" + interrupted.get() + " next=" + holding.get());
            for (int i = 0; i < n; i++) {
                if (i != idx) {
                    selectors.get(i).close();
                }
            }
        } else {
            CuratorSupport.fail("selector_close_hands_over", "no leader entered hold mode");
            for (LeaderSelector s : selectors) {
                s.close();
            }
        }
        boolean quiet = CuratorSupport.waitFor(10000, () -> inside.get() == 0);
        CuratorSupport.check(maxInside.get() == 1 && quiet, "selector_never_two_leaders",
                "max_in_takeLeadership=" + maxInside.get());
        CuratorSupport.check(selfNotLeader.get() == 0 && othersLeader.get() == 0, "selector_has_leadership_consistent",
                "leader_without_hasLeadership=" + selfNotLeader.get() + " others_with_hasLeadership=" + othersLeader.get());
        boolean cleaned = CuratorSupport.waitFor(10000, () -> {
            try {
                return CuratorSupport.children(cs.get(0), PATH).isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        CuratorSupport.check(cleaned, "selector_nodes_cleaned", "no lock nodes left after close");
        for (CuratorFramework c : cs) {
            c.close();
        }
    }
}
