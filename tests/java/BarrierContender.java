// A Curator barrier member for the recipes' barrier interop tests.
//
// Usage:
//   BarrierContender barrier <connect string> <path> set|remove|wait
//     set and remove raise and lower a DistributedBarrier and print `curator-barrier <op>`;
//     wait prints `curator-barrier waiting` once it has seen the barrier up, then waits (at
//     most 120 s) and prints `curator-barrier passed` (exit 1 if it timed out).
//   BarrierContender double <connect string> <path> <member qty> <threads> <log file>
//     Each thread is one DistributedDoubleBarrier member: enter, then leave, each bounded by
//     120 s. Each member appends to the shared log, with System.nanoTime (CLOCK_MONOTONIC):
//       curator enter-start <ns> / curator entered <ns> / curator leave-start <ns> / curator left <ns>

import java.nio.channels.FileChannel;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;

public class BarrierContender {
    public static void main(String[] args) throws Exception {
        if (args.length == 4 && args[0].equals("barrier")) {
            barrier(args[1], args[2], args[3]);
        } else if (args.length == 6 && args[0].equals("double")) {
            doubleBarrier(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5]);
        } else {
            System.err.println("usage: BarrierContender barrier <connect> <path> set|remove|wait"
                    + " | double <connect> <path> <qty> <threads> <log>");
            System.exit(2);
        }
    }

    private static void barrier(String connect, String path, String op) throws Exception {
        CuratorFramework client = ContenderSupport.connect("BarrierContender", connect);
        DistributedBarrier barrier = new DistributedBarrier(client, path);
        switch (op) {
            case "set":
                barrier.setBarrier();
                System.out.println("curator-barrier set");
                break;
            case "remove":
                barrier.removeBarrier();
                System.out.println("curator-barrier remove");
                break;
            case "wait":
                if (client.checkExists().forPath(path) == null) {
                    System.err.println("the barrier is not up");
                    System.exit(1);
                }
                System.out.println("curator-barrier waiting");
                System.out.flush();
                if (!barrier.waitOnBarrier(120, TimeUnit.SECONDS)) {
                    System.err.println("waitOnBarrier timed out");
                    System.exit(1);
                }
                System.out.println("curator-barrier passed");
                break;
            default:
                System.err.println("unknown barrier op " + op);
                System.exit(2);
        }
        client.close();
    }

    private static void doubleBarrier(String connect, String path, int qty, int threads, String logPath)
            throws Exception {
        CuratorFramework client = ContenderSupport.connect("BarrierContender", connect);
        FileChannel log = ContenderSupport.openLog(logPath);
        ContenderSupport.runThreads(threads, thread -> {
            DistributedDoubleBarrier member = new DistributedDoubleBarrier(client, path, qty);
            ContenderSupport.append(log, "curator enter-start " + System.nanoTime() + "\n");
            if (!member.enter(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("enter timed out");
            }
            ContenderSupport.append(log, "curator entered " + System.nanoTime() + "\n");
            ContenderSupport.append(log, "curator leave-start " + System.nanoTime() + "\n");
            if (!member.leave(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("leave timed out");
            }
            ContenderSupport.append(log, "curator left " + System.nanoTime() + "\n");
        }, client, log);
    }
}
