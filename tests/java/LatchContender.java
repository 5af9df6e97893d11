// A Curator LeaderLatch or LeaderSelector participant for the recipes' election interop
// tests.
//
// Usage: LatchContender <connect string> <path> <participants> <terms> <log file> [selector]
//
// Each participant (a thread with its own LeaderLatch, or with `selector` its own
// LeaderSelector, on the path; all on one session) leads <terms> times, appending one line
// per term to the shared log, then steps down (a latch is closed; a selector's
// takeLeadership returns and the selector is closed). A line is
//   curator-latch|curator-selector <pid> <thread> <token> <sequence> <start ns> <end ns> <node>
// where node is the latch node or the selector's lock node (the first in sequence order
// while it leads: a selector leads by holding Curator's mutex on the path), token its czxid,
// and times come from System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock the Rust
// contender uses).

import java.nio.channels.FileChannel;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.zookeeper.data.Stat;

public class LatchContender {
    static long sequence(String name, String marker) {
        return Long.parseLong(name.substring(name.lastIndexOf(marker) + marker.length()));
    }

    /** Logs one term led through `node` (a child of `path`). */
    static void term(CuratorFramework client, FileChannel log, String kind, long pid, int thread,
            String path, String name, String marker) throws Exception {
        Stat stat = client.checkExists().forPath(path + "/" + name);
        long start = System.nanoTime();
        Thread.sleep(2);
        long end = System.nanoTime();
        ContenderSupport.append(log, kind + " " + pid + " " + thread + " " + stat.getCzxid() + " "
                + sequence(name, marker) + " " + start + " " + end + " " + name + "\n");
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5 && !(args.length == 6 && args[5].equals("selector"))) {
            System.err.println("usage: LatchContender <connect> <path> <participants> <terms> <log> [selector]");
            System.exit(2);
        }
        String path = args[1];
        int participants = Integer.parseInt(args[2]);
        int terms = Integer.parseInt(args[3]);
        boolean selector = args.length == 6;
        long pid = ProcessHandle.current().pid();
        FileChannel log = ContenderSupport.openLog(args[4]);
        CuratorFramework client = ContenderSupport.connect("LatchContender", args[0]);
        ContenderSupport.runThreads(participants, thread -> {
            for (int i = 0; i < terms; i++) {
                if (selector) {
                    selectorTerm(client, log, pid, thread, path);
                    continue;
                }
                LeaderLatch latch = new LeaderLatch(client, path, "curator-" + pid + "-" + thread);
                latch.start();
                try {
                    if (!latch.await(120, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("no leadership in time");
                    }
                    String node = latch.getOurPath();
                    String name = node.substring(node.lastIndexOf('/') + 1);
                    term(client, log, "curator-latch", pid, thread, path, name, "latch-");
                    if (!latch.hasLeadership()) {
                        throw new IllegalStateException("lost leadership during the term");
                    }
                } finally {
                    latch.close();
                }
            }
        }, client, log);
    }

    /** One term as the leader of a LeaderSelector. */
    static void selectorTerm(CuratorFramework client, FileChannel log, long pid, int thread,
            String path) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        final Throwable[] failure = new Throwable[1];
        LeaderSelector selector = new LeaderSelector(client, path,
                new LeaderSelectorListenerAdapter() {
                    @Override
                    public void takeLeadership(CuratorFramework c) throws Exception {
                        try {
                            List<String> kids = c.getChildren().forPath(path);
                            kids.sort(Comparator.comparingLong(k -> sequence(k, "lock-")));
                            term(c, log, "curator-selector", pid, thread, path, kids.get(0), "lock-");
                        } catch (Throwable e) {
                            failure[0] = e;
                        } finally {
                            done.countDown();
                        }
                    }
                });
        selector.setId("curator-" + pid + "-" + thread);
        selector.start();
        try {
            if (!done.await(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no leadership in time");
            }
            if (failure[0] != null) {
                throw new IllegalStateException("term failed", failure[0]);
            }
        } finally {
            selector.close();
        }
    }
}
