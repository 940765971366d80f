"""CreateTopics, DeleteTopics and CreatePartitions on the active controller: Kafka's error
codes, validate-only, manual assignments, and records that replay into the expected image."""

import uuid

import pytest

from kraft.errors import ErrorCode as E
from kraft.protocol import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics


@pytest.fixture
def env():
    raft = FakeRaft()
    ctl, answers = active_controller(raft, **{"num.partitions": "2", "default.replication.factor": "3"})
    cluster_of(raft, ctl, 5)
    return raft, ctl, answers


def call(env, api_key, request, version):
    raft, ctl, answers = env
    token = object()
    ctl.submit(api_key, request, version, 0, token)
    raft.commit(ctl)
    return answers.got[token]


def codes(resp):
    return {t.name: t.error_code for t in resp.topics}


def test_create_topics_commits_topic_and_partitions_with_leaders_in_the_isr(env):
    resp = call(env, 19, create_topics(("a", 10, 3), ("b", -1, -1)), 7)
    assert codes(resp) == {"a": 0, "b": 0}
    img = env[1].image
    a = img.topics.by_name["a"]
    assert a.id == resp.topics[0].topic_id and len(a.partitions) == 10
    for p in a.partitions.values():
        assert len(p.replicas) == 3 and p.isr == p.replicas and p.leader == p.replicas[0]
    b = img.topics.by_name["b"]
    assert (len(b.partitions), len(b.partitions[0].replicas)) == (2, 3)  # the defaults
    assert (resp.topics[1].num_partitions, resp.topics[1].replication_factor) == (2, 3)


def test_create_topics_errors_are_kafkas(env):
    call(env, 19, create_topics(("exists", 1, 1), ("a.b", 1, 1)), 7)
    resp = call(env, 19, create_topics(("exists", 1, 1), ("bad/name", 1, 1), ("", 1, 1), ("x" * 250, 1, 1),
                                       ("rf", 1, 6), ("zero", 0, 1), ("rf0", 1, 0), ("a_b", 1, 1),
                                       ("dup", 1, 1), ("dup", 2, 1), ("ok", 1, 1)), 7)
    assert codes(resp) == {"exists": E.TOPIC_ALREADY_EXISTS, "bad/name": E.INVALID_TOPIC_EXCEPTION,
                           "": E.INVALID_TOPIC_EXCEPTION, "x" * 250: E.INVALID_TOPIC_EXCEPTION,
                           "rf": E.INVALID_REPLICATION_FACTOR, "zero": E.INVALID_PARTITIONS,
                           "rf0": E.INVALID_REPLICATION_FACTOR, "a_b": E.INVALID_TOPIC_EXCEPTION,
                           "dup": E.INVALID_REQUEST, "ok": 0}
    assert set(env[1].image.topics.by_name) == {"exists", "a.b", "ok"}


def test_validate_only_answers_like_a_create_and_writes_nothing(env):
    raft, ctl, _ = env
    end = raft.end
    resp = call(env, 19, create_topics(("v", 4, 2), ("bad!", 1, 1), validate_only=True), 7)
    assert codes(resp) == {"v": 0, "bad!": E.INVALID_TOPIC_EXCEPTION}
    assert resp.topics[0].num_partitions == 4
    assert raft.end == end and "v" not in ctl.image.topics.by_name


def _with_configs(request, configs: dict):
    C = CreateTopicsRequest.Topic.Config
    for topic in request.topics:
        topic.configs = [C(name=k, value=v) for k, v in configs.get(topic.name, {}).items()]
    return request


BAD_CONFIGS = {
    "unknown": ({"dummy.doesntexist": "1"}, "Unknown topic config name: dummy.doesntexist"),
    "nan": ({"retention.ms": "notanumber"},
            "Invalid value notanumber for configuration retention.ms: Not a number of type LONG"),
    "removed": ({"message.format.version": "3.0"}, "Unknown topic config name: message.format.version"),
    "range": ({"segment.bytes": "1000"}, "Invalid value 1000 for configuration segment.bytes: Value must be at "
              "least 1048576"),
    "tiered": ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker. Topic "
               "cannot be configured with remote log storage."),
}


