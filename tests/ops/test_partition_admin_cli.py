"""The pure halves of ``kraft reassign-partitions`` and ``kraft leader-election``: Kafka's JSON
files are parsed (and refused) as Kafka's ReassignPartitionsCommand / LeaderElectionCommand do,
and answers are worded as Kafka prints them. The requests themselves run against real processes
in tests/integration/test_reassignment.py."""

from __future__ import annotations

import json

import pytest

from kraft.cli import build_parser
from kraft.cli.leader_election import ElectionError, parse_partitions, result_lines
from kraft.cli.reassign_partitions import ReassignmentError, parse_reassignment, reassignment_json, verify_lines
from kraft.cli.replica_log_dirs import parse_log_dir_moves, verify_lines as log_dir_verify_lines
from kraft.errors import ErrorCode
from kraft.protocol.messages.elect_leaders import ElectLeadersResponse

R = ElectLeadersResponse.ReplicaElectionResult


def doc(*parts, version=1):
    return json.dumps({"version": version, "partitions": list(parts)})


def test_a_reassignment_file_is_read_in_kafkas_format():
    text = doc({"topic": "a", "partition": 0, "replicas": [2, 3]},
               {"topic": "b", "partition": 4, "replicas": [1], "log_dirs": ["any"]})
    assert parse_reassignment(text) == {("a", 0): [2, 3], ("b", 4): [1]}


@pytest.mark.parametrize("text, words", [
    ("not json", "not JSON"),
    (doc({"topic": "a", "partition": 0, "replicas": [1]}, version=2), "version"),
    (doc(), "cannot be empty"),
    (doc({"topic": "a", "partition": 0, "replicas": []}), "no valid replica list"),
    (doc({"topic": "a", "partition": 0, "replicas": [1, 1]}), "duplicate entries"),
    (doc({"topic": "a", "partition": -1, "replicas": [1]}), "no valid partition"),
    (doc({"partition": 0, "replicas": [1]}), "no topic"),
    (doc({"topic": "a", "partition": 0, "replicas": [1]}, {"topic": "a", "partition": 0, "replicas": [2]}),
     "duplicate partitions: a-0"),
    (doc({"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}), "different from size"),
    (doc({"topic": "a", "partition": 0, "replicas": [1], "log_dirs": [""]}), "paths or"),
])
def test_a_bad_reassignment_file_is_refused_with_the_reason(text, words):
    with pytest.raises(ReassignmentError, match=words):
        parse_reassignment(text)


def test_log_dirs_other_than_any_are_replica_moves_between_directories():
    text = doc({"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d1", "any"]},
               {"topic": "b", "partition": 3, "replicas": [2], "log_dirs": ["/d2"]})
    assert parse_reassignment(text) == {("a", 0): [1, 2], ("b", 3): [2]}
    assert parse_log_dir_moves(text) == {("a", 0, 1): "/d1", ("b", 3, 2): "/d2"}


def test_log_dir_moves_are_verified_in_kafkas_words():
    moves = {("a", 0, 1): "/d1", ("a", 1, 1): "/d1", ("a", 2, 1): "/d1", ("a", 3, 1): "/d1"}
    where = {("a", 0, 1): ("/d1", None), ("a", 1, 1): ("/d0", "/d1"), ("a", 2, 1): ("/d0", None),
             ("a", 3, 1): (None, None)}
    assert log_dir_verify_lines(moves, where) == [
        "Reassignment of replica log directories:",
        "Reassignment of replica a-0-1 completed successfully.",
        "Reassignment of replica a-1-1 is still in progress.",
        "Partition a-2 on broker 1 is not being moved from log dir /d0 to /d1.",
        "Partition a-3 is not found in any live log dir on broker 1. There is likely an offline log directory "
        "on the broker."]


def test_the_rollback_json_parses_back_to_the_same_assignment():
    current = {("b", 1): [3, 1], ("a", 0): [1]}
    text = reassignment_json(current)
    assert json.loads(text)["partitions"][0] == {"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["any"]}
    assert parse_reassignment(text) == current


def test_verify_tells_completed_in_progress_and_a_different_replica_set_apart():
    targets = {("t", 0): [2], ("t", 1): [2, 3], ("t", 2): [3]}
    current = {("t", 0): [2], ("t", 1): [2, 3, 1], ("t", 2): [1]}
    assert verify_lines(targets, current, ongoing={("t", 1)}) == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is completed.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is [1] rather than [3].",
    ]


def test_election_results_are_worded_as_kafka_and_failures_kept_apart():
    resp = ElectLeadersResponse(error_code=0, replica_election_results=[R(topic="t", partition_result=[
        R.PartitionResult(partition_id=0, error_code=0),
        R.PartitionResult(partition_id=1, error_code=int(ErrorCode.ELECTION_NOT_NEEDED)),
        R.PartitionResult(partition_id=2, error_code=int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE),
                          error_message=None)])])
    lines, failed = result_lines("PREFERRED", resp)
    assert lines == ["Successfully completed leader election (PREFERRED) for partitions t-0",
                     "Valid replica already elected for partitions t-1"]
    assert failed == [("Error completing leader election (PREFERRED) for partition: t-2: "
                       "PREFERRED_LEADER_NOT_AVAILABLE")]


def test_election_partitions_file_and_its_duplicates():
    assert parse_partitions('{"partitions":[{"topic":"t","partition":3}]}') == [("t", 3)]
    with pytest.raises(ElectionError, match="duplicate"):
        parse_partitions('{"partitions":[{"topic":"t","partition":3},{"topic":"t","partition":3}]}')
    with pytest.raises(ElectionError):
        parse_partitions('{"partitions":[{"topic":"t"}]}')


def test_the_commands_take_kafkas_options():
    p = build_parser()
    a = p.parse_args(["reassign-partitions", "--bootstrap-server", "h:1", "--reassignment-json-file", "f",
                      "--verify"])
    assert a.verify and not a.execute and a.bootstrap_server == "h:1"
    with pytest.raises(SystemExit):  # exactly one action
        p.parse_args(["reassign-partitions", "--bootstrap-server", "h:1", "--reassignment-json-file", "f",
                      "--execute", "--cancel"])
    a = p.parse_args(["leader-election", "--bootstrap-server", "h:1", "--election-type", "preferred",
                      "--all-topic-partitions"])
    assert a.election_type == "PREFERRED"
    with pytest.raises(SystemExit):
        p.parse_args(["leader-election", "--bootstrap-server", "h:1", "--election-type", "dirty", "--topic", "t",
                      "--partition", "0"])


def test_a_throttle_names_the_current_replicas_as_leaders_and_the_new_ones_as_followers():
    from kraft.cli.reassign_throttle import FOLLOWER_REPLICAS, LEADER_REPLICAS, throttles
    current = {("a", 0): [1, 2], ("a", 1): [2, 3], ("b", 0): [1]}
    targets = {("a", 0): [2, 4], ("a", 1): [2, 3], ("b", 0): [1, 5]}  # a-1 does not move
    topics, brokers = throttles(current, targets)
    assert topics == {"a": {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:4"},
                      "b": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:5"}}
    assert brokers == [1, 2, 4, 5]
    assert throttles(current, {("a", 1): [2, 3]}) == ({}, [])
