"""Replication rules, one test per rule (KIP-595 "Fetch", REFERENCE.md section 5: high
watermark, fetch validation order, divergence; Raft paper 5.3 and 5.4.2)."""

import pytest
from raft_harness import NONE, Replica, flat

from kraft.errors import ErrorCode, NotLeaderError
from kraft.protocol import EndQuorumEpochRequest, FetchRequest
from kraft.raft import Commit, ElectionState, Flush, InboundRequest, OffsetAndEpoch, Respond, Send, rpcs
from kraft.raft.control_state import ControlState
from kraft.raft.local_log import LocalLog
from kraft.raft.voters import VoterSet
from kraft.records import build_batch, iter_batches
from kraft.testing import InMemoryLog


def leader(voters=(1, 2, 3), **kw) -> Replica:
    r = Replica(voters=voters, **kw)
    r.elect()
    r.take(Commit)
    return r


def fetch(replica_id, epoch, offset, last_epoch, max_wait=0):
    return rpcs.fetch_request(replica_id, epoch, offset, last_epoch, max_wait)


def test_high_watermark_needs_a_record_of_the_leaders_own_epoch():
    """KIP-595 / KAFKA-12619: the leader exposes nothing until a majority holds an offset
    above its epoch start offset (its LeaderChange record)."""
    log = Replica().log
    r0 = Replica(log=log)
    r0.append_leader_batch([b"old"], epoch=1)  # offset 0, from a previous leader
    r = Replica(log=log, election=ElectionState(1, 2))
    r.elect()
    assert r.core.epoch == 2 and r.core.state.epoch_start_offset == 1
    resp = r.request(2, fetch(2, 2, 1, 1))  # follower holds offset 0 (epoch 1) only
    assert resp.high_watermark == -1 and r.core.high_watermark == -1
    resp = r.request(2, fetch(2, 2, 2, 2))  # now it holds the LeaderChange record too
    assert resp.high_watermark == 2 and r.core.high_watermark == 2
    assert r.take(Commit)[-1].up_to == 2


def test_high_watermark_counts_the_leaders_flushed_offset_only():
    """REFERENCE 5: the leader's own entry is its flushed end offset."""
    r = leader(voters=(1, 2))
    r.core.propose([b"a"], r.now)
    r.advance(25)  # linger expires: appended, not yet flushed
    assert r.log.end_offset() == 2 and r.take(Flush)
    r.request(2, fetch(2, 1, 2, 1))
    assert r.core.high_watermark == 1  # leader flushed only the LeaderChange record
    r.core.on_flushed(2, r.now)
    assert r.core.high_watermark == 2


def test_high_watermark_is_the_majority_offset_and_never_decreases():
    r = leader(voters=(1, 2, 3, 4, 5))
    for _ in range(3):
        r.core.propose([b"x"], r.now)
        r.advance(25)
        r.flush_all()
    assert r.log.end_offset() == 4
    r.request(2, fetch(2, 1, 4, 1))
    assert r.core.high_watermark == -1  # 2 of 5 hold offset 3
    r.request(3, fetch(3, 1, 3, 1))
    assert r.core.high_watermark == 3  # leader 4, node2 4, node3 3 -> third largest is 3
    r.request(2, fetch(2, 1, 1, 1))  # a stale (e.g. duplicated) fetch from node 2
    r.request(3, fetch(3, 1, 1, 1))
    assert r.core.high_watermark == 3


def test_fetch_validation_rejects_malformed_requests():
    r = leader()
    for bad in (fetch(2, 1, -1, 0), fetch(2, 1, 0, -1), fetch(2, 1, 0, 2), fetch(1, 1, 0, 0)):
        assert r.request(2, bad).error_code == ErrorCode.INVALID_REQUEST


def test_fetch_with_a_negative_max_wait_is_answered_at_once():
    """As on the wire since the first version: a negative MaxWaitMs means no wait, not an error."""
    r = leader()
    resp = r.request(2, fetch(2, 1, 1, 1, max_wait=-5))
    assert resp is not None and resp.error_code == NONE


