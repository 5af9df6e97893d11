// A Curator InterProcessReadWriteLock contender for the recipes' interop tests.
//
// Usage: LockRwContender <connect string> <lock path> <threads> <iterations> <log file>
//
// Even-numbered threads take the write lock, odd-numbered ones the read lock, each with its
// own InterProcessReadWriteLock, <iterations> times. Every critical section appends one line:
//   curator-w|curator-r <pid> <thread> 0 -1 <start ns> <end ns> -
// with times from System.nanoTime() (CLOCK_MONOTONIC on Linux).

import java.nio.channels.FileChannel;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;

public class LockRwContender {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: LockRwContender <connect> <path> <threads> <iterations> <log>");
            System.exit(2);
        }
        String path = args[1];
        int threads = Integer.parseInt(args[2]);
        int iterations = Integer.parseInt(args[3]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = ContenderSupport.openLog(args[4]);
        CuratorFramework client = ContenderSupport.connect("LockRwContender", args[0]);
        ContenderSupport.runThreads(threads, thread -> {
            boolean writer = thread % 2 == 0;
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
            InterProcessMutex lock = writer ? rw.writeLock() : rw.readLock();
            for (int i = 0; i < iterations; i++) {
                if (!lock.acquire(120, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("acquire timed out");
                }
                try {
                    long start = System.nanoTime();
                    Thread.sleep(3);
                    long end = System.nanoTime();
                    ContenderSupport.append(log, (writer ? "curator-w " : "curator-r ") + pid + " "
                            + thread + " 0 -1 " + start + " " + end + " -\n");
                } finally {
                    lock.release();
                }
            }
        }, client, log);
    }
}
