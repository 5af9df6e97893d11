// Curator's InterProcessMutex against a live server: mutual exclusion, reentrancy, timeouts,
// wake-up on release, release by session close, and removal of the container parent.
//
// Usage:
//   CuratorMutex <connect> <clients> <iterations> [--containers]
//       In-process checks; every client is its own CuratorFramework (own session and TCP
//       connection), so to the server they are as separate as processes.
//   CuratorMutex <connect> --shared <dir> <clients> <iterations>
//       One of several JVMs on the same lock: prints READY, waits for GO on stdin, then each
//       client increments the integer in <dir>/counter under the lock. An in-section marker
//       file created with O_EXCL catches overlaps between processes. The driver checks the
//       final count.

import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;

public class CuratorMutex {
    static final String BASE = "/curator-mutex";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorMutex", 100);
        try {
            if (args.length >= 5 && args[1].equals("--shared")) {
                shared(args[0], Paths.get(args[2]), Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            } else {
                boolean containers = args.length >= 4 && args[3].equals("--containers");
                local(args[0], Integer.parseInt(args[1]), Integer.parseInt(args[2]), containers);
            }
        } catch (Throwable t) {
            CuratorSupport.abort("mutex_unexpected", t);
        }
        CuratorSupport.finish();
    }

    // ---------------------------------------------------------------- in-process checks

    static volatile int counter;

