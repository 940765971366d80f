"""Node metrics and their Prometheus text endpoint.

A tiny registry (counters, gauges, histograms with fixed buckets) updated from the event
loop thread and, for fsync latency, from the flusher thread (plain int/float updates under
the GIL are atomic enough for monitoring). ``MetricsServer`` answers ``GET /metrics`` in
Prometheus text format 0.0.4 on its own port. Metrics never influence behaviour.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math

log = logging.getLogger("kraft.metrics")

# Seconds; fine at the bottom because fsync and commit latencies are sub-millisecond here.
LATENCY_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                   0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Counter:
    kind = "counter"

    def __init__(self, name: str, help: str):
        self.name, self.help, self.value = name, help, 0

    def inc(self, n: float = 1) -> None:
        self.value += n

    def render(self, labels: str) -> list[str]:
        return [f"{self.name}{labels} {self.value}"]


class Gauge(Counter):
    kind = "gauge"

    def set(self, v: float) -> None:
        self.value = v


class Histogram:
    kind = "histogram"

    def __init__(self, name: str, help: str, buckets=LATENCY_BUCKETS):
        self.name, self.help = name, help
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float, n: int = 1) -> None:
        """``n`` observations of ``v``."""
        self.counts[bisect.bisect_left(self.buckets, v)] += n
        self.sum += v * n
        self.count += n

    def quantile(self, q: float) -> float:
        """Upper bound of the bucket holding quantile ``q`` (nan when empty)."""
        if not self.count:
            return math.nan
        # The rank-th observation (1-based); the epsilon keeps 0.07 * 100 from becoming 8.
        rank = max(1, math.ceil(q * self.count - 1e-9))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                return self.buckets[i] if i < len(self.buckets) else math.inf
        return math.inf

    def render(self, labels: str) -> list[str]:
        inner = labels[1:-1] + "," if labels else ""
        out, cum = [], 0
        for bound, c in zip(self.buckets, self.counts):
            cum += c
            out.append(f'{self.name}_bucket{{{inner}le="{bound}"}} {cum}')
        out.append(f'{self.name}_bucket{{{inner}le="+Inf"}} {self.count}')
        out.append(f"{self.name}_sum{labels} {self.sum}")
        out.append(f"{self.name}_count{labels} {self.count}")
        return out


def label_value(text: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped (group ids and
    topic names come from clients)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class GaugeTable:
    """Gauges of one name told apart by several labels (``group``, ``topic``, ``partition``),
    the whole table replaced at once by whoever samples it (``replace``)."""

    kind = "gauge"

    def __init__(self, name: str, help: str, labels: tuple[str, ...]):
        self.name, self.help, self.labels = name, help, tuple(labels)
        self.rows: dict[tuple, float] = {}

    def replace(self, rows: dict[tuple, float]) -> None:
        self.rows = rows

    def render(self, labels: str) -> list[str]:
        inner = labels[1:-1] + "," if labels else ""
        out = []
        for key in sorted(self.rows):
            pairs = ",".join(f'{n}="{label_value(str(v))}"' for n, v in zip(self.labels, key))
            out.append(f"{self.name}{{{inner}{pairs}}} {self.rows[key]}")
        return out


# Milliseconds, for Kafka's *Ms controller histograms: 1-2.5-5 steps from 0.05 ms to 30 s.
MS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
              5000.0, 10000.0, 30000.0)


class HistogramFamily:
    """Histograms of one name told apart by one label (e.g. ``record_type``)."""

    kind = "histogram"

    def __init__(self, name: str, help: str, label: str, buckets=MS_BUCKETS):
        self.name, self.help, self.label, self.buckets = name, help, label, tuple(buckets)
        self.children: dict[str, Histogram] = {}

    def labels(self, value: str) -> Histogram:
        h = self.children.get(value)
        if h is None:
            h = self.children[value] = Histogram(self.name, self.help, self.buckets)
        return h

    def render(self, labels: str) -> list[str]:
        inner = labels[1:-1] + "," if labels else ""
        out = []
        for value in sorted(self.children):
            out += self.children[value].render(f'{{{inner}{self.label}="{value}"}}')
        return out


class NodeMetrics:
    """Every metric a node exports; attribute names are what the code updates."""

    def __init__(self, node_id: int):
        self.node_id = node_id
        self.commit_latency = Histogram("kraft_commit_latency_seconds", "Leader: propose to committed (HW passed it)")
        self.committed_records = Counter("kraft_committed_records_total", "Records committed and applied on this node (rate = commit rate)")
        self.high_watermark = Gauge("kraft_high_watermark", "Current high watermark of the metadata log")
        self.log_end_offset = Gauge("kraft_log_end_offset", "Log end offset of the metadata log")
        self.fetch_latency = Histogram("kraft_fetch_latency_seconds", "Follower: Fetch request round trip")
        self.fetch_handle_latency = Histogram("kraft_fetch_handle_seconds", "Leader: time to handle one Fetch")
        self.append_latency = Histogram("kraft_append_latency_seconds", "Time to append one batch to the log")
        self.fsync_latency = Histogram("kraft_fsync_latency_seconds", "fdatasync duration (flusher thread)")
        self.elections = Counter("kraft_elections_total", "Elections started by this node (candidate transitions)")
        self.leader_changes = Counter("kraft_leader_changes_total", "Leaders this node has learned of (a new leader or a new epoch with a known leader)")
        self.current_epoch = Gauge("kraft_current_epoch", "Current quorum epoch")
        self.current_leader = Gauge("kraft_current_leader", "Current leader id (-1 unknown)")
        self.is_leader = Gauge("kraft_is_leader", "1 when this node is the leader")
        self.rejected_connections = Counter("kraft_rejected_connections_total", "Connections closed for bad input")
        self.refused_connections = Counter("kraft_refused_connections_total",
                                           "Connections closed at once: max.connections.per.ip reached")
        self.idle_closed_connections = Counter("kraft_idle_connections_closed_total",
                                               "Connections closed after connections.max.idle.ms without activity")
        self.throttled_connections = Counter("kraft_throttled_connections_total",
                                             "Connections closed unread after a delay: connection_creation_rate")
        self.fetch_corrupt_records = Counter("kraft_fetch_corrupt_records_total",
                                             "Follower: fetched records that failed validation (not appended)")
        self.log_read_errors = Counter("kraft_log_read_errors_total",
                                       "Leader: log reads for a Fetch that failed (corrupt batch on disk)")
        self._render_hooks: list = []  # callables that refresh pulled values, in order

    def on_render(self, hook) -> None:
        """Call ``hook()`` before every render (values read at scrape time, not kept current)."""
        self._render_hooks.append(hook)

    def all(self):
        return [v for v in vars(self).values() if hasattr(v, "render")]

    def render(self) -> str:
        for hook in self._render_hooks:
            hook()
        labels = f'{{node_id="{self.node_id}"}}'
        lines = []
        for m in self.all():
            lines.append(f"# HELP {m.name} {m.help}")
            lines.append(f"# TYPE {m.name} {m.kind}")
            lines.extend(m.render(labels))
        return "\n".join(lines) + "\n"


class MetricsServer:
    """Minimal HTTP/1.0 endpoint: ``GET /metrics`` → text format; anything else → 404."""

    def __init__(self, metrics: NodeMetrics, host: str, port: int):
        self.metrics, self.host, self.port = metrics, host, port
        self._server = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.split()
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] == b"/metrics":
                body = self.metrics.render().encode()
                status = b"200 OK"
                ctype = b"text/plain; version=0.0.4; charset=utf-8"
            else:
                body, status, ctype = b"not found\n", b"404 Not Found", b"text/plain"
            writer.write(b"HTTP/1.0 " + status + b"\r\nContent-Type: " + ctype
                         + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def fetch_session_gauges(metrics: NodeMetrics, cache) -> None:
    """A broker's fetch session cache (KIP-227) on the node's metrics, refreshed at render:
    Kafka's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and evictions."""
    sessions = Gauge("kraft_fetch_sessions", "Incremental fetch sessions cached (NumIncrementalFetchSessions)")
    partitions = Gauge("kraft_fetch_session_partitions",
                       "Partitions held by cached fetch sessions (NumIncrementalFetchPartitionsCached)")
    evictions = Counter("kraft_fetch_session_evictions_total", "Fetch sessions evicted to make room")
    metrics.fetch_sessions, metrics.fetch_session_partitions, metrics.fetch_session_evictions = (
        sessions, partitions, evictions)
    def refresh() -> None:
        sessions.set(len(cache))
        partitions.set(cache.total_partitions())
        evictions.value = cache.evictions
    metrics.on_render(refresh)
