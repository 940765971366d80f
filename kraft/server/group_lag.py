"""Consumer lag on the coordinator's ``/metrics``: for every group whose offsets this broker
coordinates, the committed offset of each partition, the partition's end (its high watermark:
what a read_uncommitted consumer can reach) and their difference, as Prometheus gauges.

Kafka's brokers leave this to outside exporters (Burrow, kafka-lag-exporter), which poll
OffsetFetch and ListOffsets; the coordinator already holds the committed offsets, so it only
has to ask for the ends: its own high watermark for a partition it leads, else one
ListOffsets per leader broker per ``kraft.group.lag.interval.ms`` (0: no sampling). A
partition whose end could not be read this round has no lag row rather than a stale one; a
lag below zero (a committed offset past the high watermark, after an unclean truncation or a
reset) is shown as it is, since hiding it would hide the problem.

Series are capped (``kraft.group.lag.max.series``, 10,000): a coordinator of many groups over
many partitions would otherwise hand Prometheus millions of series. Past the cap the groups
lagging most keep their partition rows, every other group its lag sum only (the sums are
capped the same way), and ``kraft_consumer_group_lag_series_dropped`` says how many rows were
left out.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kraft.errors import KraftError
from kraft.server.metrics import Gauge, GaugeTable

log = logging.getLogger("kraft.groups.lag")

LIST_OFFSETS_VERSION = 4  # current_leader_epoch, no flexible header: every leader answers it
LATEST = -1
KEY = ("group", "topic", "partition")


class GroupLag:
    def __init__(self, state, groups, listener: str, interval_ms: int, *, connect=None, timeout_ms: int = 5000,
                 max_series: int = 10_000, client_options: dict | None = None):
        """``state``: the BrokerState; ``groups``: the GroupDriver (its loaded shards);
        ``connect(host, port)``: a NodeClient-like object (tests give their own)."""
        self.state, self.groups, self.listener = state, groups, listener
        self.interval_ms, self.timeout_ms, self.max_series = interval_ms, timeout_ms, max_series
        self.connect = connect or (lambda host, port: _node_client(host, port, client_options or {}))
        self.clients: dict[int, tuple] = {}  # broker id -> ((host, port), client)
        self.committed = GaugeTable("kraft_consumer_group_committed_offset",
                                    "Committed offset of a group's partition (groups this broker coordinates)", KEY)
        self.lag = GaugeTable("kraft_consumer_group_lag",
                              "Partition high watermark minus the group's committed offset", KEY)
        self.lag_sum = GaugeTable("kraft_consumer_group_lag_sum", "A group's lag over all its partitions",
                                  ("group",))
        self.sampled = Gauge("kraft_consumer_group_lag_sampled_seconds",
                             "Wall-clock time of the last lag sample (0: none yet)")
        self.dropped = Gauge("kraft_consumer_group_lag_series_dropped",
                             "Partition and group rows left out of the lag gauges by kraft.group.lag.max.series")
        self._task: asyncio.Task | None = None
        self._timer = None

    def export(self, metrics) -> None:
        metrics.consumer_group_committed_offset = self.committed
        metrics.consumer_group_lag = self.lag
        metrics.consumer_group_lag_sum = self.lag_sum
        metrics.consumer_group_lag_sampled = self.sampled
        metrics.consumer_group_lag_series_dropped = self.dropped

    # --- schedule --------------------------------------------------------------------------------
    def start(self) -> None:
        if self.interval_ms > 0:
            self._timer = asyncio.get_running_loop().call_later(self.interval_ms / 1000, self._due)

    def _due(self) -> None:
        if self._task is None or self._task.done():  # never two samples at once
            self._task = asyncio.get_running_loop().create_task(self.sample())
        self._timer = asyncio.get_running_loop().call_later(self.interval_ms / 1000, self._due)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for _, client in self.clients.values():
            await client.close()
        self.clients.clear()

    # --- one sample ------------------------------------------------------------------------------
    def committed_offsets(self) -> dict[tuple, int]:
        out = {}
        for loaded in list(self.groups.shards.values()):
            if not loaded.ready:
                continue
            for group, offsets in loaded.shard.offsets.items():
                for (topic, partition), entry in offsets.items():
                    out[(group, topic, partition)] = entry.offset
        return out

    async def sample(self) -> None:
        committed = self.committed_offsets()
        ends = await self.end_offsets({(t, p) for _, t, p in committed})
        lag, total = {}, {}
        for (group, topic, partition), offset in committed.items():
            end = ends.get((topic, partition))
            if end is None:
                continue
            lag[(group, topic, partition)] = end - offset
            total[(group,)] = total.get((group,), 0) + end - offset
        committed, lag, total, dropped = self._capped(committed, lag, total)
        self.dropped.set(dropped)
        self.committed.replace(committed)
        self.lag.replace(lag)
        self.lag_sum.replace(total)
        self.sampled.set(round(time.time(), 3))

    def _capped(self, committed: dict, lag: dict, total: dict):
        """At most ``max_series`` rows per table: the partition rows of the groups lagging most
        (whole groups), the sums of the groups lagging most."""
        cap = self.max_series
        if len(committed) <= cap and len(total) <= cap:
            return committed, lag, total, 0
        rows: dict = {}
        for group, _, _ in committed:
            rows[group] = rows.get(group, 0) + 1
        order = sorted(rows, key=lambda g: (-total.get((g,), 0), g))
        kept, n = set(), 0
        for g in order:
            if n + rows[g] > cap:
                break
            kept.add(g)
            n += rows[g]
        sums = {(g,): total[(g,)] for g in order[:cap] if (g,) in total}
        dropped = len(committed) - n + len(total) - len(sums)
        return ({k: v for k, v in committed.items() if k[0] in kept}, {k: v for k, v in lag.items() if k[0] in kept},
                sums, dropped)

    async def end_offsets(self, partitions) -> dict[tuple, int]:
        ends, remote = {}, {}
        for topic, partition in partitions:
            _, reg = self.state.partition(topic, partition)
            if reg is None or reg.leader < 0:
                continue  # deleted, or offline: no end to compare with
            if reg.leader == self.state.broker_id:
                code, plog, reg = self.state.local_leader(topic, partition)
                if code == 0:
                    ends[(topic, partition)] = self.state.advance_high_watermark(plog, reg)
                continue
            remote.setdefault(reg.leader, []).append((topic, partition))
        answers = await asyncio.gather(*(self._ask(b, tps) for b, tps in remote.items()))
        for answer in answers:
            ends.update(answer)
        return ends

    async def _ask(self, broker_id: int, partitions) -> dict[tuple, int]:
        from kraft.protocol.messages import ListOffsetsRequest
        client = self._client(broker_id)
        if client is None:
            return {}
        by_topic: dict[str, list] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        P = ListOffsetsRequest.Topic.Partition
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.Topic(name=t, partitions=[P(partition_index=p, current_leader_epoch=-1,
                                                           timestamp=LATEST) for p in sorted(ps)])
            for t, ps in sorted(by_topic.items())])
        try:
            response = await client.request(request, LIST_OFFSETS_VERSION, timeout_ms=self.timeout_ms)
        except KraftError as exc:
            log.debug("lag: ListOffsets to broker %d failed: %s", broker_id, exc)
            return {}
        return {(t.name, p.partition_index): p.offset for t in response.topics for p in t.partitions
                if p.error_code == 0 and p.offset >= 0}

    def _client(self, broker_id: int):
        endpoint = self.state.leader_endpoint(broker_id, self.listener)
        if endpoint is None:
            return None
        address = (endpoint[0], endpoint[1])
        known = self.clients.get(broker_id)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:  # the broker moved: the old connection is closed in the background
            asyncio.get_running_loop().create_task(known[1].close())
        client = self.connect(*address)
        self.clients[broker_id] = (address, client)
        return client


def _node_client(host: str, port: int, options: dict):
    from kraft.client.node_client import NodeClient
    return NodeClient(host, port, client_id="kraft-group-lag", request_timeout_ms=5000, **options)
