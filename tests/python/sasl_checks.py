"""Checks shared by the SASL programs (kazoo_sasl.py, kazoo_gssapi.py)."""

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError


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
