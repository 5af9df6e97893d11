// A Curator CuratorCache beside the recipes' own on the same subtree (the cache interop
// test): prints `curator-cache-ready` once initialized; then, for every line `dump` on
// stdin, prints every cached node as `node <path> <data as hex>` (sorted by path) and `end`.
// Exits when stdin closes.
//
// Usage: CuratorCacheDump <connect string> <path>

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;

public class CuratorCacheDump {
    private static String hex(byte[] data) {
        StringBuilder s = new StringBuilder("x");
        if (data != null) {
            for (byte b : data) {
                s.append(String.format("%02x", b));
            }
        }
        return s.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CuratorCacheDump <connect> <path>");
            System.exit(2);
        }
        CuratorFramework client = ContenderSupport.connect("CuratorCacheDump", args[0]);
        CuratorCache cache = CuratorCache.build(client, args[1]);
        CountDownLatch initialized = new CountDownLatch(1);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forInitialized(initialized::countDown).build());
        cache.start();
        if (!initialized.await(120, TimeUnit.SECONDS)) {
            System.err.println("the cache did not load in time");
            System.exit(1);
        }
        System.out.println("curator-cache-ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.equals("dump")) {
                continue;
            }
            Map<String, String> nodes = new TreeMap<>();
            cache.stream().forEach((ChildData d) -> nodes.put(d.getPath(), hex(d.getData())));
            StringBuilder out = new StringBuilder();
            for (Map.Entry<String, String> e : nodes.entrySet()) {
                out.append("node ").append(e.getKey()).append(' ').append(e.getValue()).append('\n');
            }
            out.append("end");
            System.out.println(out);
            System.out.flush();
        }
        cache.close();
        client.close();
    }
}
