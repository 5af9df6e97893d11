"""kazoo with SASL GSSAPI (sasl_options; pure-sasl over pykerberos) and a Kerberos ticket
from the cache KRB5CCNAME names.

Usage: kazoo_gssapi.py ID HOSTS  (ID: the sasl id the server gives the ticket's principal)

The server's principal is zookeeper/localhost, and kazoo names the server's host from the
connect string, so HOSTS' 127.0.0.1 is connected to as localhost. Checks: the client owns a
node whose only ACL is sasl:<ID>; a client without SASL is refused it (NoAuth). Prints
"N passed, N failed" last.
"""

import sys
import threading

from kazoo.client import KazooClient
from sasl_checks import owns_node, refused_without_sasl
from tally import check, finish


def main():
    sasl_id, hosts = sys.argv[1:3]
    watchdog = threading.Timer(150, lambda: (print("watchdog: giving up", flush=True), sys.exit(2)))
    watchdog.daemon = True
    watchdog.start()
    kerberos_hosts = hosts.replace("127.0.0.1", "localhost")
    zk = KazooClient(
        hosts=kerberos_hosts,
        timeout=10,
        sasl_options={"mechanism": "GSSAPI", "service": "zookeeper"},
        connection_retry={"max_tries": 1, "delay": 0.2},
    )

    def owner():
        owns_node(zk, sasl_id, "/kazoo-krb", 30)

    def stranger():
        refused_without_sasl(hosts, "/kazoo-krb")

    check("Kerberos principal owns a sasl ACL node", owner)
    check("a client without SASL is refused", stranger)
    zk.stop()
    zk.close()
    finish()


if __name__ == "__main__":
    main()
