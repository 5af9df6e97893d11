// Curator's CuratorCache (a persistent recursive watch, ZooKeeper's addWatch) and the
// PersistentWatcher recipe against a live server: the initial build sees existing nodes,
// create/change/delete events arrive for the whole subtree (including deletes by session
// close), a burst of changes ends with the cache equal to the server, persistent watches
// stay armed (even across the node's deletion), recursive ones never send NodeChildrenChanged.
//
// Usage: CuratorCacheEvents <connect>

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.watch.PersistentWatcher;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;

public class CuratorCacheEvents {
    static final String TREE = "/curator-cache/tree";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorCacheEvents", 100);
        try {
            String connect = args[0];
            CuratorFramework watcher = CuratorSupport.client(connect);
            CuratorFramework writer = CuratorSupport.client(connect);
            cache(connect, watcher, writer);
            persistent(watcher, writer);
            recursive(watcher, writer);
            watcher.close();
            writer.close();
        } catch (Throwable t) {
            CuratorSupport.abort("cache_unexpected", t);
        }
        CuratorSupport.finish();
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(ChildData d) {
        return d == null || d.getData() == null ? "null" : new String(d.getData(), StandardCharsets.UTF_8);
    }

    /** Waits for the next event line, or null after {@code seconds}. */
    static String next(BlockingQueue<String> q, long seconds) throws InterruptedException {
        return q.poll(seconds, TimeUnit.SECONDS);
    }

    /** Collects events until {@code count} arrived or {@code seconds} passed. */
    static List<String> collect(BlockingQueue<String> q, int count, long seconds) throws InterruptedException {
        List<String> out = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (out.size() < count) {
            long left = deadline - System.nanoTime();
            String e = left > 0 ? q.poll(left, TimeUnit.NANOSECONDS) : null;
            if (e == null) {
                break;
            }
            out.add(e);
        }
        return out;
    }

