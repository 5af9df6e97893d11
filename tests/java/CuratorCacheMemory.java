// What a Curator CuratorCache of a subtree costs, measured like the recipes' `lock-contender
// cache-memory`: heap in use (after full collections) and the process's resident memory once
// connected, then once the cache is initialized.
//
// Usage: CuratorCacheMemory <connect string> <path>
// Prints: curator-cache-memory nodes=<n> heap_bytes_per_node=<x> rss_bytes_per_node=<y>

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;

public class CuratorCacheMemory {
    private static long heapUsed() {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return rt.totalMemory() - rt.freeMemory();
    }

    private static long rss() throws Exception {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IllegalStateException("no VmRSS");
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CuratorCacheMemory <connect> <path>");
            System.exit(2);
        }
        CuratorFramework client = ContenderSupport.connect("CuratorCacheMemory", args[0]);
        client.checkExists().forPath(args[1]);
        long heapBefore = heapUsed();
        long rssBefore = rss();
        CuratorCache cache = CuratorCache.build(client, args[1]);
        CountDownLatch initialized = new CountDownLatch(1);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forInitialized(initialized::countDown).build());
        cache.start();
        if (!initialized.await(240, TimeUnit.SECONDS)) {
            System.err.println("the cache did not load in time");
            System.exit(1);
        }
        long heapAfter = heapUsed();
        long rssAfter = rss();
        long nodes = cache.size();
        System.out.println("curator-cache-memory nodes=" + nodes
                + " heap_bytes_per_node=" + (heapAfter - heapBefore) / Math.max(1, nodes)
                + " rss_bytes_per_node=" + (rssAfter - rssBefore) / Math.max(1, nodes));
        cache.close();
        client.close();
    }
}