    static void local(String connect, int clients, int iterations, boolean containers) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            cs.add(CuratorSupport.client(connect));
        }
        exclusive(cs, BASE + "/exclusive", iterations);
        reentrant(cs.get(0), cs.get(1), BASE + "/reentrant");
        timeoutWhileHeld(cs.get(0), cs.get(1), BASE + "/timeout");
        waiterWakes(cs.get(0), cs.get(1), BASE + "/wake");
        sessionCloseReleases(connect, cs.get(1), BASE + "/session");
        if (containers) {
            containerRemoved(cs.get(0), BASE + "/exclusive");
        }
        for (CuratorFramework c : cs) {
            c.close();
        }
    }

    /** N clients x M iterations of a non-atomic read-sleep-write under the lock. */
    static void exclusive(List<CuratorFramework> cs, String path, int iterations) throws Exception {
        counter = 0;
        AtomicInteger inSection = new AtomicInteger();
        AtomicInteger maxInSection = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger timeouts = new AtomicInteger();
        AtomicInteger errors = new AtomicInteger();
        AtomicInteger acquisitions = new AtomicInteger();
        CountDownLatch startGate = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (CuratorFramework c : cs) {
            InterProcessMutex lock = new InterProcessMutex(c, path);
            Thread t = new Thread(() -> {
                try {
                    startGate.await();
                    for (int i = 0; i < iterations; i++) {
                        if (!lock.acquire(30, TimeUnit.SECONDS)) {
                            timeouts.incrementAndGet();
                            return;
                        }
                        try {
                            int now = inSection.incrementAndGet();
                            maxInSection.accumulateAndGet(now, Math::max);
                            if (now != 1) {
                                overlaps.incrementAndGet();
                            }
                            acquisitions.incrementAndGet();
                            int v = counter;
                            Thread.sleep(1);
                            counter = v + 1;
                            inSection.decrementAndGet();
                        } finally {
                            lock.release();
                        }
                    }
                } catch (Exception e) {
                    errors.incrementAndGet();
                    CuratorSupport.fail("mutex_worker", CuratorSupport.describe(e));
                }
            }, "mutex-worker");
            threads.add(t);
            t.start();
        }
        startGate.countDown();
        boolean joined = CuratorSupport.joinAll(threads, 80);
        int expected = cs.size() * iterations;
        CuratorSupport.check(joined && timeouts.get() == 0 && errors.get() == 0 && acquisitions.get() == expected,
                "mutex_all_acquired",
                "acquisitions=" + acquisitions.get() + " expected=" + expected + " timeouts=" + timeouts.get()
                        + " errors=" + errors.get() + " joined=" + joined);
        CuratorSupport.check(overlaps.get() == 0 && maxInSection.get() == 1, "mutex_no_overlap",
                "max_in_section=" + maxInSection.get() + " overlaps=" + overlaps.get());
        CuratorSupport.check(counter == expected, "mutex_exact_count",
                "counter=" + counter + " expected=" + expected);
        List<String> left = CuratorSupport.children(cs.get(0), path);
        CuratorSupport.check(left.isEmpty(), "mutex_nodes_cleaned", "children_after_release=" + left);
    }

    /** Reentrant per thread: a second acquire costs no node, and it takes two releases. */
    static void reentrant(CuratorFramework a, CuratorFramework b, String path) throws Exception {
        InterProcessMutex la = new InterProcessMutex(a, path);
        InterProcessMutex lb = new InterProcessMutex(b, path);
        boolean first = la.acquire(10, TimeUnit.SECONDS);
        boolean second = la.acquire(10, TimeUnit.SECONDS);
        Collection<String> nodes = la.getParticipantNodes();
        CuratorSupport.check(first && second && nodes.size() == 1 && la.isAcquiredInThisProcess()
                        && la.isOwnedByCurrentThread(),
                "mutex_reentrant_acquire", "first=" + first + " second=" + second + " participant_nodes=" + nodes);
        String node = nodes.isEmpty() ? "" : nodes.iterator().next();
        CuratorSupport.check(node.matches(".*/_c_[0-9a-f-]{36}-lock-\\d{10}"), "mutex_node_name",
                "protected ephemeral-sequential node " + node);
        la.release();
        boolean otherWhileOnce = acquireOnOtherThread(lb, 500);
        CuratorSupport.check(!otherWhileOnce && la.isAcquiredInThisProcess(), "mutex_reentrant_still_held",
                "after one of two releases: other_acquired=" + otherWhileOnce);
        la.release();
        boolean otherAfter = lb.acquire(10, TimeUnit.SECONDS);
        CuratorSupport.check(otherAfter && !la.isAcquiredInThisProcess(), "mutex_reentrant_released",
                "after two releases: other_acquired=" + otherAfter);
        if (otherAfter) {
            lb.release();
        }
        try {
            la.release();
            CuratorSupport.fail("mutex_release_unowned", "release of an unowned lock did not throw");
        } catch (IllegalMonitorStateException expected) {
            CuratorSupport.pass("mutex_release_unowned", "IllegalMonitorStateException");
        }
    }

    /** acquire(time) fails while another client holds the lock, and leaves no node behind. */
    static void timeoutWhileHeld(CuratorFramework a, CuratorFramework b, String path) throws Exception {
        InterProcessMutex la = new InterProcessMutex(a, path);
        InterProcessMutex lb = new InterProcessMutex(b, path);
        if (!la.acquire(10, TimeUnit.SECONDS)) {
            CuratorSupport.fail("mutex_timeout_while_held", "first acquire failed");
            return;
        }
        long t0 = System.nanoTime();
        boolean got = lb.acquire(1, TimeUnit.SECONDS);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        List<String> children = CuratorSupport.children(a, path);
        CuratorSupport.check(!got && children.size() == 1, "mutex_timeout_while_held",
                "acquired=" + got + " after_ms=" + ms + " children_after_timeout=" + children);
        la.release();
        boolean after = lb.acquire(10, TimeUnit.SECONDS);
        CuratorSupport.check(after, "mutex_acquire_after_release", "acquired=" + after);
        if (after) {
            lb.release();
        }
    }

    /** A blocked waiter is woken by the holder's release (a watch on its predecessor). */
    static void waiterWakes(CuratorFramework a, CuratorFramework b, String path) throws Exception {
        InterProcessMutex la = new InterProcessMutex(a, path);
        InterProcessMutex lb = new InterProcessMutex(b, path);
        if (!la.acquire(10, TimeUnit.SECONDS)) {
            CuratorSupport.fail("mutex_waiter_wakes", "first acquire failed");
            return;
        }
        AtomicBoolean released = new AtomicBoolean();
        AtomicBoolean acquiredBeforeRelease = new AtomicBoolean();
        AtomicBoolean acquired = new AtomicBoolean();
        CountDownLatch waiting = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                waiting.countDown();
                if (lb.acquire(30, TimeUnit.SECONDS)) {
                    acquiredBeforeRelease.set(!released.get());
                    acquired.set(true);
                    lb.release();
                }
            } catch (Exception e) {
                CuratorSupport.fail("mutex_waiter_wakes", CuratorSupport.describe(e));
            }
        }, "waiter");
        t.start();
        CuratorSupport.await(waiting, 5);
        // Let the waiter queue its node and set its watch before the release.
        boolean queued = CuratorSupport.waitFor(5000, () -> {
            try {
                return la.getParticipantNodes().size() == 2;
            } catch (Exception e) {
                return false;
            }
        });
        Thread.sleep(200);
        released.set(true);
        la.release();
        t.join(35000);
        CuratorSupport.check(queued && acquired.get() && !acquiredBeforeRelease.get(), "mutex_waiter_wakes",
                "queued=" + queued + " acquired=" + acquired.get() + " before_release=" + acquiredBeforeRelease.get());
    }

    /** Closing the holder's session (no release) deletes its node and lets the waiter in. */
    static void sessionCloseReleases(String connect, CuratorFramework b, String path) throws Exception {
        CuratorFramework holder = CuratorSupport.client(connect);
        InterProcessMutex lh = new InterProcessMutex(holder, path);
        InterProcessMutex lb = new InterProcessMutex(b, path);
        if (!lh.acquire(10, TimeUnit.SECONDS)) {
            CuratorSupport.fail("mutex_session_close_releases", "holder acquire failed");
            return;
        }
        boolean whileHeld = acquireOnOtherThread(lb, 300);
        holder.close();
        boolean after = lb.acquire(15, TimeUnit.SECONDS);
        CuratorSupport.check(!whileHeld && after, "mutex_session_close_releases",
                "acquired_while_held=" + whileHeld + " acquired_after_close=" + after);
        if (after) {
            lb.release();
        }
    }

    /** Curator creates lock parents as containers: the server removes them once empty. */
    static void containerRemoved(CuratorFramework c, String path) throws Exception {
        boolean gone = CuratorSupport.waitFor(30000, () -> {
            try {
                return c.checkExists().forPath(path) == null;
            } catch (Exception e) {
                return false;
            }
        });
        CuratorSupport.check(gone, "mutex_container_parent_removed", path + " removed=" + gone);
    }

    /** Tries {@code lock} from a fresh thread (reentrancy is per thread), releasing on success. */
    static boolean acquireOnOtherThread(InterProcessMutex lock, long millis) throws Exception {
        AtomicBoolean got = new AtomicBoolean();
        Thread t = new Thread(() -> {
            try {
                if (lock.acquire(millis, TimeUnit.MILLISECONDS)) {
                    got.set(true);
                    lock.release();
                }
            } catch (Exception e) {
                CuratorSupport.fail("mutex_other_thread", CuratorSupport.describe(e));
            }
        }, "other");
        t.start();
        t.join(millis + 20000);
        return got.get();
    }

    // ---------------------------------------------------------------- across processes

    static void shared(String connect, Path dir, int clients, int iterations) throws Exception {
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            cs.add(CuratorSupport.client(connect));
        }
        Path counterFile = dir.resolve("counter");
        Path marker = dir.resolve("in-section");
        if (!CuratorSupport.handshake("READY", "GO", 60)) {
            return;
        }
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger done = new AtomicInteger();
        AtomicInteger problems = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (CuratorFramework c : cs) {
            InterProcessMutex lock = new InterProcessMutex(c, BASE + "/shared");
            Thread t = new Thread(() -> {
                try {
                    for (int i = 0; i < iterations; i++) {
                        if (!lock.acquire(60, TimeUnit.SECONDS)) {
                            problems.incrementAndGet();
                            CuratorSupport.fail("mutex_process_acquire", "timed out after 60s");
                            return;
                        }
                        try {
                            boolean mine = true;
                            try {
                                Files.createFile(marker);
                            } catch (FileAlreadyExistsException e) {
                                overlaps.incrementAndGet();
                                mine = false;
                            }
                            String text = Files.exists(counterFile)
                                    ? new String(Files.readAllBytes(counterFile), StandardCharsets.UTF_8).trim()
                                    : "0";
                            int v = text.isEmpty() ? 0 : Integer.parseInt(text);
                            Thread.sleep(1);
                            Path tmp = Files.createTempFile(dir, "counter", ".tmp");
                            Files.write(tmp, Integer.toString(v + 1).getBytes(StandardCharsets.UTF_8));
                            Files.move(tmp, counterFile, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                                    java.nio.file.StandardCopyOption.ATOMIC_MOVE);
                            if (mine) {
                                Files.delete(marker);
                            }
                            done.incrementAndGet();
                        } finally {
                            lock.release();
                        }
                    }
                } catch (Exception e) {
                    problems.incrementAndGet();
                    CuratorSupport.fail("mutex_process_worker", CuratorSupport.describe(e));
                }
            }, "shared-worker");
            threads.add(t);
            t.start();
        }
        boolean joined = CuratorSupport.joinAll(threads, 80);
        CuratorSupport.check(joined && problems.get() == 0 && done.get() == clients * iterations,
                "mutex_process_all_acquired", "increments=" + done.get() + " expected=" + clients * iterations);
        CuratorSupport.check(overlaps.get() == 0, "mutex_process_no_overlap", "overlaps_seen=" + overlaps.get());
        for (CuratorFramework c : cs) {
            c.close();
        }
    }
}