def test_fetch_for_another_partition_is_invalid_request_as_in_kafka():
    """KafkaRaftClient: "until we support multi-raft", any other topic-partition, or more than
    one, is a top-level INVALID_REQUEST."""
    r = leader()
    other = fetch(2, 1, 1, 1)
    other.topics[0].partitions[0].partition = 1
    two = fetch(2, 1, 1, 1)
    two.topics[0].partitions.append(two.topics[0].partitions[0])
    for bad in (other, two):
        r._handles += 1
        r.core.step(InboundRequest(2, bad, "bad"), r.now)
        r.collect()
        [answer] = [e.response for e in r.take(Respond)]
        assert answer.error_code == ErrorCode.INVALID_REQUEST  # top level
        assert answer.responses[0].partitions[0].error_code == NONE


def test_fetch_with_old_epoch_is_fenced_and_new_epoch_unknown():
    r = leader()
    assert r.request(2, fetch(2, 0, 0, 0)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    resp = r.request(2, fetch(2, 5, 0, 0))
    assert resp.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_fetch_to_a_non_leader_says_who_leads():
    r = Replica(node_id=3)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    resp = r.request(2, fetch(2, 1, 0, 0))
    assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and resp.leader_id == 1


def test_diverging_fetch_gets_the_end_offset_of_the_largest_epoch_not_above_its_own():
    """KIP-595 Fetch step 2: a follower whose last epoch does not match gets DivergingEpoch."""
    r = Replica(election=ElectionState(2, 1, None))
    r.append_leader_batch([b"a", b"b"], epoch=1)  # offsets 0-1 epoch 1
    r.append_leader_batch([b"c"], epoch=2)  # offset 2 epoch 2
    r = Replica(log=r.log, election=ElectionState(2, 3))
    r.elect()  # epoch 3 starts at offset 3
    resp = r.request(2, fetch(2, 3, 5, 2))  # follower claims offset 5 in epoch 2
    assert resp.diverging_epoch.epoch == 2 and resp.diverging_epoch.end_offset == 3
    assert resp.records == b""
    resp = r.request(2, fetch(2, 3, 2, 1))  # epoch 1 ended at 2: this position is valid
    assert resp.diverging_epoch is None and resp.records


def test_only_valid_fetches_move_replica_progress():
    r = leader(voters=(1, 2))
    r.request(2, fetch(2, 1, 7, 1))  # diverging: claims more than the leader has
    assert r.core.state.progress.voters[2].end_offset == -1


def test_follower_truncates_to_diverging_epoch_and_fetches_again():
    """Leader says DivergingEpoch(epoch, end) -> follower truncates there and refetches."""
    r = Replica(node_id=2)
    r.append_leader_batch([b"a"], epoch=1)
    r.append_leader_batch([b"stale", b"stale"], epoch=2)  # uncommitted, from a lost leader
    r = Replica(node_id=2, log=r.log, election=ElectionState(2, 3))
    r.request(1, rpcs.begin_quorum_epoch_request(1, 3))
    f = r.sent(FetchRequest, 1)[-1]
    assert (flat(f.request).fetch_offset, flat(f.request).last_fetched_epoch) == (3, 2)
    r.respond(f, rpcs.fetch_response(NONE, 1, 3, 1, 0, diverging_epoch=OffsetAndEpoch(1, 1)))
    assert r.log.end_offset() == 1
    f = r.sent(FetchRequest, 1)[-1]
    assert (flat(f.request).fetch_offset, flat(f.request).last_fetched_epoch) == (1, 1)


def test_follower_never_truncates_below_its_high_watermark():
    r = Replica(node_id=2)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    f = r.sent(FetchRequest, 1)[-1]
    data = build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=1, timestamp=0)
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 2, 0, data))
    r.flush_all()
    assert r.core.high_watermark == 2
    f = r.sent(FetchRequest, 1)[-1]
    with pytest.raises(AssertionError):
        r.respond(f, rpcs.fetch_response(NONE, 1, 1, 2, 0, diverging_epoch=OffsetAndEpoch(1, 1)))


