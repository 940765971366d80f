"""KIP-714 client metrics on the broker: GetTelemetrySubscriptions hands every client one
subscription (all metrics, cumulative, pushed every ``kraft.client.telemetry.push.interval.ms``)
and PushTelemetry's OTLP payload becomes rows of ``kraft_client_telemetry`` on /metrics, one per
(client instance, client id, metric, attributes). Kafka's brokers accept pushes only with a
``ClientTelemetry`` plugin installed; librdkafka ≥ 2.5 pushes by default whenever a broker
advertises these APIs, so kraft shows client-side metrics (queue times, request latencies,
per-node RTTs) with no plugin.

Checks as Kafka's ``ClientMetricsManager``: an unknown client instance or subscription id gets
UNKNOWN_SUBSCRIPTION_ID (the client asks again); a push before half the interval has passed,
THROTTLING_QUOTA_EXCEEDED (a terminating push is always taken); more than
``TELEMETRY_MAX_BYTES``, TELEMETRY_TOO_LARGE; a codec not offered, UNSUPPORTED_COMPRESSION_TYPE;
bytes that do not decode, INVALID_RECORD. A client not heard from for three intervals, or that
said it is terminating, loses its rows; at most ``MAX_SERIES`` rows are shown (the clients that
pushed last first).
"""

from __future__ import annotations

import logging
import time
import uuid
import zlib

from kraft.errors import ErrorCode as E
from kraft.errors import KraftError
from kraft.protocol import GetTelemetrySubscriptionsResponse, PushTelemetryResponse
from kraft.records import compression
from kraft.server.metrics import Counter, GaugeTable
from kraft.server.otlp_metrics import decode_metrics

log = logging.getLogger("kraft.telemetry")

TELEMETRY_MAX_BYTES = 1 << 20
MAX_SERIES = 10_000
#: zstd, lz4, snappy, gzip, none (Kafka's preference order)
ACCEPTED_COMPRESSION = (4, 3, 2, 1)
ALL_METRICS = ("",)  # KIP-714: one empty prefix subscribes to every metric
LABELS = ("client_instance_id", "client_id", "metric", "attributes")


class _Client:
    __slots__ = ("client_id", "last_push_ms", "last_seen_ms", "rows")

    def __init__(self, client_id: str, now_ms: int):
        self.client_id, self.last_push_ms, self.last_seen_ms, self.rows = client_id, -1, now_ms, {}


class ClientTelemetry:
    def __init__(self, push_interval_ms: int, clock_ms=None):
        self.interval_ms = push_interval_ms
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        # One subscription for every client: its id changes with what it asks for.
        self.subscription_id = zlib.crc32(f"{push_interval_ms}|{','.join(ALL_METRICS)}".encode()) & 0x7FFFFFFF
        self.clients: dict[uuid.UUID, _Client] = {}
        self.table = GaugeTable("kraft_client_telemetry",
                                "Client metrics pushed over KIP-714 (the latest value of each)", LABELS)
        self.pushes = Counter("kraft_client_telemetry_pushes_total", "PushTelemetry requests taken")
        self.refused = Counter("kraft_client_telemetry_refused_total", "PushTelemetry requests answered an error")

    def export(self, metrics) -> None:
        metrics.client_telemetry = self.table
        metrics.client_telemetry_pushes = self.pushes
        metrics.client_telemetry_refused = self.refused

    # --- requests ------------------------------------------------------------------------
    def get_subscriptions(self, request, client_id: str):
        now = self.clock_ms()
        self._expire(now)
        instance = request.client_instance_id
        if instance is None or instance.int == 0 or instance not in self.clients:
            if instance is None or instance.int == 0:
                instance = uuid.uuid4()
            self.clients[instance] = _Client(client_id or "", now)
        self.clients[instance].last_seen_ms = now
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=0, client_instance_id=instance, subscription_id=self.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION), push_interval_ms=self.interval_ms,
            telemetry_max_bytes=TELEMETRY_MAX_BYTES, delta_temporality=False, requested_metrics=list(ALL_METRICS))

    def push(self, request, client_id: str):
        code = self._push(request, client_id)
        if code:
            self.refused.value += 1
        else:
            self.pushes.value += 1
        return PushTelemetryResponse(throttle_time_ms=0, error_code=int(code))

    def _push(self, request, client_id: str) -> int:
        now = self.clock_ms()
        client = self.clients.get(request.client_instance_id)
        if client is None or request.subscription_id != self.subscription_id:
            return E.UNKNOWN_SUBSCRIPTION_ID
        client.last_seen_ms = now
        if not request.terminating and client.last_push_ms >= 0 and now - client.last_push_ms < self.interval_ms // 2:
            return E.THROTTLING_QUOTA_EXCEEDED
        data = request.metrics or b""
        if len(data) > TELEMETRY_MAX_BYTES:
            return E.TELEMETRY_TOO_LARGE
        codec = request.compression_type
        if codec != 0 and codec not in ACCEPTED_COMPRESSION:
            return E.UNSUPPORTED_COMPRESSION_TYPE
        try:
            raw = compression.decompress(codec, bytes(data), limit=8 * TELEMETRY_MAX_BYTES) if codec else data
            resource, points = decode_metrics(raw)
        except (KraftError, ValueError) as exc:
            log.debug("client %s: undecodable telemetry: %s", request.client_instance_id, exc)
            return E.INVALID_RECORD
        client.last_push_ms = now
        client.client_id = client_id or client.client_id
        if request.terminating:
            del self.clients[request.client_instance_id]
        else:
            instance = str(request.client_instance_id)
            client.rows = {(instance, client.client_id, name, _attr_text(attrs)): float(value)
                           for name, attrs, value in points}
        self._expire(now)
        return 0

    # --- the table ---------------------------------------------------------------------------
    def _expire(self, now: int) -> None:
        stale = [k for k, c in self.clients.items() if now - c.last_seen_ms > 3 * self.interval_ms]
        for k in stale:
            del self.clients[k]
        rows, n = {}, 0
        for c in sorted(self.clients.values(), key=lambda c: -c.last_push_ms):
            if n + len(c.rows) > MAX_SERIES:
                break
            rows.update(c.rows)
            n += len(c.rows)
        self.table.replace(rows)


def _attr_text(attrs: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(attrs.items()))
