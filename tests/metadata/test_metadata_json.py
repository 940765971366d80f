"""The JSON form of metadata records, as ``kafka-dump-log --cluster-metadata-decoder`` prints it.

Expected lines follow Kafka's generated ``*JsonConverter.write`` and Jackson's compact output:
camelCase names in schema order, tagged fields only when not default, uuids in base64url
without padding, doubles as Java's ``Double.toString``.
"""

from __future__ import annotations

import json
import uuid

import pytest

from kraft.errors import MetadataParseError
from kraft.metadata import (ClientQuotaRecord, ConfigRecord, NoOpRecord, PartitionChangeRecord, PartitionRecord,
                            RegisterBrokerRecord, TopicRecord, UserScramCredentialRecord, record_from_json,
                            record_json, record_to_json)
from kraft.metadata.json_form import camel_case, java_double_str
from metadata_samples import all_records, record_ids, sample

RECORDS = all_records()
TOPIC_ID = uuid.UUID(int=1)  # Kafka prints Uuid(0, 1) as AAAAAAAAAAAAAAAAAAAAAQ


@pytest.mark.parametrize("record,version,line", [
    (TopicRecord(name="foo", topic_id=TOPIC_ID), 0,
     '{"type":"TOPIC_RECORD","version":0,"data":{"name":"foo","topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}'),
    (PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, isr=[1, 2], leader=3), 0,
     '{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":1,"topicId":"AAAAAAAAAAAAAAAAAAAAAQ",'
     '"isr":[1,2],"leader":3}}'),
    (PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                     partition_epoch=0), 1,
     '{"type":"PARTITION_RECORD","version":1,"data":{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAQ",'
     '"replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":0,'
     '"partitionEpoch":0,"directories":[]}}'),
    (ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy", value=None), 0,
     '{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,"resourceName":"t","name":"cleanup.policy",'
     '"value":null}}'),
    (ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="client-id", entity_name="c\n\x01")],
                       key="request_percentage", value=1.5e7, remove=False), 0,
     '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"client-id",'
     '"entityName":"c\\n\\u0001"}],"key":"request_percentage","value":1.5E7,"remove":false}}'),
    (RegisterBrokerRecord(broker_id=1, incarnation_id=TOPIC_ID, broker_epoch=5, end_points=[
        RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
        rack=None), 2,
     '{"type":"REGISTER_BROKER_RECORD","version":2,"data":{"brokerId":1,"isMigratingZkBroker":false,'
     '"incarnationId":"AAAAAAAAAAAAAAAAAAAAAQ","brokerEpoch":5,"endPoints":[{"name":"PLAINTEXT","host":"h",'
     '"port":9092,"securityProtocol":0}],"features":[],"rack":null,"fenced":true,"inControlledShutdown":false}}'),
    (UserScramCredentialRecord(name="u", mechanism=1, salt=b"\xfb\xff", stored_key=b"", server_key=b"a",
                               iterations=4096), 0,
     '{"type":"USER_SCRAM_CREDENTIAL_RECORD","version":0,"data":{"name":"u","mechanism":1,"salt":"+/8=",'
     '"storedKey":"","serverKey":"YQ==","iterations":4096}}'),
    (NoOpRecord(), 0, '{"type":"NO_OP_RECORD","version":0,"data":{}}'),
], ids=["topic", "partition-change", "partition-v1", "config-null", "quota-double-escapes", "broker-v2",
        "scram-bytes", "noop"])
def test_json_line_is_what_kafka_dump_log_prints(record, version, line):
    assert record_json(record, version) == line
    assert json.loads(line) == record_to_json(record, version)
    assert record_from_json(json.loads(line)) == (record, version)


@pytest.mark.parametrize("cls,version", RECORDS, ids=record_ids(RECORDS))
def test_every_record_survives_json_at_every_version(cls, version):
    for record in (sample(cls, version), sample(cls, version, nulls=True)):
        line = record_json(record, version)
        doc = json.loads(line)
        assert doc["type"] == cls.TYPE_NAME and doc["version"] == version
        assert record_from_json(doc) == (record, version)


def test_field_names_are_kafkas_camel_case():
    assert camel_case("topic_id") == "topicId"
    assert camel_case("isr") == "isr"
    assert camel_case("is_migrating_zk_broker") == "isMigratingZkBroker"


@pytest.mark.parametrize("value,text", [
    (1.0, "1.0"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"), (0.001, "0.001"), (0.0001, "1.0E-4"),
    (-2.5e300, "-2.5E300"), (9999999.0, "9999999.0"), (0.1, "0.1"), (0.0, "0.0"), (-0.0, "-0.0"),
    (float("nan"), "NaN"), (float("-inf"), "-Infinity"),
])
def test_doubles_print_as_java_double_to_string(value, text):
    assert java_double_str(value) == text


@pytest.mark.parametrize("doc", [
    {}, {"type": "NOPE_RECORD", "version": 0, "data": {}}, {"type": "TOPIC_RECORD", "version": 1, "data": {}},
    {"type": "TOPIC_RECORD", "version": 0, "data": {"topicId": "not-a-uuid"}},
    {"type": "TOPIC_RECORD", "version": 0, "data": {"name": 5}},
    {"type": "TOPIC_RECORD", "version": 0, "data": []},
    {"type": "PARTITION_RECORD", "version": 0, "data": {"replicas": "1,2"}},
])
def test_bad_json_is_a_parse_error(doc):
    with pytest.raises(MetadataParseError):
        record_from_json(doc)


@pytest.mark.parametrize("cls,version", RECORDS, ids=record_ids(RECORDS))
def test_compiled_json_writer_prints_what_the_plain_dump_prints(cls, version):
    """record_json writes through per-(type, version) field writers; the plain
    record_to_json + dump is the reference, with values set, nulls, and defaults (a tagged
    field at its default must be left out by both)."""
    from kraft.metadata.json_form import _reference_json

    for record in (sample(cls, version), sample(cls, version, nulls=True), cls()):
        assert record_json(record, version) == _reference_json(record, version)
