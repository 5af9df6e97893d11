// Curator's DistributedAtomicLong against a live server: concurrent increments from several
// clients reach the exact total, no two increments see the same value (setData with a version
// is a compare-and-set), the promoted-to-lock mode agrees, and initialize/compareAndSet/trySet
// behave as documented.
//
// Usage: CuratorAtomicLong <connect> <clients> <threadsPerClient> <incrementsPerThread>

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.retry.RetryNTimes;

public class CuratorAtomicLong {
    static final String BASE = "/curator-atomic";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorAtomicLong", 100);
        try {
            String connect = args[0];
            int clients = Integer.parseInt(args[1]);
            int threads = Integer.parseInt(args[2]);
            int increments = Integer.parseInt(args[3]);
            List<CuratorFramework> cs = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                cs.add(CuratorSupport.client(connect));
            }
            operations(cs.get(0), cs.get(1));
            concurrent(cs, threads, increments, false);
            concurrent(cs, threads, increments, true);
            for (CuratorFramework c : cs) {
                c.close();
            }
        } catch (Throwable t) {
            CuratorSupport.abort("atomic_unexpected", t);
        }
        CuratorSupport.finish();
    }

    static DistributedAtomicLong counter(CuratorFramework c, String path, boolean promoted) {
        if (!promoted) {
            return new DistributedAtomicLong(c, path, new RetryNTimes(20, 5));
        }
        // One optimistic try, then the value is updated under an InterProcessMutex.
        PromotedToLock lock = PromotedToLock.builder()
                .lockPath(path + "-lock")
                .retryPolicy(new RetryNTimes(20, 5))
                .timeout(20, TimeUnit.SECONDS)
                .build();
        return new DistributedAtomicLong(c, path, new RetryNTimes(0, 0), lock);
    }

    static void operations(CuratorFramework a, CuratorFramework b) throws Exception {
        String path = BASE + "/ops";
        DistributedAtomicLong la = counter(a, path, false);
        DistributedAtomicLong lb = counter(b, path, false);
        AtomicValue<Long> unset = lb.get();
        boolean first = la.initialize(5L);
        boolean second = lb.initialize(7L);
        AtomicValue<Long> v = lb.get();
        CuratorSupport.check(unset.succeeded() && unset.postValue() == 0L && first && !second
                        && v.succeeded() && v.postValue() == 5L,
                "atomic_initialize", "before=" + unset.postValue() + " first_init=" + first
                        + " second_init=" + second + " value=" + v.postValue());
        AtomicValue<Long> wrong = lb.compareAndSet(4L, 9L);
        AtomicValue<Long> right = lb.compareAndSet(5L, 9L);
        CuratorSupport.check(!wrong.succeeded() && right.succeeded() && la.get().postValue() == 9L,
                "atomic_compare_and_set", "cas(4,9)=" + wrong.succeeded() + " cas(5,9)=" + right.succeeded()
                        + " value=" + la.get().postValue());
        AtomicValue<Long> set = la.trySet(11L);
        AtomicValue<Long> dec = lb.decrement();
        AtomicValue<Long> add = la.add(5L);
        AtomicValue<Long> sub = lb.subtract(3L);
        boolean ok = set.succeeded() && set.preValue() == 9L && set.postValue() == 11L
                && dec.succeeded() && dec.preValue() == 11L && dec.postValue() == 10L
                && add.succeeded() && add.postValue() == 15L
                && sub.succeeded() && sub.postValue() == 12L;
        la.forceSet(-3L);
        long forced = lb.get().postValue();
        CuratorSupport.check(ok && forced == -3L, "atomic_set_add_subtract",
                "trySet=" + set.postValue() + " decrement=" + dec.postValue() + " add=" + add.postValue()
                        + " subtract=" + sub.postValue() + " forceSet=" + forced);
    }

    static void concurrent(List<CuratorFramework> cs, int threadsPerClient, int increments, boolean promoted)
            throws Exception {
        String name = promoted ? "atomic_promoted" : "atomic_optimistic";
        String path = BASE + (promoted ? "/promoted" : "/optimistic");
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger duplicates = new AtomicInteger();
        AtomicInteger inconsistent = new AtomicInteger();
        AtomicInteger gaveUp = new AtomicInteger();
        AtomicInteger unsucceeded = new AtomicInteger();
        AtomicLong optimisticTries = new AtomicLong();
        AtomicLong promotedTries = new AtomicLong();
        CountDownLatch gate = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (CuratorFramework c : cs) {
            for (int t = 0; t < threadsPerClient; t++) {
                DistributedAtomicLong counter = counter(c, path, promoted);
                Thread th = new Thread(() -> {
                    try {
                        gate.await();
                        for (int i = 0; i < increments; i++) {
                            AtomicValue<Long> v = null;
                            // Curator reports exhausted retries as succeeded()==false: try again.
                            for (int attempt = 0; attempt < 200; attempt++) {
                                v = counter.increment();
                                optimisticTries.addAndGet(v.getStats().getOptimisticTries());
                                promotedTries.addAndGet(v.getStats().getPromotedLockTries());
                                if (v.succeeded()) {
                                    break;
                                }
                                unsucceeded.incrementAndGet();
                            }
                            if (v == null || !v.succeeded()) {
                                gaveUp.incrementAndGet();
                                return;
                            }
                            long pre = v.preValue() == null ? 0 : v.preValue();
                            if (v.postValue() != pre + 1) {
                                inconsistent.incrementAndGet();
                            }
                            if (!seen.add(v.postValue())) {
                                duplicates.incrementAndGet();
                            }
                        }
                    } catch (Exception e) {
                        gaveUp.incrementAndGet();
                        CuratorSupport.fail(name + "_worker", CuratorSupport.describe(e));
                    }
                }, name);
                threads.add(th);
                th.start();
            }
        }
        gate.countDown();
        boolean joined = CuratorSupport.joinAll(threads, 80);
        long expected = (long) cs.size() * threadsPerClient * increments;
        AtomicValue<Long> end = counter(cs.get(0), path, false).get();
        CuratorSupport.check(joined && gaveUp.get() == 0 && end.succeeded() && end.postValue() == expected,
                name + "_exact_total", "value=" + end.postValue() + " expected=" + expected
                        + " optimistic_tries=" + optimisticTries.get() + " promoted_tries=" + promotedTries.get()
                        + " unsucceeded_calls=" + unsucceeded.get());
        boolean allValues = seen.size() == expected && seen.stream().allMatch(x -> x >= 1 && x <= expected);
        CuratorSupport.check(duplicates.get() == 0 && inconsistent.get() == 0 && allValues, name + "_linearizable",
                "each increment saw a distinct value 1.." + expected + ": duplicates=" + duplicates.get()
                        + " pre_post_mismatch=" + inconsistent.get() + " distinct=" + seen.size());
    }
}