def test_follower_high_watermark_is_min_of_leader_and_its_flushed_log():
    """REFERENCE 5 (follower HW = min(local end, leader HW)), with 'local end' = flushed."""
    r = Replica(node_id=2)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    f = r.sent(FetchRequest, 1)[-1]
    data = build_batch([b"a", b"b", b"c"], base_offset=0, partition_leader_epoch=1, timestamp=0)
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 5, 0, data))
    assert r.core.high_watermark <= 0  # nothing flushed yet
    r.flush_all()
    assert r.core.high_watermark == 3


def test_follower_sends_next_fetch_only_after_flushing():
    """A fetch offset is a promise the data is durable: never fetch past unflushed data."""
    r = Replica(node_id=2)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    f = r.sent(FetchRequest, 1)[-1]
    data = build_batch([b"a"], base_offset=0, partition_leader_epoch=1, timestamp=0)
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 0, 0, data))
    assert r.sent(FetchRequest, 1) == []
    r.flush_all()
    assert flat(r.sent(FetchRequest, 1)[-1].request).fetch_offset == 1


def test_follower_decides_its_next_fetch_while_the_flush_runs_and_gates_it_on_that_flush():
    """The next Fetch is emitted with the append (so a driver can send it the moment the
    fsync completes), marked to wait for the flush that makes its fetch offset durable;
    the flush report then sends nothing more (one Fetch in flight)."""
    r = Replica(node_id=2)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    f = r.sent(FetchRequest, 1)[-1]
    assert f.after_flushed == -1  # nothing unflushed: at once
    data = build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=1, timestamp=0)
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 0, 0, data))
    held = [e for e in r.effects if isinstance(e, Send)]
    assert [(e.after_flushed, flat(e.request).fetch_offset) for e in held] == [(2, 2)]
    assert [e.up_to for e in r.effects if isinstance(e, Flush)] == [2]
    r.flush_all()
    assert r.sent(FetchRequest, 1) == held  # released by the flush, not a second one
    assert [e for e in r.effects if isinstance(e, Send)] == []


def test_no_gated_fetch_without_a_flush_requested_for_the_whole_log():
    """A gate is only given for a flush the core asked for: with more appended than any
    requested flush covers, nothing is sent."""
    log = InMemoryLog()
    local = LocalLog(log, ControlState(VoterSet([1, 2, 3])), [].append)
    assert local.durable_once_flushed() == -1
    log.append_as_leader(bytes(build_batch([b"a"], base_offset=0, partition_leader_epoch=1, timestamp=0)), 1)
    assert local.durable_once_flushed() is None  # appended, no flush requested
    local.request_flush()
    assert local.durable_once_flushed() == 1
    local.on_flushed(1)
    assert local.durable_once_flushed() == -1


def test_corrupt_fetched_data_is_rejected_and_the_log_is_unchanged():
    r = Replica(node_id=2)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    f = r.sent(FetchRequest, 1)[-1]
    data = bytearray(build_batch([b"a"], base_offset=0, partition_leader_epoch=1, timestamp=0))
    data[-1] ^= 0xFF
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 0, 0, bytes(data)))
    assert r.log.end_offset() == 0


def test_stale_and_duplicated_responses_are_ignored():
    r = Replica(node_id=2)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    f = r.sent(FetchRequest, 1)[-1]
    data = build_batch([b"a"], base_offset=0, partition_leader_epoch=1, timestamp=0)
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 0, 0, data))
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 0, 0, data))  # duplicate: same correlation id
    assert r.log.end_offset() == 1


def test_leader_parks_an_empty_fetch_until_data_arrives():
    """Long-poll Fetch: no data -> answer when new records are appended (or max wait)."""
    r = leader(voters=(1, 2))
    r.flush_all()
    assert r.request(2, fetch(2, 1, 1, 1, max_wait=500)) is None
    r.core.propose([b"x"], r.now)
    r.advance(25)
    answered = r.take(Respond)
    assert len(answered) == 1 and flat(answered[0].response).records


