"""Election rules, one test per rule (KIP-595 "Leader Election"; KIP-996 pre-vote; Raft
paper sections 5.2 and 5.4.1)."""

from raft_harness import NONE, Replica, flat

from kraft.errors import ErrorCode
from kraft.protocol import EndQuorumEpochRequest, FetchRequest, VoteRequest
from kraft.raft import ElectionState, InboundRequest, LeaderChange, PersistElection, Respond, Send, rpcs
from kraft.raft.voters import ReplicaKey


def vote(candidate, epoch, last_epoch=0, last_offset=0, pre_vote=False):
    return rpcs.vote_request(epoch, candidate, last_epoch, last_offset, pre_vote)


def test_election_timeout_is_randomised_in_t_to_2t():
    """Raft 5.2 / REFERENCE 5: each replica waits a random time in [T, 2T) before campaigning."""
    deadlines = set()
    for seed in range(40):
        r = Replica(seed=seed)
        assert 1000 <= r.deadline < 2000
        deadlines.add(r.deadline)
    assert len(deadlines) > 10


def test_election_starts_with_a_pre_vote_that_does_not_bump_the_epoch():
    """KIP-996: a voter whose election timeout expires becomes prospective in its epoch."""
    r = Replica()
    r.take(PersistElection)  # the initial state of a new node
    r.advance_to_deadline()
    assert r.core.role == "prospective" and r.core.epoch == 0
    votes = r.sent(VoteRequest)
    assert sorted(v.destination for v in votes) == [2, 3]
    assert all(flat(v.request).pre_vote and flat(v.request).candidate_epoch == 0 for v in votes)
    assert not r.take(PersistElection)  # nothing durable changes in a pre-election


def test_majority_of_pre_votes_makes_a_candidate_that_votes_for_itself_durably():
    """KIP-996: only a majority of pre-votes lets a prospective bump the epoch; the bumped
    epoch and self-vote are persisted before the vote requests (I/O contract)."""
    r = Replica()
    r.take(PersistElection)
    r.advance_to_deadline()
    pre = r.sent(VoteRequest)
    r.respond(pre[0], rpcs.vote_response(NONE, -1, 0, True))
    assert r.core.role == "candidate" and r.core.epoch == 1
    kinds = [type(e) for e in r.effects]
    persist = kinds.index(PersistElection)
    assert r.effects[persist].state == ElectionState(1, -1, ReplicaKey(1))
    first_vote = next(i for i, e in enumerate(r.effects) if isinstance(e, Send) and isinstance(e.request, VoteRequest))
    assert persist < first_vote
    assert all(not flat(e.request).pre_vote for e in r.sent(VoteRequest))


def test_rejected_pre_vote_returns_to_unattached_without_new_epoch():
    r = Replica()
    r.advance_to_deadline()
    for s in r.sent(VoteRequest):
        r.respond(s, rpcs.vote_response(NONE, -1, 0, False))
    assert r.core.role == "unattached" and r.core.epoch == 0


def test_voter_grants_at_most_one_vote_per_epoch():
    """Raft 5.2: each voter votes for at most one candidate per epoch, first come first served."""
    r = Replica(node_id=3)
    assert r.request(1, vote(1, 5)).vote_granted
    assert r.take(PersistElection)[-1].state == ElectionState(5, -1, ReplicaKey(1))
    assert not r.request(2, vote(2, 5)).vote_granted
    assert r.request(1, vote(1, 5)).vote_granted  # a retried request gets the same answer


def test_vote_is_persisted_before_the_response():
    r = Replica(node_id=3)
    r.core.step(InboundRequest(1, vote(1, 2), "h"), 0)
    effects = r.collect()
    kinds = [type(e) for e in effects]
    assert kinds.index(PersistElection) < kinds.index(Respond)


def test_vote_rejected_when_candidate_log_is_behind():
    """Raft 5.4.1: grant only if the candidate's log is at least as up to date (last epoch,
    then last offset)."""
    r = Replica(node_id=3)
    r.append_leader_batch([b"a", b"b"], epoch=2)
    r = Replica(node_id=3, log=r.log)
    assert not r.request(1, vote(1, 5, last_epoch=1, last_offset=10)).vote_granted  # older epoch
    assert not r.request(1, vote(1, 6, last_epoch=2, last_offset=1)).vote_granted  # shorter
    assert r.request(1, vote(1, 7, last_epoch=2, last_offset=2)).vote_granted


def test_vote_with_a_stale_epoch_is_fenced():
    r = Replica(node_id=3, election=ElectionState(4))
    resp = r.request(1, vote(1, 3))
    assert resp.error_code == ErrorCode.FENCED_LEADER_EPOCH and resp.leader_epoch == 4


def test_invalid_vote_requests_get_invalid_request():
    r = Replica(node_id=3)
    assert r.request(1, vote(1, 2, last_epoch=2)).error_code == ErrorCode.INVALID_REQUEST
    assert r.request(1, rpcs.vote_request(2, 1, 0, -1)).error_code == ErrorCode.INVALID_REQUEST


def test_pre_vote_with_higher_epoch_does_not_change_the_voters_epoch():
    """KIP-996: pre-votes never bump anyone's epoch."""
    r = Replica(node_id=3)
    r.take(PersistElection)
    resp = r.request(1, vote(1, 9, pre_vote=True))
    assert resp.vote_granted and r.core.epoch == 0
    assert not r.take(PersistElection)
    assert r.request(2, vote(2, 9, pre_vote=True)).vote_granted  # pre-votes are not exclusive


