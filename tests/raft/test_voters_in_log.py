"""KIP-853 voters in the log: the voter set is the latest Voters record of the log or of the
snapshot it starts from, acting from the moment it is appended and reverted by truncation;
the static ``controller.quorum.voters`` path (kraft.version 0) is unchanged."""

from kraft.errors import ErrorCode
from kraft.protocol import FetchRequest, VoteRequest
from kraft.raft import ElectionState, OffsetAndEpoch, VoterSet, rpcs
from kraft.raft.control_state import (ControlState, control_records, membership_control_batch,
                                      voters_record_of)
from kraft.records import KRaftVersionRecord, VotersRecord, build_batch, iter_batches
from kraft.records.bootstrap_snapshot import bootstrap_snapshot_bytes
from kraft.testing import InMemoryLog
from kraft.types import Endpoint, ReplicaKey

from tests.raft.raft_harness import Replica, flat

NONE = ErrorCode.NONE
D = {i: bytes([i]) * 16 for i in range(1, 8)}


def key(i):
    return ReplicaKey(i, D[i])


def vset(*ids):
    return VoterSet([key(i) for i in ids], {i: (Endpoint("CONTROLLER", "h", 9000 + i),) for i in ids})


def bootstrap_log(*ids) -> InMemoryLog:
    log = InMemoryLog()
    w = log.create_snapshot(OffsetAndEpoch(0, 0))
    w.append(bootstrap_snapshot_bytes(voters_record_of(vset(*ids))))
    w.freeze()
    return log


def leader_append(r, data):
    """Append on the leader as a membership change does: log, flush request, poll."""
    s = r.core.state
    r.core.local_log.append_as_leader(data, s.epoch)
    r.core.local_log.request_flush()
    r.core.tick(r.now)
    r.collect()


def test_voters_record_round_trips_directories_and_endpoints():
    data = membership_control_batch(vset(1, 2), 1, 5, 3, 0)
    found = list(control_records(data))
    assert [o for o, _ in found] == [5, 6]
    assert isinstance(found[0][1], KRaftVersionRecord) and found[0][1].kraft_version == 1
    c = ControlState(VoterSet([]))
    for o, m in found:
        c.apply(o, m)
    assert c.voters.last() == vset(1, 2) and c.kraft_version == 1


def test_static_voters_stay_kraft_version_0():
    r = Replica(node_id=1, voters=(1, 2, 3))
    assert r.core.kraft_version == 0 and r.core.voters.ids == {1, 2, 3}
    r.elect()
    # No Voters record is written under kraft.version 0: only the LeaderChange batch.
    assert not list(control_records(r.log.read(0, 1 << 20)))


def test_standalone_bootstrap_elects_itself_and_copies_the_voters_into_the_log():
    log = bootstrap_log(1)
    r = Replica(node_id=1, voters=(), log=log, directory_id=D[1])
    assert r.core.kraft_version == 1 and r.core.voters == vset(1)
    r.elect()
    records = [m for _, m in control_records(r.log.read(0, 1 << 20))]
    assert [type(m) for m in records] == [KRaftVersionRecord, VotersRecord]
    # A restart rebuilds the same voter set from the log (the checkpoint alone would too).
    r2 = Replica(node_id=1, voters=(), log=log, directory_id=D[1], election=ElectionState(1, 1, key(1)))
    assert r2.core.voters == vset(1) and r2.core.control.voters.last_offset() >= 1


