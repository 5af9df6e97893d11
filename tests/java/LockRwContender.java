// A Curator InterProcessReadWriteLock contender for the recipes' interop tests.
//
// Usage: LockRwContender <connect string> <lock path> <threads> <iterations> <log file>
//
// Even-numbered threads take the write lock, odd-numbered ones the read lock, each with its
// own InterProcessReadWriteLock, <iterations> times. Every critical section appends one line:
//   curator-w|curator-r <pid> <thread> 0 -1 <start ns> <end ns> -
// with times from System.nanoTime() (CLOCK_MONOTONIC on Linux).

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
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class LockRwContender {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: LockRwContender <connect> <path> <threads> <iterations> <log>");
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
            System.err.println("LockRwContender: no connection to " + connect);
            System.exit(1);
        }
        List<Thread> workers = new ArrayList<>();
        final Throwable[] failure = new Throwable[1];
        for (int t = 0; t < threads; t++) {
            final int thread = t;
            final boolean writer = t % 2 == 0;
            Thread w = new Thread(() -> {
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
                InterProcessMutex lock = writer ? rw.writeLock() : rw.readLock();
                try {
                    for (int i = 0; i < iterations; i++) {
                        if (!lock.acquire(120, TimeUnit.SECONDS)) {
                            throw new IllegalStateException("acquire timed out");
                        }
                        try {
                            long start = System.nanoTime();
                            Thread.sleep(3);
                            long end = System.nanoTime();
                            String line = (writer ? "curator-w " : "curator-r ") + pid + " " + thread
                                    + " 0 -1 " + start + " " + end + " -\n";
                            synchronized (log) {
                                log.write(ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8)));
                            }
                        } finally {
                            lock.release();
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
