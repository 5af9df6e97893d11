// A Curator client holding a lock and a leader latch for the console's browser test.
//
// Usage: ConsoleLockHolder <connect> <lock path> <latch path>
//
// Acquires an InterProcessMutex on <lock path>, one lease of an InterProcessSemaphoreV2 (two
// leases) on <lock path>-sem, the read lock of an InterProcessReadWriteLock on <lock path>-rw,
// and starts a LeaderLatch on <latch path>, then prints "HELD 0x<session id>". Each "release" line on stdin releases the mutex (and
// prints "RELEASED"); end of input closes the client and exits.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;

public class ConsoleLockHolder {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: ConsoleLockHolder <connect> <lock path> <latch path>");
            System.exit(2);
        }
        CuratorFramework client = ContenderSupport.connect("ConsoleLockHolder", args[0]);
        InterProcessMutex mutex = new InterProcessMutex(client, args[1]);
        if (!mutex.acquire(60, TimeUnit.SECONDS)) {
            System.err.println("ConsoleLockHolder: lock not acquired within 60 s");
            System.exit(1);
        }
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, args[1] + "-sem", 2);
        Lease lease = semaphore.acquire(60, TimeUnit.SECONDS);
        if (lease == null) {
            System.err.println("ConsoleLockHolder: no lease within 60 s");
            System.exit(1);
        }
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, args[1] + "-rw");
        if (!rw.readLock().acquire(60, TimeUnit.SECONDS)) {
            System.err.println("ConsoleLockHolder: no read lock within 60 s");
            System.exit(1);
        }
        LeaderLatch latch = new LeaderLatch(client, args[2], "curator-latch");
        latch.start();
        if (!latch.await(60, TimeUnit.SECONDS)) {
            System.err.println("ConsoleLockHolder: no leadership within 60 s");
            System.exit(1);
        }
        long session = client.getZookeeperClient().getZooKeeper().getSessionId();
        System.out.println("HELD 0x" + Long.toHexString(session));
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        boolean held = true;
        while ((line = in.readLine()) != null) {
            if (line.trim().equals("release") && held) {
                mutex.release();
                held = false;
                System.out.println("RELEASED");
                System.out.flush();
            }
        }
        latch.close();
        rw.readLock().release();
        semaphore.returnLease(lease);
        client.close();
    }
}