def test_a_voters_record_acts_on_append_and_truncation_reverts_it():
    log = InMemoryLog()
    r = Replica(node_id=2, voters=vset(1, 2, 3), log=log, directory_id=D[2])
    r.append_leader_batch([b"a"], epoch=1)
    r = Replica(node_id=2, voters=vset(1, 2, 3), log=log, directory_id=D[2], election=ElectionState(2, 1))
    r.request(1, rpcs.begin_quorum_epoch_request(1, 2))
    f = r.sent(FetchRequest, 1)[-1]
    batch = membership_control_batch(vset(1, 3), 1, 1, 2, 0)  # node 2 removed, uncommitted
    r.respond(f, rpcs.fetch_response(NONE, 1, 2, 1, 0, records=batch))
    assert r.core.voters == vset(1, 3)
    assert not r.core.quorum.is_voter()
    # A removed voter stops voting at once.
    assert not r.request(3, rpcs.vote_request(2, 3, 2, 3, True, D[3], 2, D[2])).vote_granted
    r.flush_all()
    f = r.sent(FetchRequest, 1)[-1]
    # The new leader of epoch 2 never had it: truncation brings the old voter set back.
    r.respond(f, rpcs.fetch_response(NONE, 1, 2, 1, 0, diverging_epoch=OffsetAndEpoch(1, 1)))
    assert r.log.end_offset() == 1
    assert r.core.voters == vset(1, 2, 3) and r.core.quorum.is_voter()


def test_leader_counts_majorities_over_the_appended_voter_set():
    log = bootstrap_log(1)
    r = Replica(node_id=1, voters=(), log=log, directory_id=D[1])
    r.elect()
    r.flush_all()
    hw = r.core.high_watermark
    assert hw == r.log.end_offset()  # alone: committed as soon as flushed
    s = r.core.state
    leader_append(r, membership_control_batch(vset(1, 2), None, r.log.end_offset(), s.epoch, 0))
    r.flush_all()
    # Voter 2 never fetched: with two voters the record cannot commit on the leader alone.
    assert r.core.high_watermark == hw and s.voters == vset(1, 2)
    end = r.log.end_offset()
    resp = r.request(2, rpcs.fetch_request(2, s.epoch, end, s.epoch, replica_directory_id=D[2]))
    assert resp.error_code == 0 and r.core.high_watermark == end


def test_a_leader_that_removed_itself_resigns_once_the_removal_commits():
    log = bootstrap_log(1, 2)
    r = Replica(node_id=1, voters=(), log=log, directory_id=D[1])
    r.elect()
    r.flush_all()
    s = r.core.state
    end = r.log.end_offset()
    r.request(2, rpcs.fetch_request(2, s.epoch, end, s.epoch, replica_directory_id=D[2]))
    assert r.core.high_watermark == end
    leader_append(r, membership_control_batch(vset(2), None, end, s.epoch, 0))
    r.flush_all()
    assert r.core.role == "leader"  # not committed yet: still leads
    r.request(2, rpcs.fetch_request(2, s.epoch, end + 1, s.epoch, replica_directory_id=D[2]))
    r.advance(1)
    assert r.core.role == "resigned"


def test_snapshot_carries_the_voters_and_a_new_replica_learns_them_from_it():
    log = bootstrap_log(1)
    r = Replica(node_id=1, voters=(), log=log, directory_id=D[1])
    r.elect()
    r.flush_all()
    s = r.core.state
    leader_append(r, membership_control_batch(vset(1, 2, 3), None, r.log.end_offset(), s.epoch, 0))
    leader_append(r, build_batch([b"x"], base_offset=r.log.end_offset(),
                                   partition_leader_epoch=s.epoch, timestamp=0))
    r.flush_all()
    end = r.log.end_offset()
    for v in (2, 3):
        r.request(v, rpcs.fetch_request(v, s.epoch, end, s.epoch, replica_directory_id=D[v]))
    assert r.core.high_watermark == end
    w = r.core.create_snapshot(OffsetAndEpoch(end, s.epoch), r.now)
    w.append([b"state"])
    w.freeze()
    data = log.read_snapshot(OffsetAndEpoch(end, s.epoch)).read(0, 1 << 20)
    kinds = [type(m) for _, m in control_records(data)]
    assert kinds == [KRaftVersionRecord, VotersRecord]
    assert [b.base_offset for b in iter_batches(data)][:3] == [0, 1, 2]
    c = ControlState(VoterSet([]))
    c.load_snapshot(data, end)
    assert c.voters.last() == vset(1, 2, 3) and c.kraft_version == 1


