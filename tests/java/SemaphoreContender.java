// A Curator InterProcessSemaphoreV2 contender for the recipes' semaphore interop tests.
//
// Usage: SemaphoreContender <connect string> <semaphore path> <max leases> <threads>
//        <iterations> <log file>
//
// Each thread has its own InterProcessSemaphoreV2 on the path and takes a lease <iterations>
// times, holding it 20 ms. Every lease appends one line to the shared log:
//   curator-lease <pid> <thread> <czxid> <sequence> <start ns> <end ns> <node>
// with times from System.nanoTime() (CLOCK_MONOTONIC on Linux, as the Rust contender).

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
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.data.Stat;

public class SemaphoreContender {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: SemaphoreContender <connect> <path> <max> <threads> <iterations> <log>");
            System.exit(2);
        }
        String connect = args[0];
        String path = args[1];
        int max = Integer.parseInt(args[2]);
        int threads = Integer.parseInt(args[3]);
        int iterations = Integer.parseInt(args[4]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = FileChannel.open(Paths.get(args[5]), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10000, 10000,
                new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.err.println("SemaphoreContender: no connection to " + connect);
            System.exit(1);
        }
        List<Thread> workers = new ArrayList<>();
        final Throwable[] failure = new Throwable[1];
        for (int t = 0; t < threads; t++) {
            final int thread = t;
            Thread w = new Thread(() -> {
                InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, max);
                try {
                    for (int i = 0; i < iterations; i++) {
                        Lease lease = sem.acquire(120, TimeUnit.SECONDS);
                        if (lease == null) {
                            throw new IllegalStateException("acquire timed out");
                        }
                        try {
                            String name = lease.getNodeName();
                            name = name.substring(name.lastIndexOf('/') + 1);
                            String node = ZKPaths.makePath(path, "leases", name);
                            Stat stat = client.checkExists().forPath(node);
                            long start = System.nanoTime();
                            Thread.sleep(20);
                            long end = System.nanoTime();
                            long seq = Long.parseLong(name.substring(name.lastIndexOf("lease-") + 6));
                            String line = "curator-lease " + pid + " " + thread + " " + stat.getCzxid() + " "
                                    + seq + " " + start + " " + end + " " + name + "\n";
                            synchronized (log) {
                                log.write(ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8)));
                            }
                        } finally {
                            lease.close();
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
