"""Random valid metadata images for property tests, built the only way images are built: by
replaying records. ``images()`` draws a list of records that replays cleanly (every part of the
image, every optional field: ELR, directories, controlled shutdown, default quota entities,
null racks...) and returns the image; ``sample_image()`` is one fixed, rich image.
"""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from kraft.metadata import (EMPTY_IMAGE, AccessControlEntryRecord, BrokerRegistrationChangeRecord, ClientQuotaRecord,
                            ConfigRecord, FeatureLevelRecord, MetadataDelta, PartitionChangeRecord, PartitionRecord,
                            ProducerIdsRecord, RegisterBrokerRecord, RegisterControllerRecord, TopicRecord)
from kraft.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kraft.metadata.partition import MIGRATING_DIR

DIRS = [uuid.UUID(int=0x100 + i) for i in range(4)] + [MIGRATING_DIR]
BROKERS = [1, 2, 3, 4]
_E = RegisterBrokerRecord.BrokerEndpoint
_F = RegisterBrokerRecord.BrokerFeature


def broker_record(b: int, *, fenced=False, rack="r1", shutdown=False, migrating=False, log_dirs=()):
    return RegisterBrokerRecord(
        broker_id=b, incarnation_id=uuid.UUID(int=0xB000 + b), broker_epoch=10 + b,
        end_points=[_E(name="PLAINTEXT", host=f"h{b}", port=9092 + b, security_protocol=0)],
        features=[_F(name="metadata.version", min_supported_version=1, max_supported_version=21)],
        rack=rack, fenced=fenced, in_controlled_shutdown=shutdown, is_migrating_zk_broker=migrating,
        log_dirs=list(log_dirs))


@st.composite
def partition_records(draw, topic_id, pid):
    n = draw(st.integers(0, 3))
    replicas = draw(st.permutations(BROKERS))[:n]
    isr = replicas[: draw(st.integers(0, n))]
    dirs = draw(st.sampled_from(["none", "migrating", "assigned"]))
    directories = ([] if dirs == "none" else [MIGRATING_DIR] * n if dirs == "migrating"
                   else [draw(st.sampled_from(DIRS)) for _ in replicas])
    elr = draw(st.none() | st.lists(st.sampled_from(BROKERS), max_size=2, unique=True))
    return PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=replicas, isr=isr,
                           removing_replicas=replicas[:draw(st.integers(0, 1))] if n else [],
                           adding_replicas=replicas[-1:] if n and draw(st.booleans()) else [],
                           leader=isr[0] if isr else -1, leader_recovery_state=draw(st.sampled_from([0, 1])),
                           leader_epoch=draw(st.integers(-1, 50)), partition_epoch=draw(st.integers(-1, 50)),
                           directories=directories, eligible_leader_replicas=elr,
                           last_known_elr=draw(st.none() | st.just([2])))