def test_a_removed_voter_campaigns_only_while_its_removal_may_be_uncommitted():
    """Raft dissertation 4.2.2: until the removal commits, the removed voter may be needed to
    elect the leader that commits it; afterwards it neither campaigns nor votes."""
    log = InMemoryLog()
    r = Replica(node_id=2, voters=vset(1, 2, 3), log=log, directory_id=D[2])
    r.append_leader_batch([b"a"], epoch=1)
    r = Replica(node_id=2, voters=vset(1, 2, 3), log=log, directory_id=D[2], election=ElectionState(2, 1))
    r.request(1, rpcs.begin_quorum_epoch_request(1, 2))
    f = r.sent(FetchRequest, 1)[-1]
    r.respond(f, rpcs.fetch_response(NONE, 1, 2, 1, 0, records=membership_control_batch(vset(1, 3), 1, 1, 2, 0)))
    assert not r.core.quorum.is_voter() and r.core.quorum.is_electable()  # uncommitted
    r.flush_all()
    f = r.sent(FetchRequest, 1)[-1]
    r.respond(f, rpcs.fetch_response(NONE, 1, 2, 3, 0))  # the leader's HW passes the record
    assert r.core.high_watermark == 3 and not r.core.quorum.is_electable()
    r.advance(60_000)  # long past any fetch timeout: it stays an observer
    assert r.core.role in ("follower", "unattached") and not r.sent(VoteRequest)
    unaddressed = rpcs.vote_request(3, 3, 2, 3)
    assert not r.request(3, unaddressed).vote_granted


def test_a_voter_that_has_not_seen_its_own_addition_votes_when_asked_by_its_key():
    """KIP-853's VoterId/VoterDirectoryId: the candidate names the voter it asks; a new
    voter whose log lacks the record adding it answers on the logs alone (else a quorum whose
    latest member is behind could never elect anyone)."""
    r = Replica(node_id=4, voters=(), log=bootstrap_log(1, 2, 3), directory_id=D[4])
    assert not r.core.quorum.is_electable()
    asked = rpcs.vote_request(1, 1, 0, 5, False, D[1], 4, D[4])
    assert r.request(1, asked).vote_granted
    other = Replica(node_id=4, voters=(), log=bootstrap_log(1, 2, 3), directory_id=D[5])  # wiped: new disk
    assert other.request(1, asked).error_code == ErrorCode.INVALID_VOTER_KEY
    assert not other.request(1, rpcs.vote_request(1, 1, 0, 5)).vote_granted


def test_an_observer_takes_data_from_a_bootstrap_server_that_is_the_leader():
    """Bootstrap servers have ids of their own (-2, -3, ...): when the one asked is the leader
    of the observer's epoch, its answer is the leader's and the observer appends it."""
    r = Replica(node_id=4, voters=(), directory_id=D[4], log=InMemoryLog())
    r.core.follower_replication.bootstrap_ids = (-2,)
    r.advance(200)
    f = r.sent(FetchRequest, -2)[-1]
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, -1, 0))  # learns: leader 1, epoch 1
    assert (r.core.role, r.core.leader_id) == ("follower", 1)
    batch = build_batch([b"x"], partition_leader_epoch=1, timestamp=0)
    r.advance(5_000)  # leader 1 unreachable by id: discovery through the bootstrap server again
    f = r.sent(FetchRequest, -2)[-1]
    r.respond(f, rpcs.fetch_response(NONE, 2, 1, 1, 0, records=batch))  # names another leader
    assert r.log.end_offset() == 0
    r.advance(200)
    f = r.sent(FetchRequest, -2)[-1]
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 1, 0, records=batch))
    assert r.log.end_offset() == 1
