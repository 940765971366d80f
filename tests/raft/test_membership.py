"""AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter on the leader, with Kafka's rules
(KIP-853): one change at a time, only a caught-up observer with that exact replica key is
added, the answer comes when the Voters record commits, a leader that removes itself
resigns after the commit, a static quorum refuses."""

from kraft.errors import ErrorCode
from kraft.protocol import (AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest,
                            UpdateRaftVoterRequest)
from kraft.raft import InboundRequest, Respond, rpcs
from kraft.raft.control_state import control_records
from kraft.records import VotersRecord
from kraft.types import Endpoint

from tests.raft.raft_harness import Replica
from tests.raft.test_voters_in_log import D, bootstrap_log, key, vset

NONE = ErrorCode.NONE
Lst = AddRaftVoterRequest.Listener


def add_request(i, directory=None, timeout_ms=0, port=None):
    return AddRaftVoterRequest(cluster_id="test", timeout_ms=timeout_ms, voter_id=i,
                               voter_directory_id=rpcs.directory_uuid(directory or D[i]),
                               listeners=[Lst(name="CONTROLLER", host="h", port=port or 9000 + i)])


def remove_request(i, directory=None):
    return RemoveRaftVoterRequest(cluster_id="test", voter_id=i,
                                  voter_directory_id=rpcs.directory_uuid(directory or D[i]))


def send(r, body):
    """Deliver a request; the response if answered at once, else the handle (pending)."""
    r._handles += 1
    handle = ("m", r._handles)
    r.core.step(InboundRequest(-1, body, handle), r.now)
    r.collect()
    return answered(r, handle) or handle


def answered(r, handle):
    for e in r.take(Respond):
        if e.handle == handle:
            return e.response
        r.effects.append(e)
    return None


def fetch(r, i, offset=None, directory=None):
    s = r.core.state
    off = r.log.end_offset() if offset is None else offset
    return r.request(i, rpcs.fetch_request(i, s.epoch, off, r.log.last_fetched_epoch(),
                                           replica_directory_id=directory or D[i]))


def standalone_leader(*voters):
    r = Replica(node_id=1, voters=(), log=bootstrap_log(*(voters or (1,))), directory_id=D[1])
    r.elect()
    r.flush_all()
    for v in voters[1:]:
        fetch(r, v)
    assert r.core.high_watermark == r.log.end_offset() > 0
    return r


def test_add_a_caught_up_observer_answers_once_committed():
    r = standalone_leader(1)
    fetch(r, 2)  # observer 2, caught up
    pending = send(r, add_request(2))
    assert not isinstance(pending, AddRaftVoterResponse)
    assert r.core.voters.ids == {1, 2}  # acts when appended
    assert r.core.voters.endpoints(2) == (Endpoint("CONTROLLER", "h", 9002),)
    r.flush_all()
    assert answered(r, pending) is None  # needs voter 2 now: 1 of 2 is no majority
    fetch(r, 2)
    resp = answered(r, pending)
    assert resp is not None and resp.error_code == NONE
    last = [m for _, m in control_records(r.log.read(0, 1 << 20)) if isinstance(m, VotersRecord)][-1]
    assert [(v.voter_id, v.directory_id) for v in last.voters] == [(1, D[1]), (2, D[2])]


def test_one_change_at_a_time():
    r = standalone_leader(1)
    fetch(r, 2)
    fetch(r, 3)
    send(r, add_request(2))
    assert send(r, add_request(3)).error_code == ErrorCode.REQUEST_TIMED_OUT
    assert send(r, remove_request(1)).error_code == ErrorCode.REQUEST_TIMED_OUT


def test_only_a_caught_up_observer_with_that_directory_is_added():
    r = standalone_leader(1)
    assert send(r, add_request(2)).error_code == ErrorCode.REQUEST_TIMED_OUT  # never fetched
    fetch(r, 2, directory=b"w" * 16)  # node 2 with another disk
    assert send(r, add_request(2)).error_code == ErrorCode.REQUEST_TIMED_OUT
    fetch(r, 3, offset=0)  # lagging
    assert send(r, add_request(3)).error_code == ErrorCode.REQUEST_TIMED_OUT
    assert r.core.voters.ids == {1}


