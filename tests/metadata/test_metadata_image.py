"""Replaying record sequences into MetadataDelta and checking the MetadataImage they build.

Rules are Kafka's (``TopicsDelta``, ``PartitionRegistration.merge``, ``ClusterDelta``,
``ConfigurationsDelta``, ``AclsDelta``, ``FeaturesDelta``, ``MetadataBatchLoader`` for
transactions).
"""

from __future__ import annotations

import uuid

import pytest

from kraft.errors import MetadataReplayError
from kraft.metadata import (EMPTY_IMAGE, AbortTransactionRecord, AccessControlEntryRecord, BeginTransactionRecord,
                            BrokerRegistrationChangeRecord, ClientQuotaRecord, ConfigRecord, EndTransactionRecord,
                            FeatureLevelRecord, FenceBrokerRecord, MetadataDelta, NoOpRecord, PartitionChangeRecord,
                            PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord, RemoveAccessControlEntryRecord,
                            RemoveTopicRecord, TopicRecord, UnfenceBrokerRecord, UnregisterBrokerRecord)
from kraft.metadata.partition import MIGRATING_DIR

FOO, BAR = uuid.UUID(int=0xF00), uuid.UUID(int=0xBA2)


def replay(records, image=EMPTY_IMAGE):
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply()


def topic(name, topic_id, partitions=1, replicas=(1, 2, 3)):
    out = [TopicRecord(name=name, topic_id=topic_id)]
    for p in range(partitions):
        out.append(PartitionRecord(partition_id=p, topic_id=topic_id, replicas=list(replicas), isr=list(replicas),
                                   leader=replicas[0], leader_epoch=0, partition_epoch=0))
    return out


def broker(broker_id, epoch=10, fenced=True):
    return RegisterBrokerRecord(broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=epoch,
                                end_points=[RegisterBrokerRecord.BrokerEndpoint(
                                    name="PLAINTEXT", host="localhost", port=9092 + broker_id)],
                                rack=None, fenced=fenced)


# --- topics and partitions --------------------------------------------------------


def test_topic_creation_is_visible_by_id_and_by_name():
    image = replay(topic("foo", FOO, partitions=3))
    t = image.topics.get_topic(FOO)
    assert t is image.topics.get_topic_by_name("foo")
    assert (t.name, t.id, sorted(t.partitions)) == ("foo", FOO, [0, 1, 2])
    p = t.partitions[2]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2, 3), (1, 2, 3), 1, 0, 0)
    assert p.directories == (MIGRATING_DIR,) * 3  # v0 records: Kafka's defaultToMigrating


def test_partition_change_minus_two_keeps_the_leader_and_null_keeps_the_isr():
    image = replay(topic("foo", FOO))
    image = replay([PartitionChangeRecord(partition_id=0, topic_id=FOO, isr=[1, 2])], image)
    p = image.topics.get_partition(FOO, 0)
    assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (1, 0, (1, 2), 1)
    image = replay([PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=2)], image)
    p = image.topics.get_partition(FOO, 0)
    assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (2, 1, (1, 2), 2)
    image = replay([PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=-1, isr=[],
                                          leader_recovery_state=1)], image)
    p = image.topics.get_partition(FOO, 0)
    assert (p.leader, p.has_leader, p.leader_epoch, p.isr, p.leader_recovery_state) == (-1, False, 2, (), 1)
    image = replay([PartitionChangeRecord(partition_id=0, topic_id=FOO, replicas=[3, 4], adding_replicas=[4],
                                          removing_replicas=[1, 2])], image)
    p = image.topics.get_partition(FOO, 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader_recovery_state) == ((3, 4), (4,), (1, 2), 1)
    assert p.directories == (MIGRATING_DIR, MIGRATING_DIR) and p.partition_epoch == 4