    static void cache(String connect, CuratorFramework watcher, CuratorFramework writer) throws Exception {
        writer.create().creatingParentsIfNeeded().forPath(TREE, b("root"));
        writer.create().forPath(TREE + "/a", b("1"));
        writer.create().forPath(TREE + "/b", b("2"));
        writer.create().forPath(TREE + "/b/c", b("3"));

        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CountDownLatch initialized = new CountDownLatch(1);
        CuratorCache cache = CuratorCache.build(watcher, TREE);
        cache.listenable().addListener(new CuratorCacheListener() {
            @Override
            public void event(Type type, ChildData oldData, ChildData data) {
                switch (type) {
                    case NODE_CREATED:
                        events.add("CREATED " + data.getPath() + " " + s(data));
                        break;
                    case NODE_CHANGED:
                        events.add("CHANGED " + data.getPath() + " " + s(oldData) + "->" + s(data));
                        break;
                    case NODE_DELETED:
                        events.add("DELETED " + oldData.getPath() + " " + s(oldData));
                        break;
                    default:
                        events.add("OTHER " + type);
                }
            }

            @Override
            public void initialized() {
                initialized.countDown();
            }
        });
        cache.start();

        boolean init = CuratorSupport.await(initialized, 20);
        List<String> initial = new ArrayList<>(events);
        events.clear();
        Collections.sort(initial);
        List<String> expected = List.of(
                "CREATED " + TREE + " root",
                "CREATED " + TREE + "/a 1",
                "CREATED " + TREE + "/b 2",
                "CREATED " + TREE + "/b/c 3");
        boolean contents = cache.size() == 4 && "3".equals(s(cache.get(TREE + "/b/c").orElse(null)));
        CuratorSupport.check(init && initial.equals(expected) && contents, "cache_initial_build",
                "initialized=" + init + " events=" + initial + " size=" + cache.size());

        writer.create().forPath(TREE + "/d", b("x"));
        String e1 = next(events, 10);
        CuratorSupport.check(("CREATED " + TREE + "/d x").equals(e1), "cache_sees_create", "event=" + e1);

        writer.create().forPath(TREE + "/b/c/e", b("deep"));
        String e2 = next(events, 10);
        CuratorSupport.check(("CREATED " + TREE + "/b/c/e deep").equals(e2), "cache_sees_deep_create", "event=" + e2);

        writer.setData().forPath(TREE + "/a", b("changed"));
        String e3 = next(events, 10);
        CuratorSupport.check(("CHANGED " + TREE + "/a 1->changed").equals(e3), "cache_sees_change", "event=" + e3);

        writer.delete().forPath(TREE + "/b/c/e");
        String e4 = next(events, 10);
        CuratorSupport.check(("DELETED " + TREE + "/b/c/e deep").equals(e4), "cache_sees_delete", "event=" + e4);

        // An ephemeral of another session disappears when that session closes.
        CuratorFramework shortLived = CuratorSupport.client(connect);
        shortLived.create().withMode(CreateMode.EPHEMERAL).forPath(TREE + "/eph", b("e"));
        String e5 = next(events, 10);
        shortLived.close();
        String e6 = next(events, 10);
        CuratorSupport.check(("CREATED " + TREE + "/eph e").equals(e5) && ("DELETED " + TREE + "/eph e").equals(e6),
                "cache_sees_session_close_delete", "events=" + e5 + ", " + e6);

        // A burst: 50 creates, 50 updates, then a recursive delete.
        int burst = 50;
        writer.create().forPath(TREE + "/burst", b("p"));
        for (int i = 0; i < burst; i++) {
            writer.create().forPath(TREE + "/burst/n" + i, b("v" + i));
        }
        for (int i = 0; i < burst; i++) {
            writer.setData().forPath(TREE + "/burst/n" + i, b("w" + i));
        }
        // Changes can coalesce if the cache reads a node after several updates; the final
        // state is what must match.
        boolean settled = CuratorSupport.waitFor(20000, () -> {
            try {
                return snapshot(cache).equals(server(writer, TREE));
            } catch (Exception e) {
                return false;
            }
        });
        // Listeners run after the storage is updated: give the last events a bounded moment.
        List<String> got = Collections.synchronizedList(new ArrayList<>());
        CuratorSupport.waitFor(5000, () -> {
            events.drainTo(got);
            return count(got, "CREATED " + TREE + "/burst") >= 1 + burst;
        });
        long creates = count(got, "CREATED " + TREE + "/burst");
        long changes = count(got, "CHANGED " + TREE + "/burst/n");
        CuratorSupport.check(creates == 1 + burst && changes >= 1 && settled, "cache_burst_matches_server",
                "created_events=" + creates + " changed_events=" + changes + " cache_equals_server=" + settled);
        writer.delete().deletingChildrenIfNeeded().forPath(TREE + "/burst");
        boolean gone = CuratorSupport.waitFor(20000,
                () -> cache.stream().noneMatch(d -> d.getPath().startsWith(TREE + "/burst")));
        List<String> dels = Collections.synchronizedList(new ArrayList<>());
        CuratorSupport.waitFor(5000, () -> {
            events.drainTo(dels);
            return count(dels, "DELETED " + TREE + "/burst") >= 1 + burst;
        });
        long deletes = count(dels, "DELETED " + TREE + "/burst");
        CuratorSupport.check(deletes == 1 + burst && dels.size() == deletes && gone, "cache_sees_recursive_delete",
                "deleted_events=" + deletes + " other_events=" + (dels.size() - deletes) + " cache_emptied=" + gone);
        Map<String, String> finalServer = server(writer, TREE);
        CuratorSupport.check(snapshot(cache).equals(finalServer), "cache_final_equals_server",
                "nodes=" + finalServer.keySet());
        cache.close();
    }

    static long count(List<String> events, String prefix) {
        synchronized (events) {
            return events.stream().filter(x -> x.startsWith(prefix)).count();
        }
    }

    /** The cache as path -> "data@version". */
    static Map<String, String> snapshot(CuratorCache cache) {
        return cache.stream().collect(Collectors.toMap(ChildData::getPath,
                d -> s(d) + "@" + d.getStat().getVersion(), (x, y) -> x, TreeMap::new));
    }

