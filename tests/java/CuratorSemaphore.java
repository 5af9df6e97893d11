// Curator's InterProcessSemaphoreV2 against a live server: at most maxLeases holders at once,
// exactly maxLeases can hold together, everyone is eventually served, multi-lease acquire.
//
// Usage: CuratorSemaphore <connect> <clients> <maxLeases> <iterations>
// Every client is its own CuratorFramework (own session); clients must exceed maxLeases.

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;

public class CuratorSemaphore {
    static final String BASE = "/curator-semaphore";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorSemaphore", 100);
        try {
            String connect = args[0];
            int clients = Integer.parseInt(args[1]);
            int maxLeases = Integer.parseInt(args[2]);
            int iterations = Integer.parseInt(args[3]);
            if (clients <= maxLeases || maxLeases < 2) {
                throw new IllegalArgumentException("need clients > maxLeases >= 2");
            }
            List<CuratorFramework> cs = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                cs.add(CuratorSupport.client(connect));
            }
            fillUp(cs, BASE + "/fill", maxLeases);
            churn(cs, BASE + "/churn", maxLeases, iterations);
            multiLease(cs.get(0), cs.get(1), BASE + "/multi");
            for (CuratorFramework c : cs) {
                c.close();
            }
        } catch (Throwable t) {
            CuratorSupport.abort("semaphore_unexpected", t);
        }
        CuratorSupport.finish();
    }

    /**
     * maxLeases clients take a lease each and stay until all of them are in (so K holders at
     * once is possible); one more client cannot get a lease meanwhile, and gets one as soon as
     * a lease is returned.
     */
    static void fillUp(List<CuratorFramework> cs, String path, int k) throws Exception {
        CountDownLatch allIn = new CountDownLatch(k);
        CountDownLatch extraTried = new CountDownLatch(1);
        AtomicInteger got = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < k; i++) {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(cs.get(i), path, k);
            Thread t = new Thread(() -> {
                try {
                    Lease lease = sem.acquire(20, TimeUnit.SECONDS);
                    if (lease == null) {
                        return;
                    }
                    try {
                        got.incrementAndGet();
                        allIn.countDown();
                        CuratorSupport.await(allIn, 20);
                        CuratorSupport.await(extraTried, 20);
                    } finally {
                        sem.returnLease(lease);
                    }
                } catch (Exception e) {
                    CuratorSupport.fail("semaphore_fill_worker", CuratorSupport.describe(e));
                }
            }, "fill");
            threads.add(t);
            t.start();
        }
        boolean full = CuratorSupport.await(allIn, 30);
        CuratorSupport.check(full && got.get() == k, "semaphore_k_holders_at_once",
                "max_leases=" + k + " holding_together=" + got.get());
        InterProcessSemaphoreV2 extra = new InterProcessSemaphoreV2(cs.get(k), path, k);
        Collection<String> participants = extra.getParticipantNodes();
        Lease denied = extra.acquire(1, TimeUnit.SECONDS);
        CuratorSupport.check(denied == null && participants.size() == k, "semaphore_full_denies",
                "extra_acquired=" + (denied != null) + " lease_nodes=" + participants.size());
        if (denied != null) {
            extra.returnLease(denied);
        }
        extraTried.countDown();
        Lease later = extra.acquire(20, TimeUnit.SECONDS);
        CuratorSupport.check(later != null, "semaphore_served_after_return", "acquired=" + (later != null));
        if (later != null) {
            extra.returnLease(later);
        }
        CuratorSupport.joinAll(threads, 30);
        // (getParticipantNodes() throws NoNode once the server removed the empty container.)
        Collection<String> left = CuratorSupport.children(cs.get(k), path + "/leases");
        CuratorSupport.check(left.isEmpty(), "semaphore_leases_cleaned", "lease_nodes_after_return=" + left);
    }

    /** All clients compete for iterations leases each; never more than K inside. */
    static void churn(List<CuratorFramework> cs, String path, int k, int iterations) throws Exception {
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger maxInside = new AtomicInteger();
        AtomicInteger leases = new AtomicInteger();
        AtomicInteger problems = new AtomicInteger();
        int[] perClient = new int[cs.size()];
        CountDownLatch gate = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < cs.size(); i++) {
            final int me = i;
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(cs.get(i), path, k);
            Thread t = new Thread(() -> {
                try {
                    gate.await();
                    for (int j = 0; j < iterations; j++) {
                        Lease lease = sem.acquire(30, TimeUnit.SECONDS);
                        if (lease == null) {
                            problems.incrementAndGet();
                            CuratorSupport.fail("semaphore_churn_acquire", "no lease within 30s");
                            return;
                        }
                        try {
                            maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                            Thread.sleep(10);
                            inside.decrementAndGet();
                            leases.incrementAndGet();
                            perClient[me]++;
                        } finally {
                            sem.returnLease(lease);
                        }
                    }
                } catch (Exception e) {
                    problems.incrementAndGet();
                    CuratorSupport.fail("semaphore_churn_worker", CuratorSupport.describe(e));
                }
            }, "churn");
            threads.add(t);
            t.start();
        }
        gate.countDown();
        boolean joined = CuratorSupport.joinAll(threads, 80);
        CuratorSupport.check(maxInside.get() <= k && maxInside.get() >= 1, "semaphore_never_over_max",
                "max_leases=" + k + " max_holders_seen=" + maxInside.get());
        boolean everyone = true;
        for (int n : perClient) {
            everyone &= n == iterations;
        }
        CuratorSupport.check(joined && problems.get() == 0 && everyone, "semaphore_everyone_served",
                "leases=" + leases.get() + " per_client=" + java.util.Arrays.toString(perClient));
    }

    /** Several leases in one call count against the limit. */
    static void multiLease(CuratorFramework a, CuratorFramework b, String path) throws Exception {
        InterProcessSemaphoreV2 sa = new InterProcessSemaphoreV2(a, path, 3);
        InterProcessSemaphoreV2 sb = new InterProcessSemaphoreV2(b, path, 3);
        Collection<Lease> two = sa.acquire(2, 10, TimeUnit.SECONDS);
        Collection<Lease> twoMore = sb.acquire(2, 1, TimeUnit.SECONDS);
        Lease one = sb.acquire(10, TimeUnit.SECONDS);
        CuratorSupport.check(two != null && two.size() == 2 && twoMore == null && one != null, "semaphore_multi_lease",
                "max=3 a_got_2=" + (two != null) + " b_got_2_more=" + (twoMore != null) + " b_got_1=" + (one != null));
        if (twoMore != null) {
            sb.returnAll(twoMore);
        }
        if (one != null) {
            sb.returnLease(one);
        }
        if (two != null) {
            sa.returnAll(two);
        }
    }
}
