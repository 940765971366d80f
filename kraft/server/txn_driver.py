"""The transaction coordinator on a broker's event loop: the I/O around
``kraft.coordinator.txn_shard``.

For every ``__transaction_state`` partition this broker leads, a ``TxnShard`` loaded by
replaying the partition (read off the loop, applied on it) with the partition's leader epoch
as its coordinator epoch; losing the leadership (or a new leader epoch) unloads it. Its records
are appended through the broker's own produce path with acks=all and answered once durable.
Its marker jobs become WriteTxnMarkers requests to each partition's current leader (this
broker's own handler called directly for the partitions it leads), retried
(with the leader looked up again) until every marker is written or the shard is unloaded; a
partition whose topic is gone counts as written (Kafka's marker channel drops it). One timer
reconciles leadership, aborts timed-out transactions every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and expires transactional ids
every ``transaction.remove.expired.transaction.cleanup.interval.ms``.

``__transaction_state`` is created through the controller on the first FindCoordinator for a
transactional id, with ``transaction.state.log.num.partitions`` / ``.replication.factor``,
``min.insync.replicas`` = ``transaction.state.log.min.isr``, ``cleanup.policy=compact``,
``compression.type=uncompressed`` and ``segment.bytes`` = ``transaction.state.log.segment.bytes``
(Kafka's ``TransactionLog`` topic configs).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time

from kraft.client.client_pool import ClientPool
from kraft.client.node_client import NodeClient
from kraft.coordinator.group_records import OFFSETS_TOPIC, partition_for as group_partition_for
from kraft.coordinator.txn_metadata import TxnConfig
from kraft.coordinator.txn_records import TRANSACTION_TOPIC, decode_txn_record, partition_for
from kraft.coordinator.txn_shard import TxnShard, compile_pattern, valid_state_names
from kraft.errors import ErrorCode as E
from kraft.errors import KraftError
from kraft.protocol import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
                            AddPartitionsToTxnResponse, CreateTopicsRequest, DescribeTransactionsRequest,
                            DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
                            InitProducerIdResponse,
                            ListTransactionsRequest, ListTransactionsResponse, ProduceRequest, WriteTxnMarkersRequest)
from kraft.protocol.messages.add_to_txn import AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult
from kraft.records import build_batch
from kraft.server.group_driver import _Loaded, _produce_code
from kraft.server.partition_loader import read_partition_records, reconcile_shards
from kraft.server.reply import Reply, mapped

log = logging.getLogger("kraft.transactions")

TICK_S = 0.1
MARKER_RETRY_S = 0.1      # Kafka's retry.backoff.ms; doubled after each failed round, up to
MARKER_RETRY_MAX_S = 1.0  # this (a leader that keeps refusing is not hammered)
MARKER_TIMEOUT_MS = 30_000
#: Kafka's answers to older clients: PRODUCER_FENCED (KIP-588) only from these versions on.
FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2}
#: Marker answers after which the marker counts as written (Kafka's
#: TransactionMarkerRequestCompletionHandler: an old message format needs none).
MARKER_DONE = frozenset({int(E.NONE), int(E.UNSUPPORTED_FOR_MESSAGE_FORMAT), int(E.UNSUPPORTED_VERSION)})
#: Answers that say this coordinator is stale: it stops sending (the new one resends on load).
MARKER_FENCED = frozenset({int(E.INVALID_PRODUCER_EPOCH), int(E.TRANSACTION_COORDINATOR_FENCED)})


def _now_ms() -> int:
    return int(time.time() * 1000)


def txn_config(values: dict) -> TxnConfig:
    return TxnConfig(max_timeout_ms=values["transaction.max.timeout.ms"],
                     id_expiration_ms=values["transactional.id.expiration.ms"],
                     abort_check_interval_ms=values["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                     expiration_check_interval_ms=values[
                         "transaction.remove.expired.transaction.cleanup.interval.ms"],
                     offsets_partitions=values["offsets.topic.num.partitions"])


def _fenced(code: int, api_key: int, version: int) -> int:
    if code == E.PRODUCER_FENCED and version < FENCED_SINCE.get(api_key, 0):
        return int(E.INVALID_PRODUCER_EPOCH)
    return int(code)


class TxnDriver:
    def __init__(self, state, produce, values: dict, *, listener: str, new_producer_id=None, create_topic=None,
                 executor=None, client_options: dict | None = None, local_markers=None):
        """``produce``: the broker's ProduceHandler; ``listener``: the inter-broker listener
        (markers go to leaders there); ``new_producer_id()``: a fresh producer id, or an
        awaitable of one (None: none to be had); ``create_topic(request)``: an awaitable
        CreateTopics call on the controller; ``client_options``: the NodeClient settings for
        other brokers (TLS, SASL); ``local_markers(request, version)``: this broker's
        WriteTxnMarkers handler (a response or a future of one), for the partitions it leads
        (None: those markers go over the listener too)."""
        self.state = state
        self.produce = produce
        self.values = values
        self.config = txn_config(values)
        self.listener = listener
        self.new_producer_id = new_producer_id
        self.create_topic = create_topic
        self.local_markers = local_markers
        self.executor = executor or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-txns")
        self.shards: dict[int, _Loaded] = {}
        self.clients = ClientPool(self._address, lambda host, port: NodeClient(
            host, port, client_id=f"kraft-txn-markers-{state.broker_id}", request_timeout_ms=MARKER_TIMEOUT_MS,
            **(client_options or {})))
        self._creating = False
        self._create_again_at = 0.0
        self._timer = None
        self._tasks: set = set()
        self._next_abort_ms = self._next_expire_ms = 0
        self.closed = False

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for loaded in self.shards.values():
            loaded.shard.unload()
        self.shards.clear()
        for task in list(self._tasks):
            task.cancel()
        self.clients.close_all()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def _spawn(self, coro):
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _tick(self) -> None:
        try:
            self.reconcile()
            now = _now_ms()
            abort = now >= self._next_abort_ms
            if abort:
                self._next_abort_ms = now + self.config.abort_check_interval_ms
            expire = now >= self._next_expire_ms
            if expire:
                self._next_expire_ms = now + self.config.expiration_check_interval_ms
            for p, loaded in list(self.shards.items()):
                if loaded.ready:
                    loaded.shard.tick(now, abort_expired=abort, expire_ids=expire)
                    self._drain(p)
        except Exception:  # a bug here must not stop the timer: log it and go on
            log.exception("transaction coordinator tick failed")
        if not self.closed:
            self._timer = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def reconcile(self) -> None:
        """Load the shards of partitions this broker now leads, unload the others."""
        reconcile_shards(self.state, TRANSACTION_TOPIC, self.shards, self._load, log, "transactions")

    def _load(self, p: int, epoch: int, plog) -> None:
        shard = TxnShard(p, epoch, self.config)
        loaded = self.shards[p] = _Loaded(shard, epoch, plog)
        fut = asyncio.get_running_loop().run_in_executor(self.executor, read_partition_records, plog,
                                                         decode_txn_record)

        def done(f):
            if self.shards.get(p) is not loaded:
                return
            try:
                records, bad = f.result()
                for tid, value in records:
                    shard.apply(tid, value)
                if bad:
                    log.error("transactions: %s-%d: %d records did not decode and were skipped", TRANSACTION_TOPIC,
                              p, bad)
            except (KraftError, OSError, concurrent.futures.CancelledError) as exc:
                log.error("transactions: loading %s-%d failed: %s", TRANSACTION_TOPIC, p, exc)
                del self.shards[p]  # the next tick tries again
                return
            loaded.ready = True
            shard.loaded()  # markers of transactions it inherits mid-completion
            (log.info if records else log.debug)("transactions: loaded %s-%d in coordinator epoch %d: %d ids",
                                                 TRANSACTION_TOPIC, p, epoch, len(shard.txns))
            self._drain(p)
        fut.add_done_callback(done)

    # --- appending and markers -----------------------------------------------------------------
    def _drain(self, p: int) -> None:
        loaded = self.shards.get(p)
        if loaded is None:
            return
        for append in loaded.shard.take_appends():
            self._append(p, loaded, append)
        for job in loaded.shard.take_markers():
            self._spawn(self._write_markers(p, loaded, job))

    def _append(self, p: int, loaded, append) -> None:
        P = ProduceRequest
        recs = append.records
        batch = build_batch([r.value for r in recs], keys=[r.key for r in recs])
        req = P(transactional_id=None, acks=-1, timeout_ms=MARKER_TIMEOUT_MS, topic_data=[
            P.Topic(name=TRANSACTION_TOPIC, partition_data=[P.Topic.Partition(index=p, records=batch)])])

        def finish(code):
            if code != 0:
                append.on_failed(code)
            elif self.shards.get(p) is not loaded:
                append.on_failed(int(E.NOT_LEADER_OR_FOLLOWER))  # written, but by a shard since unloaded
            else:
                append.on_durable()
            self._drain(p)
        try:
            result = self.produce.handle(req, 9, "", internal=True)
        except KraftError as exc:
            return finish(int(exc.code))
        if isinstance(result, asyncio.Future):
            result.add_done_callback(lambda f: finish(_produce_code(f)))
        else:
            finish(_produce_code(result))

    def _address(self, broker_id: int):
        ep = self.state.leader_endpoint(broker_id, self.listener)
        return None if ep is None else (ep[0] or "localhost", ep[1])

    def _client(self, broker_id: int):
        return self.clients.get(broker_id)

    async def _write_markers(self, p: int, loaded, job) -> None:
        """Until every partition of ``job`` has its marker (or the shard is unloaded)."""
        left = set(job.partitions)
        backoff = MARKER_RETRY_S
        while left and self.shards.get(p) is loaded and not self.closed:
            by_leader: dict = {}
            for topic, part in sorted(left):
                t = self.state.image.topics.by_name.get(topic)
                reg = None if t is None else t.partitions.get(part)
                if reg is None:
                    log.info("transactions: %s-%d is gone: no marker for %s", topic, part, job.transactional_id)
                    self._written(p, loaded, job, topic, part, left)
                    continue
                if reg.leader >= 0:
                    by_leader.setdefault(reg.leader, []).append((topic, part))
            results = await asyncio.gather(*(self._send(leader, job, parts) for leader, parts in by_leader.items()))
            for done, fenced in results:
                for topic, part in done:
                    self._written(p, loaded, job, topic, part, left)
                if fenced:
                    log.warning("transactions: markers of %s refused as from a stale coordinator (epoch %d): "
                                "stopped", job.transactional_id, job.coordinator_epoch)
                    return
            if left:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MARKER_RETRY_MAX_S)

    def _written(self, p, loaded, job, topic, part, left) -> None:
        left.discard((topic, part))
        if self.shards.get(p) is loaded:
            loaded.shard.marker_written(job.transactional_id, job.producer_id, job.producer_epoch, topic, part,
                                        _now_ms())
            self._drain(p)

    async def _send(self, leader: int, job, parts) -> tuple[list, bool]:
        """(the partitions of ``parts`` whose marker ``leader`` wrote, whether it said this
        coordinator is fenced)."""
        local = leader == self.state.broker_id and self.local_markers is not None
        client = None if local else self._client(leader)
        if client is None and not local:
            return [], False
        M = WriteTxnMarkersRequest.Marker
        topics: dict = {}
        for topic, part in parts:
            topics.setdefault(topic, []).append(part)
        req = WriteTxnMarkersRequest(markers=[M(
            producer_id=job.producer_id, producer_epoch=job.producer_epoch, transaction_result=job.committed,
            coordinator_epoch=job.coordinator_epoch,
            topics=[M.Topic(name=t, partition_indexes=ps) for t, ps in topics.items()])])
        try:
            if local:
                # This broker leads them: its own WriteTxnMarkers handler, not a connection to
                # itself (a request encoded, sent, read and decoded on this same loop).
                resp = self.local_markers(req, 1)
                if asyncio.isfuture(resp):
                    resp = await resp
            else:
                resp = await client.request(req, 1)
        except (KraftError, OSError, asyncio.TimeoutError) as exc:
            log.debug("transactions: markers to broker %d failed: %s", leader, exc)
            return [], False
        done, fenced = [], False
        for m in resp.markers:
            for t in m.topics:
                for pr in t.partitions:
                    if pr.error_code in MARKER_DONE:
                        done.append((t.name, pr.partition_index))
                    elif pr.error_code in MARKER_FENCED:
                        fenced = True
                    else:
                        log.debug("transactions: marker on %s-%d for %s: %s", t.name, pr.partition_index,
                                  job.transactional_id, E(pr.error_code).name)
        return done, fenced

    # --- requests ------------------------------------------------------------------------------
    def _shard(self, transactional_id: str):
        t = self.state.image.topics.by_name.get(TRANSACTION_TOPIC)
        if t is None or not t.partitions:
            return E.COORDINATOR_NOT_AVAILABLE, None
        p = partition_for(transactional_id or "", len(t.partitions))
        loaded = self.shards.get(p)
        if loaded is None:
            self.reconcile()
            loaded = self.shards.get(p)
            if loaded is None:
                return E.NOT_COORDINATOR, None
        if not loaded.ready:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        return E.NONE, loaded.shard

    def _call(self, transactional_id: str, fn, error_answer):
        """Run ``fn(shard, respond)`` on the id's shard; the answer tuple now or a future of it."""
        code, shard = self._shard(transactional_id)
        if shard is None:
            return error_answer(code)
        box, fut = [], None

        def respond(*answer):
            if fut is None:
                box.append(answer)
            elif not fut.done():
                fut.set_result(answer)
        fn(shard, respond)
        self._drain(shard.partition)
        if box:
            return box[0]
        fut = Reply()
        # The request's connection closed (its answer cancelled): a held add must not run later.
        fut.add_done_callback(lambda f: shard.forget(respond) if f.cancelled() else None)
        return fut


    def handle(self, ctx, request):
        version = ctx.header.api_version
        kind = type(request)
        now = _now_ms()
        if kind is AddPartitionsToTxnRequest:
            return self.add_partitions(request, version, now)
        if kind is AddOffsetsToTxnRequest:
            t = self.state.image.topics.by_name.get(OFFSETS_TOPIC)
            n = len(t.partitions) if t is not None and t.partitions else self.config.offsets_partitions
            part = (OFFSETS_TOPIC, group_partition_for(request.group_id or "", n))
            return mapped(self._call(request.transactional_id, lambda s, r: s.add_partitions(
                request.transactional_id, request.producer_id, request.producer_epoch, [part], now, r),
                lambda c: (c,)), lambda c: AddOffsetsToTxnResponse(error_code=_fenced(c, 25, version)))
        if kind is EndTxnRequest:
            return mapped(self._call(request.transactional_id, lambda s, r: s.end_txn(
                request.transactional_id, request.producer_id, request.producer_epoch, request.committed, now, r),
                lambda c: (c,)), lambda c: EndTxnResponse(error_code=_fenced(c, 26, version)))
        if kind is DescribeTransactionsRequest:
            return self.describe(request)
        if kind is ListTransactionsRequest:
            return self.list(request, now)
        raise KraftError(f"{kind.__name__} is not a transaction request")

    def init_producer_id(self, request, version: int):
        """InitProducerId with a transactional id; a fresh producer id is fetched first when the
        shard needs one (a new id, or an exhausted epoch)."""
        tid = request.transactional_id

        def make(code, pid, epoch):
            return InitProducerIdResponse(error_code=_fenced(code, 22, version), producer_id=pid, producer_epoch=epoch)

        def run(new_pid):
            return mapped(self._call(tid, lambda s, r: s.init_producer_id(
                tid, request.transaction_timeout_ms, request.producer_id, request.producer_epoch, _now_ms(), r,
                new_pid), lambda c: (c, -1, -1)), make)
        code, shard = self._shard(tid)
        if shard is None:
            return make(code, -1, -1)
        if not shard.needs_producer_id(tid) or self.new_producer_id is None:
            return run(None)
        got = self.new_producer_id()
        if not asyncio.isfuture(got) and not asyncio.iscoroutine(got):
            return run(got)

        async def later():
            result = run(await got)
            return (await result) if type(result) is Reply else result
        return later()

    def add_partitions(self, request, version: int, now: int):
        R = AddPartitionsToTxnResponse
        if version >= 4:
            return self._add_batched(request, now)
        tid = request.v3_and_below_transactional_id
        parts = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
        topics = self.state.image.topics.by_name
        unknown = {(n, p) for n, p in parts if n not in topics or p not in topics[n].partitions}

        def make(code, per=None):
            return R(results_by_topic_v3_and_below=_topic_results(parts, lambda tp: (per or {}).get(
                tp, _fenced(code, 24, version))))
        if unknown:
            # Kafka's KafkaApis: unknown partitions refused, the others not attempted.
            return make(E.OPERATION_NOT_ATTEMPTED, {tp: int(E.UNKNOWN_TOPIC_OR_PARTITION) for tp in unknown})
        return mapped(self._call(tid, lambda s, r: s.add_partitions(
            tid, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, parts, now, r),
            lambda c: (c,)), make)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions) -> dict:
        """KIP-890's check asked by this broker's own partitions (``TxnVerifier``'s ``local``):
        {partition: error code} of those not in the producer's ongoing transaction, as the
        verify_only form of AddPartitionsToTxn answers."""
        per = self._verify_all(transactional_id, producer_id, producer_epoch, partitions)
        return {tp: int(c) for tp, c in per.items() if c}

    def _verify_all(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions) -> dict:
        code, shard = self._shard(transactional_id)
        if shard is None:
            return {tp: code for tp in partitions}
        return shard.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    def _add_batched(self, request, now: int):
        """v4+: many transactions, each verified (``verify_only``) or added; one answer when
        every add is durable."""
        R = AddPartitionsToTxnResponse
        results, waits = [], []
        for txn in request.transactions:
            parts = [(t.name, p) for t in txn.topics for p in t.partitions]
            if txn.verify_only:
                per = self._verify_all(txn.transactional_id, txn.producer_id, txn.producer_epoch, parts)
                results.append((txn.transactional_id, parts, per))
                continue
            entry = (txn.transactional_id, parts, {})
            results.append(entry)
            w = self._call(txn.transactional_id, lambda s, r, txn=txn, parts=parts: s.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, parts, now, r), lambda c: (c,))
            waits.append((entry, w))

        def make():
            return R(error_code=0, results_by_transaction=[R.Result(
                transactional_id=tid, topic_results=_topic_results(parts, lambda tp: int(per.get(tp, 0))))
                for tid, parts, per in results])

        def fill(entry, code):
            entry[2].update({tp: int(code) for tp in entry[1]})
        if not any(type(w) is Reply for _, w in waits):
            for entry, w in waits:
                fill(entry, w[0])
            return make()

        async def later():
            try:
                for entry, w in waits:
                    fill(entry, ((await w) if type(w) is Reply else w)[0])
            except asyncio.CancelledError:
                for _, w in waits:
                    if type(w) is Reply:
                        w.cancel()
                raise
            return make()
        return later()

    def describe(self, request):
        R = DescribeTransactionsResponse
        S = R.TransactionState
        out = []
        for tid in request.transactional_ids:
            code, shard = self._shard(tid)
            s = None
            if shard is not None:
                code, s = shard.describe(tid)
            if s is None:
                out.append(S(error_code=code, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                             transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1))
                continue
            topics: dict = {}
            for topic, p in s.partitions:
                topics.setdefault(topic, []).append(p)
            out.append(S(error_code=E.NONE, transactional_id=tid, transaction_state=s.state,
                         transaction_timeout_ms=s.timeout_ms, transaction_start_time_ms=s.start_ms,
                         producer_id=s.producer_id, producer_epoch=s.producer_epoch,
                         topics=[S.TopicData(topic=t, partitions=ps) for t, ps in topics.items()]))
        return R(transaction_states=out)

    def list(self, request, now: int):
        R = ListTransactionsResponse
        states, unknown = valid_state_names(request.state_filters)
        pattern, ok = compile_pattern(request.transactional_id_pattern)
        if not ok:
            return R(error_code=E.INVALID_REQUEST, unknown_state_filters=unknown)
        code, out = E.NONE, []
        self.reconcile()
        for loaded in self.shards.values():
            if not loaded.ready:
                code = E.COORDINATOR_LOAD_IN_PROGRESS
                continue
            out.extend(loaded.shard.list(states, set(request.producer_id_filters), request.duration_filter,
                                         pattern, now))
        if code:
            return R(error_code=code, unknown_state_filters=unknown)
        return R(error_code=E.NONE, unknown_state_filters=unknown, transaction_states=[
            R.TransactionState(transactional_id=tid, producer_id=s.producer_id, transaction_state=s.state)
            for tid, s in out])

    # --- FindCoordinator -----------------------------------------------------------------------
    def coordinator(self, key: str, listener: str):
        """(error, message, node, host, port) of FindCoordinator for a transactional id."""
        unavailable = (E.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1)
        if not key:
            return (E.INVALID_REQUEST, "an empty transactional id", -1, "", -1)
        t = self.state.image.topics.by_name.get(TRANSACTION_TOPIC)
        if t is None or not t.partitions:
            self._create_topic()
            return unavailable
        reg = t.partitions.get(partition_for(key, len(t.partitions)))
        if reg is None or reg.leader < 0:
            return unavailable
        endpoint = self.state.leader_endpoint(reg.leader, listener)
        if endpoint is None:
            return unavailable
        return (E.NONE, None, reg.leader, endpoint[0], endpoint[1])

    def _create_topic(self) -> None:
        if self._creating or self.create_topic is None or time.monotonic() < self._create_again_at:
            return
        self._creating = True
        v = self.values
        T = CreateTopicsRequest.Topic
        C = T.Config
        req = CreateTopicsRequest(topics=[T(
            name=TRANSACTION_TOPIC, num_partitions=v["transaction.state.log.num.partitions"],
            replication_factor=v["transaction.state.log.replication.factor"],
            configs=[C(name="cleanup.policy", value="compact"), C(name="compression.type", value="uncompressed"),
                     C(name="min.insync.replicas", value=str(v["transaction.state.log.min.isr"])),
                     C(name="unclean.leader.election.enable", value="false"),
                     C(name="segment.bytes", value=str(v["transaction.state.log.segment.bytes"]))])],
            timeout_ms=30_000)

        async def create():
            try:
                resp = await self.create_topic(req)
                code = resp.topics[0].error_code
                if code not in (0, int(E.TOPIC_ALREADY_EXISTS)):
                    self._create_again_at = time.monotonic() + 1.0
                    log.warning("transactions: creating %s failed: %s %s", TRANSACTION_TOPIC, E(code).name,
                                resp.topics[0].error_message or "")
                else:
                    log.info("transactions: created %s", TRANSACTION_TOPIC)
            except KraftError as exc:
                self._create_again_at = time.monotonic() + 1.0
                log.warning("transactions: creating %s failed: %s", TRANSACTION_TOPIC, exc)
            finally:
                self._creating = False
        self._spawn(create())


def producer_ids_from(handler):
    """``new_producer_id`` over the broker's ``InitProducerIdHandler``: one id of its current
    block (fetched from the controller when used up), or None when none could be had."""
    def new_producer_id():
        got = handler.handle(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0), 0)
        if isinstance(got, asyncio.Future):
            async def wait():
                resp = await got
                return resp.producer_id if resp.error_code == 0 else None
            return wait()
        return got.producer_id if got.error_code == 0 else None
    return new_producer_id


def _topic_results(parts, code_of) -> list:
    topics: dict = {}
    for topic, p in parts:
        topics.setdefault(topic, []).append(p)
    return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=[
        AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=int(code_of((t, p))))
        for p in ps]) for t, ps in topics.items()]