    /** The server's subtree as path -> "data@version". */
    static Map<String, String> server(CuratorFramework c, String path) throws Exception {
        Map<String, String> out = new TreeMap<>();
        org.apache.zookeeper.data.Stat stat = new org.apache.zookeeper.data.Stat();
        byte[] data = c.getData().storingStatIn(stat).forPath(path);
        out.put(path, (data == null ? "null" : new String(data, StandardCharsets.UTF_8)) + "@" + stat.getVersion());
        for (String child : c.getChildren().forPath(path)) {
            out.putAll(server(c, ZKPaths.makePath(path, child)));
        }
        return out;
    }

    /**
     * addWatch mode PERSISTENT straight through Curator's API: set on a missing node, it stays
     * armed for data and child changes of that one node, across its deletion and re-creation;
     * removeWatches (type Any) is accepted.
     */
    static void persistent(CuratorFramework watcher, CuratorFramework writer) throws Exception {
        String path = "/curator-cache/persistent";
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        Watcher w = e -> events.add(e.getType() + " " + e.getPath());
        watcher.watchers().add().withMode(AddWatchMode.PERSISTENT).usingWatcher(w).forPath(path);
        writer.create().forPath(path, b("0"));
        writer.setData().forPath(path, b("1"));
        writer.setData().forPath(path, b("2"));
        writer.create().forPath(path + "/child");
        writer.create().forPath(path + "/child/grandchild");
        writer.setData().forPath(path + "/child", b("x"));
        writer.delete().deletingChildrenIfNeeded().forPath(path + "/child");
        writer.setData().forPath(path, b("3"));
        writer.delete().forPath(path);
        writer.create().forPath(path, b("again"));
        List<String> got = collect(events, 8, 10);
        got.addAll(collect(events, 1, 1));
        List<String> expected = List.of(
                "NodeCreated " + path,
                "NodeDataChanged " + path,
                "NodeDataChanged " + path,
                "NodeChildrenChanged " + path,
                "NodeChildrenChanged " + path,
                "NodeDataChanged " + path,
                "NodeDeleted " + path,
                "NodeCreated " + path);
        CuratorSupport.check(got.equals(expected), "persistent_watch_events", "events=" + got);
        try {
            watcher.watchers().remove(w).ofType(Watcher.WatcherType.Any).forPath(path);
            CuratorSupport.pass("persistent_watch_removed", "removeWatches(type Any) accepted");
        } catch (Exception e) {
            CuratorSupport.fail("persistent_watch_removed", CuratorSupport.describe(e));
        }
    }

    /** addWatch mode PERSISTENT_RECURSIVE: created/changed/deleted for the subtree, no child events. */
    static void recursive(CuratorFramework watcher, CuratorFramework writer) throws Exception {
        String path = "/curator-cache/recursive";
        writer.create().creatingParentsIfNeeded().forPath(path, b("0"));
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        PersistentWatcher pw = new PersistentWatcher(watcher, path, true);
        CountDownLatch armed = new CountDownLatch(1);
        pw.getResetListenable().addListener(armed::countDown);
        pw.getListenable().addListener((WatchedEvent e) -> events.add(e.getType() + " " + e.getPath()));
        pw.start();
        boolean ok = CuratorSupport.await(armed, 10);
        writer.create().forPath(path + "/x", b("a"));
        writer.create().forPath(path + "/x/y", b("b"));
        writer.setData().forPath(path + "/x/y", b("c"));
        writer.setData().forPath(path, b("d"));
        writer.delete().forPath(path + "/x/y");
        writer.delete().forPath(path + "/x");
        writer.create().forPath("/curator-cache/recursive-sibling");
        List<String> got = collect(events, 6, 10);
        got.addAll(collect(events, 1, 1));
        List<String> expected = List.of(
                "NodeCreated " + path + "/x",
                "NodeCreated " + path + "/x/y",
                "NodeDataChanged " + path + "/x/y",
                "NodeDataChanged " + path,
                "NodeDeleted " + path + "/x/y",
                "NodeDeleted " + path + "/x");
        CuratorSupport.check(ok && got.equals(expected), "recursive_watch_events", "armed=" + ok + " events=" + got);
        pw.close();
    }
}
