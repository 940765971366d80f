"""Transactional offset commits in the group coordinator (TxnOffsetCommit, KIP-98): pending per
producer until the transaction's marker lands on the group's partition; COMMIT makes them the
group's offsets, ABORT drops them; a shard loaded from the log (transactional batches and
control markers) ends with the same offsets."""

from kraft.coordinator.group_records import decode_record
from kraft.coordinator.group_shard import GroupShard
from kraft.coordinator.shard_state import TxnMarker, TxnOffsets
from kraft.errors import ErrorCode as E
from kraft.protocol import TxnOffsetCommitRequest

T = TxnOffsetCommitRequest.Topic


def _req(pid, offset, group="g", partitions=(0,), metadata="m", member_id="", generation=-1):
    return TxnOffsetCommitRequest(
        transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=0, generation_id=generation,
        member_id=member_id, topics=[T(name="t", partitions=[T.Partition(
            partition_index=p, committed_offset=offset, committed_metadata=metadata) for p in partitions])])


def _commit(shard, req, log=None, version=3):
    answers = []
    shard.txn_commit(req, version, 100, answers.append)
    for a in shard.take_appends():
        assert a.producer_id == req.producer_id and a.producer_epoch == req.producer_epoch  # a transactional batch
        if log is not None:
            log.extend((a.producer_id, r) for r in a.records)
        a.on_durable()
    (resp,) = answers
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def _offset(shard, group="g", partition=0):
    code, [(_, [(_, entry)])] = shard.fetch_offsets(group, [("t", [partition])])
    return None if entry is None else entry.offset


def test_txn_offsets_are_invisible_until_commit_marker():
    s = GroupShard(0)
    assert _commit(s, _req(7, 42)) == {("t", 0): E.NONE}
    assert _offset(s) is None and s.has_pending_txn_offsets("g", "t", 0)
    s.complete_txn(7, committed=True)
    assert _offset(s) == 42 and not s.has_pending_txn_offsets("g", "t", 0)


def test_abort_marker_drops_them_and_other_producers_are_untouched():
    s = GroupShard(0)
    _commit(s, _req(7, 42))
    _commit(s, _req(8, 50, partitions=(1,)))
    s.complete_txn(7, committed=False)
    assert _offset(s) is None
    s.complete_txn(8, committed=True)
    assert _offset(s, partition=1) == 50 and _offset(s) is None


def test_a_later_commit_of_the_same_transaction_overwrites():
    s = GroupShard(0)
    _commit(s, _req(7, 10))
    _commit(s, _req(7, 20))
    s.complete_txn(7, committed=True)
    assert _offset(s) == 20


def test_refusals():
    s = GroupShard(0, )
    assert _commit(s, _req(7, 1, group="")) == {("t", 0): E.INVALID_GROUP_ID}
    assert _commit(s, _req(7, 1, metadata="x" * 5000)) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    from kraft.coordinator.classic_group import ClassicGroup
    s.groups["g"] = ClassicGroup("g", 0)
    assert _commit(s, _req(7, 1, member_id="ghost", generation=1)) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_a_member_that_lost_its_membership_cannot_commit_with_its_old_generation():
    """librdkafka's consumer, told its member is unknown (paused past its session), clears its
    member id but keeps its generation; a copier whose partitions moved to another member must
    not commit their offsets then (the 30-minute exactly-once run caught 12 duplicates and
    offsets going backwards when this was accepted). Kafka checks the member once any of
    member id, generation or instance id is given."""
    from kraft.coordinator.classic_group import STABLE, ClassicGroup, ClassicMember
    s = GroupShard(0)
    g = s.groups["g"] = ClassicGroup("g", 0)
    g.generation, g.state = 4, STABLE
    g.members["m-new"] = ClassicMember("m-new", None, "c", "h", 6000, 6000, "consumer", [("range", b"")])
    assert _commit(s, _req(7, 1, member_id="", generation=3)) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert _commit(s, _req(7, 1, member_id="m-new", generation=3)) == {("t", 0): E.ILLEGAL_GENERATION}
    assert _commit(s, _req(7, 1, member_id="m-new", generation=4)) == {("t", 0): E.NONE}
    # A producer committing offsets outside group management (no member fields) is accepted.
    assert _commit(s, _req(8, 1, member_id="", generation=-1)) == {("t", 0): E.NONE}
    assert _commit(s, _req(9, 1), version=2) == {("t", 0): E.NONE}


def test_failed_write_answers_a_coordinator_error_and_keeps_nothing():
    s = GroupShard(0)
    answers = []
    s.txn_commit(_req(7, 5), 3, 100, answers.append)
    for a in s.take_appends():
        a.on_failed(E.NOT_LEADER_OR_FOLLOWER)
    assert answers[0].topics[0].partitions[0].error_code == E.NOT_COORDINATOR
    s.complete_txn(7, committed=True)
    assert _offset(s) is None


def test_replay_of_transactional_batches_and_markers():
    s = GroupShard(0)
    log = []
    _commit(s, _req(7, 42), log)
    _commit(s, _req(8, 99, partitions=(1,)), log)
    _commit(s, _req(9, 77, partitions=(2,)), log)
    entries = [TxnOffsets(pid, decode_record(r.key, r.value)) for pid, r in log]
    entries += [TxnMarker(7, True), TxnMarker(8, False)]  # 9's transaction still open
    other = GroupShard(0)
    for e in entries:
        other.apply(e, 0)
    assert _offset(other) == 42 and _offset(other, partition=1) is None and _offset(other, partition=2) is None
    assert other.has_pending_txn_offsets("g", "t", 2)
    other.complete_txn(9, committed=True)
    assert _offset(other, partition=2) == 77
