"""Directory ids (KIP-853 ReplicaKey) through every place a replica names itself: the vote it
casts (and persists in quorum-state v1), the candidate it grants, meta.properties."""

from kraft.log.state_files import (MetaProperties, QuorumStateFile, uuid_bytes_to_text,
                                   uuid_text_to_bytes)
from kraft.log.formatting import random_uuid
from kraft.raft import ElectionState, VoterSet, rpcs
from kraft.server.raft_driver import election_from_file, election_to_file
from kraft.types import ReplicaKey

from tests.raft.raft_harness import Replica

A, B, C, Z = b"a" * 16, b"b" * 16, b"c" * 16, b"z" * 16


def test_uuid_text_round_trip_and_zero_is_unknown():
    text = random_uuid()
    assert uuid_bytes_to_text(uuid_text_to_bytes(text)) == text
    assert uuid_text_to_bytes("AAAAAAAAAAAAAAAAAAAAAA") is None
    assert uuid_bytes_to_text(None) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_quorum_state_v1_keeps_the_voted_directory(tmp_path):
    f = QuorumStateFile.in_directory(str(tmp_path))
    state = ElectionState(7, -1, ReplicaKey(2, B))
    f.write(election_to_file(state, "c", [1, 2, 3], kraft_version=1))
    data = f.read()
    assert data.data_version == 1
    assert election_from_file(data) == state
    # kraft.version 0 keeps Kafka's version 0 file, which has no directory.
    f.write(election_to_file(state, "c", [1, 2, 3], kraft_version=0))
    assert f.read().data_version == 0
    assert election_from_file(f.read()).voted_key == ReplicaKey(2, None)


def test_a_wiped_candidate_is_not_granted_the_vote_of_its_old_incarnation():
    voters = VoterSet([ReplicaKey(1, A), ReplicaKey(2, B), ReplicaKey(3, C)])
    r = Replica(node_id=3, voters=voters, directory_id=C)
    wiped = rpcs.vote_request(1, 1, 0, 0, False, Z, 3, C)  # node 1 came back with directory Z
    assert not r.request(1, wiped).vote_granted
    genuine = rpcs.vote_request(1, 1, 0, 0, False, A, 3, C)
    assert r.request(1, genuine).vote_granted


def test_a_restarted_voter_does_not_vote_again_for_another_directory():
    """The vote persisted with its directory binds the whole epoch across a restart."""
    voters = VoterSet([ReplicaKey(1, A), ReplicaKey(2, B), ReplicaKey(3, C)])
    r = Replica(node_id=3, voters=voters, directory_id=C, election=ElectionState(4, -1, ReplicaKey(1, A)))
    assert not r.request(2, rpcs.vote_request(4, 2, 0, 0, False, B, 3, C)).vote_granted
    assert r.request(1, rpcs.vote_request(4, 1, 0, 0, False, A, 3, C)).vote_granted


def test_meta_properties_carries_directory_id(tmp_path):
    d = random_uuid()
    MetaProperties("MkU3OEVBNTcwNTJENDM2Qg", 1, d).write(str(tmp_path / "meta.properties"))
    assert MetaProperties.read(str(tmp_path / "meta.properties")).directory_id == d
