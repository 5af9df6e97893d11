// A Curator counter writer for the recipes' counter interop tests: DistributedAtomicLong and
// SharedCount on the paths the Rust side uses at the same time.
//
// Usage: CounterContender <connect string> <atomic long path> <shared count path> <increments>
//
// Adds 1 to the DistributedAtomicLong <increments> times (optimistic; an attempt that ran out
// of retries is tried again), then adds 1 to the SharedCount <increments> times (read, then
// trySetCount at that version, again until it takes), and prints
//   curator-counters <last atomic post value> <last shared count value>

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;

public class CounterContender {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: CounterContender <connect> <long path> <count path> <increments>");
            System.exit(2);
        }
        int increments = Integer.parseInt(args[3]);
        CuratorFramework client = ContenderSupport.connect("CounterContender", args[0]);
        DistributedAtomicLong counter = new DistributedAtomicLong(client, args[1], new RetryNTimes(50, 1));
        long lastLong = 0;
        for (int i = 0; i < increments; i++) {
            AtomicValue<Long> v = counter.increment();
            for (int attempt = 0; !v.succeeded() && attempt < 100; attempt++) {
                v = counter.increment();
            }
            if (!v.succeeded()) {
                throw new IllegalStateException("increment never took");
            }
            lastLong = v.postValue();
        }
        SharedCount count = new SharedCount(client, args[2], 0);
        count.start();
        int lastCount = 0;
        for (int i = 0; i < increments; i++) {
            while (true) {
                VersionedValue<Integer> seen = count.getVersionedValue();
                if (count.trySetCount(seen, seen.getValue() + 1)) {
                    lastCount = seen.getValue() + 1;
                    break;
                }
            }
        }
        count.close();
        System.out.println("curator-counters " + lastLong + " " + lastCount);
        client.close();
    }
}
