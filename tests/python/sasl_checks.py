"""Checks shared by the SASL programs (kazoo_sasl.py, kazoo_gssapi.py)."""

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id


def owns_node(zk, sasl_id, path, timeout):
    """Starts `zk` (a SASL client), creates `path` readable only by `sasl:<sasl_id>`, reads it
    back and checks its ACL."""
    acl = [ACL(31, Id("sasl", sasl_id))]
    zk.start(timeout=timeout)
    zk.create(path, b"mine", acl=acl)
    data, _ = zk.get(path)
    assert data == b"mine", data
    assert zk.get_acls(path)[0] == acl


def refused_without_sasl(hosts, path):
    """A client without SASL may not read `path` (a node whose only ACL is a sasl id)."""
    plain = KazooClient(hosts=hosts, timeout=10)
    plain.start(timeout=20)
    try:
        plain.get(path)
    except NoAuthError:
        return
    finally:
        plain.stop()
        plain.close()
    raise AssertionError(f"a client without SASL read {path}")