@st.composite
def image_record_lists(draw):
    out = []
    for name in draw(st.lists(st.sampled_from(["metadata.version", "kraft.version", "group.version"]),
                              unique=True)):
        out.append(FeatureLevelRecord(name=name, feature_level=draw(st.integers(1, 25))))
    for b in draw(st.lists(st.sampled_from(BROKERS), unique=True)):
        out.append(broker_record(b, fenced=draw(st.booleans()), rack=draw(st.none() | st.just("r1")),
                                 shutdown=draw(st.booleans()), migrating=draw(st.booleans()),
                                 log_dirs=draw(st.lists(st.sampled_from(DIRS[:4]), max_size=2, unique=True))))
        if draw(st.booleans()):
            out.append(BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=10 + b, fenced=-1))
    for c in draw(st.lists(st.integers(3000, 3002), unique=True, max_size=2)):
        out.append(RegisterControllerRecord(
            controller_id=c, incarnation_id=uuid.UUID(int=c), zk_migration_ready=draw(st.booleans()),
            end_points=[RegisterControllerRecord.ControllerEndpoint(name="CONTROLLER", host="h", port=c,
                                                                    security_protocol=0)],
            features=[]))
    for t in range(draw(st.integers(0, 4))):
        tid = uuid.UUID(int=(t + 1) << 64 | draw(st.integers(0, 2**64 - 1)))  # unique per topic
        out.append(TopicRecord(name=f"topic-{t}-{tid.hex[:4]}", topic_id=tid))
        for p in range(draw(st.integers(0, 3))):
            out.append(draw(partition_records(tid, p)))
            if draw(st.booleans()):
                leader = draw(st.sampled_from([-2, -1, 2]))
                out.append(PartitionChangeRecord(partition_id=p, topic_id=tid, leader=leader,
                                                 isr=draw(st.none() | st.just([2]))))
        if draw(st.booleans()):
            out.append(ConfigRecord(resource_type=2, resource_name=f"topic-{t}-{tid.hex[:4]}",
                                    name="cleanup.policy", value="compact"))
    for key in draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True)):
        out.append(ConfigRecord(resource_type=draw(st.sampled_from([4, 8, 16])), resource_name=draw(
            st.sampled_from(["", "1", "x"])), name=key, value=draw(st.text(max_size=5))))
    for _ in range(draw(st.integers(0, 3))):
        entity = [ClientQuotaRecord.EntityData(entity_type=t, entity_name=draw(st.none() | st.sampled_from(["u", "v"])))
                  for t in draw(st.lists(st.sampled_from(["user", "client-id", "ip"]), min_size=1, unique=True))]
        key = draw(st.sampled_from(["producer_byte_rate", "request_percentage"]))
        out.append(ClientQuotaRecord(entity=entity, key=key,
                                     value=draw(st.floats(allow_nan=False, allow_infinity=False)), remove=False))
    for i in draw(st.lists(st.integers(1, 50), unique=True, max_size=3)):
        out.append(AccessControlEntryRecord(id=uuid.UUID(int=0xACE0 + i), resource_type=draw(st.integers(1, 7)),
                                            resource_name=draw(st.sampled_from(["*", "t", "é"])), pattern_type=3,
                                            principal="User:alice", host="*", operation=draw(st.integers(2, 12)),
                                            permission_type=draw(st.sampled_from([2, 3]))))
    if draw(st.booleans()):
        out.append(ProducerIdsRecord(broker_id=1, broker_epoch=11, next_producer_id=draw(st.integers(0, 2**40))))
    for user, mechanism in draw(st.lists(st.tuples(st.sampled_from(["alice", "bob", "é"]), st.integers(1, 2)),
                                         unique=True, max_size=3)):
        out.append(UserScramCredentialRecord(name=user, mechanism=mechanism, salt=draw(st.binary(max_size=8)),
                                             stored_key=b"s" * 32, server_key=b"k" * 32,
                                             iterations=draw(st.integers(4096, 16384))))
        if draw(st.booleans()):
            out.append(RemoveUserScramCredentialRecord(name=user, mechanism=mechanism))
    return out


def replay(records, image=EMPTY_IMAGE):
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply()


images = image_record_lists().map(replay)


def sample_records(topics: int = 3, partitions: int = 4) -> list:
    """A fixed, rich record list: every image part, partitions with and without directories/ELR."""
    out = [FeatureLevelRecord(name="metadata.version", feature_level=21),
           FeatureLevelRecord(name="kraft.version", feature_level=1)]
    out += [broker_record(b, log_dirs=[DIRS[b - 1]], fenced=b == 4, rack=None if b == 2 else "r1") for b in BROKERS]
    for t in range(topics):
        tid = uuid.UUID(int=0x7000 + t)
        out.append(TopicRecord(name=f"t{t}", topic_id=tid))
        for p in range(partitions):
            reps = [BROKERS[(p + i) % 4] for i in range(3)]
            out.append(PartitionRecord(partition_id=p, topic_id=tid, replicas=reps, isr=reps[:2], leader=reps[0],
                                       leader_epoch=p, partition_epoch=p + 1,
                                       directories=[DIRS[r - 1] for r in reps] if p % 2 else [],
                                       eligible_leader_replicas=[reps[2]] if p == 3 else None))
        out.append(ConfigRecord(resource_type=2, resource_name=f"t{t}", name="retention.ms", value="1000"))
    out.append(ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="5"))
    out.append(ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="user", entity_name=None)],
                                 key="producer_byte_rate", value=1024.0, remove=False))
    out.append(AccessControlEntryRecord(id=uuid.UUID(int=0xACE), resource_type=2, resource_name="t0", pattern_type=3,
                                        principal="User:bob", host="*", operation=3, permission_type=3))
    out.append(ProducerIdsRecord(broker_id=1, broker_epoch=11, next_producer_id=5000))
    out.append(UserScramCredentialRecord(name="alice", mechanism=2, salt=b"salt", stored_key=b"s" * 64,
                                         server_key=b"k" * 64, iterations=8192))
    return out


def sample_image(topics: int = 3, partitions: int = 4):
    return replay(sample_records(topics, partitions))