def test_several_changes_to_one_partition_in_one_delta_compose():
    image = replay(topic("foo", FOO) + [PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=2),
                                         PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=3)])
    p = image.topics.get_partition(FOO, 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (3, 2, 2)


def test_topic_deletion_removes_partitions_and_topic_configs():
    image = replay(topic("foo", FOO) + topic("bar", BAR) + [
        ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value="1"),
        ConfigRecord(resource_type=4, resource_name="1", name="log.cleaner.threads", value="2")])
    image = replay([RemoveTopicRecord(topic_id=FOO)], image)
    assert image.topics.get_topic(FOO) is None and image.topics.get_topic_by_name("foo") is None
    assert image.topics.get_topic_by_name("bar") is not None
    assert image.configs.config(2, "foo") == {} and image.configs.config(4, "1") == {"log.cleaner.threads": "2"}


def test_topic_created_and_removed_in_one_delta_leaves_nothing():
    image = replay(topic("foo", FOO) + [RemoveTopicRecord(topic_id=FOO)])
    assert image.topics.by_id == {} and image.topics.by_name == {}


def test_a_deleted_name_can_be_reused_in_the_same_delta():
    image = replay(topic("foo", FOO))
    image = replay([RemoveTopicRecord(topic_id=FOO)] + topic("foo", BAR, partitions=2), image)
    assert image.topics.get_topic_by_name("foo").id == BAR and FOO not in image.topics.by_id
    assert len(image.topics.get_topic(BAR).partitions) == 2


@pytest.mark.parametrize("records,message", [
    ([PartitionRecord(partition_id=0, topic_id=FOO)], "unknown topic"),
    ([PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=1)], "unknown topic"),
    (topic("foo", FOO) + [PartitionChangeRecord(partition_id=9, topic_id=FOO, leader=1)], "unknown partition"),
    ([RemoveTopicRecord(topic_id=FOO)], "no such topic"),
    (topic("foo", FOO) + [TopicRecord(name="foo", topic_id=BAR)], "already exists"),
    (topic("foo", FOO) + [TopicRecord(name="bar", topic_id=FOO)], "already in use"),
    (topic("foo", FOO) + [RemoveTopicRecord(topic_id=FOO), PartitionChangeRecord(partition_id=0, topic_id=FOO)],
     "unknown topic"),
    (topic("foo", FOO) + [PartitionChangeRecord(partition_id=0, topic_id=FOO, leader_recovery_state=7)],
     "recovery state"),
    ([TopicRecord(name="foo", topic_id=FOO),
      PartitionRecord(partition_id=0, topic_id=FOO, replicas=[1, 2], directories=[FOO])], "directories"),
])
def test_records_that_do_not_fit_the_image_raise_replay_errors(records, message):
    delta = MetadataDelta(EMPTY_IMAGE)
    with pytest.raises(MetadataReplayError, match=message):
        delta.replay_all(records)


def test_a_failed_record_leaves_the_delta_as_it_was():
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(topic("foo", FOO))
    before = delta.apply()
    for bad in (PartitionChangeRecord(partition_id=5, topic_id=FOO, leader=2),
                TopicRecord(name="foo", topic_id=BAR), RemoveTopicRecord(topic_id=BAR)):
        with pytest.raises(MetadataReplayError):
            delta.replay(bad)
    assert delta.apply() == before


# --- brokers ------------------------------------------------------------------------


def test_broker_register_fence_unfence_unregister():
    image = replay([broker(1), broker(2, fenced=False)])
    b1 = image.cluster.broker(1)
    assert (b1.fenced, b1.epoch, b1.listeners[0].port, b1.rack) == (True, 10, 9093, None)
    assert image.cluster.unfenced_broker_ids() == [2]
    image = replay([UnfenceBrokerRecord(id=1, epoch=10), FenceBrokerRecord(id=2, epoch=10)], image)
    assert (image.cluster.broker(1).fenced, image.cluster.broker(2).fenced) == (False, True)
    image = replay([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1, in_controlled_shutdown=1,
                                                   log_dirs=[FOO])], image)
    b1 = image.cluster.broker(1)
    assert (b1.fenced, b1.in_controlled_shutdown, b1.directories) == (True, True, (FOO,))
    image = replay([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1)], image)
    assert image.cluster.broker(1).fenced is False and image.cluster.broker(1).in_controlled_shutdown
    image = replay([UnregisterBrokerRecord(broker_id=1, broker_epoch=10)], image)
    assert image.cluster.broker(1) is None and sorted(image.cluster.brokers) == [2]