def test_parked_fetch_is_answered_empty_when_max_wait_expires():
    r = leader(voters=(1, 2))
    r.flush_all()
    assert r.request(2, fetch(2, 1, 1, 1, max_wait=500)) is None  # moves the HW to 1: answered with it
    r.advance(5)
    assert flat(r.take(Respond)[0].response).high_watermark == 1
    assert r.request(2, fetch(2, 1, 1, 1, max_wait=500)) is None  # knows the HW now: waits it out
    r.advance(499)
    assert r.take(Respond) == []
    r.advance(1)
    assert flat(r.take(Respond)[0].response).records == b""


def test_the_fetch_that_moves_the_high_watermark_learns_it_without_waiting_out_max_wait():
    """A follower's fetch can be what commits an offset (it reports the follower's log end).
    It is parked, as it finds no data, but its replica has not been told that HW: it must be
    answered after the notify delay, not at max wait (standbys would learn every commit up to
    controller.quorum.fetch max wait late when no other write follows)."""
    r = leader(voters=(1, 2))
    r.flush_all()
    assert r.core.high_watermark == -1
    assert r.request(2, fetch(2, 1, 1, 1, max_wait=500)) is None
    assert r.core.high_watermark == 1
    r.advance(r.core.config.hw_notify_delay_ms)
    [answer] = r.take(Respond)
    assert flat(answer.response).high_watermark == 1


def test_parked_fetches_are_answered_when_leadership_ends():
    r = leader(voters=(1, 2))
    r.flush_all()
    assert r.request(2, fetch(2, 1, 1, 1, max_wait=500)) is None
    r.request(2, rpcs.begin_quorum_epoch_request(2, 2))
    resp = flat(r.take(Respond)[0].response)
    assert resp.error_code == ErrorCode.FENCED_LEADER_EPOCH and resp.leader_id == 2


def test_check_quorum_leader_resigns_without_majority_fetches():
    """KAFKA-15489: a leader resigns when a majority has not fetched within 1.5 x fetch timeout."""
    r = leader()
    r.advance(2999)
    assert r.core.role == "leader"
    r.advance(1)
    assert r.core.role == "resigned"
    assert r.sent(EndQuorumEpochRequest)


def test_check_quorum_is_satisfied_by_a_majority_of_fetches():
    r = leader()
    for _ in range(5):
        r.advance(1000)
        r.request(2, fetch(2, 1, 1, 1))
    assert r.core.role == "leader"


def test_single_voter_is_its_own_quorum():
    r = Replica(voters=(1,))
    r.advance_to_deadline()
    assert r.core.role == "leader"
    r.flush_all()
    assert r.core.high_watermark == 1
    r.advance(100_000)
    assert r.core.role == "leader"


def test_observer_fetches_are_not_counted_for_the_high_watermark():
    """KIP-595: observers replicate but never count towards the majority."""
    r = leader()
    r.flush_all()
    r.request(7, fetch(7, 1, 1, 1))
    r.request(8, fetch(8, 1, 1, 1))
    assert r.core.high_watermark == -1
    r.request(2, fetch(2, 1, 1, 1))
    assert r.core.high_watermark == 1


def test_propose_on_a_non_leader_raises_not_leader():
    r = Replica()
    with pytest.raises(NotLeaderError):
        r.core.propose([b"x"], 0)


def test_proposals_are_batched_by_linger_and_appended_atomically():
    r = leader(voters=(1,))
    r.flush_all()
    assert r.core.propose([b"a", b"b"], r.now) == 2
    assert r.core.propose([b"c"], r.now) == 3
    r.advance(24)
    assert r.log.end_offset() == 1
    r.advance(1)
    batches = r.log.batches()
    assert r.log.end_offset() == 4 and len(batches) == 2 and batches[1].records_count == 3


def test_resigned_leader_names_followers_by_progress():
    r = leader()
    r.flush_all()
    r.request(3, fetch(3, 1, 1, 1))
    r.core.resign(r.now)
    r.collect()
    assert r.core.role == "resigned"
    ends = r.sent(EndQuorumEpochRequest)
    assert ends and flat(ends[0].request).preferred_successors == (3, 2)


