import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

/**
 * The Java client's read-only mode (canBeReadOnly) against a member cut off from its
 * quorum. Usage: ReadOnlyClient HOSTS. Run while only one member of HOSTS is up: connects,
 * reads, has a write refused, prints "READ-ONLY DONE", waits for a line on stdin (the quorum
 * is back), waits for the client to find the read-write member by itself, writes, and
 * prints "N passed, N failed".
 */
public final class ReadOnlyClient {
    private static int passed;
    private static int failed;

    private static void check(String name, boolean ok, Object detail) {
        if (ok) {
            passed++;
            System.out.println("ok   " + name);
        } else {
            failed++;
            System.out.println("FAIL " + name + " " + detail);
        }
        System.out.flush();
    }

    private static boolean waitFor(AtomicReference<KeeperState> state, KeeperState want, long ms)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < deadline) {
            if (state.get() == want) {
                return true;
            }
            Thread.sleep(100);
        }
        return state.get() == want;
    }

    public static void main(String[] args) throws Exception {
        AtomicReference<KeeperState> state = new AtomicReference<>(KeeperState.Disconnected);
        ZooKeeper zk = new ZooKeeper(args[0], 10000, event -> {
            if (event.getPath() == null) {
                state.set(event.getState());
            }
        }, true);
        check("connected read-only",
                waitFor(state, KeeperState.ConnectedReadOnly, 60000), state.get());
        byte[] data = zk.getData("/ro", false, null);
        check("read on the read-only member",
                "v".equals(new String(data, StandardCharsets.UTF_8)), data);
        try {
            zk.create("/java-ro", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            check("write refused", false, "the create succeeded");
        } catch (KeeperException.NotReadOnlyException e) {
            check("write refused", true, null);
        }
        System.out.println("READ-ONLY DONE");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        check("back to read-write by itself",
                waitFor(state, KeeperState.SyncConnected, 90000), state.get());
        boolean created = false;
        long deadline = System.currentTimeMillis() + 60000;
        while (!created && System.currentTimeMillis() < deadline) {
            try {
                zk.create("/java-rw", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                        CreateMode.PERSISTENT);
                created = true;
            } catch (KeeperException.ConnectionLossException
                    | KeeperException.NotReadOnlyException e) {
                Thread.sleep(200);
            }
        }
        check("write after the quorum is back", created, null);
        zk.close();
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
