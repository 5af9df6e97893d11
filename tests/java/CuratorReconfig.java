// Curator's reconfig() and getConfig() builders against a 3-member ensemble with
// reconfigEnabled=true and skipACL=yes: the configuration read with its version, a stale
// fromConfig refused with BADVERSION, a member removed and added back (each answer is the
// new configuration, the second sent as soon as the first is answered), and a watch on the
// configuration firing.
//
// Usage: CuratorReconfig <connect> <id of a follower to remove (not the connected member)>

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.api.CuratorWatcher;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorReconfig {
    public static void main(String[] args) {
        CuratorSupport.init("CuratorReconfig", 100);
        try {
            CuratorFramework c = CuratorSupport.client(args[0]);
            String gone = args[1];
            Stat stat = new Stat();
            List<String> lines = lines(c.getConfig().storingStatIn(stat).forEnsemble());
            String version = lines.get(lines.size() - 1);
            CuratorSupport.check(lines.size() == 4 && version.equals("version=" + Long.toHexString(stat.getMzxid())),
                    "reconfig_get_config", "lines=" + lines + " mzxid=" + Long.toHexString(stat.getMzxid()));
            String line = lines.stream().filter(l -> l.startsWith("server." + gone + "=")).findFirst().orElse("");
            boolean bad = false;
            try {
                c.reconfig().leaving(gone).fromConfig(12345).forEnsemble();
            } catch (KeeperException.BadVersionException e) {
                bad = true;
            }
            CuratorSupport.check(bad, "reconfig_stale_version", "BADVERSION=" + bad);
            CountDownLatch fired = new CountDownLatch(1);
            CuratorWatcher watcher = event -> fired.countDown();
            c.getConfig().usingWatcher(watcher).forEnsemble();
            List<String> removed = lines(c.reconfig().leaving(gone).fromConfig(stat.getMzxid()).forEnsemble());
            CuratorSupport.check(removed.size() == 3 && !removed.contains(line), "reconfig_remove",
                    "config=" + removed);
            CuratorSupport.check(CuratorSupport.await(fired, 30), "reconfig_watch_fires", "");
            List<String> back = lines(c.reconfig().joining(line).forEnsemble());
            CuratorSupport.check(back.size() == 4 && back.contains(line), "reconfig_add_back", "config=" + back);
            c.close();
        } catch (Throwable t) {
            CuratorSupport.abort("reconfig_unexpected", t);
        }
        CuratorSupport.finish();
    }

    static List<String> lines(byte[] data) {
        return Arrays.asList(new String(data, StandardCharsets.UTF_8).split("\n"));
    }
}
