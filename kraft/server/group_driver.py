"""The group coordinator on a broker's event loop: the I/O around ``kraft.coordinator``.

For every ``__consumer_offsets`` partition this broker leads, a ``GroupShard`` loaded by
replaying the partition (read off the loop, applied on it); losing the leadership (or a new
leader epoch) unloads it and its waiting answers get NOT_COORDINATOR. A shard's records are
appended through the broker's own produce path with acks=all, so a commit is answered only once
the partition's high watermark covers it (``offsets.commit.required.acks``). One timer
(``TICK_S``) drives session expiries and join phases, reconciles leadership with the image and
runs offsets retention every ``offsets.retention.check.interval.ms``.

``__consumer_offsets`` is created through the controller (``create_topic``) on the first
FindCoordinator, with ``offsets.topic.num.partitions`` / ``offsets.topic.replication.factor``
(not capped by the live brokers: Kafka's KRaft brokers answer COORDINATOR_NOT_AVAILABLE until
enough brokers are there), ``cleanup.policy=compact``, ``compression.type=producer`` and
``segment.bytes`` = ``offsets.topic.segment.bytes``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid

from kraft.coordinator.group_records import OFFSETS_TOPIC, partition_for
from kraft.coordinator.group_shard import GroupConfig, GroupShard
from kraft.errors import ErrorCode as E
from kraft.errors import KraftError
from kraft.metadata.authorization import authorizer_configured
from kraft.metadata.configs import GROUP
from kraft.protocol import (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
                            ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, CreateTopicsRequest,
                            DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
                            DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
                            HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
                            LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse,
                            OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
                            OffsetFetchRequest, OffsetFetchResponse, ProduceRequest, SyncGroupRequest,
                            SyncGroupResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse)
from kraft.protocol.messages.group_membership import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION
from kraft.records import build_batch
from kraft.server.partition_loader import read_partition_records, reconcile_shards
from kraft.server.reply import Reply, mapped

log = logging.getLogger("kraft.groups")

TICK_S = 0.05
#: Appends of one loop turn written as one batch, up to these (well below message.max.bytes).
COALESCE_RECORDS, COALESCE_BYTES = 4000, 512 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


def group_config(values: dict) -> GroupConfig:
    return GroupConfig(min_session_timeout_ms=values["group.min.session.timeout.ms"],
                       max_session_timeout_ms=values["group.max.session.timeout.ms"],
                       initial_rebalance_delay_ms=values["group.initial.rebalance.delay.ms"],
                       max_size=values["group.max.size"],
                       offset_metadata_max_bytes=values["offset.metadata.max.bytes"],
                       offsets_retention_ms=values["offsets.retention.minutes"] * 60_000,
                       consumer_heartbeat_interval_ms=values["group.consumer.heartbeat.interval.ms"],
                       consumer_session_timeout_ms=values["group.consumer.session.timeout.ms"],
                       consumer_rebalance_heartbeat_interval_ms=values[
                           "kraft.group.consumer.rebalance.heartbeat.interval.ms"],
                       consumer_max_size=values["group.consumer.max.size"],
                       consumer_migration_policy=values["group.consumer.migration.policy"].strip().lower(),
                       consumer_assignors=tuple(a.strip() for a in values["group.consumer.assignors"].split(",")
                                                if a.strip()) or ("uniform", "range"),
                       regex_needs_describe=authorizer_configured(values))


class ImageTopics:
    """The topics of the broker's current metadata image, as a shard's consumer groups see
    them (``kraft.coordinator.consumer_group.TopicsView``'s interface)."""

    def __init__(self, state):
        self.state = state

    def lookup(self, name: str):
        t = self.state.image.topics.by_name.get(name)
        return None if t is None else (t.id, len(t.partitions))

    def name_of(self, topic_id):
        t = self.state.image.topics.by_id.get(topic_id)
        return None if t is None else t.name

    def names(self):
        return self.state.image.topics.by_name.keys()


class _Loaded:
    __slots__ = ("shard", "epoch", "ready", "plog")

    def __init__(self, shard, epoch, plog):
        self.shard, self.epoch, self.plog, self.ready = shard, epoch, plog, False


class GroupDriver:
    def __init__(self, state, produce, values: dict, *, create_topic=None, executor=None):
        """``produce``: the broker's ProduceHandler; ``create_topic(request)``: an awaitable
        CreateTopics call on the controller (None: the topic must already be in the image)."""
        self.state = state
        self.produce = produce
        self.values = values
        self.config = group_config(values)
        self.config.group_overrides = lambda group_id: state.image.configs.config(GROUP, group_id)
        self.create_topic = create_topic
        self.executor = executor or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-groups")
        self.shards: dict[int, _Loaded] = {}
        self._creating = False
        self._create_again_at = 0.0
        self._timer = None
        self._tasks: set = set()
        self._next_retention_ms = 0
        self._queued: dict[int, list] = {}  # partition -> appends waiting for their write
        self._queued_records = 0
        self._write_scheduled = False
        self._write_timer = None  # the linger's timer while it runs
        self._linger_s = values["group.coordinator.append.linger.ms"] / 1000
        #: the transaction coordinator (``TxnDriver``): FindCoordinator for transactional ids
        self.transactions = None

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        for loaded in self.shards.values():
            loaded.shard.unload()
        self.shards.clear()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def _tick(self) -> None:
        try:
            self.reconcile()
            now = _now_ms()
            retention = now >= self._next_retention_ms
            if retention:
                self._next_retention_ms = now + self.values["offsets.retention.check.interval.ms"]
            for p, loaded in list(self.shards.items()):
                if loaded.ready:
                    loaded.shard.tick(now)
                    if retention:
                        loaded.shard.expire_offsets(now)
                    self._drain(p)
        except Exception:  # a bug here must not stop the timer: log it and go on
            log.exception("group coordinator tick failed")
        self._timer = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def reconcile(self) -> None:
        """Load the shards of partitions this broker now leads, unload the others."""
        reconcile_shards(self.state, OFFSETS_TOPIC, self.shards, self._load, log, "groups")

    def _load(self, p: int, epoch: int, plog) -> None:
        shard = GroupShard(p, self.config, new_member_id=lambda client_id: f"{client_id}-{uuid.uuid4()}",
                           topics=ImageTopics(self.state))
        loaded = self.shards[p] = _Loaded(shard, epoch, plog)
        began = time.monotonic()
        fut = asyncio.get_running_loop().run_in_executor(self.executor, read_partition_records, plog)

        def done(f):
            if self.shards.get(p) is not loaded:
                return
            try:
                records, bad = f.result()
                now = _now_ms()
                for decoded in records:
                    shard.apply(decoded, now)
                if bad:
                    log.error("groups: %s-%d: %d records did not decode and were skipped", OFFSETS_TOPIC, p, bad)
            except (KraftError, OSError, concurrent.futures.CancelledError) as exc:
                log.error("groups: loading %s-%d failed: %s", OFFSETS_TOPIC, p, exc)
                del self.shards[p]  # the next tick tries again
                return
            loaded.ready = True
            (log.info if records else log.debug)(
                "groups: loaded %s-%d in leader epoch %d: %d records, %d groups in %.0f ms", OFFSETS_TOPIC, p, epoch,
                len(records), len(shard.groups), (time.monotonic() - began) * 1000)
        fut.add_done_callback(done)

    # --- appending -----------------------------------------------------------------------------
    def _drain(self, p: int) -> None:
        """Queue the shard's new appends. They are written together once the first of them has
        waited ``group.coordinator.append.linger.ms`` (Kafka's coordinator runtime, default
        5 ms), at the end of this loop turn when that is 0, and at once (end of turn) when a
        transactional one is among them or the batch is full: the commits of many clients
        share one batch, one append and one acks=all wait. Most of a commit's CPU is per
        batch (the leader's append and fsync, each follower's Fetch round), so a batch
        gathered over a few ms instead of one turn costs much less per commit."""
        loaded = self.shards.get(p)
        if loaded is None:
            return
        appends = loaded.shard.take_appends()
        if not appends:
            return
        queue = self._queued.get(p)
        if queue is None:
            queue = self._queued[p] = []
        now = self._linger_s <= 0
        for a in appends:
            queue.append((loaded, a))
            self._queued_records += len(a.records)
            now = now or a.producer_id >= 0  # Kafka does not hold transactional writes back
        if now or self._queued_records >= COALESCE_RECORDS:
            self._write_soon()
        elif self._write_timer is None and not self._write_scheduled:
            self._write_timer = asyncio.get_running_loop().call_later(self._linger_s, self._write_queued)

    def _write_soon(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        if not self._write_scheduled:
            self._write_scheduled = True
            asyncio.get_running_loop().call_soon(self._write_queued)

    def _write_queued(self) -> None:
        self._write_scheduled = False
        if self._write_timer is not None:  # appends queued after this write was scheduled
            self._write_timer.cancel()
            self._write_timer = None
        queued, self._queued = self._queued, {}
        self._queued_records = 0
        for p, entries in queued.items():
            # Appends of a shard unloaded (or reloaded) meanwhile are not written: the shard
            # now loaded replayed the log without them and would never see them.
            stale = [a for loaded, a in entries if self.shards.get(p) is not loaded]
            if stale:
                self._appended(p, stale, int(E.NOT_LEADER_OR_FOLLOWER))
            appends = [a for loaded, a in entries if self.shards.get(p) is loaded]
            group, records, size = [], 0, 0
            for append in appends:
                if append.producer_id >= 0:  # transactional: a batch of its producer, alone
                    self._append(p, [append])
                    continue
                n = sum(len(r.key) + len(r.value or b"") for r in append.records)
                if group and (records + len(append.records) > COALESCE_RECORDS or size + n > COALESCE_BYTES):
                    self._append(p, group)
                    group, records, size = [], 0, 0
                group.append(append)
                records += len(append.records)
                size += n
            if group:
                self._append(p, group)

    def _append(self, p: int, appends: list) -> None:
        P = ProduceRequest
        records = [r for a in appends for r in a.records]
        first = appends[0]
        # A producer's transactional offsets go as its batch at sequence 0, as Kafka's coordinator
        # writes them: the partition checks only their epoch (a coordinator write, not a client's).
        seq = -1 if first.producer_id < 0 else 0
        batch = build_batch([r.value for r in records], keys=[r.key for r in records], producer_id=first.producer_id,
                            producer_epoch=first.producer_epoch, transactional=first.producer_id >= 0,
                            base_sequence=seq)
        req = P(transactional_id=None, acks=-1, timeout_ms=self.values["offsets.commit.timeout.ms"],
                topic_data=[P.Topic(name=OFFSETS_TOPIC, partition_data=[P.Topic.Partition(index=p, records=batch)])])
        try:
            result = self.produce.handle(req, 9, "", internal=True)
        except KraftError as exc:
            return self._appended(p, appends, int(exc.code))
        if isinstance(result, asyncio.Future):
            result.add_done_callback(lambda f: self._appended(p, appends, _produce_code(f)))
        else:
            self._appended(p, appends, _produce_code(result))

    def _appended(self, p: int, appends: list, code: int) -> None:
        if code != 0:
            log.warning("groups: appending to %s-%d failed: %s", OFFSETS_TOPIC, p, E(code).name)
        try:
            for append in appends:
                if code == 0:
                    if append.on_durable is not None:
                        append.on_durable()
                elif append.on_failed is not None:
                    append.on_failed(code)
        finally:
            self._drain(p)

    # --- requests ------------------------------------------------------------------------------
    def _shard(self, group_id: str):
        """(error, shard): the shard coordinating ``group_id`` here, or why not."""
        t = self.state.image.topics.by_name.get(OFFSETS_TOPIC)
        if t is None or not t.partitions:
            return E.COORDINATOR_NOT_AVAILABLE, None
        p = partition_for(group_id or "", len(t.partitions))
        loaded = self.shards.get(p)
        if loaded is None:
            self.reconcile()  # led since the last tick? then its load starts now
            loaded = self.shards.get(p)
            if loaded is None:
                return E.NOT_COORDINATOR, None
        if not loaded.ready:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        return E.NONE, loaded.shard

    def _call(self, group_id: str, fn, error_answer):
        """Run ``fn(shard, respond)`` on the group's shard; an answer now or a future of it."""
        code, shard = self._shard(group_id)
        if shard is None:
            return error_answer(code)
        box = []
        fut = None

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
        return fut


    def handle(self, ctx, request):
        version = ctx.header.api_version
        kind = type(request)
        now = _now_ms()
        if kind is FindCoordinatorRequest:
            return self.find_coordinator(request, version, ctx.listener)
        if kind is JoinGroupRequest:
            host = "/" + ctx.peer.rsplit(":", 1)[0]
            return mapped(self._call(request.group_id, lambda s, r: s.join(
                request, version, now, ctx.header.client_id or "", host, r),
                lambda c: (JoinGroupResponse(error_code=c, member_id=request.member_id,
                                             protocol_name=None if version >= 7 else ""),)), lambda x: x)
        if kind is SyncGroupRequest:
            return mapped(self._call(request.group_id, lambda s, r: s.sync(request, version, now, r),
                                           lambda c: (SyncGroupResponse(error_code=c),)), lambda x: x)
        if kind is HeartbeatRequest:
            return mapped(self._call(request.group_id, lambda s, r: r(s.heartbeat(request, now)),
                                           lambda c: (HeartbeatResponse(error_code=c),)), lambda x: x)
        if kind is LeaveGroupRequest:
            return mapped(self._call(request.group_id, lambda s, r: r(s.leave(request, version, now)),
                                           lambda c: (LeaveGroupResponse(error_code=c),)), lambda x: x)
        if kind is ConsumerGroupHeartbeatRequest:
            host = "/" + ctx.peer.rsplit(":", 1)[0]
            return mapped(self._call(request.group_id, lambda s, r: s.consumer_heartbeat(
                request, version, now, ctx.header.client_id or "", host, r, ctx.may_describe_topic),
                lambda c: (ConsumerGroupHeartbeatResponse(error_code=c),)), lambda x: x)
        if kind is ConsumerGroupDescribeRequest:
            G = ConsumerGroupDescribeResponse.Group
            out = []
            for gid in request.group_ids:
                code, shard = self._shard(gid)
                out.append(shard.consumer_describe(gid) if shard is not None else G(error_code=code, group_id=gid))
            return ConsumerGroupDescribeResponse(groups=out)
        if kind is OffsetCommitRequest:
            return self.offset_commit(request, version, now)
        if kind is TxnOffsetCommitRequest:
            return self.txn_offset_commit(request, version, now)
        if kind is OffsetFetchRequest:
            return self.offset_fetch(request, version)
        if kind is ListGroupsRequest:
            groups = []
            code = E.NONE
            for loaded in self.shards.values():
                if loaded.ready:
                    groups.extend(loaded.shard.list_groups(request.states_filter, request.types_filter))
                else:
                    code = E.COORDINATOR_LOAD_IN_PROGRESS
            return ListGroupsResponse(error_code=code, groups=groups)
        if kind is DescribeGroupsRequest:
            G = DescribeGroupsResponse.Group
            out = []
            for gid in request.groups:
                code, shard = self._shard(gid)
                out.append(shard.describe(gid) if shard is not None else
                           G(error_code=code, group_id=gid, group_state="", protocol_type="", protocol_data=""))
            return DescribeGroupsResponse(groups=out)
        if kind is DeleteGroupsRequest:
            return self.delete_groups(request)
        if kind is OffsetDeleteRequest:
            R = OffsetDeleteResponse
            topics = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]

            def make(code, codes):
                return R(error_code=code, topics=[] if code else [R.Topic(name=n, partitions=[
                    R.Topic.Partition(partition_index=p, error_code=codes.get((n, p), E.NONE)) for p in parts])
                    for n, parts in topics])
            return mapped(self._call(request.group_id, lambda s, r: s.delete_offsets(
                request.group_id, topics, r), lambda c: (c, {})), make)
        raise KraftError(f"{kind.__name__} is not a group request")

    def offset_commit(self, request, version: int, now: int):
        """Partitions of topics the image lacks are answered UNKNOWN_TOPIC_OR_PARTITION and not
        written (Kafka's KafkaApis does the same before the coordinator sees the request)."""
        R = OffsetCommitResponse
        topics = self.state.image.topics.by_name
        unknown = [R.Topic(name=t.name, partitions=[
            R.Topic.Partition(partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION)
            for p in t.partitions]) for t in request.topics if t.name not in topics]
        if unknown:
            request.topics = [t for t in request.topics if t.name in topics]

        def make(resp):
            resp.topics.extend(unknown)
            return resp
        return mapped(self._call(request.group_id, lambda s, r: s.commit(request, version, now, r),
                                       lambda c: (R(topics=[R.Topic(name=t.name, partitions=[
                                           R.Topic.Partition(partition_index=p.partition_index, error_code=c)
                                           for p in t.partitions]) for t in request.topics]),)), make)

    def txn_offset_commit(self, request, version: int, now: int):
        """TxnOffsetCommit: the offsets are pending in the group's shard until the producer's
        marker lands on its partition (``txn_marker_written``)."""
        R = TxnOffsetCommitResponse
        topics = self.state.image.topics.by_name
        unknown = [R.Topic(name=t.name, partitions=[
            R.Topic.Partition(partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION)
            for p in t.partitions]) for t in request.topics if t.name not in topics]
        if unknown:
            request.topics = [t for t in request.topics if t.name in topics]

        def make(resp):
            resp.topics.extend(unknown)
            return resp
        return mapped(self._call(request.group_id, lambda s, r: s.txn_commit(request, version, now, r),
                                       lambda c: (R(topics=[R.Topic(name=t.name, partitions=[
                                           R.Topic.Partition(partition_index=p.partition_index, error_code=c)
                                           for p in t.partitions]) for t in request.topics]),)), make)

    def txn_marker_written(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                           committed: bool) -> None:
        """The partition side's hook (its WriteTxnMarkers handler calls it once a marker is
        durable on any partition): on a ``__consumer_offsets`` partition this broker
        coordinates, the producer's pending transactional offsets become committed (COMMIT) or
        are dropped (ABORT)."""
        if topic != OFFSETS_TOPIC:
            return
        loaded = self.shards.get(partition)
        if loaded is not None and loaded.ready:
            loaded.shard.complete_txn(producer_id, committed, _now_ms())

    # --- FindCoordinator -----------------------------------------------------------------------
    def find_coordinator(self, request, version: int, listener: str):
        R = FindCoordinatorResponse
        keys = request.coordinator_keys if version >= 4 else [request.key]
        key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
        answers = [self._coordinator(key, key_type, listener) for key in keys]
        if version >= 4:
            return R(coordinators=[R.Coordinator(key=k, node_id=n, host=h, port=p, error_code=c, error_message=m)
                                   for k, (c, m, n, h, p) in zip(keys, answers)])
        c, m, n, h, p = answers[0]
        return R(error_code=c, error_message=m, node_id=n, host=h, port=p)

    def _coordinator(self, key: str, key_type: int, listener: str):
        unavailable = (E.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1)
        if key_type == KEY_TYPE_TRANSACTION:
            if self.transactions is None:
                return (E.COORDINATOR_NOT_AVAILABLE, "no transaction coordinator on this broker", -1, "", -1)
            return self.transactions.coordinator(key, listener)
        if key_type != KEY_TYPE_GROUP:
            return (E.INVALID_REQUEST, f"unsupported key type {key_type}", -1, "", -1)
        if not key:
            return (E.INVALID_REQUEST, "an empty group id", -1, "", -1)
        t = self.state.image.topics.by_name.get(OFFSETS_TOPIC)
        if t is None or not t.partitions:
            self._create_offsets_topic()
            return unavailable
        reg = t.partitions.get(partition_for(key, len(t.partitions)))
        if reg is None or reg.leader < 0:
            return unavailable
        endpoint = self.state.leader_endpoint(reg.leader, listener)
        if endpoint is None:
            return unavailable
        host, port = endpoint[0], endpoint[1]
        return (E.NONE, None, reg.leader, host, port)

    def _create_offsets_topic(self) -> None:
        if self._creating or self.create_topic is None or time.monotonic() < self._create_again_at:
            return
        self._creating = True
        v = self.values
        T = CreateTopicsRequest.Topic
        C = T.Config
        req = CreateTopicsRequest(topics=[T(
            name=OFFSETS_TOPIC, num_partitions=v["offsets.topic.num.partitions"],
            replication_factor=v["offsets.topic.replication.factor"],
            configs=[C(name="cleanup.policy", value="compact"), C(name="compression.type", value="producer"),
                     C(name="segment.bytes", value=str(v["offsets.topic.segment.bytes"]))])], timeout_ms=30_000)

        async def create():
            try:
                resp = await self.create_topic(req)
                code = resp.topics[0].error_code
                if code not in (0, int(E.TOPIC_ALREADY_EXISTS)):
                    # e.g. fewer live brokers than offsets.topic.replication.factor: clients keep
                    # asking; the controller is asked again at most once a second.
                    self._create_again_at = time.monotonic() + 1.0
                    log.warning("groups: creating %s failed: %s %s", OFFSETS_TOPIC, E(code).name,
                                resp.topics[0].error_message or "")
                else:
                    log.info("groups: created %s", OFFSETS_TOPIC)
            except KraftError as exc:
                self._create_again_at = time.monotonic() + 1.0
                log.warning("groups: creating %s failed: %s", OFFSETS_TOPIC, exc)
            finally:
                self._creating = False
        task = asyncio.get_running_loop().create_task(create())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- OffsetFetch / DeleteGroups ------------------------------------------------------------
    def offset_fetch(self, request, version: int):
        R = OffsetFetchResponse
        if version >= 8:
            asks = [(g.group_id, None if g.topics is None else [(t.name, list(t.partition_indexes))
                                                                 for t in g.topics], g.member_id, g.member_epoch)
                    for g in request.groups]
        else:
            asks = [(request.group_id, None if request.topics is None else
                     [(t.name, list(t.partition_indexes)) for t in request.topics], None, -1)]
        results = []
        unstable = set()  # (group, topic, partition) with transactional offsets pending
        for gid, topics, member_id, member_epoch in asks:
            code, shard = self._shard(gid)
            if shard is not None:
                code, found = shard.fetch_offsets(gid, topics, member_id, member_epoch)
                if version >= 7 and request.require_stable and shard.pending_txn:
                    # KIP-447: a read_committed consumer waits until the producer's marker lands.
                    unstable.update((gid, n, p) for n, parts in found for p, _ in parts
                                    if shard.has_pending_txn_offsets(gid, n, p))
            else:
                found = [(n, [(p, None) for p in parts]) for n, parts in (topics or [])]
            results.append((gid, code, found))
        if version >= 8:
            GT = R.Group.Topic
            return R(groups=[R.Group(group_id=gid, error_code=code, topics=[GT(name=n, partitions=[
                GT.Partition(partition_index=p, committed_offset=e.offset if e else -1,
                             committed_leader_epoch=e.leader_epoch if e else -1, metadata=e.metadata if e else "",
                             error_code=E.UNSTABLE_OFFSET_COMMIT if (gid, n, p) in unstable else E.NONE)
                for p, e in parts]) for n, parts in found]) for gid, code, found in results])
        gid, code, found = results[0]
        T = R.Topic
        part_code = code if version < 2 else E.NONE
        return R(error_code=code, topics=[T(name=n, partitions=[
            T.Partition(partition_index=p, committed_offset=e.offset if e else -1,
                        committed_leader_epoch=e.leader_epoch if e else -1, metadata=e.metadata if e else "",
                        error_code=E.UNSTABLE_OFFSET_COMMIT if (gid, n, p) in unstable else part_code)
            for p, e in parts]) for n, parts in found])

    def delete_groups(self, request):
        R = DeleteGroupsResponse
        codes: dict = {}
        by_shard: dict = {}
        for gid in request.groups_names:
            code, shard = self._shard(gid)
            if shard is None:
                codes[gid] = code
            else:
                by_shard.setdefault(shard.partition, (shard, []))[1].append(gid)
        waits = []
        for p, (shard, gids) in by_shard.items():
            result = self._call(gids[0], lambda s, r, gids=gids: s.delete_groups(gids, r, _now_ms()), None)
            waits.append(result)

        def make():
            return R(results=[R.Result(group_id=g, error_code=codes[g]) for g in request.groups_names])
        if not any(type(w) is Reply for w in waits):
            for w in waits:
                codes.update(w[0])
            return make()

        async def later():
            for w in waits:
                answer = (await w) if type(w) is Reply else w
                codes.update(answer[0])
            return make()
        return later()


def _produce_code(result) -> int:
    if isinstance(result, asyncio.Future):
        if result.cancelled():
            return int(E.REQUEST_TIMED_OUT)
        exc = result.exception()
        if exc is not None:
            return int(getattr(exc, "code", E.UNKNOWN_SERVER_ERROR))
        result = result.result()
    return int(result.responses[0].partition_responses[0].error_code)
