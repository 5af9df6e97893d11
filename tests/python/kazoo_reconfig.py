"""kazoo's client.reconfig against a 3-member ensemble with reconfigEnabled=true and
skipACL=yes: /zookeeper/config's format, a stale from_config, a membership with no synced
quorum, and removing a member and adding it back (the reply carries the new configuration,
the data watch on /zookeeper/config fires).

Usage: REMOVE_ID=<a follower's id, not the connected member's> python3 kazoo_reconfig.py
host:port [check-name ...]. Driven by tests/tests/clients/kazoo.rs; prints PASS/FAIL per check and
"N passed, N failed" last.
"""

import os
import threading

from kazoo.exceptions import BadVersionError, NewConfigNoQuorumError

import zkcheck
from zkcheck import check, expect, expect_eq, expect_raises, new_client, wait_for, wait_until

CONFIG = "/zookeeper/config"


def config_lines(data):
    return data.decode().split("\n")


def stated_config(c, watch=None):
    """/zookeeper/config: never empty, on both servers, from the start."""
    data, stat = c.get(CONFIG, watch=watch)
    expect(data != b"", "a configuration from the start")
    return data, stat


@check
def config_node_format():
    c = new_client()
    data, _ = stated_config(c)
    lines = config_lines(data)
    expect_eq(len(lines), 4, "three server lines and the version")
    for n, line in enumerate(lines[:3], start=1):
        expect(line.startswith("server.%d=127.0.0.1:" % n), "server.%d line: %s" % (n, line))
        expect(":participant;127.0.0.1:" in line, "role and client address: %s" % line)
    expect(lines[3].startswith("version="), "version line: %s" % lines[3])


@check
def stale_from_config_is_bad_version():
    c = new_client()
    stated_config(c)
    expect_raises(BadVersionError, c.reconfig, None, os.environ["REMOVE_ID"], None, 12345)


@check
def no_synced_quorum():
    c = new_client()
    stated_config(c)
    dead = ",".join(
        "server.%d=127.0.0.1:%d:%d;%d" % (n, 1000 + n, 2000 + n, 3000 + n) for n in (7, 8, 9)
    )
    expect_raises(NewConfigNoQuorumError, c.reconfig, dead, None, None)


@check
def remove_and_add_back():
    c = new_client()
    gone = os.environ["REMOVE_ID"]
    fired = threading.Event()
    data, stat = stated_config(c, watch=lambda event: fired.set())
    line = [l for l in config_lines(data) if l.startswith("server.%s=" % gone)][0]
    data, stat = c.reconfig(None, gone, None, stat.mzxid)
    lines = config_lines(data)
    expect_eq(len(lines), 3, "two server lines and the version")
    expect(not any(l.startswith("server.%s=" % gone) for l in lines), "member removed")
    expect_eq(lines[-1], "version=%x" % stat.mzxid, "the version is the reconfig's zxid")
    wait_for(fired, "the /zookeeper/config watch")
    data, _ = c.reconfig(line, None, None)  # at once: the removal is in effect
    expect(line in config_lines(data), "member back: %s" % line)
    c.create("/after-reconfig", b"x")
    wait_until(lambda: c.exists("/after-reconfig") is not None, "a write after reconfig")


if __name__ == "__main__":
    zkcheck.main()
