// Shared plumbing for the Curator end-to-end programs (CuratorMutex, CuratorLeaderLatch, ...).
//
// Every program prints one machine-readable line per check:
//     PASS <check-name> <detail>
//     FAIL <check-name> <detail>
// and a final `DONE passed=<n> failed=<m>`. It exits 0 only if nothing failed and at least one
// check passed. A watchdog thread halts the JVM with exit code 3 after a bound, so a program
// never hangs whatever the server does. Control lines for the Rust driver (READY_..., see
// CuratorConnectionState) go to stdout too; everything else (logs) goes to stderr.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;

final class CuratorSupport {
    private static final AtomicInteger PASSED = new AtomicInteger();
    private static final AtomicInteger FAILED = new AtomicInteger();
    private static final Object OUT = new Object();
    private static volatile BlockingQueue<String> stdinLines;

    private CuratorSupport() {}

    /**
     * Call first in main: quiets logging (before any logger exists) and arms the watchdog,
     * which halts the JVM with a FAIL line after {@code watchdogSeconds}.
     */
    static void init(String program, int watchdogSeconds) {
        String level = System.getenv("ZOORAFT_JAVA_LOG");
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level != null ? level : "warn");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(watchdogSeconds));
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("watchdog: thread dump\n" + threadDump());
            fail("watchdog", program + " still running after " + watchdogSeconds + "s (thread dump on stderr)");
            line("DONE passed=" + PASSED.get() + " failed=" + FAILED.get());
        // The summary the tests' `checks` runner reads as well.
        line(PASSED.get() + " passed, " + FAILED.get() + " failed");
            Runtime.getRuntime().halt(3);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    static void line(String text) {
        synchronized (OUT) {
            System.out.println(text);
            System.out.flush();
        }
    }

    static void pass(String name, String detail) {
        PASSED.incrementAndGet();
        line("PASS " + name + " " + detail);
    }

    static void fail(String name, String detail) {
        FAILED.incrementAndGet();
        line("FAIL " + name + " " + detail);
    }

    /** Records a check; returns the condition so callers can stop early. */
    static boolean check(boolean ok, String name, String detail) {
        if (ok) {
            pass(name, detail);
        } else {
            fail(name, detail);
        }
        return ok;
    }

    static int failures() {
        return FAILED.get();
    }

    /** Prints the summary and exits: 0 only if every check passed and there was one. */
    static void finish() {
        line("DONE passed=" + PASSED.get() + " failed=" + FAILED.get());
        // The summary the tests' `checks` runner reads as well.
        line(PASSED.get() + " passed, " + FAILED.get() + " failed");
        Runtime.getRuntime().halt(FAILED.get() == 0 && PASSED.get() > 0 ? 0 : 1);
    }

    /** Reports an unexpected exception as a failed check and exits. */
    static void abort(String name, Throwable t) {
        fail(name, "exception: " + describe(t));
        t.printStackTrace();
        finish();
    }

    static String describe(Throwable t) {
        String msg = t.getMessage();
        return t.getClass().getSimpleName() + (msg == null ? "" : ": " + msg.replace('\n', ' '));
    }

    /**
     * A started CuratorFramework on {@code connect}, connected within 20 s (otherwise the
     * program fails and exits). Exponential backoff retries, as applications configure it.
     */
    static CuratorFramework client(String connect, int sessionTimeoutMs) throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionTimeoutMs)
                .connectionTimeoutMs(15000)
                .retryPolicy(new ExponentialBackoffRetry(100, 6, 2000))
                .build();
        c.start();
        if (!c.blockUntilConnected(20, TimeUnit.SECONDS)) {
            fail("connect", "no connection to " + connect + " within 20s");
            finish();
        }
        return c;
    }

    static CuratorFramework client(String connect) throws InterruptedException {
        return client(connect, 30000);
    }

    /**
     * The children of {@code path}; empty if the node is gone. Curator creates lock parents
     * as containers, which the server may delete as soon as they are empty.
     */
    static java.util.List<String> children(CuratorFramework c, String path) throws Exception {
        try {
            return c.getChildren().forPath(path);
        } catch (org.apache.zookeeper.KeeperException.NoNodeException e) {
            return java.util.Collections.emptyList();
        }
    }

    /** The ZooKeeper session id of a connected client. */
    static long sessionId(CuratorFramework c) throws Exception {
        return c.getZookeeperClient().getZooKeeper().getSessionId();
    }

    static boolean await(CountDownLatch latch, long seconds) throws InterruptedException {
        return latch.await(seconds, TimeUnit.SECONDS);
    }

    /** Waits (bounded) until {@code cond} holds, polling every 10 ms. */
    static boolean waitFor(long millis, java.util.function.BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(10);
        }
        return true;
    }

    /** Joins every thread within {@code seconds} in total; false if any is still alive. */
    static boolean joinAll(Iterable<Thread> threads, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        for (Thread t : threads) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left > 0) {
                t.join(left);
            }
            if (t.isAlive()) {
                return false;
            }
        }
        return true;
    }

    /**
     * The next line the driver wrote on stdin, or null after {@code seconds}. Lines are read by
     * a daemon thread, so a silent driver never blocks the program past the bound.
     */
    static String readStdinLine(long seconds) throws InterruptedException {
        if (stdinLines == null) {
            synchronized (CuratorSupport.class) {
                if (stdinLines == null) {
                    BlockingQueue<String> q = new LinkedBlockingQueue<>();
                    Thread reader = new Thread(() -> {
                        try (BufferedReader in = new BufferedReader(
                                new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                            String l;
                            while ((l = in.readLine()) != null) {
                                q.add(l.trim());
                            }
                        } catch (Exception ignored) {
                            // stdin closed: the driver went away; waits time out
                        }
                    }, "stdin-reader");
                    reader.setDaemon(true);
                    reader.start();
                    stdinLines = q;
                }
            }
        }
        return stdinLines.poll(seconds, TimeUnit.SECONDS);
    }

    /** Prints {@code request} and waits for the driver to answer {@code expected}. */
    static boolean handshake(String request, String expected, long seconds) throws InterruptedException {
        line(request);
        String got = readStdinLine(seconds);
        if (!expected.equals(got)) {
            fail("driver_" + expected.toLowerCase(), "waited " + seconds + "s for " + expected + " after " + request + ", got " + got);
            return false;
        }
        return true;
    }

    private static String threadDump() {
        StringBuilder sb = new StringBuilder();
        for (java.util.Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            sb.append("  thread ").append(e.getKey().getName()).append('\n');
            StackTraceElement[] st = e.getValue();
            for (int i = 0; i < Math.min(st.length, 8); i++) {
                sb.append("    at ").append(st[i]).append('\n');
            }
        }
        return sb.toString();
    }
}
