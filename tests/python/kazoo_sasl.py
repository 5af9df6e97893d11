"""kazoo with SASL DIGEST-MD5 (sasl_options; needs pure-sasl).

Usage: kazoo_sasl.py USER PASSWORD HOSTS  (server without enforced authentication)

Checks: the user authenticates and owns a node whose only ACL is sasl:<USER>; a client
without SASL is refused it (NoAuth); a wrong password does not get a session. Prints
"N passed, N failed" last.
"""

import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KeeperState
from sasl_checks import owns_node, refused_without_sasl
from tally import check, finish


def sasl_client(hosts, user, password):
    return KazooClient(
        hosts=hosts,
        timeout=10,
        sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": password},
        connection_retry={"max_tries": 1, "delay": 0.2},
    )


def main():
    user, password, hosts = sys.argv[1:4]
    watchdog = threading.Timer(150, lambda: (print("watchdog: giving up", flush=True), sys.exit(2)))
    watchdog.daemon = True
    watchdog.start()
    zk = sasl_client(hosts, user, password)

    def owner():
        owns_node(zk, user, "/kazoo-sasl", 20)

    def stranger():
        refused_without_sasl(hosts, "/kazoo-sasl")

    def wrong_password():
        # kazoo may report the connection before the SASL exchange ends; the refusal then
        # shows as the client dropping to AUTH_FAILED and CLOSED (ZooKeeper answers
        # AUTHFAILED and closes the connection).
        bad = sasl_client(hosts, user, password + "-wrong")
        try:
            try:
                bad.start(timeout=10)
            except Exception:  # noqa: BLE001 - refused before start returned
                return
            deadline = time.time() + 15
            refused = (KeeperState.AUTH_FAILED, KeeperState.CLOSED)
            while time.time() < deadline and bad.client_state not in refused:
                time.sleep(0.1)
            assert bad.client_state in refused, bad.client_state
        finally:
            bad.stop()
            bad.close()

    check("SASL user owns a sasl ACL node", owner)
    check("a client without SASL is refused", stranger)
    check("a wrong password is refused", wrong_password)
    zk.stop()
    zk.close()
    finish()


if __name__ == "__main__":
    main()