@pytest.mark.parametrize("validate_only", [False, True])
def test_create_topics_refuses_invalid_configs_with_or_without_validate_only(env, validate_only):
    """Kafka's CreateTopics validates a new topic's configs as AlterConfigs does (ReplicationControlManager
    .createTopics -> ConfigurationControlManager): INVALID_CONFIG, the same verdict under validate_only."""
    raft, ctl, _ = env
    end = raft.end
    specs = [(name, 1, 1) for name in BAD_CONFIGS] + [("good", 1, 1)]
    request = _with_configs(create_topics(*specs, validate_only=validate_only),
                            {**{n: c for n, (c, _) in BAD_CONFIGS.items()},
                             "good": {"retention.ms": "1000", "cleanup.policy": "compact,delete"}})
    resp = call(env, 19, request, 7)
    assert {t.name: (t.error_code, t.error_message) for t in resp.topics} == {
        **{n: (E.INVALID_CONFIG, m) for n, (_, m) in BAD_CONFIGS.items()}, "good": (0, None)}
    assert not set(BAD_CONFIGS) & set(ctl.image.topics.by_name)
    if validate_only:
        assert raft.end == end and "good" not in ctl.image.topics.by_name
    else:
        assert ctl.image.configs.config(2, "good") == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}


def test_manual_assignments_are_used_as_given_and_checked(env):
    resp = call(env, 19, create_topics(("m", {0: [3, 1], 1: [2, 4]}), ("empty", {0: []}),
                                       ("twice", {0: [1, 1]}), ("unknown", {0: [1, 99]}),
                                       ("gap", {0: [1], 2: [2]}), ("uneven", {0: [1], 1: [1, 2]})), 7)
    assert codes(resp) == {"m": 0, "empty": E.INVALID_REPLICA_ASSIGNMENT, "twice": E.INVALID_REPLICA_ASSIGNMENT,
                           "unknown": E.INVALID_REPLICA_ASSIGNMENT, "gap": E.INVALID_REPLICA_ASSIGNMENT,
                           "uneven": E.INVALID_REPLICA_ASSIGNMENT}
    parts = env[1].image.topics.by_name["m"].partitions
    assert (parts[0].replicas, parts[0].leader, parts[1].replicas) == ((3, 1), 3, (2, 4))


def test_delete_topics_by_name_and_by_id(env):
    ids = {t.name: t.topic_id for t in call(env, 19, create_topics(("a", 1, 1), ("b", 1, 1)), 7).topics}
    resp = call(env, 20, DeleteTopicsRequest(topic_names=["a", "nope"]), 5)
    assert {r.name: r.error_code for r in resp.responses} == {"a": 0, "nope": E.UNKNOWN_TOPIC_OR_PARTITION}
    T = DeleteTopicsRequest.Topic
    resp = call(env, 20, DeleteTopicsRequest(topics=[T(topic_id=ids["b"]), T(topic_id=uuid.UUID(int=(1 << 70))),
                                                     T(name="b", topic_id=ids["b"])]), 6)
    assert [r.error_code for r in resp.responses] == [0, E.UNKNOWN_TOPIC_ID, E.INVALID_REQUEST]
    assert resp.responses[0].name == "b"
    assert env[1].image.topics.by_name == {}


def test_create_partitions_adds_partitions_with_the_topics_replication_factor(env):
    call(env, 19, create_topics(("a", 2, 2), ("b", 1, 1)), 7)
    T = CreatePartitionsRequest.Topic
    req = CreatePartitionsRequest(topics=[T(name="a", count=5), T(name="b", count=1), T(name="c", count=3),
                                          T(name="b2", count=2)])
    resp = call(env, 37, req, 3)
    assert {r.name: r.error_code for r in resp.results} == {
        "a": 0, "b": E.INVALID_PARTITIONS, "c": E.UNKNOWN_TOPIC_OR_PARTITION, "b2": E.UNKNOWN_TOPIC_OR_PARTITION}
    parts = env[1].image.topics.by_name["a"].partitions
    assert sorted(parts) == [0, 1, 2, 3, 4] and all(len(p.replicas) == 2 for p in parts.values())
    bad = CreatePartitionsRequest(topics=[T(name="b", count=3, assignments=[T.Assignment(broker_ids=[1])])])
    assert call(env, 37, bad, 3).results[0].error_code == E.INVALID_REPLICA_ASSIGNMENT
    ok = CreatePartitionsRequest(topics=[T(name="b", count=2, assignments=[T.Assignment(broker_ids=[4])])],
                                 validate_only=True)
    assert call(env, 37, ok, 3).results[0].error_code == 0
    assert len(env[1].image.topics.by_name["b"].partitions) == 1
