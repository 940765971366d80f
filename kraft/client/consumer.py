"""Consumer: an asyncio Kafka consumer of assigned partitions that hands back whole fetch
responses as columns (numpy arrays decoded by the native codec), not one object per record.

For reading a lot fast from Python: analytics, replay, copying a topic. Partitions are
assigned by the caller (no consumer group, no committed offsets: this module must not grow
a group protocol); positions are set with ``seek*`` (ListOffsets for beginning, end and
timestamps). ``poll`` sends one Fetch (v12) per partition leader, keeps the next one in
flight while the caller works on what came back, CRC-checks every batch (``scan_batches``)
and decodes the records with ``log_columns`` into a :class:`FetchedRecords` per partition.
Leaders come from Metadata and are looked up again when a broker answers
NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION or when a
connection fails. read_uncommitted only: control batches are skipped.

Example::

    import asyncio
    from kraft.client.consumer import Consumer

    async def main():
        async with Consumer("127.0.0.1:9092") as consumer:
            await consumer.assign([("orders", 0)])
            await consumer.seek_to_beginning()
            while True:
                for part in await consumer.poll(timeout_ms=1000):
                    print(part.topic, part.partition, len(part), part.offsets[-1], part.value(0))

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np

from kraft.client.node_client import NodeClient
from kraft.errors import CorruptRecordError, ErrorCode, KraftError, NetworkError, OffsetOutOfRangeError
from kraft.protocol import FetchRequest, ListOffsetsRequest, MetadataRequest
from kraft.records import log_columns, scan_batches

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
FETCH_VERSION, LIST_OFFSETS_VERSION, METADATA_VERSION = 12, 7, 12
#: Answers that mean "ask Metadata who leads now, then fetch again".
_RETRY_AFTER_METADATA = frozenset(int(c) for c in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS))
_ATTRIBUTES_LOW_BYTE, _CONTROL_BIT = 22, 0x20


class ConsumerError(KraftError):
    """A partition answered with an error the consumer does not retry; ``code`` is Kafka's."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@dataclass
class FetchedRecords:
    """The records one fetch returned for one partition, as Arrow-layout columns: row ``i``
    has ``offsets[i]``, ``timestamps[i]`` and key/value bytes ``key_data[key_offsets[i]:
    key_offsets[i + 1]]`` (None when bit ``i`` of ``key_valid`` is clear; the same for values).
    ``high_watermark`` is the partition's as the leader answered."""

    topic: str
    partition: int
    offsets: np.ndarray
    timestamps: np.ndarray
    key_valid: np.ndarray
    key_offsets: np.ndarray
    key_data: np.ndarray
    value_valid: np.ndarray
    value_offsets: np.ndarray
    value_data: np.ndarray
    high_watermark: int

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def nbytes(self) -> int:
        """Key and value bytes of every row."""
        return int(self.key_offsets[-1]) + int(self.value_offsets[-1]) if len(self) else 0

    @staticmethod
    def _cell(valid, offsets, data, i: int) -> bytes | None:
        if not valid[i >> 3] & (1 << (i & 7)):
            return None
        return data[offsets[i]:offsets[i + 1]].tobytes()

    def key(self, i: int) -> bytes | None:
        return self._cell(self.key_valid, self.key_offsets, self.key_data, i)

    def value(self, i: int) -> bytes | None:
        return self._cell(self.value_valid, self.value_offsets, self.value_data, i)

    def values(self) -> list:
        return [self.value(i) for i in range(len(self))]


def decode_records(topic: str, partition: int, records, first_offset: int, high_watermark: int, scan=None):
    """``(FetchedRecords or None, next fetch offset)`` for a fetched records field: every whole
    batch CRC-checked, control batches left out, rows below ``first_offset`` dropped (a
    compressed batch may start before it). A trailing partial batch (a fetch cut at its max
    bytes) is ignored, as Kafka's consumers do; anything else invalid raises CorruptRecordError.
    ``scan``: the ``scan_batches(records)`` the caller already has."""
    if records is None or not len(records):
        return None, first_offset
    if scan is None:
        scan = scan_batches(records)
    if scan.error is not None and scan.error != "partial":
        raise CorruptRecordError(f"{topic}-{partition}: {scan.error} (fetch at offset {first_offset})")
    if not len(scan):
        return None, first_offset
    next_offset = max(first_offset, int(scan.last_offsets[-1]) + 1)
    positions = scan.positions
    raw = np.frombuffer(records, np.uint8)
    data = raw[positions + _ATTRIBUTES_LOW_BYTE] & _CONTROL_BIT == 0
    if not data.all():
        positions = positions[data]
        if not len(positions):
            return None, next_offset
    cols = log_columns(records, np.ascontiguousarray(positions), first_offset, next_offset)
    fetched = FetchedRecords(topic, partition, cols[0], cols[1], cols[6], cols[7], cols[8], cols[9], cols[10],
                             cols[11], high_watermark)
    return (fetched if len(fetched) else None), next_offset


