// A Curator LeaderSelector participant for the recipes' election interop tests.
//
// Usage: SelectorContender <connect string> <election path> <participants> <terms> <log file>
//
// Each participant (a thread with its own LeaderSelector on the path, all on one session)
// leads <terms> times: it starts a selector, and in takeLeadership appends one line to the
// shared log and returns (relinquishing leadership); then it closes the selector. A line is
//   curator-selector <pid> <thread> <token> <sequence> <start ns> <end ns> <node>
// where node is the selector's lock node (the first in sequence order while we lead: the
// selector leads by holding Curator's mutex on the path) and token its czxid.

import java.nio.channels.FileChannel;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.zookeeper.data.Stat;

public class SelectorContender {
    static long sequence(String name) {
        return Long.parseLong(name.substring(name.lastIndexOf("lock-") + 5));
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: SelectorContender <connect> <path> <participants> <terms> <log>");
            System.exit(2);
        }
        String path = args[1];
        int participants = Integer.parseInt(args[2]);
        int terms = Integer.parseInt(args[3]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = ContenderSupport.openLog(args[4]);
        CuratorFramework client = ContenderSupport.connect("SelectorContender", args[0]);
        ContenderSupport.runThreads(participants, thread -> {
            for (int i = 0; i < terms; i++) {
                CountDownLatch done = new CountDownLatch(1);
                final Throwable[] failure = new Throwable[1];
                LeaderSelector selector = new LeaderSelector(client, path,
                        new LeaderSelectorListenerAdapter() {
                            @Override
                            public void takeLeadership(CuratorFramework c) throws Exception {
                                try {
                                    List<String> kids = c.getChildren().forPath(path);
                                    kids.sort(Comparator.comparingLong(SelectorContender::sequence));
                                    String name = kids.get(0);
                                    Stat stat = c.checkExists().forPath(path + "/" + name);
                                    long start = System.nanoTime();
                                    Thread.sleep(2);
                                    long end = System.nanoTime();
                                    ContenderSupport.append(log, "curator-selector " + pid + " "
                                            + thread + " " + stat.getCzxid() + " " + sequence(name)
                                            + " " + start + " " + end + " " + name + "\n");
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
        }, client, log);
    }
}
