// Curator's InterProcessReadWriteLock against a live server: readers share, a writer excludes
// readers and writers, the write-lock holder can take the read lock (downgrade), a reader
// cannot upgrade.
//
// Usage: CuratorReadWriteLock <connect> <clients> <iterations>
// Every client is its own CuratorFramework (own session).

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;

public class CuratorReadWriteLock {
    static final String BASE = "/curator-rwlock";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorReadWriteLock", 100);
        try {
            String connect = args[0];
            int clients = Integer.parseInt(args[1]);
            int iterations = Integer.parseInt(args[2]);
            List<CuratorFramework> cs = new ArrayList<>();
            for (int i = 0; i < Math.max(clients, 3); i++) {
                cs.add(CuratorSupport.client(connect));
            }
            readersConcurrent(cs, BASE + "/readers");
            writerBlocks(cs.get(0), cs.get(1), cs.get(2), BASE + "/blocks");
            downgrade(cs.get(0), cs.get(1), cs.get(2), BASE + "/downgrade");
            noUpgrade(cs.get(0), BASE + "/upgrade");
            mixed(cs, BASE + "/mixed", iterations);
            for (CuratorFramework c : cs) {
                c.close();
            }
        } catch (Throwable t) {
            CuratorSupport.abort("rwlock_unexpected", t);
        }
        CuratorSupport.finish();
    }

    /** All clients hold the read lock at the same moment: each waits inside for the others. */
    static void readersConcurrent(List<CuratorFramework> cs, String path) throws Exception {
        int n = cs.size();
        CountDownLatch allInside = new CountDownLatch(n);
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger maxInside = new AtomicInteger();
        AtomicInteger acquired = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (CuratorFramework c : cs) {
            InterProcessMutex read = new InterProcessReadWriteLock(c, path).readLock();
            Thread t = new Thread(() -> {
                try {
                    if (!read.acquire(20, TimeUnit.SECONDS)) {
                        return;
                    }
                    try {
                        acquired.incrementAndGet();
                        maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                        allInside.countDown();
                        // Only possible if the other readers get in while we hold ours.
                        CuratorSupport.await(allInside, 20);
                        inside.decrementAndGet();
                    } finally {
                        read.release();
                    }
                } catch (Exception e) {
                    CuratorSupport.fail("rwlock_reader", CuratorSupport.describe(e));
                }
            }, "reader");
            threads.add(t);
            t.start();
        }
        boolean joined = CuratorSupport.joinAll(threads, 60);
        CuratorSupport.check(joined && acquired.get() == n && maxInside.get() == n, "rwlock_readers_concurrent",
                "readers=" + n + " acquired=" + acquired.get() + " max_at_once=" + maxInside.get());
    }

    /** While a writer holds, neither a reader nor another writer gets in; readers block writers. */
    static void writerBlocks(CuratorFramework a, CuratorFramework b, CuratorFramework c, String path) throws Exception {
        InterProcessReadWriteLock la = new InterProcessReadWriteLock(a, path);
        InterProcessReadWriteLock lb = new InterProcessReadWriteLock(b, path);
        InterProcessReadWriteLock lc = new InterProcessReadWriteLock(c, path);
        if (!la.writeLock().acquire(10, TimeUnit.SECONDS)) {
            CuratorSupport.fail("rwlock_writer_excludes", "write acquire failed");
            return;
        }
        boolean readerIn = lb.readLock().acquire(1, TimeUnit.SECONDS);
        boolean writerIn = lc.writeLock().acquire(1, TimeUnit.SECONDS);
        CuratorSupport.check(!readerIn && !writerIn, "rwlock_writer_excludes",
                "while write-locked: reader_acquired=" + readerIn + " writer_acquired=" + writerIn);
        if (readerIn) {
            lb.readLock().release();
        }
        if (writerIn) {
            lc.writeLock().release();
        }
        la.writeLock().release();
        boolean readerAfter = lb.readLock().acquire(10, TimeUnit.SECONDS);
        boolean writerWhileRead = lc.writeLock().acquire(1, TimeUnit.SECONDS);
        CuratorSupport.check(readerAfter && !writerWhileRead, "rwlock_reader_excludes_writer",
                "reader_after_write_release=" + readerAfter + " writer_while_read_locked=" + writerWhileRead);
        if (writerWhileRead) {
            lc.writeLock().release();
        }
        if (readerAfter) {
            lb.readLock().release();
        }
        boolean writerAfter = lc.writeLock().acquire(10, TimeUnit.SECONDS);
        CuratorSupport.check(writerAfter, "rwlock_writer_after_readers", "writer_acquired=" + writerAfter);
        if (writerAfter) {
            lc.writeLock().release();
        }
    }

    /** The write-lock holder takes the read lock, releases the write lock, and is a reader. */
    static void downgrade(CuratorFramework a, CuratorFramework b, CuratorFramework c, String path) throws Exception {
        InterProcessReadWriteLock la = new InterProcessReadWriteLock(a, path);
        InterProcessReadWriteLock lb = new InterProcessReadWriteLock(b, path);
        InterProcessReadWriteLock lc = new InterProcessReadWriteLock(c, path);
        if (!la.writeLock().acquire(10, TimeUnit.SECONDS)) {
            CuratorSupport.fail("rwlock_downgrade", "write acquire failed");
            return;
        }
        boolean readToo = la.readLock().acquire(5, TimeUnit.SECONDS);
        la.writeLock().release();
        CuratorSupport.check(readToo && la.readLock().isAcquiredInThisProcess()
                        && !la.writeLock().isAcquiredInThisProcess(),
                "rwlock_downgrade", "read_while_writing=" + readToo);
        boolean otherReader = lb.readLock().acquire(10, TimeUnit.SECONDS);
        boolean writerBlocked = !lc.writeLock().acquire(1, TimeUnit.SECONDS);
        CuratorSupport.check(otherReader && writerBlocked, "rwlock_downgraded_is_reader",
                "other_reader_acquired=" + otherReader + " writer_blocked=" + writerBlocked);
        if (otherReader) {
            lb.readLock().release();
        }
        if (!writerBlocked) {
            lc.writeLock().release();
        }
        if (readToo) {
            la.readLock().release();
        }
        boolean writerAfter = lc.writeLock().acquire(10, TimeUnit.SECONDS);
        CuratorSupport.check(writerAfter, "rwlock_writer_after_downgrade", "writer_acquired=" + writerAfter);
        if (writerAfter) {
            lc.writeLock().release();
        }
    }

    /** A reader asking for the write lock never gets it (Curator documents no upgrade). */
    static void noUpgrade(CuratorFramework a, String path) throws Exception {
        InterProcessReadWriteLock la = new InterProcessReadWriteLock(a, path);
        if (!la.readLock().acquire(10, TimeUnit.SECONDS)) {
            CuratorSupport.fail("rwlock_no_upgrade", "read acquire failed");
            return;
        }
        boolean upgraded = la.writeLock().acquire(1, TimeUnit.SECONDS);
        CuratorSupport.check(!upgraded, "rwlock_no_upgrade", "write_while_reading=" + upgraded);
        if (upgraded) {
            la.writeLock().release();
        }
        la.readLock().release();
        List<String> left = CuratorSupport.children(a, path);
        CuratorSupport.check(left.isEmpty(), "rwlock_nodes_cleaned", "children_after_release=" + left);
    }

    /**
     * Each client alternates writes and reads. A writer must see no other writer and no reader
     * inside; a reader must see no writer. Writers do a non-atomic read-sleep-write of a shared
     * counter, so a lost update shows as a wrong total.
     */
    static volatile int counter;

    static void mixed(List<CuratorFramework> cs, String path, int iterations) throws Exception {
        counter = 0;
        AtomicInteger readers = new AtomicInteger();
        AtomicInteger writers = new AtomicInteger();
        AtomicInteger violations = new AtomicInteger();
        AtomicInteger maxReaders = new AtomicInteger();
        AtomicInteger writes = new AtomicInteger();
        AtomicInteger reads = new AtomicInteger();
        AtomicBoolean failed = new AtomicBoolean();
        CountDownLatch gate = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        int idx = 0;
        for (CuratorFramework c : cs) {
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, path);
            final int me = idx++;
            Thread t = new Thread(() -> {
                try {
                    gate.await();
                    for (int i = 0; i < iterations; i++) {
                        // Mostly reads, so readers overlap; a write every third turn.
                        boolean write = (i + me) % 3 == 0;
                        InterProcessMutex lock = write ? rw.writeLock() : rw.readLock();
                        if (!lock.acquire(30, TimeUnit.SECONDS)) {
                            failed.set(true);
                            CuratorSupport.fail("rwlock_mixed_acquire", "timed out after 30s");
                            return;
                        }
                        try {
                            if (write) {
                                if (writers.incrementAndGet() != 1 || readers.get() != 0) {
                                    violations.incrementAndGet();
                                }
                                int v = counter;
                                Thread.sleep(2);
                                counter = v + 1;
                                writes.incrementAndGet();
                                writers.decrementAndGet();
                            } else {
                                maxReaders.accumulateAndGet(readers.incrementAndGet(), Math::max);
                                if (writers.get() != 0) {
                                    violations.incrementAndGet();
                                }
                                Thread.sleep(5);
                                reads.incrementAndGet();
                                readers.decrementAndGet();
                            }
                        } finally {
                            lock.release();
                        }
                    }
                } catch (Exception e) {
                    failed.set(true);
                    CuratorSupport.fail("rwlock_mixed_worker", CuratorSupport.describe(e));
                }
            }, "mixed");
            threads.add(t);
            t.start();
        }
        gate.countDown();
        boolean joined = CuratorSupport.joinAll(threads, 80);
        CuratorSupport.check(joined && !failed.get() && writes.get() + reads.get() == cs.size() * iterations,
                "rwlock_mixed_all_acquired", "writes=" + writes.get() + " reads=" + reads.get());
        CuratorSupport.check(violations.get() == 0, "rwlock_mixed_exclusion",
                "violations=" + violations.get() + " max_readers_at_once=" + maxReaders.get());
        CuratorSupport.check(counter == writes.get(), "rwlock_mixed_exact_count",
                "counter=" + counter + " writes=" + writes.get());
    }
}
