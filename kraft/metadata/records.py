"""The KIP-631 metadata record schemas, declared with the protocol DSL.

Facts (API keys, versions, fields, tags, defaults, nullability) come from Kafka's
``metadata/src/main/resources/common/metadata/*.json``; every record is flexible from version 0.
Field names are Kafka's in snake_case (``TopicId`` -> ``topic_id``); ``json_form`` turns them back
into Kafka's camelCase. Defining a class registers it by API key in :data:`METADATA_RECORDS`, a
registry separate from requests and responses. This module only describes shapes: framing is
``serde.py``, meaning is the image and delta modules.
"""

from __future__ import annotations

from kraft.protocol.message import Message
from kraft.protocol.schema import (BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, STRING, UINT16, UUID, Array,
                                   Field, Struct)

#: api key -> record class
METADATA_RECORDS: dict[int, type["MetadataRecord"]] = {}


class MetadataRecord(Message):
    """Base of every metadata record. ``TYPE_NAME`` is Kafka's ``MetadataRecordType`` constant
    (``TopicRecord`` -> ``TOPIC_RECORD``), the ``type`` that kafka-dump-log prints."""

    __slots__ = ()
    REGISTRY = METADATA_RECORDS
    FLEXIBLE = "0+"
    TYPE_NAME: str = ""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.API_KEY >= 0:
            cls.TYPE_NAME = _upper_snake(cls.__name__)


def _upper_snake(name: str) -> str:
    """Kafka's ``MessageGenerator.toSnakeCase(...).toUpperCase()``: an underscore before a
    capital that follows a lower-case letter."""
    out, prev_upper = [], True
    for c in name:
        if c.isupper():
            if not prev_upper:
                out.append("_")
            out.append(c)
            prev_upper = True
        else:
            out.append(c.upper())
            prev_upper = False
    return "".join(out)


# --- brokers and controllers ---------------------------------------------------


class RegisterBrokerRecord(MetadataRecord):
    API_KEY = 0
    VERSIONS = "0-3"

    class BrokerEndpoint(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("host", STRING),
            Field("port", UINT16),
            Field("security_protocol", INT16),
        )

    class BrokerFeature(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("min_supported_version", INT16),
            Field("max_supported_version", INT16),
        )

    FIELDS = (
        Field("broker_id", INT32),
        Field("is_migrating_zk_broker", BOOL, "2+", default=False),
        Field("incarnation_id", UUID),
        Field("broker_epoch", INT64),
        Field("end_points", Array(BrokerEndpoint)),
        Field("features", Array(BrokerFeature)),
        Field("rack", STRING, nullable="0+", default=None),
        Field("fenced", BOOL, default=True),
        Field("in_controlled_shutdown", BOOL, "1+", default=False),
        Field("log_dirs", Array(UUID), "3+", tag=0),
    )


class UnregisterBrokerRecord(MetadataRecord):
    API_KEY = 1
    VERSIONS = "0"
    FIELDS = (
        Field("broker_id", INT32),
        Field("broker_epoch", INT64),
    )


class FenceBrokerRecord(MetadataRecord):
    API_KEY = 7
    VERSIONS = "0"
    FIELDS = (
        Field("id", INT32),
        Field("epoch", INT64),
    )


class UnfenceBrokerRecord(MetadataRecord):
    API_KEY = 8
    VERSIONS = "0"
    FIELDS = (
        Field("id", INT32),
        Field("epoch", INT64),
    )


class BrokerRegistrationChangeRecord(MetadataRecord):
    API_KEY = 17
    VERSIONS = "0-2"
    FIELDS = (
        Field("broker_id", INT32),
        Field("broker_epoch", INT64),
        Field("fenced", INT8, tag=0),  # -1 unfenced, 0 no change, 1 fenced
        Field("in_controlled_shutdown", INT8, "1+", tag=1),  # 0 no change, 1 in controlled shutdown
        Field("log_dirs", Array(UUID), "2+", tag=2),
    )


class RegisterControllerRecord(MetadataRecord):
    API_KEY = 27
    VERSIONS = "0"

    class ControllerEndpoint(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("host", STRING),
            Field("port", UINT16),
            Field("security_protocol", INT16),
        )

    class ControllerFeature(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("min_supported_version", INT16),
            Field("max_supported_version", INT16),
        )

    FIELDS = (
        Field("controller_id", INT32),
        Field("incarnation_id", UUID),
        Field("zk_migration_ready", BOOL),
        Field("end_points", Array(ControllerEndpoint)),
        Field("features", Array(ControllerFeature)),
    )


# --- topics and partitions -------------------------------------------------------


class TopicRecord(MetadataRecord):
    API_KEY = 2
    VERSIONS = "0"
    FIELDS = (
        Field("name", STRING),
        Field("topic_id", UUID),
    )


class PartitionRecord(MetadataRecord):
    API_KEY = 3
    VERSIONS = "0-2"  # 1: directories (KIP-858); 2: ELR (KIP-966)
    FIELDS = (
        Field("partition_id", INT32, default=-1),
        Field("topic_id", UUID),
        Field("replicas", Array(INT32)),
        Field("isr", Array(INT32)),
        Field("removing_replicas", Array(INT32)),
        Field("adding_replicas", Array(INT32)),
        Field("leader", INT32, default=-1),
        Field("leader_recovery_state", INT8, tag=0, default=0),
        Field("leader_epoch", INT32, default=-1),
        Field("partition_epoch", INT32, default=-1),
        Field("directories", Array(UUID), "1+"),
        Field("eligible_leader_replicas", Array(INT32), "2+", nullable="2+", tag=1, default=None),
        Field("last_known_elr", Array(INT32), "2+", nullable="2+", tag=2, default=None),
    )


