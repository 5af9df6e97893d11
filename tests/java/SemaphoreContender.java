// A Curator InterProcessSemaphoreV2 contender for the recipes' semaphore interop tests.
//
// Usage: SemaphoreContender <connect string> <semaphore path> <max leases> <threads>
//        <iterations> <log file>
//
// Each thread has its own InterProcessSemaphoreV2 on the path and takes a lease <iterations>
// times, holding it 20 ms. Every lease appends one line to the shared log:
//   curator-lease <pid> <thread> <czxid> <sequence> <start ns> <end ns> <node>
// with times from System.nanoTime() (CLOCK_MONOTONIC on Linux, as the Rust contender).

import java.nio.channels.FileChannel;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.data.Stat;

public class SemaphoreContender {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: SemaphoreContender <connect> <path> <max> <threads> <iterations> <log>");
            System.exit(2);
        }
        String path = args[1];
        int max = Integer.parseInt(args[2]);
        int threads = Integer.parseInt(args[3]);
        int iterations = Integer.parseInt(args[4]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = ContenderSupport.openLog(args[5]);
        CuratorFramework client = ContenderSupport.connect("SemaphoreContender", args[0]);
        ContenderSupport.runThreads(threads, thread -> {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, max);
            for (int i = 0; i < iterations; i++) {
                Lease lease = sem.acquire(120, TimeUnit.SECONDS);
                if (lease == null) {
                    throw new IllegalStateException("acquire timed out");
                }
                try {
                    // The lease's node name (Curator 5.4 gives the name, not the path).
                    String name = lease.getNodeName();
                    name = name.substring(name.lastIndexOf('/') + 1);
                    Stat stat = client.checkExists().forPath(ZKPaths.makePath(path, "leases", name));
                    long start = System.nanoTime();
                    Thread.sleep(20);
                    long end = System.nanoTime();
                    long seq = Long.parseLong(name.substring(name.lastIndexOf("lease-") + 6));
                    ContenderSupport.append(log, "curator-lease " + pid + " " + thread + " "
                            + stat.getCzxid() + " " + seq + " " + start + " " + end + " " + name + "\n");
                } finally {
                    lease.close();
                }
            }
        }, client, log);
    }
}
