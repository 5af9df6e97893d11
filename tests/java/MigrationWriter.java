import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

/**
 * The Java client's writer for the live-migration tests: the same loop and the same last
 * line as zk_migrate.py's write_at, so a test checks both clients alike.
 *
 * Usage: MigrationWriter ROOT SECONDS HOSTS. For SECONDS it creates ROOT/nNNNNNN, sets
 * ROOT's data to the step number, deletes the node three steps back and creates a
 * sequential ROOT/q-; then prints
 * "acked N errors N last_set N same_session True|False states S1,S2|-", where the states
 * are every connection state change the client saw after it first connected.
 */
public final class MigrationWriter {
    public static void main(String[] args) throws Exception {
        String root = args[0];
        long seconds = Long.parseLong(args[1]);
        String hosts = args[2];
        List<String> states = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch connected = new CountDownLatch(1);
        Watcher watcher = event -> {
            if (event.getType() != Watcher.Event.EventType.None) {
                return;
            }
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected
                    && connected.getCount() > 0) {
                connected.countDown();
            } else {
                states.add(event.getState().toString());
            }
        };
        ZooKeeper zk = new ZooKeeper(hosts, 10000, watcher);
        if (!connected.await(30, TimeUnit.SECONDS)) {
            System.out.println("error: no session within 30 s");
            System.exit(2);
        }
        long session = zk.getSessionId();
        try {
            zk.create(root, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException e) {
            // Made by an earlier run.
        }
        long end = System.currentTimeMillis() + seconds * 1000;
        long acked = 0;
        long errors = 0;
        String lastSet = "None";
        for (int i = 0; System.currentTimeMillis() < end; i++) {
            String step = String.format("create n%06d", i);
            try {
                zk.create(String.format("%s/n%06d", root, i), new byte[i % 50],
                        ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                step = "set " + i;
                zk.setData(root, Integer.toString(i).getBytes(StandardCharsets.UTF_8), -1);
                lastSet = Integer.toString(i);
                if (i % 3 == 0 && i >= 3) {
                    step = String.format("delete n%06d", i - 3);
                    zk.delete(String.format("%s/n%06d", root, i - 3), -1);
                }
                step = "create q-";
                zk.create(root + "/q-", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                        CreateMode.PERSISTENT_SEQUENTIAL);
                acked++;
            } catch (KeeperException | InterruptedException e) {
                errors++;
                System.out.printf("error in %s at %d: %s%n", step, System.currentTimeMillis(), e);
                Thread.sleep(50);
            }
        }
        boolean same = zk.getSessionId() == session;
        String seen = states.isEmpty() ? "-" : String.join(",", states);
        System.out.printf("acked %d errors %d last_set %s same_session %s states %s%n",
                acked, errors, lastSet, same ? "True" : "False", seen);
        zk.close();
    }
}