def test_follower_that_hears_from_its_leader_rejects_pre_votes():
    """KIP-996: a follower that fetched from its leader within the fetch timeout refuses."""
    r = Replica(node_id=3)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    assert r.core.role == "follower"
    fetch = r.sent(FetchRequest, 1)[0]
    r.respond(fetch, rpcs.fetch_response(NONE, 1, 1, 0))
    assert not r.request(2, vote(2, 1, pre_vote=True)).vote_granted
    r.advance(1500)
    assert not r.request(2, vote(2, 1, pre_vote=True)).vote_granted
    r.now += 600  # past the fetch timeout since the last successful fetch
    assert r.request(2, vote(2, 1, pre_vote=True)).vote_granted


def test_follower_grants_pre_votes_once_its_leader_resigned():
    r = Replica(node_id=3)
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    fetch = r.sent(FetchRequest, 1)[0]
    r.respond(fetch, rpcs.fetch_response(NONE, 1, 1, 0))
    r.request(1, rpcs.end_quorum_epoch_request(1, 1, (2, 3)))
    assert r.request(2, vote(2, 1, pre_vote=True)).vote_granted


def test_preferred_successor_campaigns_first_after_end_quorum_epoch():
    """KIP-595 EndQuorumEpoch: the first preferred successor starts at once, others wait
    a strictly growing backoff."""
    first, second = Replica(node_id=2), Replica(node_id=3)
    for r in (first, second):
        r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
        r.request(1, rpcs.end_quorum_epoch_request(1, 1, (2, 3)))
        r.advance(0)
    assert first.core.role == "prospective"
    # position 1 of 2: (backoff max >> 1) << 0 = 500 ms
    assert second.core.role == "follower" and second.deadline - second.now == 500


def test_candidate_becomes_leader_with_majority_and_writes_leader_change_first():
    """KIP-595: a new leader appends a LeaderChange control record at its epoch start."""
    r = Replica()
    r.elect()
    assert r.core.role == "leader" and r.core.epoch == 1
    batches = r.log.batches()
    assert len(batches) == 1 and batches[0].is_control and batches[0].partition_leader_epoch == 1
    assert r.take(LeaderChange)[-1].epoch_start_offset == 0


def test_candidate_backs_off_after_rejection_and_retries_through_a_pre_vote():
    """KIP-595: a rejected candidate backs off (randomised, exponential) before retrying."""
    r = Replica()
    r.advance_to_deadline()
    r.respond(r.sent(VoteRequest)[0], rpcs.vote_response(NONE, -1, 0, True))
    assert r.core.role == "candidate"
    for s in r.sent(VoteRequest):
        r.respond(s, rpcs.vote_response(NONE, -1, 1, False))
    assert r.core.state.backoff_until is not None
    assert r.core.state.backoff_until - r.now <= 1000
    r.advance_to_deadline()
    assert r.core.role == "prospective" and r.core.epoch == 1 and r.core.state.retries == 2


def test_restarted_leader_never_leads_the_same_epoch_again():
    """KAFKA-10527: a leader that restarts resigns its stored epoch."""
    r = Replica(election=ElectionState(3, 1, ReplicaKey(1)))
    assert r.core.role == "resigned" and r.core.epoch == 3
    assert sorted(s.destination for s in r.sent(EndQuorumEpochRequest)) == [2, 3]


def test_restarted_voter_keeps_its_vote():
    r = Replica(node_id=3, election=ElectionState(4, -1, ReplicaKey(1)))
    assert not r.request(2, vote(2, 4)).vote_granted
    assert r.request(1, vote(1, 4)).vote_granted


def test_higher_epoch_in_a_vote_request_is_adopted_before_voting():
    r = Replica(node_id=3, election=ElectionState(2, 1))
    assert r.core.role == "follower"
    assert r.request(2, vote(2, 3)).vote_granted
    assert r.core.role == "unattached" and r.core.epoch == 3


def test_observer_never_votes_and_never_campaigns():
    """KIP-595: observers only follow."""
    r = Replica(node_id=9)
    assert not r.request(1, vote(1, 1)).vote_granted
    r.advance(10_000)
    assert r.core.role == "unattached" and r.core.epoch == 1
    assert all(not isinstance(s.request, VoteRequest) for s in r.take(Send))


def test_request_meant_for_another_replica_directory_is_refused():
    """KIP-853 voter key: a wiped node (new directory) must not vote as its old self."""
    from kraft.raft import VoterSet
    voters = VoterSet([ReplicaKey(1, b"a" * 16), ReplicaKey(2, b"b" * 16), ReplicaKey(3, b"c" * 16)])
    wiped = Replica(node_id=3, voters=voters, directory_id=b"z" * 16)
    req = rpcs.vote_request(1, 1, 0, 0, False, b"a" * 16, 3, b"c" * 16)
    assert wiped.request(1, req).error_code == ErrorCode.INVALID_VOTER_KEY
    assert not wiped.request(1, rpcs.vote_request(2, 1, 0, 0)).vote_granted  # not a voter any more
    same = Replica(node_id=3, voters=voters, directory_id=b"c" * 16)
    assert same.request(1, req).vote_granted
