"""ProduceWriter: Kafka's Produce API on the controller listener as the writer of
``__cluster_metadata``-0 (a demo and benchmark writer until the controller owns the log).

The lean write path: the batches of a request are checked once, in one native pass (header,
CRC, counts, every record of uncompressed batches), and proposed as the bytes that arrived, so
the log patches offsets and epoch in place and nothing is decoded into Python objects or
re-encoded. Requests read in one I/O callback share one append and one fsync (the core
drains when that callback ends). The answer is a cached encoding of the success response with the
base offset spliced in, completed by the commit waiter itself: no task, timer or callback
chain per request.

Untrusted payload work is bounded and kept off the loop: compressed batches are
decompressed and checked on a worker thread, at most ``max_decompressed_bytes`` per
request, so heartbeats and fetches keep flowing while a gzip bomb is refused. Proposals
still happen in the order requests arrived. A node that is not the leader answers
NOT_LEADER_OR_FOLLOWER before it looks at the payload.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import struct

from kraft.errors import ErrorCode, KraftError, NotLeaderError
from kraft.protocol import INT64_SENTINEL, METADATA_TOPIC_ID, EncodedBody, ProduceRequest, ProduceResponse, split_at_int64
from kraft.records.validation import inspect_batches, validate_compressed
from kraft.server.reply import Reply

TOPIC = "__cluster_metadata"
_I64 = struct.Struct(">q")

P = ProduceResponse


class ProduceWriter:
    def __init__(self, driver, endpoints, *, max_batch_bytes: int, max_batch_records: int,
                 max_decompressed_bytes: int, executor: concurrent.futures.Executor | None = None):
        """``max_batch_bytes`` bounds one batch as sent and as decompressed (the Raft batch
        limit), ``max_decompressed_bytes`` all records of one request once decompressed."""
        self.driver = driver
        self.endpoints = list(endpoints)  # (node_id, host, port) of the controllers
        self.max_batch_bytes = max_batch_bytes
        self.max_batch_records = max_batch_records
        self.max_decompressed_bytes = max_decompressed_bytes
        # One worker: checks of compressed payloads run one at a time, off the loop thread.
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-validate")
        self._waiting: collections.deque = collections.deque()  # requests checked off the loop, in order
        self._templates: dict[int, tuple[bytes, bytes] | None] = {}

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    # --- the request --------------------------------------------------------------------------
    def handle(self, wire: ProduceRequest, version: int):
        topics = wire.topic_data
        ours = (lambda t: t.topic_id == METADATA_TOPIC_ID) if version >= 13 else (lambda t: t.name == TOPIC)
        if (len(topics) != 1 or not ours(topics[0]) or len(topics[0].partition_data) != 1
                or topics[0].partition_data[0].index != 0):
            return self.error(version, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, request=wire)
        if wire.acks not in (-1, 0, 1):
            return self.error(version, ErrorCode.INVALID_REQUIRED_ACKS)
        if not self.driver.core.is_leader():
            return self.error(version, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        # The records view points into the request frame; checks and the log patch a copy.
        data = bytearray(topics[0].partition_data[0].records or b"")
        try:
            info = inspect_batches(data, max_batch_bytes=self.max_batch_bytes,
                                   max_batch_records=self.max_batch_records)
        except KraftError as exc:
            return self.error(version, exc.code, message=str(exc))
        if not info.compressed and not self._waiting:
            return self._propose(data, info.records, wire, version)
        # Compressed (or queued behind a compressed one, to keep arrival order): inflate and
        # check on the worker thread, propose once every earlier request has been proposed.
        checked = (self._executor.submit(validate_compressed, data, max_decompressed_bytes=self.max_decompressed_bytes,
                                         max_batch_decompressed_bytes=self.max_batch_bytes)
                   if info.compressed else _done_future())
        out = asyncio.get_running_loop().create_future()
        self._waiting.append((checked, data, info.records, wire, version, out))
        checked.add_done_callback(lambda _: self.driver.loop.call_soon_threadsafe(self._propose_checked))
        return out

    def _propose_checked(self) -> None:
        q = self._waiting
        while q and q[0][0].done():
            checked, data, records, wire, version, out = q.popleft()
            if out.done():  # the connection went away
                continue
            exc = checked.exception() if not checked.cancelled() else NotLeaderError("shutting down", -1, -1)
            if exc is not None:
                code = exc.code if isinstance(exc, KraftError) else ErrorCode.CORRUPT_MESSAGE
                out.set_result(self.error(version, code, message=str(exc)))
                continue
            result = self._propose(data, records, wire, version, out)
            if result is not out and not out.done():
                out.set_result(result)  # an error, or None for acks=0

    def _propose(self, data, records: int, wire: ProduceRequest, version: int, out=None):
        """Propose; the answer is a future completed at commit (``out`` if given), or an
        error now, or None for acks=0."""
        answer = _Answer(self, version)
        fut = out if out is not None else Reply()  # completed inline by the commit waiter
        try:
            last = self.driver.propose_batches(data, records, fut, max(wire.timeout_ms, 1) / 1000, answer)
        except NotLeaderError:
            return self.error(version, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        except KraftError as exc:
            return self.error(version, exc.code, message=str(exc))
        answer.base_offset = last - records + 1
        if wire.acks == 0:
            # Nobody hears the outcome; the write commits (or not) like any other.
            return None
        return fut

    # --- answers -------------------------------------------------------------------------------
    def success(self, version: int, base_offset: int) -> EncodedBody | ProduceResponse:
        """The success answer at ``version``: a cached encoding with the offset spliced in."""
        tpl = self._templates.get(version, False)
        if tpl is False:
            tpl = self._templates[version] = self._template(version)
        if tpl is None:
            return self.error(version, ErrorCode.NONE, base_offset)
        return EncodedBody(tpl[0] + _I64.pack(base_offset) + tpl[1])

    def _template(self, version: int):
        # None (not uniquely placed): every answer is encoded in full.
        return split_at_int64(self.error(version, ErrorCode.NONE, INT64_SENTINEL).encode(version))

    def error(self, version: int, code: int, base_offset: int = -1, message: str | None = None,
              request: ProduceRequest | None = None) -> ProduceResponse:
        """The answer for ``__cluster_metadata``-0 with ``code``, or, with ``request``, an
        error for every partition it named (Kafka answers each requested partition)."""
        endpoints = self._endpoints if version >= 10 and code == ErrorCode.NOT_LEADER_OR_FOLLOWER else []
        if request is not None and any(t.partition_data for t in request.topic_data):
            return P(responses=[P.Topic(name=t.name, topic_id=t.topic_id, partition_responses=[
                P.Topic.Partition(index=p.index, error_code=int(code), base_offset=-1, error_message=message)
                for p in t.partition_data]) for t in request.topic_data], node_endpoints=endpoints)
        part = P.Topic.Partition(index=0, error_code=int(code), base_offset=base_offset, error_message=message)
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= 10:
            core = self.driver.core
            part.current_leader = P.LeaderIdAndEpoch(leader_id=core.leader_id, leader_epoch=core.epoch)
        return P(responses=[P.Topic(name=TOPIC, topic_id=METADATA_TOPIC_ID, partition_responses=[part])],
                 node_endpoints=endpoints)

    @property
    def _endpoints(self):
        eps = getattr(self, "_endpoint_cache", None)
        if eps is None:
            eps = self._endpoint_cache = [P.NodeEndpoint(node_id=i, host=h, port=p) for i, h, p in self.endpoints]
        return eps


class _Answer:
    """A commit waiter's outcome -> the Produce answer (the base offset is known once the
    proposal has its offsets)."""

    __slots__ = ("writer", "version", "base_offset")

    def __init__(self, writer: ProduceWriter, version: int):
        self.writer = writer
        self.version = version
        self.base_offset = -1

    def __call__(self, code: int):
        if code == ErrorCode.NONE:
            return self.writer.success(self.version, self.base_offset)
        return self.writer.error(self.version, code, self.base_offset)


def _done_future() -> concurrent.futures.Future:
    f = concurrent.futures.Future()
    f.set_result(None)
    return f
