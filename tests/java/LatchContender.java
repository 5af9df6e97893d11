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
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public class LatchContender {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: LatchContender <connect> <path> <participants> <terms> <log>");
            System.exit(2);
        }
        String connect = args[0];
        String path = args[1];
        int participants = Integer.parseInt(args[2]);
        int terms = Integer.parseInt(args[3]);
        long pid = ProcessHandle.current().pid();
        FileChannel log = FileChannel.open(Paths.get(args[4]), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10000, 10000,
                new ExponentialBackoffRetry(100, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.err.println("LatchContender: no connection to " + connect);
            System.exit(1);
        }
        List<Thread> workers = new ArrayList<>();
        final Throwable[] failure = new Throwable[1];
        for (int t = 0; t < participants; t++) {
            final int thread = t;
            Thread w = new Thread(() -> {
                try {
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
                            String line = "curator-latch " + pid + " " + thread + " " + stat.getCzxid() + " "
                                    + seq + " " + start + " " + end + " " + name + "\n";
                            synchronized (log) {
                                log.write(ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8)));
                            }
                        } finally {
                            latch.close();
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