def test_reregistration_replaces_the_registration_with_its_new_epoch():
    image = replay([broker(1, epoch=10, fenced=False), broker(1, epoch=20)])
    assert (image.cluster.broker(1).epoch, image.cluster.broker(1).fenced) == (20, True)


@pytest.mark.parametrize("record,message", [
    (FenceBrokerRecord(id=3, epoch=10), "not registered"),
    (UnfenceBrokerRecord(id=1, epoch=11), "did not match"),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=9), "did not match"),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=2), "fenced"),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=-1), "controlled"),
])
def test_broker_changes_need_a_registered_broker_at_its_epoch(record, message):
    delta = MetadataDelta(replay([broker(1)]))
    with pytest.raises(MetadataReplayError, match=message):
        delta.replay(record)


# --- configs, quotas, ACLs, features, producer ids --------------------------------


def test_configs_set_overwrite_and_null_deletes():
    image = replay([ConfigRecord(resource_type=4, resource_name="", name="a", value="1"),
                    ConfigRecord(resource_type=4, resource_name="", name="b", value="2"),
                    ConfigRecord(resource_type=4, resource_name="", name="a", value="3")])
    assert image.configs.config(4, "") == {"a": "3", "b": "2"}
    image = replay([ConfigRecord(resource_type=4, resource_name="", name="a", value=None)], image)
    assert image.configs.config(4, "") == {"b": "2"}
    image = replay([ConfigRecord(resource_type=4, resource_name="", name="b", value=None)], image)
    assert (4, "") not in image.configs.resources


def test_client_quotas_set_and_remove_per_entity():
    user = [ClientQuotaRecord.EntityData(entity_type="user", entity_name="alice"),
            ClientQuotaRecord.EntityData(entity_type="client-id", entity_name=None)]
    image = replay([ClientQuotaRecord(entity=user, key="producer_byte_rate", value=1024.0),
                    ClientQuotaRecord(entity=list(reversed(user)), key="consumer_byte_rate", value=5.0)])
    entity = (("client-id", None), ("user", "alice"))
    assert image.client_quotas.entities == {entity: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 5.0}}
    image = replay([ClientQuotaRecord(entity=user, key="producer_byte_rate", remove=True),
                    ClientQuotaRecord(entity=user, key="consumer_byte_rate", value=99.0, remove=True)], image)
    assert image.client_quotas.entities == {}


def acl(acl_id, principal="User:alice"):
    return AccessControlEntryRecord(id=acl_id, resource_type=2, resource_name="foo", pattern_type=3,
                                    principal=principal, host="*", operation=3, permission_type=3)


def test_acls_add_and_remove():
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    image = replay([acl(a), acl(b, "User:bob")])
    assert image.acls.acls[b].principal == "User:bob" and len(image.acls.acls) == 2
    image = replay([RemoveAccessControlEntryRecord(id=a)], image)
    assert list(image.acls.acls) == [b]
    assert replay([acl(a), RemoveAccessControlEntryRecord(id=a)]).acls.acls == {}
    with pytest.raises(MetadataReplayError, match="cannot remove ACL"):
        replay([RemoveAccessControlEntryRecord(id=a)], image)


def test_feature_levels_set_and_level_zero_removes():
    image = replay([FeatureLevelRecord(name="metadata.version", feature_level=20),
                    FeatureLevelRecord(name="kraft.version", feature_level=1)])
    assert image.features.metadata_version == 20 and image.features.finalized_versions["kraft.version"] == 1
    image = replay([FeatureLevelRecord(name="kraft.version", feature_level=0)], image)
    assert image.features.finalized_versions == {"metadata.version": 20}


