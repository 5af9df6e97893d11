"""kazoo over TLS (use_ssl=True) with its own CA, client certificate and key.

Usage: kazoo_tls.py TLS_HOSTS CA CERT KEY X509_ID OTHER_CERT OTHER_KEY PLAIN_HOSTS

Checks: a session over TLS reads and writes; a node whose only ACL is x509:<X509_ID> is
readable by this certificate and refused (NoAuth) to a client with OTHER_CERT; the plain
port (PLAIN_HOSTS, the last argument) still serves. Prints "N passed, N failed" last.
"""

import sys
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id
from tally import check, finish


def tls_client(hosts, ca, cert, key):
    return KazooClient(
        hosts=hosts,
        use_ssl=True,
        ca=ca,
        certfile=cert,
        keyfile=key,
        verify_certs=True,
        timeout=10,
        connection_retry={"max_tries": 3, "delay": 0.2},
    )


def main():
    tls_hosts, ca, cert, key, x509_id, other_cert, other_key, plain_hosts = sys.argv[1:9]
    watchdog = threading.Timer(180, lambda: (print("watchdog: giving up", flush=True), sys.exit(2)))
    watchdog.daemon = True
    watchdog.start()
    zk = tls_client(tls_hosts, ca, cert, key)
    other = tls_client(tls_hosts, ca, other_cert, other_key)

    def read_write():
        zk.start(timeout=20)
        zk.create("/kazoo-tls", b"over tls", makepath=True)
        data, _ = zk.get("/kazoo-tls")
        assert data == b"over tls", data

    def x509_acl_owner():
        acl = [ACL(31, Id("x509", x509_id))]
        zk.create("/kazoo-x509", b"mine", acl=acl)
        data, _ = zk.get("/kazoo-x509")
        assert data == b"mine", data
        got = zk.get_acls("/kazoo-x509")[0]
        assert got == acl, got

    def x509_acl_other():
        other.start(timeout=20)
        try:
            other.get("/kazoo-x509")
        except NoAuthError:
            return
        raise AssertionError("a client with another certificate read the node")

    def plain_port():
        plain = KazooClient(hosts=plain_hosts, timeout=10)
        plain.start(timeout=20)
        try:
            data, _ = plain.get("/kazoo-tls")
            assert data == b"over tls", data
        finally:
            plain.stop()
            plain.close()

    check("read and write over TLS", read_write)
    check("x509 ACL grants its subject", x509_acl_owner)
    check("x509 ACL refuses another certificate", x509_acl_other)
    check("plain port still serves", plain_port)
    for c in (zk, other):
        try:
            c.stop()
            c.close()
        except Exception:  # noqa: BLE001 - closing a client that never connected
            pass
    finish()


if __name__ == "__main__":
    main()