#: PartitionChangeRecord.leader when the leader did not change.
NO_LEADER_CHANGE = -2


class PartitionChangeRecord(MetadataRecord):
    """Every change field is tagged and null/-2/-1 means "unchanged"."""

    API_KEY = 5
    VERSIONS = "0-2"
    FIELDS = (
        Field("partition_id", INT32, default=-1),
        Field("topic_id", UUID),
        Field("isr", Array(INT32), nullable="0+", tag=0, default=None),
        Field("leader", INT32, tag=1, default=NO_LEADER_CHANGE),  # -1: no leader now
        Field("replicas", Array(INT32), nullable="0+", tag=2, default=None),
        Field("removing_replicas", Array(INT32), nullable="0+", tag=3, default=None),
        Field("adding_replicas", Array(INT32), nullable="0+", tag=4, default=None),
        Field("leader_recovery_state", INT8, tag=5, default=-1),
        Field("directories", Array(UUID), "1+", nullable="1+", tag=8, default=None),
        Field("eligible_leader_replicas", Array(INT32), "2+", nullable="2+", tag=6, default=None),
        Field("last_known_elr", Array(INT32), "2+", nullable="2+", tag=7, default=None),
    )


class RemoveTopicRecord(MetadataRecord):
    API_KEY = 9
    VERSIONS = "0"
    FIELDS = (Field("topic_id", UUID),)


# --- configs, quotas, ACLs, producer ids, features ------------------------------------


class ConfigRecord(MetadataRecord):
    API_KEY = 4
    VERSIONS = "0"
    FIELDS = (
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("name", STRING),
        Field("value", STRING, nullable="0+"),  # null deletes the key
    )


class ClientQuotaRecord(MetadataRecord):
    API_KEY = 14
    VERSIONS = "0"

    class EntityData(Struct):
        FIELDS = (
            Field("entity_type", STRING),
            Field("entity_name", STRING, nullable="0+"),  # null: the default entity
        )

    FIELDS = (
        Field("entity", Array(EntityData)),
        Field("key", STRING),
        Field("value", FLOAT64),
        Field("remove", BOOL),
    )


class AccessControlEntryRecord(MetadataRecord):
    API_KEY = 18
    VERSIONS = "0"
    FIELDS = (
        Field("id", UUID),
        Field("resource_type", INT8),
        Field("resource_name", STRING),
        Field("pattern_type", INT8),
        Field("principal", STRING),
        Field("host", STRING),
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


class RemoveAccessControlEntryRecord(MetadataRecord):
    API_KEY = 19
    VERSIONS = "0"
    FIELDS = (Field("id", UUID),)


class ProducerIdsRecord(MetadataRecord):
    API_KEY = 15
    VERSIONS = "0"
    FIELDS = (
        Field("broker_id", INT32),
        Field("broker_epoch", INT64, default=-1),
        Field("next_producer_id", INT64),
    )


class FeatureLevelRecord(MetadataRecord):
    API_KEY = 12
    VERSIONS = "0"  # Kafka pins it at 0: every reader must understand the first record of a log
    FIELDS = (
        Field("name", STRING),
        Field("feature_level", INT16),  # 0 removes the feature
    )


# --- transactions and no-ops (KIP-868, KIP-835) ------------------------------------


class NoOpRecord(MetadataRecord):
    API_KEY = 20
    VERSIONS = "0"
    FIELDS = ()


class BeginTransactionRecord(MetadataRecord):
    API_KEY = 23
    VERSIONS = "0"
    FIELDS = (Field("name", STRING, nullable="0+", tag=0, default=None),)


class EndTransactionRecord(MetadataRecord):
    API_KEY = 24
    VERSIONS = "0"
    FIELDS = ()


class AbortTransactionRecord(MetadataRecord):
    API_KEY = 25
    VERSIONS = "0"
    FIELDS = (Field("reason", STRING, nullable="0+", tag=0, default=None),)


# --- decoded and framed, not yet part of the image ------------------------------------


class DelegationTokenRecord(MetadataRecord):
    API_KEY = 10
    VERSIONS = "0"
    FIELDS = (
        Field("owner", STRING),
        Field("requester", STRING),
        Field("renewers", Array(STRING)),
        Field("issue_timestamp", INT64),
        Field("max_timestamp", INT64),
        Field("expiration_timestamp", INT64),
        Field("token_id", STRING),
    )


class UserScramCredentialRecord(MetadataRecord):
    API_KEY = 11
    VERSIONS = "0"
    FIELDS = (
        Field("name", STRING),
        Field("mechanism", INT8),
        Field("salt", BYTES),
        Field("stored_key", BYTES),
        Field("server_key", BYTES),
        Field("iterations", INT32),
    )


class ZkMigrationStateRecord(MetadataRecord):
    API_KEY = 21
    VERSIONS = "0"
    FIELDS = (Field("zk_migration_state", INT8),)


class RemoveUserScramCredentialRecord(MetadataRecord):
    API_KEY = 22
    VERSIONS = "0"
    FIELDS = (
        Field("name", STRING),
        Field("mechanism", INT8),
    )


class RemoveDelegationTokenRecord(MetadataRecord):
    API_KEY = 26
    VERSIONS = "0"
    FIELDS = (Field("token_id", STRING),)


#: type name (``TOPIC_RECORD``) -> record class
RECORDS_BY_TYPE_NAME = {cls.TYPE_NAME: cls for cls in METADATA_RECORDS.values()}

__all__ = ["METADATA_RECORDS", "RECORDS_BY_TYPE_NAME", "MetadataRecord", "NO_LEADER_CHANGE"] + sorted(
    cls.__name__ for cls in METADATA_RECORDS.values())
