"""KIP-714 client metrics without processes: the OTLP decoder against a hand-encoded
MetricsData, and the broker's subscription/push rules (unknown instance or subscription,
throttling, size, codec, garbage, termination, expiry), each visible in the gauge table."""

from __future__ import annotations

import struct
import uuid
from types import SimpleNamespace as NS

from kraft.errors import ErrorCode as E
from kraft.protocol import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from kraft.records import compression
from kraft.server.client_telemetry import TELEMETRY_MAX_BYTES, ClientTelemetry
from kraft.server.otlp_metrics import decode_metrics


def _v(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _f(number: int, payload: bytes) -> bytes:  # a length-delimited field
    return _v(number << 3 | 2) + _v(len(payload)) + payload


def _kv(key: str, value) -> bytes:
    any_value = _f(1, value.encode()) if isinstance(value, str) else _v(3 << 3) + _v(value)
    return _f(1, key.encode()) + _f(2, any_value)


def _point(value, **attrs) -> bytes:
    body = b"".join(_f(7, _kv(k, v)) for k, v in attrs.items())
    if isinstance(value, float):
        return body + _v(4 << 3 | 1) + struct.pack("<d", value)
    return body + _v(6 << 3 | 1) + struct.pack("<q", value)


def metrics_data(points) -> bytes:
    """MetricsData with one resource (client.id attribute) and one metric per (name, kind, points)."""
    metrics = b""
    for name, kind, pts in points:
        data = b"".join(_f(1, _point(v, **a)) for v, a in pts)
        metrics += _f(2, _f(1, name.encode()) + _f(5 if kind == "gauge" else 7, data))
    resource = _f(1, _f(1, _kv("client_rack", "r1")))
    return _f(1, resource + _f(2, metrics))


SAMPLE = [("org.apache.kafka.producer.node.request.latency.avg", "gauge", [(1.5, {"node.id": "1"}),
                                                                            (2.25, {"node.id": "2"})]),
          ("org.apache.kafka.producer.record.queue.time.max", "gauge", [(7, {})]),
          ("org.apache.kafka.producer.connection.creation.total", "sum", [(3, {"node.id": "1"})])]


def test_the_decoder_reads_gauges_and_sums_with_their_attributes():
    resource, points = decode_metrics(metrics_data(SAMPLE))
    assert resource == {"client_rack": "r1"}
    assert points == [("org.apache.kafka.producer.node.request.latency.avg", {"node.id": "1"}, 1.5),
                      ("org.apache.kafka.producer.node.request.latency.avg", {"node.id": "2"}, 2.25),
                      ("org.apache.kafka.producer.record.queue.time.max", {}, 7),
                      ("org.apache.kafka.producer.connection.creation.total", {"node.id": "1"}, 3)]


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


def push(t, instance, sub, data, codec=0, terminating=False):
    return t.push(PushTelemetryRequest(client_instance_id=instance, subscription_id=sub, terminating=terminating,
                                       compression_type=codec, metrics=data), "app-1").error_code


def test_subscribe_push_and_every_refusal():
    clock = Clock()
    t = ClientTelemetry(1000, clock_ms=clock)
    sub = t.get_subscriptions(GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)), "app-1")
    assert sub.error_code == 0 and sub.client_instance_id.int != 0 and sub.requested_metrics == [""]
    assert sub.push_interval_ms == 1000 and not sub.delta_temporality and 4 in sub.accepted_compression_types
    me, data = sub.client_instance_id, metrics_data(SAMPLE)
    assert push(t, uuid.uuid4(), sub.subscription_id, data) == E.UNKNOWN_SUBSCRIPTION_ID
    assert push(t, me, sub.subscription_id + 1, data) == E.UNKNOWN_SUBSCRIPTION_ID
    assert push(t, me, sub.subscription_id, compression.compress(4, data), codec=4) == 0
    rows = t.table.rows
    assert rows[(str(me), "app-1", "org.apache.kafka.producer.node.request.latency.avg", "node.id=2")] == 2.25
    assert len(rows) == 4
    assert push(t, me, sub.subscription_id, data) == E.THROTTLING_QUOTA_EXCEEDED  # too soon
    clock.now += 600
    assert push(t, me, sub.subscription_id, b"\xff" * 10) == E.INVALID_RECORD
    assert push(t, me, sub.subscription_id, data, codec=9) == E.UNSUPPORTED_COMPRESSION_TYPE
    assert push(t, me, sub.subscription_id, b"\0" * (TELEMETRY_MAX_BYTES + 1)) == E.TELEMETRY_TOO_LARGE
    assert t.refused.value == 6 and t.pushes.value == 1
    # a second client; the first goes quiet and expires after three intervals
    other = t.get_subscriptions(GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)), "app-2")
    clock.now += 3100
    assert push(t, other.client_instance_id, other.subscription_id, data) == 0
    assert {k[0] for k in t.table.rows} == {str(other.client_instance_id)}
    # terminating: taken even if early, and its rows go
    assert push(t, other.client_instance_id, other.subscription_id, data, terminating=True) == 0
    assert t.table.rows == {}
