// Curator over SASL DIGEST-MD5 with a JAAS client file, as Kafka-style deployments run it:
// the client authenticates as sasl:<user>, owns a node with a sasl: ACL, and a client without
// SASL may not read it.
//
// Usage: CuratorSasl <client JAAS file> <connect>

import java.util.Collections;
import java.util.List;

import org.apache.curator.framework.CuratorFramework;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;

public class CuratorSasl {
    static final String PATH = "/curator-sasl";

    public static void main(String[] args) {
        CuratorSupport.init("CuratorSasl", 90);
        try {
            // The JAAS file's Client section: read by every ZooKeeper client of this JVM
            // created from now on (ZKClientConfig takes the system properties at creation).
            System.setProperty("java.security.auth.login.config", args[0]);
            String connect = args[1];
            CuratorFramework owner = CuratorSupport.client(connect);
            List<ACL> acl = Collections.singletonList(new ACL(ZooDefs.Perms.ALL, new Id("sasl", "bob")));
            owner.create().withACL(acl).forPath(PATH, "secret".getBytes());
            String read = new String(owner.getData().forPath(PATH));
            CuratorSupport.check("secret".equals(read), "curator_sasl_owner_reads", "read=" + read);
            List<ClientInfo> who = owner.getZookeeperClient().getZooKeeper().whoAmI();
            boolean isBob = who.stream().anyMatch(i -> "sasl".equals(i.getAuthScheme()) && "bob".equals(i.getUser()));
            CuratorSupport.check(isBob, "curator_sasl_whoami", "whoami=" + describe(who));

            System.setProperty("zookeeper.sasl.client", "false");
            CuratorFramework other = CuratorSupport.client(connect);
            String outcome;
            try {
                other.getData().forPath(PATH);
                outcome = "read the node";
            } catch (KeeperException.NoAuthException e) {
                outcome = "NoAuth";
            }
            CuratorSupport.check("NoAuth".equals(outcome), "curator_sasl_acl_refuses_others", "without SASL: " + outcome);
            other.close();
            owner.close();
        } catch (Throwable t) {
            CuratorSupport.abort("curator_sasl_unexpected", t);
        }
        CuratorSupport.finish();
    }

    static String describe(List<ClientInfo> who) {
        StringBuilder sb = new StringBuilder();
        for (ClientInfo i : who) {
            sb.append(i.getAuthScheme()).append(':').append(i.getUser()).append(' ');
        }
        return sb.toString().trim();
    }
}
