// A Curator InterProcessMutex contender for the recipes' interop tests.
//
// Usage: LockContender <connect string> <lock path> <threads> <iterations> <log file>
//
// Each thread has its own InterProcessMutex on the lock path and acquires it <iterations>
// times. Every critical section appends one line to the shared log:
//   curator <pid> <thread> <token> <sequence> <start ns> <end ns> <node>
// where token is the lock node's czxid and times come from System.nanoTime()
// (CLOCK_MONOTONIC on Linux, the clock the Rust and Python contenders use).

import java.nio.channels.FileChannel;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
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
        String path = args[1];
        int threads = Integer.parseInt(args[2]);
        int iterations = Integer.parseInt(args[3]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = ContenderSupport.openLog(args[4]);
        CuratorFramework client = ContenderSupport.connect("LockContender", args[0]);
        ContenderSupport.runThreads(threads, thread -> {
            TokenMutex mutex = new TokenMutex(client, path);
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
                    ContenderSupport.append(log, "curator " + pid + " " + thread + " " + stat.getCzxid()
                            + " " + seq + " " + start + " " + end + " " + name + "\n");
                } finally {
                    mutex.release();
                }
            }
        }, client, log);
    }
}
