"""A reassignment as the brokers live it, in one process over real segment files and the
controller's own record builder (seed 003's reassignment; Kafka's KIP-455 flow): the image adds
broker 2 to an RF-1 partition whose leader already deleted its oldest segments; broker 2 makes
an empty log, fetches at 0, is told OFFSET_OUT_OF_RANGE and restarts its log at the leader's
log start, copies the rest; the leader proposes it into the ISR only once it caught up; the
controller's change record then completes the move (replicas = target, leader = first of
target); the old replica stops leading and its log is renamed ``-delete`` and removed.
Cancelling instead drops the new replica's log and leaves the leader as it was."""

from __future__ import annotations

import os
import uuid

from kraft.broker.broker_state import BrokerState
from kraft.broker.fetch_handler import FetchHandler
from kraft.broker.follower_log import LocalReplicas, apply_fetch_effects
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.broker.replica_fetcher import ReplicaFetchers, TruncateFullyAndStartAt
from kraft.controller.partition_change import build, reassignment_targets, reverted_reassignment
from kraft.errors import ErrorCode
from kraft.log.config import LogConfig
from kraft.metadata import MetadataDelta, PartitionRecord, RegisterBrokerRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import AlterPartitionResponse, EncodedParts, FetchResponse
from kraft.records import build_batch, iter_batches

TID = uuid.UUID(int=7)
TP = ("t", 0)


def _image(replicas=(1,)):
    d = MetadataDelta(EMPTY_IMAGE)
    for b in (1, 2):
        d.replay(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=1, end_points=[
            RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9000 + b)], fenced=False))
    d.replay(TopicRecord(name="t", topic_id=TID))
    d.replay(PartitionRecord(partition_id=0, topic_id=TID, replicas=list(replicas), isr=list(replicas),
                             removing_replicas=[], adding_replicas=[], leader=replicas[0], leader_epoch=1,
                             partition_epoch=1))
    return d.apply()


def _changed(image, record):
    d = MetadataDelta(image)
    d.replay(record)
    return d.apply()


def _reg(image):
    return image.topics.by_name["t"].partitions[0]


class Broker:
    def __init__(self, tmp_path, broker_id, image):
        self.dir = str(tmp_path / f"b{broker_id}")
        self.logs = PartitionLogs([self.dir], LogConfig(segment_bytes=400))
        self.state = BrokerState(broker_id, self.logs)
        self.fetch = FetchHandler(self.state)
        self.fetchers = ReplicaFetchers(broker_id, LocalReplicas(self.logs), max_wait_ms=0)
        self.publish(image)

    def publish(self, image):
        changes = publish_image(self.logs, self.state.image, image, self.state.broker_id)
        self.state.image = image
        self.fetchers.on_image(image)
        self.state.replication.on_image(image, self.logs)
        return changes

    @property
    def plog(self):
        return self.logs.get(*TP)

    def values(self):
        log = self.plog.log
        data = bytes(log.read(log.start_offset, 1 << 20)) if log.end_offset > log.start_offset else b""
        return [(r.offset, r.value) for b in iter_batches(data) for r in b]

    def close(self):
        self.logs.close()


def _round(follower, leader) -> list:
    effects_all = []
    for f in list(follower.fetchers.fetchers.values()):
        req = f.poll(0)
        if req is None:
            continue
        out = leader.fetch.handle(req, 13)
        body = b"".join(bytes(p) for p in out) if isinstance(out, EncodedParts) else out.encode(13)
        effects = f.on_response(FetchResponse.decode(body, 13), 0)
        apply_fetch_effects(follower.logs, effects, follower.state.producer_states)
        effects_all += effects
    return effects_all


def _accept(image) -> callable:
    return lambda b: b in image.cluster.brokers


