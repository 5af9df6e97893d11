// A Curator LeaderLatch participant for the recipes' election interop tests.
//
// Usage: LatchContender <connect string> <latch path> <participants> <terms> <log file>
//
// Each participant (a thread with its own LeaderLatch on the path, all on one session)
// leads <terms> times: it starts a latch, awaits leadership, appends one line to the shared
// log, then closes the latch (steps down). A line is
//   curator-latch <pid> <thread> <token> <sequence> <start ns> <end ns> <node>
// where token is the latch node's czxid and times come from System.nanoTime()
// (CLOCK_MONOTONIC on Linux, the clock the Rust contender uses).

import java.nio.channels.FileChannel;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.zookeeper.data.Stat;

public class LatchContender {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: LatchContender <connect> <path> <participants> <terms> <log>");
            System.exit(2);
        }
        String path = args[1];
        int participants = Integer.parseInt(args[2]);
        int terms = Integer.parseInt(args[3]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = ContenderSupport.openLog(args[4]);
        CuratorFramework client = ContenderSupport.connect("LatchContender", args[0]);
        ContenderSupport.runThreads(participants, thread -> {
            for (int i = 0; i < terms; i++) {
                LeaderLatch latch = new LeaderLatch(client, path, "curator-" + pid + "-" + thread);
                latch.start();
                try {
                    if (!latch.await(120, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("no leadership in time");
                    }
                    String node = latch.getOurPath();
                    Stat stat = client.checkExists().forPath(node);
                    long start = System.nanoTime();
                    Thread.sleep(2);
                    long end = System.nanoTime();
                    if (!latch.hasLeadership()) {
                        throw new IllegalStateException("lost leadership during the term");
                    }
                    String name = node.substring(node.lastIndexOf('/') + 1);
                    long seq = Long.parseLong(name.substring(name.lastIndexOf("latch-") + 6));
                    ContenderSupport.append(log, "curator-latch " + pid + " " + thread + " "
                            + stat.getCzxid() + " " + seq + " " + start + " " + end + " " + name + "\n");
                } finally {
                    latch.close();
                }
            }
        }, client, log);
    }
}
