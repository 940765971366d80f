"""KIP-858 on the controller (Kafka's ReplicationControlManager.handleAssignReplicasToDirs and
handleDirectoriesOffline): a broker's AssignReplicasToDirs records where each replica lives; a
heartbeat naming a directory offline moves leadership and ISR membership off exactly the
partitions in that directory, and the broker keeps the others."""

import uuid

from kraft.errors import ErrorCode as E
from kraft.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsRequest as A
from kraft.protocol.messages.broker_lifecycle import BrokerHeartbeatRequest
from controller_fakes import FakeRaft, active_controller, create_topics, heartbeat, registration


def _dirs(b):
    return [uuid.UUID(int=(b << 72) | 0xA), uuid.UUID(int=(b << 72) | 0xB)]


def submit(raft, ctl, api_key, request, version=0):
    token = object()
    ctl.submit(api_key, request, version, 0, token)
    raft.commit(ctl)
    return ctl.respond.got.get(token)


def _cluster(raft, ctl):
    epochs = {}
    for b in (1, 2, 3):
        req = registration(b)
        req.log_dirs = _dirs(b)
        epochs[b] = submit(raft, ctl, 62, req, version=2).broker_epoch
    for b in (1, 2, 3):
        assert not submit(raft, ctl, 63, heartbeat(b, epochs[b], raft.end)).is_fenced
    assert submit(raft, ctl, 19, create_topics(("t", 6, 3)), version=7) is not None
    return epochs


def _assign(broker, epoch, where):
    return A(broker_id=broker, broker_epoch=epoch, directories=[
        A.Directory(id=d, topics=[A.Directory.Topic(topic_id=tid, partitions=ps)]) for d, (tid, ps) in where.items()])


def test_an_assignment_records_the_brokers_directory_only():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epochs = _cluster(raft, ctl)
    topic = ctl.image.topics.by_name["t"]
    a, b = _dirs(1)
    resp = submit(raft, ctl, 73, _assign(1, epochs[1], {a: (topic.id, [0, 1, 2]), b: (topic.id, [3, 4, 5])}))
    assert resp.error_code == 0 and all(p.error_code == 0 for d in resp.directories for t in d.topics
                                        for p in t.partitions)
    for pid, part in ctl.image.topics.by_name["t"].partitions.items():
        i = part.replicas.index(1)
        assert part.directories[i] == (a if pid < 3 else b)
        assert all(d != a and d != b for j, d in enumerate(part.directories) if j != i)
    stale = submit(raft, ctl, 73, _assign(1, epochs[1] - 1, {a: (topic.id, [0])}))
    assert stale.error_code == E.STALE_BROKER_EPOCH
    unknown = submit(raft, ctl, 73, _assign(1, epochs[1], {a: (uuid.UUID(int=5), [0])}))
    assert unknown.directories[0].topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID


def test_an_offline_directory_moves_only_its_partitions_off_the_broker():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epochs = _cluster(raft, ctl)
    topic = ctl.image.topics.by_name["t"]
    a, b = _dirs(1)
    submit(raft, ctl, 73, _assign(1, epochs[1], {a: (topic.id, [0, 1, 2]), b: (topic.id, [3, 4, 5])}))
    before = dict(ctl.image.topics.by_name["t"].partitions)
    hb = BrokerHeartbeatRequest(broker_id=1, broker_epoch=epochs[1], current_metadata_offset=raft.end,
                                want_fence=False, want_shut_down=False, offline_log_dirs=[a])
    resp = submit(raft, ctl, 63, hb, version=1)
    assert resp.error_code == 0 and not resp.is_fenced
    parts = ctl.image.topics.by_name["t"].partitions
    for pid in (0, 1, 2):
        assert parts[pid].leader != 1 and 1 not in parts[pid].isr and parts[pid].leader in (2, 3)
    for pid in (3, 4, 5):  # the healthy directory's partitions keep their leader and ISR
        assert (parts[pid].leader, parts[pid].isr) == (before[pid].leader, before[pid].isr)
    broker = ctl.image.cluster.brokers[1]
    assert tuple(broker.directories) == (b,) and not broker.fenced
    end = raft.end
    again = submit(raft, ctl, 63, hb, version=1)  # reported again: nothing new to do
    assert again.error_code == 0 and raft.end == end
