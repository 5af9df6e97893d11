// What the recipes' interop contenders (LockContender, LockRwContender, LatchContender,
// SemaphoreContender) share: a client that is connected before it is returned, the shared
// log (appended line by line), and worker threads whose first failure fails the process.

import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;

final class ContenderSupport {
    /** One worker thread's body. */
    interface Body {
        void run(int thread) throws Exception;
    }

    private ContenderSupport() {
    }

    /** A started client, connected within 30 s (or the process exits with status 1). */
    static CuratorFramework connect(String program, String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10000, 10000,
                new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.err.println(program + ": no connection to " + connect);
            System.exit(1);
        }
        return client;
    }

    /** The shared log, opened for appending. */
    static FileChannel openLog(String path) throws java.io.IOException {
        return FileChannel.open(Paths.get(path), StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.APPEND);
    }

    /** Appends one line (the log is shared by the threads). */
    static void append(FileChannel log, String line) throws java.io.IOException {
        synchronized (log) {
            log.write(ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8)));
        }
    }

    /**
     * Runs `body` on `threads` threads, waits for all, closes the client and the log, and exits
     * with status 1 (after printing it) if any thread failed.
     */
    static void runThreads(int threads, Body body, CuratorFramework client, FileChannel log)
            throws Exception {
        List<Thread> workers = new ArrayList<>();
        final Throwable[] failure = new Throwable[1];
        for (int t = 0; t < threads; t++) {
            final int thread = t;
            Thread w = new Thread(() -> {
                try {
                    body.run(thread);
                } catch (Throwable e) {
                    synchronized (failure) {
                        failure[0] = e;
                    }
                }
            });
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        client.close();
        log.close();
        if (failure[0] != null) {
            failure[0].printStackTrace();
            System.exit(1);
        }
    }
}