def test_producer_id_blocks_move_forward_only():
    image = replay([ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000),
                    ProducerIdsRecord(broker_id=2, broker_epoch=10, next_producer_id=2000)])
    assert image.producer_ids.next_producer_id == 2000
    with pytest.raises(MetadataReplayError, match="not greater"):
        replay([ProducerIdsRecord(broker_id=1, next_producer_id=2000)], image)


# --- transactions ----------------------------------------------------------------


def test_committed_transaction_is_applied_whole():
    image = replay([BeginTransactionRecord(name="create foo")] + topic("foo", FOO, partitions=2)
                   + [EndTransactionRecord()])
    assert len(image.topics.get_topic_by_name("foo").partitions) == 2


def test_aborted_transaction_leaves_no_trace():
    base = replay(topic("bar", BAR))
    image = replay([BeginTransactionRecord()] + topic("foo", FOO) + [
        PartitionChangeRecord(partition_id=0, topic_id=BAR, leader=2), AbortTransactionRecord(reason="timeout"),
        NoOpRecord()], base)
    assert image == base


def test_open_transaction_is_not_in_the_image_and_carries_to_the_next_delta():
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all([BeginTransactionRecord()] + topic("foo", FOO))
    assert delta.in_transaction
    image = delta.apply()
    assert image.topics.by_id == {}
    nxt = MetadataDelta(image, open_transaction=delta.open_transaction)
    nxt.replay(EndTransactionRecord())
    assert nxt.apply().topics.get_topic_by_name("foo") is not None


@pytest.mark.parametrize("records,message", [
    ([EndTransactionRecord()], "without a Begin"),
    ([AbortTransactionRecord()], "without a Begin"),
    ([BeginTransactionRecord(), BeginTransactionRecord()], "inside an open transaction"),
])
def test_unbalanced_transaction_markers_are_replay_errors(records, message):
    with pytest.raises(MetadataReplayError, match=message):
        replay(records)


def test_a_bad_record_inside_a_transaction_fails_at_commit_and_poisons_the_delta():
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all([BeginTransactionRecord()] + topic("foo", FOO)
                     + [PartitionChangeRecord(partition_id=0, topic_id=BAR, leader=1)])
    with pytest.raises(MetadataReplayError, match="unknown topic"):
        delta.replay(EndTransactionRecord())
    with pytest.raises(MetadataReplayError, match="failed transaction"):
        delta.apply()
    with pytest.raises(MetadataReplayError, match="failed transaction"):
        delta.replay(NoOpRecord())


def test_directories_compare_by_value_whatever_the_uuid_objects():
    d1, d2 = uuid.UUID(int=0xD1), uuid.UUID(int=0xD2)
    image = replay([TopicRecord(name="foo", topic_id=FOO)] + [
        PartitionRecord(partition_id=p, topic_id=FOO, replicas=[1, 2], isr=[1], leader=1,
                        directories=[uuid.UUID(int=d1.int), uuid.UUID(int=d2.int)]) for p in (0, 1)])
    p0, p1 = image.topics.get_partition(FOO, 0), image.topics.get_partition(FOO, 1)
    assert p0.directories == p1.directories == (d1, d2)
    # Assigned directories must follow a replica change; all-MIGRATING ones are re-sized.
    with pytest.raises(MetadataReplayError, match="directories"):
        replay([PartitionChangeRecord(partition_id=0, topic_id=FOO, replicas=[1, 2, 3])], image)
    image = replay([PartitionChangeRecord(partition_id=0, topic_id=FOO, replicas=[1, 2, 3],
                                          directories=[MIGRATING_DIR] * 3)], image)
    assert image.topics.get_partition(FOO, 0).directories == (MIGRATING_DIR,) * 3


def test_replaying_something_that_is_not_a_metadata_record_is_refused_even_in_a_transaction():
    from kraft.protocol import ApiVersionsRequest
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(BeginTransactionRecord())
    with pytest.raises(MetadataReplayError, match="not a metadata record"):
        delta.replay(ApiVersionsRequest())
    delta.replay(EndTransactionRecord())
    assert delta.apply() == EMPTY_IMAGE
