"""Produce (API key 0, v3-v11) to partitions this broker leads (Kafka's
``ReplicaManager.appendRecords`` for RF 1).

The lean write path of the metadata log, for partitions: each partition's batches are checked
once by the native pass (``inspect_batches``: framing, CRC, counts, limits, every record of
uncompressed batches) and appended as the bytes that arrived, offsets and leader epoch patched
natively by the log. Compressed batches are inflated and checked on a worker thread within a
byte budget (``validate_compressed``), so the loop keeps serving; requests still append in the
order they arrived (a FIFO of checked requests; a coordinator's write passes the queue when
no queued request writes to its partition). ``LogAppendTime`` topics get the batch's max
timestamp and timestamp-type bit set and its CRC recomputed (one batch header each, never a
record). The topic's effective configs (``BrokerState.topic_config``) apply per request:
``max.message.bytes`` (MESSAGE_TOO_LARGE), a key on every record of a ``compact`` topic and
CreateTime timestamps within ``message.timestamp.before/after.max.ms`` (Kafka's INVALID_RECORD /
INVALID_TIMESTAMP with record errors), and ``compression.type``: batches in another codec are
rewritten on the worker thread (``recompression``).

Answers: acks=0 none; acks=1 once appended (page cache, as Kafka); acks=-1 once the high
watermark covers the append *and* the group-commit flusher has fsynced it (stronger than
Kafka, which trusts replication; with RF 1 there is none). With other ISR members the HW
moves as they fetch (``on_high_watermark``). acks=-1 needs ``min.insync.replicas`` in the
ISR before the append (NOT_ENOUGH_REPLICAS) and when it completes
(NOT_ENOUGH_REPLICAS_AFTER_APPEND); a wait completes with NOT_LEADER_OR_FOLLOWER if the broker
no longer leads in the epoch of the append (Kafka's DelayedProduce). Batches with a producer
id go through the partition's producer state at append time (in request order, so pipelined idempotent requests see each
other): duplicates of the last five batches are answered with their original offsets and
not appended; OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH reject the batch. A partition led elsewhere gets
NOT_LEADER_OR_FOLLOWER with the current leader (v10+), and so does an acks=-1 wait once an
image shows this broker no longer leads its partition (``release_unled``). No sockets: the server passes the
request and sends what comes back (a response, a future of one, or None).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import time

from kraft.broker.broker_state import INTERNAL_TOPICS, NONE, BrokerState
from kraft.broker.producer_state import producer_batches
from kraft.broker.txn_verification import produce_error, transactional_head
from kraft.errors import ErrorCode, FatalLogError, KraftError, RecordListTooLargeError
from kraft.protocol import ProduceRequest, ProduceResponse
from kraft.protocol.framing import CLOSE_CONNECTION
from kraft.records import crc32c
from kraft.records.recompression import batch_codecs, recompress
from kraft.records.validation import RecordRules, inspect_batches, validate_compressed

P = ProduceResponse
_ATTRIBUTES, _MAX_TS, _CRC, _CRC_START = 21, 35, 17, 21
_TIMESTAMP_TYPE_BIT = 0x08
#: A request whose compressed batches are this small is checked on the loop (_checked_here),
#: decompressing at most INLINE_DECOMPRESSED there (~0.1 ms of lz4) before leaving it to the worker.
INLINE_COMPRESSED = 16 * 1024
INLINE_DECOMPRESSED = 256 * 1024
_PRODUCER_ID = 43


class _Part:
    """One partition of a request on its way through the checks and the append."""

    __slots__ = ("topic", "index", "code", "message", "data", "plog", "reg", "compressed", "base_offset",
                 "last_offset", "append_time", "log_append", "leader", "rules", "codec", "level", "max_bytes",
                 "record_errors", "coordinator", "guard")

    def __init__(self, topic, index):
        self.topic, self.index = topic, index
        self.coordinator = False  # written by this broker's coordinators (Kafka's AppendOrigin.COORDINATOR)
        self.code, self.message = NONE, None
        self.data = self.plog = self.reg = None
        self.compressed = False
        self.rules = None  # the topic's RecordRules
        self.codec = self.level = None  # the codec (and level) to rewrite batches to; None: as sent
        self.max_bytes = 0  # max.message.bytes
        self.record_errors = ()  # (index, message) of records the rules refused
        self.base_offset = self.last_offset = -1
        self.append_time = -1
        self.log_append = False
        self.leader = None
        self.guard = None  # (producer id, guard) of a transactional batch verified with its coordinator


def _settle(out: asyncio.Future, done: asyncio.Future) -> None:
    """Pass a finished future's outcome on to ``out``; a cancelled one cancels it (reading its
    result would raise CancelledError inside the event loop's callback). The server layer's
    ``kraft.server.reply.relay`` is the same for Replies; the broker layer may not import it."""
    if out.done():
        return
    if done.cancelled():
        out.cancel()
    elif done.exception() is not None:
        out.set_exception(done.exception())
    else:
        out.set_result(done.result())


class ProduceHandler:
    def __init__(self, state: BrokerState, *, on_append=None, clock_ms=None,
                 executor: concurrent.futures.Executor | None = None):
        self.state = state
        self.on_append = on_append  # on_append(plog): wakes parked fetches
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-validate")
        self._waiting: collections.deque = collections.deque()  # requests checked off the loop, in order
        self._durable: dict = {}  # PartitionLog -> [(offset, _Ack, _Part)] waiting for fsync and HW (acks=-1)
        #: KIP-890 verification of transactional produce (``kraft.broker.txn_verification``);
        #: None: appended without asking the coordinator (no coordinator wired, or disabled)
        self.verifier = None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    # --- the request ---------------------------------------------------------------------------
    def handle(self, request: ProduceRequest, version: int, listener: str, *, internal: bool = False,
               verified=None):
        """``internal``: a write of the broker's own coordinators; clients may not append to
        the internal topics (Kafka's "Cannot append to internal topic", INVALID_TOPIC_EXCEPTION).
        ``verified``: (errors, guards) of the coordinator's verification of the request's
        transactional partitions, when it was asked (``_verify_first``)."""
        if verified is None and self.verifier is not None and request.transactional_id and not internal:
            held = self._verify_first(request, version, listener)
            if held is not None:
                return held
        errors, guards = verified or ({}, {})
        parts = []
        for t in request.topic_data:
            for p in t.partition_data:
                if t.name in INTERNAL_TOPICS and not internal:
                    part = _Part(t.name, p.index)
                    part.code = int(ErrorCode.INVALID_TOPIC_EXCEPTION)
                    part.message = f"Cannot append to internal topic {t.name}"
                    parts.append(part)
                    continue
                refused = errors.get((t.name, p.index))
                if refused is not None:
                    part = _Part(t.name, p.index)
                    part.code, part.message = produce_error(refused)
                    parts.append(part)
                    continue
                part = self._check(t.name, p, request.acks, listener)
                part.coordinator = internal
                part.guard = guards.get((t.name, p.index))
                parts.append(part)
        if request.acks not in (-1, 0, 1):
            for part in parts:
                part.code = int(ErrorCode.INVALID_REQUIRED_ACKS)
        compressed = [p for p in parts if (p.compressed or p.codec is not None) and p.code == NONE]
        if not compressed and (not self._waiting or (internal and not self._queued(parts))):
            # A coordinator's own write waits only for earlier writes to its partitions, not for
            # clients' compressed requests to other partitions being checked (an EndTxn answer
            # waits for the PrepareCommit record to be durable and nothing else).
            return self._append_and_answer(parts, request, version)
        limits = self.state.limits
        if compressed and not self._waiting and self._checked_here(compressed, limits.max_decompressed_bytes):
            return self._append_and_answer(parts, request, version)
        if compressed:
            checked = self._executor.submit(_validate_all, [(p.data, p.compressed, p.rules, p.codec, p.level,
                                                             p.max_bytes) for p in compressed],
                                            limits.max_decompressed_bytes)
        else:
            checked = concurrent.futures.Future()
            checked.set_result([])
        loop = asyncio.get_running_loop()
        out = loop.create_future()
        self._waiting.append((checked, compressed, parts, request, version, out))
        checked.add_done_callback(lambda _: loop.call_soon_threadsafe(self._drain_waiting))
        return out

    def _checked_here(self, compressed, max_decompressed: int) -> bool:
        """Check a small request's compressed batches on the loop: the worker's two thread
        hops cost more than decompressing a few KiB (about a tenth of an acks=all round for a
        flushed thousand records). Only without recompression, and bounded: a request that
        decompresses past ``INLINE_DECOMPRESSED`` is left to the worker (False)."""
        if any(p.codec is not None for p in compressed) or sum(len(p.data) for p in compressed) > INLINE_COMPRESSED:
            return False
        bound = min(INLINE_DECOMPRESSED, max_decompressed)
        results = _validate_all([(p.data, p.compressed, p.rules, None, p.level, p.max_bytes) for p in compressed],
                                bound)
        if bound < max_decompressed and any(isinstance(e, RecordListTooLargeError) for e, _ in results):
            return False
        for part, (error, data) in zip(compressed, results):
            if error is not None:
                _refuse(part, error)
            else:
                part.data = data
        return True

    def _verify_first(self, request: ProduceRequest, version: int, listener: str):
        """A future of the answer if some partition's batch opens a transaction there (its
        producer has none ongoing on it): the request is handled once the coordinator has
        said which of them belong to the transaction; None if none needs asking."""
        guards, ask, producer = {}, [], None
        for t in request.topic_data:
            for p in t.partition_data:
                head = transactional_head(p.records)
                if head is None:
                    continue
                code, plog, _ = self.state.local_leader(t.name, p.index)
                if code != NONE:
                    continue  # answered by the usual checks
                table = self.state.producer_states.table(plog)
                entry = table.get(head[0])
                if entry is not None and entry.txn_first_offset >= 0 and entry.epoch == head[1]:
                    continue  # inside its transaction here already
                guard = table.verification.get(head[0])
                if guard is None or guard[0] != head[1]:
                    guard = table.verification[head[0]] = (head[1], object())
                guards[(t.name, p.index)] = (head[0], guard)
                ask.append((t.name, p.index))
                producer = head
        if not ask:
            return None
        checked = self.verifier.verify(request.transactional_id, producer[0], producer[1], ask)
        out = asyncio.get_running_loop().create_future()

        def resume(f):
            if out.done():
                return
            # A verification dropped on the way is a retriable network error, answered, not a stall.
            verdict = {tp: int(ErrorCode.NETWORK_EXCEPTION) for tp in ask} if f.cancelled() else f.result()
            try:
                result = self.handle(request, version, listener, verified=(verdict, guards))
            except Exception as exc:  # the handler's own failure: the server answers it
                out.set_exception(exc)
                return
            if isinstance(result, asyncio.Future):
                result.add_done_callback(lambda r: _settle(out, r))
            else:
                out.set_result(result)
        checked.add_done_callback(resume)
        return out

    def _guard_holds(self, part) -> bool:
        """A verified transactional batch may open its transaction only if no marker of that
        producer came since the check began (else the check spoke of a transaction now over)."""
        pid, guard = part.guard
        table = self.state.producer_states.table(part.plog)
        entry = table.get(pid)
        if entry is not None and entry.txn_first_offset >= 0:
            return True  # an earlier batch of this transaction opened it here meanwhile
        if table.verification.get(pid) is guard:
            return True
        part.code = int(ErrorCode.INVALID_TXN_STATE)
        part.message = "the transaction ended while this produce was being verified"
        return False

    def _check(self, topic: str, p, acks: int, listener: str) -> _Part:
        part = _Part(topic, p.index)
        code, plog, reg = self.state.local_leader(topic, p.index)
        part.plog, part.reg = plog, reg
        if code != NONE:
            part.code = code
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and reg is not None:
                part.leader = (reg.leader, reg.leader_epoch, self.state.leader_endpoint(reg.leader, listener))
            return part
        config = self.state.topic_config(topic)
        if acks == -1 and len(reg.isr) < config.min_insync_replicas:
            part.code = int(ErrorCode.NOT_ENOUGH_REPLICAS)
            part.message = f"the ISR {list(reg.isr)} is smaller than min.insync.replicas"
            return part
        data = bytearray(p.records or b"")  # the request frame's view; the log patches this copy
        part.rules = RecordRules.of(compact=config.compact, now_ms=None if config.log_append_time else self.clock_ms(),
                                    before_ms=config.timestamp_before_ms, after_ms=config.timestamp_after_ms,
                                    partition=f"{topic}-{p.index}")
        try:
            info = inspect_batches(data, max_batch_bytes=config.max_message_bytes, allow_null_values=True,
                                   rules=part.rules)
        except KraftError as exc:
            _refuse(part, exc)
            return part
        if len(data) > plog.log.config.segment_bytes:
            part.code = int(ErrorCode.RECORD_LIST_TOO_LARGE)
            return part
        part.data, part.compressed = data, info.compressed
        part.log_append = config.log_append_time
        part.max_bytes = config.max_message_bytes
        if config.codec is not None and batch_codecs(data) != {config.codec}:
            part.codec, part.level = config.codec, config.level
        return part

    def _queued(self, parts) -> bool:
        """Whether a request waiting to be appended writes to a partition of ``parts``."""
        want = {(p.topic, p.index) for p in parts}
        return any((q.topic, q.index) in want for entry in self._waiting for q in entry[2])

    def _drain_waiting(self) -> None:
        q = self._waiting
        while q and q[0][0].done():
            checked, compressed, parts, request, version, out = q.popleft()
            if out.done():
                continue
            exc = checked.exception() if not checked.cancelled() else KraftError("shutting down")
            if exc is not None:
                code = exc.code if isinstance(exc, KraftError) else ErrorCode.CORRUPT_MESSAGE
                for part in compressed:
                    part.code, part.message = int(code), str(exc)
            else:
                for part, (error, data) in zip(compressed, checked.result()):
                    if error is not None:
                        _refuse(part, error)
                    else:
                        part.data = data
            # Checked on an earlier loop turn: the image may have moved leadership since.
            for part in parts:
                if part.code == NONE and not self._leads(part, serving=True):
                    part.code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            result = self._append_and_answer(parts, request, version)
            if result is None:
                out.set_result(None)
            elif isinstance(result, asyncio.Future):
                result.add_done_callback(lambda f, o=out: o.done() or o.set_result(f.result()))
            else:
                out.set_result(result)

    # --- appending and answering ---------------------------------------------------------------
    def _append_and_answer(self, parts, request: ProduceRequest, version: int):
        now = None
        for part in parts:
            if part.code != NONE:
                continue
            if part.log_append:
                now = now if now is not None else self.clock_ms()
                _set_log_append_time(part.data, now)
                part.append_time = now
            plog = part.plog
            idempotent = len(part.data) > _PRODUCER_ID + 8 and part.data[_PRODUCER_ID] < 0x80  # producer id >= 0
            if part.guard is not None and not self._guard_holds(part):
                continue
            if idempotent and not self._check_producer(part):
                continue
            try:
                info = plog.log.append(part.data, assign_offsets=True, leader_epoch=max(part.reg.leader_epoch, 0))
            except FatalLogError as exc:
                part.code, part.message = int(ErrorCode.KAFKA_STORAGE_ERROR), str(exc)
                continue
            except KraftError as exc:
                part.code, part.message = int(exc.code), str(exc)
                continue
            if idempotent:
                self.state.producer_states.on_appended(plog, part.data)
                if part.guard is not None:  # the transaction is open here now: no guard needed
                    self.state.producer_states.table(plog).verification.pop(part.guard[0], None)
            part.data = None
            part.base_offset, part.last_offset = info.first_offset, info.last_offset
            self.state.advance_high_watermark(plog, part.reg)
            if self.on_append is not None:
                self.on_append(plog)
        if request.acks == 0:  # no answer; a failure closes the connection (Kafka's closeConnection)
            return CLOSE_CONNECTION if any(p.code != NONE for p in parts) else None
        if request.acks == -1:
            waits = [p for p in parts if p.code == NONE]
            if waits:
                return self._await_durable(waits, parts, request, version)
        return self._response(parts, version)

    def _leads(self, part, *, serving: bool = False) -> bool:
        """Whether this broker still leads ``part``'s partition, with the same log, in the
        leader epoch the request was checked (and appended) in. ``serving``: also within its
        lease (for an append). A wait that completes needs only the epoch: its HW moved
        only through fetches of that epoch's followers, so what it covers is committed even
        if the lease lapsed meanwhile; answering NOT_LEADER_OR_FOLLOWER then would tell the
        client "not persisted" about a committed write."""
        if serving:
            code, plog, reg = self.state.local_leader(part.topic, part.index)
            if code != NONE:
                return False
        else:
            if not still_leads(self.state, part.topic, part.index, part.reg.leader_epoch):
                return False
            _, reg = self.state.partition(part.topic, part.index)
            plog = self.state.logs.get(part.topic, part.index)
        return plog is part.plog and reg.leader_epoch == part.reg.leader_epoch

    def _check_producer(self, part) -> bool:
        """The producer-state verdict on ``part``'s batches; False if nothing is to be
        appended (an error, or a duplicate answered with its original offsets)."""
        try:
            verdict = self.state.producer_states.table(part.plog).check_client_append(
                producer_batches(part.data), coordinator=part.coordinator)
        except KraftError as exc:
            part.code, part.message = int(exc.code), str(exc)
            return False
        if verdict.code != NONE:
            part.code, part.message = verdict.code, verdict.message
            return False
        if verdict.duplicate is not None:
            part.data = None
            part.base_offset, part.last_offset = verdict.duplicate.first_offset, verdict.duplicate.last_offset
            return False
        return True

    def _after_append_check(self, waits) -> None:
        """Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND: the ISR shrank below min.insync.replicas
        while an acks=-1 append waited."""
        states = self.state.replication.states
        for part in waits:
            st = states.get((part.topic, part.index))
            if st is not None and part.code == NONE:
                if len(st.maximal_isr) < self.state.min_insync_replicas(part.topic):
                    part.code = int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)

    def _await_durable(self, waits, parts, request, version):
        return self.await_replicated(waits, request.timeout_ms, lambda: self._response(parts, version))

    @staticmethod
    def appended(topic: str, index: int, plog, reg, base_offset: int, last_offset: int) -> _Part:
        """A partition append made outside a Produce request (a transaction marker), to wait
        on with ``await_replicated``."""
        part = _Part(topic, index)
        part.plog, part.reg = plog, reg
        part.base_offset, part.last_offset = base_offset, last_offset
        return part

    def await_replicated(self, waits, timeout_ms: int, answer):
        """A future of ``answer()`` once every part of ``waits`` is fsynced and below the
        high watermark in the epoch of its append (acks=-1); a part that fails gets its
        ``code`` set (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        fut = asyncio.get_running_loop().create_future()

        def done():
            if not fut.done():
                self._after_append_check(waits)
                fut.set_result(answer())
        ack = _Ack(len(waits), done)
        for part in waits:
            plog = part.plog
            target = part.last_offset + 1
            if plog.log.flushed_offset >= target and plog.high_watermark >= target:
                ack.one_done()
                continue
            self._durable.setdefault(plog, []).append((target, ack, part))
            plog.log.request_flush()
        if not fut.done():
            timeout = max(timeout_ms, 0) / 1000

            def expire():
                if not fut.done():
                    for part in waits:
                        if part.code != NONE:
                            continue  # already answered NOT_LEADER_OR_FOLLOWER by on_flushed
                        if not self._leads(part):
                            part.code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                        elif part.plog.log.flushed_offset <= part.last_offset or \
                                part.plog.high_watermark <= part.last_offset:
                            part.code = int(ErrorCode.REQUEST_TIMED_OUT)
                    fut.set_result(answer())
            handle = asyncio.get_running_loop().call_later(timeout, expire)
            fut.add_done_callback(lambda _: handle.cancel())
        return fut

    def on_high_watermark(self, plog) -> None:
        """On the loop thread: a follower's fetch moved ``plog``'s high watermark."""
        self.on_flushed(plog, plog.log.flushed_offset)

    def on_flushed(self, plog, offset: int) -> None:
        """On the loop thread: ``plog`` is durable below ``offset``; complete acks=-1 waits
        the high watermark also covers."""
        waiting = self._durable.get(plog)
        if not waiting:
            return
        hw = plog.high_watermark
        keep = []
        for target, ack, part in waiting:
            if not self._leads(part):
                # A replaced leader that truncated this append as a follower sees the new
                # leader's HW pass the offset it would answer: that is no acknowledgement.
                # Failing at once (not at the timeout) lets the client retry on the new leader.
                part.code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                ack.one_done()
            elif offset >= target and hw >= target:
                ack.one_done()
            else:
                keep.append((target, ack, part))
        if keep:
            self._durable[plog] = keep
        else:
            del self._durable[plog]

    def release_unled(self) -> int:
        """After each metadata image: acks=-1 waits on partitions this broker no longer leads
        in the leader epoch of their append (a new leader, a reassignment that moved the
        partition away, a deleted log) are answered NOT_LEADER_OR_FOLLOWER now, as Kafka's
        delayed produce is, so the client retries at the new leader instead of timing out.
        This also keeps a log that became a follower from acknowledging them when the new
        leader's high watermark passes offsets it may have truncated and refetched. A lapsed
        lease alone releases nothing: what the HW covers in the append's epoch is committed.
        Returns the waits answered."""
        released = 0
        for plog in list(self._durable):
            keep = []
            for entry in self._durable[plog]:
                _, ack, part = entry
                if self._leads(part):
                    keep.append(entry)
                    continue
                _, reg = self.state.partition(part.topic, part.index)
                part.code, part.base_offset = int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1
                part.message = "the partition's leadership moved while the write waited for the in-sync replicas"
                if reg is not None:
                    part.leader = (reg.leader, reg.leader_epoch, None)
                ack.one_done()
                released += 1
            if keep:
                self._durable[plog] = keep
            else:
                del self._durable[plog]
        return released

    def _response(self, parts, version: int) -> ProduceResponse:
        topics: dict[str, list] = {}
        endpoints = {}
        for part in parts:
            resp = P.Topic.Partition(index=part.index, error_code=part.code, base_offset=part.base_offset,
                                     log_append_time_ms=part.append_time,
                                     log_start_offset=part.plog.log.start_offset if part.plog is not None else -1,
                                     error_message=part.message if part.code != NONE else None,
                                     record_errors=[P.Topic.Partition.BatchIndexAndErrorMessage(
                                         batch_index=i, batch_index_error_message=m) for i, m in part.record_errors])
            if part.leader is not None and version >= 10:
                leader, epoch, ep = part.leader
                resp.current_leader = P.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
                if ep is not None:
                    endpoints[leader] = P.NodeEndpoint(node_id=leader, host=ep[0], port=ep[1], rack=ep[2])
            topics.setdefault(part.topic, []).append(resp)
        return P(responses=[P.Topic(name=name, partition_responses=ps) for name, ps in topics.items()],
                 throttle_time_ms=0, node_endpoints=list(endpoints.values()))


class _Ack:
    __slots__ = ("remaining", "done")

    def __init__(self, n: int, done):
        self.remaining, self.done = n, done

    def one_done(self) -> None:
        self.remaining -= 1
        if self.remaining == 0:
            self.done()


def _refuse(part: _Part, exc: KraftError) -> None:
    part.code, part.message = int(exc.code), str(exc)
    part.record_errors = getattr(exc, "record_errors", ())


def _validate_all(items, max_decompressed_bytes: int) -> list:
    """On the worker thread (on the loop for a small request), per partition: (error or None,
    the bytes to append) after checking its compressed batches' records and rewriting them to
    the topic's codec, if it has one."""
    out = []
    for data, compressed, rules, codec, level, max_bytes in items:
        try:
            if compressed:
                validate_compressed(data, max_decompressed_bytes=max_decompressed_bytes, allow_null_values=True,
                                    rules=rules)
            if codec is not None:
                data = recompress(data, codec, level, max_decompressed_bytes)
                # Kafka checks the batch it writes: recompressed, it may have grown past the limit.
                inspect_batches(data, max_batch_bytes=max_bytes, allow_null_values=True)
            out.append((None, data))
        except KraftError as exc:
            # Without its traceback: the frames it holds keep memoryviews of the request and
            # native readers of them in a cycle with ``out``, and the cyclic GC cannot clear a
            # memoryview with exports (it segfaulted the broker's next collection).
            out.append((exc.with_traceback(None), None))
    return out


def _set_log_append_time(data: bytearray, now_ms: int) -> None:
    """Every batch: timestamp type LogAppendTime, max timestamp ``now_ms``, CRC recomputed."""
    pos, end = 0, len(data)
    while pos < end:
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        data[pos + _ATTRIBUTES + 1] |= _TIMESTAMP_TYPE_BIT
        data[pos + _MAX_TS:pos + _MAX_TS + 8] = now_ms.to_bytes(8, "big", signed=True)
        stop = pos + 12 + length
        data[pos + _CRC:pos + _CRC + 4] = crc32c(memoryview(data)[pos + _CRC_START:stop]).to_bytes(4, "big")
        pos = stop


def still_leads(state: BrokerState, topic: str, index: int, leader_epoch: int) -> bool:
    """Whether an acks=-1 wait for an append made in ``leader_epoch`` may still succeed: only
    while this broker leads the partition in that epoch (Kafka's ``checkEnoughReplicasReachOffset``
    answers NOT_LEADER_OR_FOLLOWER otherwise). After a leader change the offsets it waits for
    may be truncated and refilled with other records, and this broker's HW, now the new
    leader's, would cover those instead. (The replication simulator runs this same rule.)"""
    _, reg = state.partition(topic, index)
    return reg is not None and reg.leader == state.broker_id and reg.leader_epoch == leader_epoch