def test_a_moved_replica_copies_from_the_leaders_log_start_joins_the_isr_then_the_old_one_goes(tmp_path):
    image = _image((1,))
    a = Broker(tmp_path, 1, image)
    for i in range(30):  # 30 one-record batches over several 400-byte segments
        a.plog.log.append(bytearray(build_batch([b"v%02d" % i])), assign_offsets=True, leader_epoch=1)
    a.state.advance_high_watermark(a.plog, _reg(image))
    assert a.plog.log.delete_below(20) > 0 and a.plog.log.start_offset > 0  # retention took the oldest
    start = a.plog.log.start_offset
    b = Broker(tmp_path, 2, image)
    try:
        assert b.plog is None
        # AlterPartitionReassignments [1] -> [2]: replicas [2, 1], adding [2], removing [1].
        replicas, removing, adding = reassignment_targets(_reg(image).replicas, [2])
        rec = build(TID, 0, _reg(image), _accept(image), target_replicas=replicas, target_removing=removing,
                    target_adding=adding)
        image = _changed(image, rec)
        assert _reg(image).leader == 1 and _reg(image).isr == (1,)  # nothing moves before 2 caught up
        a.publish(image)
        assert b.publish(image).created == [TP] and b.plog.log.end_offset == 0

        effects = _round(b, a)  # fetch at 0: below the leader's log start
        assert effects == [TruncateFullyAndStartAt(TP, start)]
        assert b.plog.log.start_offset == start
        assert a.state.replication.poll_alter_partition() is None  # not caught up: no ISR change yet
        for _ in range(10):
            _round(b, a)
        assert b.values() == a.values() and b.plog.log.end_offset == 30
        # The leader proposes the caught-up replica into the ISR (AlterPartition).
        req = a.state.replication.poll_alter_partition()
        assert req is not None and req.topics[0].partitions[0].new_isr == [1, 2]

        # The controller applies the ISR change: the reassignment completes in the same record.
        rec = build(TID, 0, _reg(image), _accept(image), target_isr=(1, 2))
        assert rec.replicas == (2,) and rec.leader == 2 and rec.removing_replicas == () and rec.adding_replicas == ()
        image = _changed(image, rec)
        assert _reg(image).isr == (2,) and _reg(image).leader_epoch == 2
        old_dir = a.plog.directory
        assert a.publish(image).deleted == [TP]
        assert a.plog is None and not os.path.exists(old_dir)  # renamed -delete at once
        a.logs.wait_for_deletions(10)
        assert [n for n in os.listdir(a.dir) if n.startswith("t-0")] == []  # and removed
        b.publish(image)
        # it leads now: nothing to fetch (a fetcher may remain only to close its session)
        assert not any(f.partitions for f in b.fetchers.fetchers.values())
        assert b.state.local_leader("t", 0)[0] == 0
    finally:
        a.close()
        b.close()


def test_a_cancelled_reassignment_drops_the_new_replicas_log_and_keeps_the_leader(tmp_path):
    image = _image((1,))
    a = Broker(tmp_path, 1, image)
    b = Broker(tmp_path, 2, image)
    try:
        for i in range(5):
            a.plog.log.append(bytearray(build_batch([b"w%d" % i])), assign_offsets=True, leader_epoch=1)
        replicas, removing, adding = reassignment_targets(_reg(image).replicas, [2])
        image = _changed(image, build(TID, 0, _reg(image), _accept(image), target_replicas=replicas,
                                      target_removing=removing, target_adding=adding))
        a.publish(image)
        b.publish(image)
        _round(b, a)
        assert b.plog is not None and b.plog.log.end_offset == 5
        # Cancelled before broker 2 joined the ISR: back to [1].
        replicas, isr, unclean = reverted_reassignment(_reg(image))
        assert (replicas, isr, unclean) == ((1,), (1,), False)
        image = _changed(image, build(TID, 0, _reg(image), _accept(image), target_isr=isr, target_replicas=replicas,
                                      target_removing=(), target_adding=()))
        assert _reg(image).replicas == (1,) and _reg(image).leader == 1
        assert b.publish(image).deleted == [TP] and not any(f.partitions for f in b.fetchers.fetchers.values())
        a.publish(image)
        assert a.state.local_leader("t", 0)[0] == 0 and len(a.values()) == 5
    finally:
        a.close()
        b.close()


def test_writes_after_the_isr_expansion_is_proposed_wait_for_the_new_replica(tmp_path):
    """The leader alone in the ISR proposed the caught-up new replica (AlterPartition in
    flight). The controller will complete the reassignment in the same record and may make the
    new replica leader, so from the proposal on the HW is the maximal ISR's: a write the new
    replica has not fetched is not acknowledged (else it would be lost with the move), also
    after the controller answered NEW_LEADER_ELECTED and before the image shows it."""
    image = _image((1,))
    a = Broker(tmp_path, 1, image)
    b = Broker(tmp_path, 2, image)
    try:
        replicas, removing, adding = reassignment_targets(_reg(image).replicas, [2])
        image = _changed(image, build(TID, 0, _reg(image), _accept(image), target_replicas=replicas,
                                      target_removing=removing, target_adding=adding))
        a.publish(image)
        b.publish(image)

        def write(n):
            for i in range(n):
                a.plog.log.append(bytearray(build_batch([b"x"])), assign_offsets=True, leader_epoch=1)
            return a.state.advance_high_watermark(a.plog, _reg(image))
        assert write(5) == 5  # ISR {1}: the leader's end is the HW
        _round(b, a)
        _round(b, a)  # the fetch at 5 shows it caught up: expansion proposed
        assert a.state.replication.poll_alter_partition().topics[0].partitions[0].new_isr == [1, 2]
        assert write(3) == 5  # the committed ISR is still {1}, but broker 2 lacks 5..7
        # The controller applied it and completed the move: broker 2 leads. Until the image
        # says so, broker 1 still waits for broker 2 (Kafka keeps the state pending).
        A = AlterPartitionResponse
        a.state.replication.on_alter_partition_response(A(error_code=0, topics=[A.Topic(topic_id=TID, partitions=[
            A.Topic.Partition(partition_index=0, error_code=int(ErrorCode.NEW_LEADER_ELECTED), leader_id=-1,
                              leader_epoch=-1, isr=[], partition_epoch=-1)])]))
        assert write(2) == 5
        _round(b, a)
        _round(b, a)
        assert a.state.advance_high_watermark(a.plog, _reg(image)) == 10 and b.plog.log.end_offset == 10
    finally:
        a.close()
        b.close()
