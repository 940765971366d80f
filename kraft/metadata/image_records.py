"""The inverse of replay: every part of a ``MetadataImage`` as the records a snapshot holds.

``image_records(image)`` yields ``RecordAndVersion`` pairs in Kafka's ``MetadataImage.write``
order: features (``metadata.version`` first, so a reader knows the version before anything
else), brokers and controllers, each topic followed by its partitions, configs, client quotas,
producer ids, ACLs, SCRAM credentials. Within a part the order is sorted (ids, names, resources), so the same image
always gives the same bytes. Replaying the records into an empty ``MetadataDelta`` gives an
equal image (tests/metadata/test_image_records.py checks it on random images).

Record versions are the lowest that carry every value the image holds (a PartitionRecord with
no ELR is written at v1, or v0 when its directories are the "migrating" default), so snapshots
stay small and readable by older Kafka releases. This module must not do I/O or know about
batches and files (see ``snapshot_image.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from kraft.metadata import records as R
from kraft.metadata.features import METADATA_VERSION
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition import MIGRATING_DIR, PartitionRegistration
from kraft.metadata.serde import RecordAndVersion


def image_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    """Every record of a snapshot of ``image``, in write order."""
    yield from feature_records(image)
    yield from cluster_records(image)
    yield from topic_records(image)
    yield from config_records(image)
    yield from client_quota_records(image)
    yield from producer_id_records(image)
    yield from acl_records(image)
    yield from scram_records(image)


def feature_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    levels = image.features.finalized_versions
    names = sorted(levels, key=lambda n: (n != METADATA_VERSION, n))  # metadata.version first
    for name in names:
        yield RecordAndVersion(R.FeatureLevelRecord(name=name, feature_level=levels[name]), 0)


def _register_broker_version(b) -> int:
    if b.directories:
        return 3
    if b.is_migrating_zk_broker:
        return 2
    return 1 if b.in_controlled_shutdown else 0


def cluster_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    E, F = R.RegisterBrokerRecord.BrokerEndpoint, R.RegisterBrokerRecord.BrokerFeature
    for broker_id in sorted(image.cluster.brokers):
        b = image.cluster.brokers[broker_id]
        yield RecordAndVersion(R.RegisterBrokerRecord(
            broker_id=b.id, is_migrating_zk_broker=b.is_migrating_zk_broker, incarnation_id=b.incarnation_id,
            broker_epoch=b.epoch,
            end_points=[E(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                        for e in b.listeners],
            features=[F(name=f.name, min_supported_version=f.min_version, max_supported_version=f.max_version)
                      for f in b.supported_features],
            rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=list(b.directories)), _register_broker_version(b))
    CE, CF = R.RegisterControllerRecord.ControllerEndpoint, R.RegisterControllerRecord.ControllerFeature
    for controller_id in sorted(image.cluster.controllers):
        c = image.cluster.controllers[controller_id]
        yield RecordAndVersion(R.RegisterControllerRecord(
            controller_id=c.id, incarnation_id=c.incarnation_id, zk_migration_ready=c.zk_migration_ready,
            end_points=[CE(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                        for e in c.listeners],
            features=[CF(name=f.name, min_supported_version=f.min_version, max_supported_version=f.max_version)
                      for f in c.supported_features]), 0)


def partition_record(topic_id, partition_id: int, p: PartitionRegistration) -> RecordAndVersion:
    """The PartitionRecord that replays into ``p`` (Kafka's ``PartitionRegistration.toRecord``)."""
    migrating = all(d == MIGRATING_DIR for d in p.directories)
    elr = p.elr or p.last_known_elr
    version = 2 if elr else (0 if migrating else 1)
    record = R.PartitionRecord(
        partition_id=partition_id, topic_id=topic_id, replicas=list(p.replicas), isr=list(p.isr),
        removing_replicas=list(p.removing_replicas), adding_replicas=list(p.adding_replicas), leader=p.leader,
        leader_recovery_state=p.leader_recovery_state, leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch, directories=[] if migrating else list(p.directories),
        eligible_leader_replicas=list(p.elr) if p.elr else None,
        last_known_elr=list(p.last_known_elr) if p.last_known_elr else None)
    return RecordAndVersion(record, version)


def topic_records_of(topic) -> Iterator[RecordAndVersion]:
    """One topic: its TopicRecord, then its partitions by id."""
    yield RecordAndVersion(R.TopicRecord(name=topic.name, topic_id=topic.id), 0)
    partitions = topic.partitions
    for pid in sorted(partitions):
        yield partition_record(topic.id, pid, partitions[pid])


def topic_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    by_name = image.topics.by_name
    for name in sorted(by_name):
        yield from topic_records_of(by_name[name])


def config_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    resources = image.configs.resources
    for resource in sorted(resources):
        resource_type, resource_name = resource
        config = resources[resource]
        for key in sorted(config):
            yield RecordAndVersion(R.ConfigRecord(resource_type=resource_type, resource_name=resource_name,
                                                  name=key, value=config[key]), 0)


def client_quota_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    entities = image.client_quotas.entities
    EntityData = R.ClientQuotaRecord.EntityData
    # None (the default entity) sorts before any name.
    for entity in sorted(entities, key=lambda e: [(t, n is not None, n or "") for t, n in e]):
        quotas = entities[entity]
        for key in sorted(quotas):
            yield RecordAndVersion(R.ClientQuotaRecord(
                entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity], key=key,
                value=quotas[key], remove=False), 0)


def producer_id_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    next_id = image.producer_ids.next_producer_id
    if next_id >= 0:  # Kafka writes the block owner as unknown: only the next id matters
        yield RecordAndVersion(R.ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=next_id), 0)


def acl_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    acls = image.acls.acls
    for acl_id in sorted(acls):
        a = acls[acl_id]
        yield RecordAndVersion(R.AccessControlEntryRecord(
            id=acl_id, resource_type=a.resource_type, resource_name=a.resource_name, pattern_type=a.pattern_type,
            principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type), 0)


def scram_records(image: MetadataImage) -> Iterator[RecordAndVersion]:
    credentials = image.scram.credentials
    for user, mechanism in sorted(credentials):
        c = credentials[(user, mechanism)]
        yield RecordAndVersion(R.UserScramCredentialRecord(
            name=user, mechanism=mechanism, salt=c.salt, stored_key=c.stored_key, server_key=c.server_key,
            iterations=c.iterations), 0)