class _Assigned:
    __slots__ = ("position", "leader", "epoch", "retry_at")

    def __init__(self):
        self.position: int | None = None  # None until a seek
        self.leader = -1
        self.epoch = -1
        self.retry_at = 0.0  # monotonic time before which it is not fetched (after an error)


class Consumer:
    """Assigned partitions read from their leaders. Every coroutine runs on the caller's loop;
    one task uses a consumer at a time."""

    def __init__(self, bootstrap: str | list[str], *, client_id: str = "kraft-consumer",
                 max_bytes: int = 64 << 20, partition_max_bytes: int = 8 << 20, max_wait_ms: int = 500,
                 min_bytes: int = 1, request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100,
                 auto_offset_reset: str = "none"):
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}")
        addresses = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
        self._bootstrap = [_split(a) for a in ",".join(addresses).split(",") if a.strip()]
        self.client_id = client_id
        self.max_bytes, self.partition_max_bytes = max_bytes, partition_max_bytes
        self.max_wait_ms, self.min_bytes = max_wait_ms, min_bytes
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000
        self.auto_offset_reset = auto_offset_reset
        self._assigned: dict[tuple[str, int], _Assigned] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._clients: dict = {}  # node id (or (host, port) for bootstrap) -> NodeClient
        self._inflight: dict[int, tuple[asyncio.Task, dict]] = {}  # leader -> (task, {tp: offset})
        self._stale = True  # leaders must be looked up before the next fetch

    # --- assignment and positions ---------------------------------------------------------------
    async def assign(self, partitions) -> None:
        """Read exactly these ``(topic, partition)`` pairs from now on (positions of partitions
        kept from the previous assignment stay; new ones need a ``seek*``)."""
        wanted = [(t, int(p)) for t, p in partitions]
        self._assigned = {tp: self._assigned.get(tp) or _Assigned() for tp in wanted}
        self._drop_inflight()
        await self._refresh_metadata()

    def assignment(self) -> list[tuple[str, int]]:
        return list(self._assigned)

    def position(self, topic: str, partition: int) -> int | None:
        """The offset the next record returned for the partition will have (at least)."""
        return self._get(topic, partition).position

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._get(topic, partition).position = int(offset)
        self._drop_inflight()

    async def seek_to_beginning(self, *partitions) -> None:
        """Log start offsets of ``partitions`` (default: every assigned one)."""
        await self._seek_listed(partitions, EARLIEST)

    async def seek_to_end(self, *partitions) -> None:
        """High watermarks: only records written after this are returned."""
        await self._seek_listed(partitions, LATEST)

    async def seek_to_timestamp(self, timestamp_ms: int, *partitions) -> None:
        """The first offset whose record timestamp is >= ``timestamp_ms`` (the end when none)."""
        if timestamp_ms < 0:
            raise ValueError("timestamp_ms must be >= 0")
        await self._seek_listed(partitions, int(timestamp_ms))

    async def offsets_for(self, timestamp: int, partitions=None) -> dict:
        """ListOffsets: ``{(topic, partition): offset}`` for ``timestamp`` (EARLIEST, LATEST or
        ms), -1 where no record has such a timestamp."""
        tps = list(partitions) if partitions else list(self._assigned)
        for _ in range(10):
            if self._stale:
                await self._refresh_metadata()
            by_leader: dict[int, list] = {}
            for tp in tps:
                by_leader.setdefault(self._leader_of(tp), []).append(tp)
            out, retry = {}, by_leader.pop(-1, None) is not None
            for leader, group in by_leader.items():
                answers = await self._list_offsets(leader, group, timestamp)
                for tp, (code, offset) in answers.items():
                    if code == 0:
                        out[tp] = offset
                    elif code in _RETRY_AFTER_METADATA:
                        retry = self._stale = True
                    else:
                        raise ConsumerError(f"ListOffsets {tp[0]}-{tp[1]}: {ErrorCode(code).name}", code)
            if not retry:
                return out
            await asyncio.sleep(self.retry_backoff)
        raise ConsumerError(f"ListOffsets: no leader answered for {tps}", int(ErrorCode.LEADER_NOT_AVAILABLE))

    async def _seek_listed(self, partitions, timestamp: int) -> None:
        tps = [(t, int(p)) for t, p in partitions] or list(self._assigned)
        for tp in tps:
            self._get(*tp)
        found = await self.offsets_for(timestamp, tps)
        missing = [tp for tp in tps if found.get(tp, -1) < 0]
        if missing:  # no record at or after the timestamp: the end, as Kafka's consumer does
            found.update(await self.offsets_for(LATEST, missing))
        for tp in tps:
            self._assigned[tp].position = found[tp]
        self._drop_inflight()

    def _get(self, topic: str, partition: int) -> _Assigned:
        a = self._assigned.get((topic, partition))
        if a is None:
            raise KeyError(f"{topic}-{partition} is not assigned")
        return a

    # --- polling -------------------------------------------------------------------------------
    async def poll(self, timeout_ms: int = 1000) -> list[FetchedRecords]:
        """The records of the next fetch answer that has any (one list item per partition),
        or [] after ``timeout_ms``. Positions move past what is returned; the following fetch
        is already on its way when this returns."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if self._stale:
                await self._refresh_metadata()
            self._start_fetches()
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            tasks = [t for t, _ in self._inflight.values()]
            if not tasks:  # everything backs off or has no position
                await asyncio.sleep(min(left, self.retry_backoff))
                continue
            done, _ = await asyncio.wait(tasks, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            out = []
            for leader, (task, asked) in list(self._inflight.items()):
                if task in done:
                    del self._inflight[leader]
                    out.extend(self._take(leader, task, asked))
            if out:
                return out

    def _start_fetches(self) -> None:
        now = time.monotonic()
        by_leader: dict[int, dict] = {}
        for tp, a in self._assigned.items():
            if a.position is None or a.leader < 0 or a.retry_at > now:
                continue
            by_leader.setdefault(a.leader, {})[tp] = a.position
        for leader, asked in by_leader.items():
            if leader not in self._inflight:
                self._inflight[leader] = (asyncio.ensure_future(self._fetch(leader, asked)), asked)

    async def _fetch(self, leader: int, asked: dict):
        F = FetchRequest
        topics: dict[str, list] = {}
        for (topic, p), offset in asked.items():
            topics.setdefault(topic, []).append(F.Topic.Partition(
                partition=p, current_leader_epoch=self._assigned[(topic, p)].epoch, fetch_offset=offset,
                log_start_offset=-1, partition_max_bytes=self.partition_max_bytes))
        req = F(replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                topics=[F.Topic(topic=t, partitions=ps) for t, ps in topics.items()])
        return await self._client(leader).request(req, FETCH_VERSION, self.max_wait_ms + self.request_timeout_ms)

    def _take(self, leader: int, task: asyncio.Task, asked: dict) -> list[FetchedRecords]:
        """Apply one fetch answer: errors mark partitions for a metadata lookup; records move
        positions (then the next fetch goes out) and are decoded."""
        exc = task.exception()
        if exc is not None:
            if not isinstance(exc, NetworkError):
                raise exc
            self._backoff(asked, leader)
            return []
        resp = task.result()
        if resp.error_code:
            raise ConsumerError(f"Fetch from node {leader}: {ErrorCode(resp.error_code).name}", resp.error_code)
        got = []
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                a = self._assigned.get(tp)
                if a is None or asked.get(tp) != a.position:  # sought or unassigned meanwhile
                    continue
                code = p.error_code
                if code == 0:
                    if p.records is not None and len(p.records):
                        got.append((tp, a, p))
                elif code in _RETRY_AFTER_METADATA:
                    self._backoff({tp: a.position}, leader)
                elif code == int(ErrorCode.OFFSET_OUT_OF_RANGE) and self.auto_offset_reset != "none":
                    a.position = None
                    self._stale = True
                    asyncio.ensure_future(self._reset(tp))
                elif code == int(ErrorCode.OFFSET_OUT_OF_RANGE):
                    raise OffsetOutOfRangeError(f"{tp[0]}-{tp[1]}: offset {a.position} is outside the log "
                                                f"(log start {p.log_start_offset}, high watermark {p.high_watermark})")
                else:
                    raise ConsumerError(f"Fetch {tp[0]}-{tp[1]}: {ErrorCode(code).name}", code)
        # Move every position first and send the next fetch, then decode while it travels.
        pending = []
        for tp, a, p in got:
            scan = scan_batches(p.records)
            if scan.error is not None and scan.error != "partial":
                raise CorruptRecordError(f"{tp[0]}-{tp[1]}: {scan.error} (fetch at offset {a.position})")
            first = a.position
            if len(scan):
                a.position = max(first, int(scan.last_offsets[-1]) + 1)
            pending.append((tp, p, first, scan))
        if got:
            self._start_fetches()
        out = []
        for tp, p, first, scan in pending:
            fetched, _ = decode_records(tp[0], tp[1], p.records, first, p.high_watermark, scan)
            if fetched is not None:
                out.append(fetched)
        return out

    async def _reset(self, tp) -> None:
        timestamp = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        try:
            found = await self.offsets_for(timestamp, [tp])
        except (KraftError, OSError):
            self._stale = True
            return
        a = self._assigned.get(tp)
        if a is not None and a.position is None:
            a.position = found[tp]

    def _backoff(self, asked: dict, leader: int) -> None:
        until = time.monotonic() + self.retry_backoff
        for tp in asked:
            a = self._assigned.get(tp)
            if a is not None:
                a.retry_at = until
        self._stale = True

    def _drop_inflight(self) -> None:
        """Answers to fetches sent before a seek are not wanted (their offsets no longer match)."""
        for task, _ in self._inflight.values():
            task.cancel()
        self._inflight.clear()

    # --- metadata and connections ---------------------------------------------------------------
    async def _refresh_metadata(self) -> None:
        topics = sorted({t for t, _ in self._assigned})
        req = MetadataRequest(topics=[MetadataRequest.Topic(name=t) for t in topics], allow_auto_topic_creation=False)
        last: Exception | None = None
        for key in list(self._brokers) + self._bootstrap:
            try:
                resp = await self._client(key).request(req, METADATA_VERSION, self.request_timeout_ms)
                break
            except NetworkError as exc:
                last = exc
        else:
            raise last or NetworkError("no bootstrap address")
        self._brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        for t in resp.topics:
            for p in t.partitions:
                a = self._assigned.get((t.name, p.partition_index))
                if a is not None:
                    ok = p.error_code == 0 and p.leader_id >= 0
                    a.leader, a.epoch = (p.leader_id, p.leader_epoch) if ok else (-1, -1)
        self._stale = any(a.leader < 0 for a in self._assigned.values())
        if self._stale:  # a leader is being elected: look again after the backoff
            await asyncio.sleep(self.retry_backoff)

    def _leader_of(self, tp) -> int:
        """-1 while no leader is known (the caller looks again)."""
        a = self._assigned.get(tp)
        if a is None:
            raise KeyError(f"{tp[0]}-{tp[1]} is not assigned")
        if a.leader < 0:
            self._stale = True
        return a.leader

    async def _list_offsets(self, leader: int, tps, timestamp: int) -> dict:
        L = ListOffsetsRequest
        topics: dict[str, list] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(L.Topic.Partition(partition_index=p, timestamp=timestamp,
                                                              current_leader_epoch=self._assigned[(t, p)].epoch
                                                              if (t, p) in self._assigned else -1))
        req = L(replica_id=-1, isolation_level=0, topics=[L.Topic(name=t, partitions=ps) for t, ps in topics.items()])
        try:
            resp = await self._client(leader).request(req, LIST_OFFSETS_VERSION, self.request_timeout_ms)
        except NetworkError:
            return {tp: (int(ErrorCode.LEADER_NOT_AVAILABLE), -1) for tp in tps}
        return {(t.name, p.partition_index): (p.error_code, p.offset) for t in resp.topics for p in t.partitions}

    def _client(self, key) -> NodeClient:
        client = self._clients.get(key)
        if client is None:
            host, port = self._brokers[key] if isinstance(key, int) else key
            client = self._clients[key] = NodeClient(host, port, client_id=self.client_id,
                                                     request_timeout_ms=self.request_timeout_ms,
                                                     max_frame_bytes=self.max_bytes + (1 << 20))
        return client

    async def close(self) -> None:
        self._drop_inflight()
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)
