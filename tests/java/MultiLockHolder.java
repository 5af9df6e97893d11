// A Curator lock holder for the recipes' multi-lock interop tests.
//
// Usage: MultiLockHolder <connect string> <path>[,<path>...]
//
// One path: an InterProcessMutex; several: an InterProcessMultiLock over InterProcessMutexes
// on those paths. Acquires (at most 120 s, exit 1 if it could not), prints `curator-acquired`,
// holds until a line arrives on stdin (or stdin closes), releases, prints `curator-released`.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;

public class MultiLockHolder {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: MultiLockHolder <connect> <path>[,<path>...]");
            System.exit(2);
        }
        CuratorFramework client = ContenderSupport.connect("MultiLockHolder", args[0]);
        List<String> paths = Arrays.asList(args[1].split(","));
        InterProcessLock lock = paths.size() == 1
                ? new InterProcessMutex(client, paths.get(0))
                : new InterProcessMultiLock(client, paths);
        if (!lock.acquire(120, TimeUnit.SECONDS)) {
            System.err.println("acquire timed out");
            System.exit(1);
        }
        System.out.println("curator-acquired");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        in.readLine();
        lock.release();
        System.out.println("curator-released");
        System.out.flush();
        client.close();
    }
}
