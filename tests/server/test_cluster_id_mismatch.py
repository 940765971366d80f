"""A node formatted with another cluster id must be visible in the logs on both sides, at a
bounded rate (kraft/server/controller_handlers.py, kraft/server/raft_driver.py,
kraft/server/log_throttle.py): the node that receives the request warns, naming the peer and
both ids; the node whose request is refused logs an error saying its cluster id does not
match. Two real controllers over real TCP, clusters "alpha" and "bravo"."""

from __future__ import annotations

import logging

from kraft.server.log_throttle import LogThrottle

from controller_helpers import Controller
from server_helpers import run, settle


def test_log_throttle_allows_one_line_per_key_per_interval_and_counts_the_rest():
    now = [0.0]
    t = LogThrottle(10.0, clock=lambda: now[0])
    assert t.allow("a") == 0
    assert t.allow("a") is None and t.allow("a") is None
    assert t.allow("b") == 0  # keys are independent
    now[0] = 9.9
    assert t.allow("a") is None
    now[0] = 10.0
    assert t.allow("a") == 3  # three held back since the last line
    assert t.allow("a") is None


def _lines(caplog, logger, level, *needles):
    return [r.getMessage() for r in caplog.records
            if r.name == logger and r.levelno == level and all(n in r.getMessage() for n in needles)]


def test_a_node_of_another_cluster_is_logged_on_both_sides_once_per_interval(caplog):
    caplog.set_level(logging.INFO)

    async def main():
        a = Controller([1, 2], node_id=1, cluster_id="alpha")
        b = Controller([1, 2], node_id=2, cluster_id="bravo")
        ports = {1: await a.listen(), 2: await b.listen()}
        await a.start(ports, real_peers=True)
        await b.start(ports, real_peers=True)
        for node in (a, b):  # an interval longer than the test: a second line would be a flood
            node.handlers.peer_log_throttle.interval_s = 3600
            node.driver.peer_log_throttle.interval_s = 3600
        try:
            # Both campaign and both are refused, over and over.
            assert await settle(lambda: all(len(n.handlers.peer_log_throttle._held) and
                                            max(n.handlers.peer_log_throttle._held.values()) >= 3 for n in (a, b)),
                                timeout=10)
        finally:
            await a.close()
            await b.close()
        assert not a.core.is_leader() and not b.core.is_leader()

    run(main())
    for me, mine, peer, theirs in ((1, "alpha", 2, "bravo"), (2, "bravo", 1, "alpha")):
        warned = _lines(caplog, "kraft.handlers", logging.WARNING, f"from node {peer} at 127.0.0.1:",
                        repr(theirs), repr(mine), "INCONSISTENT_CLUSTER_ID")
        assert len(warned) == 1, (me, warned)
        refused = _lines(caplog, "kraft.raft", logging.ERROR, f"node {me}: node {peer} rejected",
                         repr(mine), "does not match")
        assert len(refused) == 1, (me, refused)
