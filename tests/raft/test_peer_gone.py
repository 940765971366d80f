"""Fast failover on a crashed leader: a voter whose connection to its leader was closed,
reset or refused (RequestFailed.peer_gone) starts a pre-vote at once instead of waiting out
controller.quorum.fetch.timeout.ms, as ZooKeeper's followers react to a dropped leader
connection. Pre-vote keeps it safe (KIP-996): voters still hearing from a live leader refuse."""

from kraft.protocol import VoteRequest
from kraft.raft import RequestFailed, rpcs
from kraft.testing import SimCluster

from raft_harness import NONE, Replica, flat


def _follower_of_2():
    r = Replica(1, voters=(1, 2, 3))
    r.request(2, rpcs.begin_quorum_epoch_request(leader_id=2, leader_epoch=5))
    assert (r.core.role, r.core.leader_id) == ("follower", 2)
    r.take()
    return r


def test_follower_starts_a_pre_vote_when_its_leader_is_gone():
    r = _follower_of_2()
    r.core.step(RequestFailed(2, 999, peer_gone=True), r.now)
    r.collect()
    assert r.core.role == "prospective" and r.core.epoch == 5  # a pre-vote does not bump the epoch
    votes = r.sent(VoteRequest)
    assert {v.destination for v in votes} == {2, 3} and all(flat(v.request).pre_vote for v in votes)


def test_a_plain_failure_or_a_timeout_does_not_start_an_election():
    r = _follower_of_2()
    r.core.step(RequestFailed(2, 999), r.now)
    r.collect()
    assert r.core.role == "follower"


def test_another_peer_gone_is_ignored():
    r = _follower_of_2()
    r.core.step(RequestFailed(3, 999, peer_gone=True), r.now)
    r.collect()
    assert r.core.role == "follower"


def test_an_observer_does_not_campaign_when_its_leader_is_gone():
    r = Replica(4, voters=(1, 2, 3))
    r.request(2, rpcs.begin_quorum_epoch_request(leader_id=2, leader_epoch=5))
    r.take()
    r.core.step(RequestFailed(2, 999, peer_gone=True), r.now)
    r.collect()
    assert r.core.role != "prospective"


def test_peer_gone_starts_at_most_one_pre_election_per_election_timeout():
    """A leader unreachable to this voter only (others still follow it) must not make the
    voter campaign in a loop: it loses the pre-vote, follows again, and waits."""
    r = _follower_of_2()
    r.core.step(RequestFailed(2, 999, peer_gone=True), r.now)
    r.collect()
    assert r.core.role == "prospective"
    # The others refuse (they hear from the leader): back to following 2.
    r.request(2, rpcs.begin_quorum_epoch_request(leader_id=2, leader_epoch=5))
    r.take()
    assert r.core.role == "follower"
    r.now += r.core.config.election_timeout_ms - 1
    r.core.step(RequestFailed(2, 1000, peer_gone=True), r.now)
    r.collect()
    assert r.core.role == "follower"
    r.now += 1
    r.core.step(RequestFailed(2, 1001, peer_gone=True), r.now)
    r.collect()
    assert r.core.role == "prospective"


def test_crashed_leader_is_replaced_well_within_the_fetch_timeout():
    """In the simulator a request to a dead node is refused; the survivors elect a new
    leader long before the 2 s fetch timeout would have fired."""
    c = SimCluster(5, 3)
    c.start_all()
    old = c.wait_for_leader()
    c.commit()
    c.run_for(500)
    crashed_at = c.now
    c.crash(old.id)
    new = c.wait_for_leader(timeout_ms=10_000)
    assert new.id != old.id
    assert c.now - crashed_at < c.config.fetch_timeout_ms // 2, c.describe()
    c.commit()


def test_a_voter_that_refused_our_pre_vote_is_asked_again_once_it_campaigns_itself():
    """The leader dies; voter 1 (longer log) notices first and asks 3, which still follows
    the leader and refuses. When 3 notices too and asks 1 for a pre-vote, 1 asks 3 again,
    instead of waiting out its election timeout (one slow failover in the benchmark)."""
    r = _follower_of_2()
    r.append_leader_batch([b"x"], epoch=5)
    r.core.on_flushed(r.log.end_offset(), r.now)  # durable, as the follower would have it
    r.collect()
    r.take()
    r.core.step(RequestFailed(2, 999, peer_gone=True), r.now)
    r.collect()
    asks = {v.destination: v for v in r.sent(VoteRequest)}
    assert set(asks) == {2, 3}
    r.respond(asks[3], rpcs.vote_response(NONE, 2, 5, False))  # 3 still hears from 2
    assert r.core.role == "prospective" and r.sent(VoteRequest) == []
    behind = rpcs.vote_request(candidate_epoch=5, candidate_id=3, last_offset_epoch=0, last_offset=0, pre_vote=True,
                               voter_id=1)
    answer = r.request(3, behind)
    assert not answer.vote_granted  # 3's log is behind ours
    again = r.sent(VoteRequest, dest=3)
    assert len(again) == 1 and flat(again[0].request).pre_vote