def test_fetch_below_log_start_gets_the_snapshot_id():
    r = leader(voters=(1,))
    r.flush_all()
    r.core.propose([b"a", b"b"], r.now)
    r.advance(25)
    r.flush_all()
    w = r.core.create_snapshot(OffsetAndEpoch(3, 1), r.now)
    w.append([b"state"])
    w.freeze()
    assert r.log.start_offset() == 3
    r2 = Replica(voters=(1, 2), log=r.log, election=ElectionState(1, 1))  # restarted as resigned
    assert r2.core.role == "resigned"
    r3 = Replica(voters=(1, 2), log=r.log, election=ElectionState(1, 1))
    r3.elect()
    resp = r3.request(2, fetch(2, 2, 0, 0))
    assert resp.snapshot_id == OffsetAndEpoch(3, 1)
    resp = r3.request(2, fetch(2, 2, 3, 0))  # last epoch older than the snapshot's
    assert resp.snapshot_id == OffsetAndEpoch(3, 1)


def test_records_in_fetch_responses_are_whole_record_batches():
    r = leader(voters=(1, 2))
    r.core.propose([b"a"], r.now)
    r.advance(25)
    resp = r.request(2, fetch(2, 1, 0, 0))
    assert [b.base_offset for b in iter_batches(resp.records)] == [0, 1]


def _parked_follower_after_a_commit():
    """Leader 1 of (1, 2, 3) with follower 3's Fetch parked at the end of the log, then a
    write that follower 3 already holds: the leader's flush moves the HW while 3 is parked."""
    r = leader()
    r.flush_all()
    r.core.propose([b"x"], r.now)
    r.advance(r.core.config.append_linger_ms)
    end = r.log.end_offset()
    hw_before = r.core.high_watermark
    assert r.request(3, fetch(3, 1, end, 1, max_wait=500)) is None  # 3 has it all: parked
    r.flush_all()  # the leader's own flush: majority (1, 3) holds `end`
    assert r.core.high_watermark == end > hw_before
    return r, end


def test_a_parked_fetch_learns_a_new_high_watermark_after_the_notify_delay():
    r, end = _parked_follower_after_a_commit()
    delay = r.core.config.hw_notify_delay_ms
    assert delay > 0 and r.take(Respond) == []  # not at once: new data may carry it
    r.advance(delay - 1)
    assert r.take(Respond) == []
    r.advance(1)
    [answer] = r.take(Respond)
    assert flat(answer.response).high_watermark == end and flat(answer.response).records == b""


def test_new_data_within_the_notify_delay_carries_the_high_watermark():
    """One Fetch round trip per write and follower instead of two: the data answer brings
    the HW the follower was not told about yet."""
    r, end = _parked_follower_after_a_commit()
    r.core.propose([b"y"], r.now)
    r.advance(r.core.config.append_linger_ms)
    answers = r.take(Respond)
    assert len(answers) == 1 and flat(answers[0].response).records
    assert flat(answers[0].response).high_watermark == end


def test_the_quorum_high_watermark_a_lagging_follower_learns_is_the_leaders_not_its_own():
    """A restarted broker catches up to the quorum's high watermark as the leader reports it
    (Kafka's RaftClient.highWatermark): a follower's own high watermark is capped by its log
    and would call a prefix of the metadata 'caught up'. Unknown (-1) until a leader says."""
    r = Replica(node_id=3)
    assert r.core.leader_high_watermark == -1
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    assert r.core.leader_high_watermark == -1  # following, not yet heard a high watermark
    f = r.sent(FetchRequest, 1)[0]
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 500, 0))  # the leader is at 500, this log is empty
    assert r.core.leader_high_watermark == 500 and r.core.high_watermark < 500


def test_a_leaders_quorum_high_watermark_is_its_own_once_its_epoch_commits():
    r = Replica()
    r.elect()
    assert r.core.leader_high_watermark == r.core.high_watermark
