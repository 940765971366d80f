"""The ``connection_creation_rate`` quota of ``ip`` entities (KIP-612), as Kafka's
ConnectionQuotas applies it: each new connection is recorded in its address's rate; one that
takes the rate over the quota is un-recorded, never read from, and closed after the time the
rate needs to fall back (at most one quota window). The default entity covers every address, a
named one overrides it; removing the quota lifts it. Checked on the arithmetic and on a real
broker's listener, fed the quota the way the controller's records reach it."""

from __future__ import annotations

import socket
import struct
import time

from broker_helpers import BrokerThread

from kraft.metadata import MetadataDelta
from kraft.metadata.records import ClientQuotaRecord
from kraft.server.connection_limits import REFUSED, THROTTLED, ConnectionCaps, ip_connection_rates

IP = "ip"


def entities(**by_name) -> dict:
    """Quota entities as the image holds them; ``default=`` is the entity with no name."""
    out = {}
    for name, rate in by_name.items():
        out[((IP, None if name == "default" else name.replace("_", ".")),)] = {"connection_creation_rate": rate}
    return out


def test_rates_are_read_from_ip_entities_only():
    ents = {**entities(default=5, **{"10_0_0_1": 2}),
            (("user", "u"),): {"producer_byte_rate": 10.0},
            (("ip", "::ffff:10.0.0.2"),): {"connection_creation_rate": 3.0}}
    rates, default = ip_connection_rates(ents)
    assert default == 5
    assert rates == {"10.0.0.1": 2, "::ffff:a00:2": 3}


def test_the_first_connection_over_the_rate_is_throttled_for_the_time_the_rate_needs():
    caps = ConnectionCaps(2**31 - 1, samples=2, window_ms=1000)
    caps.set_quotas(entities(default=2))
    now = 1_000_000
    assert caps.admit("10.0.0.9", now) is None
    assert caps.admit("10.0.0.9", now) is None
    # Two in the first (full) window: a third makes the rate 3/s, over 2/s by half a window.
    assert caps.admit("10.0.0.9", now) == (THROTTLED, 500)
    # Un-recorded: it did not count, so the address is not throttled longer for it.
    assert caps.admit("10.0.0.9", now) == (THROTTLED, 500)
    assert caps.admit("10.0.0.8", now) is None  # another address has its own rate
    # Two windows later the samples have expired.
    assert caps.admit("10.0.0.9", now + 2_500) is None


def test_a_named_address_overrides_the_default_and_removal_lifts_the_quota():
    caps = ConnectionCaps(2**31 - 1, samples=2, window_ms=1000)
    caps.set_quotas(entities(default=1, **{"10_0_0_1": 100}))
    now = 5_000_000
    assert [caps.admit("10.0.0.1", now) for _ in range(50)] == [None] * 50
    assert caps.admit("10.0.0.2", now) is None
    assert caps.admit("10.0.0.2", now)[0] == THROTTLED
    caps.set_quotas({})
    assert [caps.admit("10.0.0.2", now) for _ in range(20)] == [None] * 20


def test_a_throttled_connection_does_not_count_against_max_connections_per_ip():
    caps = ConnectionCaps(1, samples=2, window_ms=1000)
    caps.set_quotas(entities(default=1))
    assert caps.admit("10.0.0.3", 0) is None
    assert caps.admit("10.0.0.3", 1)[0] == THROTTLED
    caps.release("10.0.0.3")
    assert caps.admit("10.0.0.3", 2_100) is None  # the cap saw one open connection, then none
    assert caps.admit("10.0.0.4", 2_100) is None
    caps.set_quotas({})
    assert caps.admit("10.0.0.4", 2_100) == (REFUSED, 1)


def _api_versions_answered(port: int, timeout: float = 3.0) -> tuple[bool, float]:
    """(answered?, seconds until answered or closed) for one ApiVersions v0 on a new connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    start = time.monotonic()
    try:
        body = struct.pack(">hhih", 18, 0, 7, 4) + b"rate"
        s.sendall(struct.pack(">i", len(body)) + body)
        got = s.recv(4)
        return len(got) == 4, time.monotonic() - start
    except (ConnectionResetError, socket.timeout):
        return False, time.monotonic() - start
    finally:
        s.close()


def test_a_broker_listener_closes_connections_over_the_ips_rate_unread(tmp_path):
    props = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
    with BrokerThread(str(tmp_path), {"t": 1}, props=props) as b:
        def set_quota(value):
            delta = MetadataDelta(b.node.state.image)
            delta.replay(ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="ip", entity_name=None)],
                                           key="connection_creation_rate", value=float(value or 0),
                                           remove=value is None))
            b.node.publish(delta.apply())
        port = b.node.port()
        assert all(_api_versions_answered(port)[0] for _ in range(5))  # no quota: every one served
        b.call(set_quota, 2)
        results = [_api_versions_answered(port) for _ in range(3)]
        assert [ok for ok, _ in results] == [True, True, False], results
        # The third takes the rate to 3/s, over 2/s by half a window: closed after ~500 ms, unread.
        assert 0.3 <= results[2][1] <= 1.2, results
        assert sum(s.throttled_total for s in b.node.servers.values()) == 1
        b.call(set_quota, None)
        assert all(_api_versions_answered(port)[0] for _ in range(5))