def test_duplicate_invalid_and_static_quorum_refusals():
    r = standalone_leader(1)
    assert send(r, add_request(1)).error_code == ErrorCode.DUPLICATE_VOTER
    bad = add_request(2)
    bad.listeners = [Lst(name="PLAINTEXT", host="h", port=1)]
    assert send(r, bad).error_code == ErrorCode.INVALID_REQUEST
    static = Replica(node_id=1, voters=(1,))
    static.elect()
    static.flush_all()
    fetch(static, 2)
    assert send(static, add_request(2)).error_code == ErrorCode.UNSUPPORTED_VERSION
    follower = Replica(node_id=2, voters=(), log=bootstrap_log(1, 2), directory_id=D[2])
    assert send(follower, add_request(3)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_remove_needs_the_exact_replica_key_and_never_the_last_voter():
    r = standalone_leader(1, 2)
    assert send(r, remove_request(2, b"w" * 16)).error_code == ErrorCode.VOTER_NOT_FOUND
    assert send(r, remove_request(5)).error_code == ErrorCode.VOTER_NOT_FOUND
    alone = standalone_leader(1)
    assert send(alone, remove_request(1)).error_code == ErrorCode.VOTER_NOT_FOUND


def test_a_leader_removing_itself_answers_on_commit_then_resigns():
    r = standalone_leader(1, 2)
    pending = send(r, remove_request(1))
    assert r.core.voters.ids == {2} and r.core.role == "leader"
    r.flush_all()
    fetch(r, 2)  # voter 2 alone is the majority of the new set
    resp = answered(r, pending)
    assert resp is not None and resp.error_code == NONE
    r.advance(1)
    assert r.core.role == "resigned"


def test_a_change_that_does_not_commit_times_out_and_frees_the_next():
    r = standalone_leader(1, 2)
    pending = send(r, remove_request(2))
    r.flush_all()
    assert answered(r, pending).error_code == NONE  # {1} alone commits its own removal of 2
    fetch(r, 3)
    pending = send(r, add_request(3, timeout_ms=500))
    r.flush_all()
    r.advance(600)  # 3 never fetches again: {1, 3} has no majority
    assert answered(r, pending).error_code == ErrorCode.REQUEST_TIMED_OUT
    # The record stays uncommitted, so the next change still waits for it.
    assert send(r, remove_request(3)).error_code == ErrorCode.REQUEST_TIMED_OUT


def test_update_voter_replaces_its_endpoints():
    r = standalone_leader(1, 2)
    W = UpdateRaftVoterRequest
    req = W(cluster_id="test", current_leader_epoch=r.core.epoch, voter_id=2,
            voter_directory_id=rpcs.directory_uuid(D[2]), listeners=[W.Listener(name="CONTROLLER", host="new", port=7)],
            kraft_version_feature=W.KRaftVersionFeature(min_supported_version=0, max_supported_version=1))
    resp = send(r, req)
    assert resp.error_code == NONE
    assert r.core.voters.endpoints(2) == (Endpoint("CONTROLLER", "new", 7),)
    req.voter_directory_id = rpcs.directory_uuid(b"w" * 16)
    r.flush_all()
    fetch(r, 2)
    assert send(r, req).error_code == ErrorCode.VOTER_NOT_FOUND
    req.current_leader_epoch = r.core.epoch + 1
    assert send(r, req).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_voter_on_a_new_address_asks_the_leader_to_update_its_endpoints():
    """Seed 000's "permanence of the advertised listener": a voter restarted elsewhere sends
    UpdateRaftVoter (in place of one Fetch) until the Voters record has its new listeners."""
    from kraft.protocol import FetchRequest
    from kraft.raft import ElectionState, RaftCore

    log = bootstrap_log(1, 2)
    r = Replica(node_id=2, voters=(), log=log, directory_id=D[2], election=ElectionState(1, 1))
    moved = (Endpoint("CONTROLLER", "h", 7777),)
    r.core = RaftCore(2, log, r.core.config, (), __import__("random").Random(0), directory_id=D[2],
                      election_state=ElectionState(1, 1), local_endpoints=moved)
    r.collect()
    f = r.sent(FetchRequest, 1)[-1]
    r.respond(f, rpcs.fetch_response(NONE, 1, 1, 0, 0))
    r.advance(1)
    sent = [s.request for s in r.take() if hasattr(s, "request")]
    updates = [q for q in sent if isinstance(q, UpdateRaftVoterRequest)]
    assert updates and updates[0].voter_id == 2 and [(x.host, x.port) for x in updates[0].listeners] == [("h", 7777)]
    # The leader applies it like any voter change.
    leader = standalone_leader(1, 2)
    updates[0].current_leader_epoch = leader.core.epoch
    assert send(leader, updates[0]).error_code == NONE
    assert leader.core.voters.endpoints(2) == moved


def test_voter_not_found_names_replicas_as_kafka_prints_them():
    """Issue 37: the message carried Python reprs (``ReplicaKey(id=2, directory_id=b'www...')``);
    directory ids are now Kafka's base64, as ``describe --status`` shows them."""
    import base64
    r = standalone_leader(1, 2)
    answer = send(r, remove_request(2, b"w" * 16))
    assert answer.error_code == ErrorCode.VOTER_NOT_FOUND
    assert "b'" not in answer.error_message and "ReplicaKey(" not in answer.error_message
    assert f"2@{base64.urlsafe_b64encode(b'w' * 16).decode().rstrip('=')}" in answer.error_message
