// A Curator InterProcessMutex contender for the recipes' interop tests.
//
// Usage: LockContender <connect string> <lock path> <threads> <iterations> <log file>
//
// Each thread has its own InterProcessMutex on the lock path and acquires it <iterations>
// times. Every critical section appends one line to the shared log:
//   curator <pid> <thread> <token> <sequence> <start ns> <end ns> <node>
// where token is the lock node's czxid and times come from System.nanoTime()
// (CLOCK_MONOTONIC on Linux, the clock the Rust and Python contenders use).

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
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public class LockContender {
    /** Exposes the node of the held lock (protected in Curator). */
    static final class TokenMutex extends InterProcessMutex {
        TokenMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String heldNode() {
            return getLockPath();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: LockContender <connect> <path> <threads> <iterations> <log>");
            System.exit(2);
        }
        String connect = args[0];
        String path = args[1];
        int threads = Integer.parseInt(args[2]);
        int iterations = Integer.parseInt(args[3]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = FileChannel.open(Paths.get(args[4]), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10000, 10000,
                new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.err.println("LockContender: no connection to " + connect);
            System.exit(1);
        }
        List<Thread> workers = new ArrayList<>();
        final Throwable[] failure = new Throwable[1];
        for (int t = 0; t < threads; t++) {
            final int thread = t;
            Thread w = new Thread(() -> {
                TokenMutex mutex = new TokenMutex(client, path);
                try {
                    for (int i = 0; i < iterations; i++) {
                        if (!mutex.acquire(120, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("acquire timed out");
                        }
                        try {
                            String node = mutex.heldNode();
                            Stat stat = client.checkExists().forPath(node);
                            long start = System.nanoTime();
                            Thread.sleep(2);
                            long end = System.nanoTime();
                            String name = node.substring(node.lastIndexOf('/') + 1);
                            long seq = Long.parseLong(name.substring(name.lastIndexOf("lock-") + 5));
                            String line = "curator " + pid + " " + thread + " " + stat.getCzxid() + " "
                                    + seq + " " + start + " " + end + " " + name + "\n";
                            synchronized (log) {
                                log.write(ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8)));
                            }
                        } finally {
                            mutex.release();
                        }
                    }
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
