"""Pre-vote tie-break between prospectives (kraft's liveness rule on top of KIP-996).

When the leader of a 3-voter quorum dies, both survivors reach their fetch timeout at about
the same moment. With plain KIP-996 each grants the other's pre-vote, both become candidates
and the real vote splits, costing a whole randomized election timeout. Pre-votes change no
durable state, so a prospective may refuse a pre-vote from a lower id whose log equals its
own: exactly one of them proceeds.
"""

from kraft.protocol import FetchRequest, VoteRequest
from kraft.raft import rpcs
from kraft.errors import ErrorCode

from raft_harness import Replica

NONE = ErrorCode.NONE


def prospective(node_id: int) -> Replica:
    r = Replica(node_id=node_id, voters=(1, 2, 3))
    r.request(1, rpcs.begin_quorum_epoch_request(1, 1))
    fetch = r.sent(FetchRequest, 1)[0]
    r.respond(fetch, rpcs.fetch_response(NONE, 1, 1, 0))
    r.flush_all()
    for _ in range(20):
        if r.core.role == "prospective":
            break
        r.advance_to_deadline()
        r.flush_all()
    assert r.core.role == "prospective"
    return r


def pre_vote_from(r: Replica, candidate: int) -> VoteRequest:
    log = r.log
    return rpcs.vote_request(r.core.epoch, candidate, log.last_fetched_epoch(), log.end_offset(), pre_vote=True)


def test_prospective_refuses_pre_vote_from_a_lower_id_with_an_equal_log():
    high, low = prospective(3), prospective(2)
    assert not high.request(2, pre_vote_from(low, 2)).vote_granted
    assert low.request(3, pre_vote_from(high, 3)).vote_granted


def test_prospective_grants_a_lower_id_whose_log_is_ahead():
    high = prospective(3)
    log = high.log
    ahead = rpcs.vote_request(high.core.epoch, 2, log.last_fetched_epoch(), log.end_offset() + 5, pre_vote=True)
    assert high.request(2, ahead).vote_granted


def test_tie_break_does_not_apply_to_real_votes():
    high = prospective(3)
    log = high.log
    real = rpcs.vote_request(high.core.epoch + 1, 2, log.last_fetched_epoch(), log.end_offset(), pre_vote=False)
    assert high.request(2, real).vote_granted


def exchange(nodes: dict) -> bool:
    """Deliver every pending VoteRequest between ``nodes`` at once (all requests first, then
    all responses), as when both sides send before either hears back."""
    pending = []
    for src, r in nodes.items():
        for send in r.sent(VoteRequest):
            if send.destination in nodes:
                pending.append((r, send, nodes[send.destination].request(src, send.request)))
    for r, send, resp in pending:
        if resp is not None:
            r.respond(send, resp)
    for r in nodes.values():
        r.flush_all()
    return bool(pending)


def test_simultaneous_prospectives_elect_one_leader_without_a_split_vote():
    nodes = {2: prospective(2), 3: prospective(3)}
    rounds = 0
    while exchange(nodes) and rounds < 10:
        rounds += 1
    roles = {i: (r.core.role, r.core.epoch) for i, r in nodes.items()}
    assert roles[3] == ("leader", 2), roles
    assert roles[2][0] != "candidate", roles
