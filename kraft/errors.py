"""Typed errors shared by every layer, and Kafka's numeric error codes.

Every exception kraft raises on purpose derives from :class:`KraftError` and
carries the Kafka error code a server would put on the wire for it, so request
handlers can turn any failure into a proper response instead of a traceback.
This module must not import anything from kraft: it sits at the bottom of the
layer graph.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Kafka's error codes, numbered exactly as ``org.apache.kafka.common.protocol.Errors``."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128


class KraftError(Exception):
    """Base of every error kraft raises on purpose; ``code`` is its Kafka error code."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


# --- records -----------------------------------------------------------------


class CorruptRecordError(KraftError):
    """Bytes that do not form a valid RecordBatch v2 (bad CRC, bad lengths, truncation...)."""

    code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(KraftError):
    """A structurally valid batch or record that breaks a rule (e.g. bad control record)."""

    code = ErrorCode.INVALID_RECORD


class RecordValidationError(KraftError):
    """Records a topic's rules refuse (Kafka's ``RecordValidationException``): INVALID_RECORD or
    INVALID_TIMESTAMP, with ``record_errors`` as (record index in its batch, message)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list):
        super().__init__(message)
        self.code = code
        self.record_errors = record_errors


class UnsupportedCodecError(KraftError):
    """A compression codec that is unknown, or whose Python package is not installed."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class RecordTooLargeError(KraftError):
    """A record or batch exceeds a configured size limit."""

    code = ErrorCode.MESSAGE_TOO_LARGE


# --- protocol ----------------------------------------------------------------


class RecordListTooLargeError(CorruptRecordError):
    """Records that decompress to more than the limit a node accepts (a decompression bomb
    or a batch beyond the metadata batch size)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class ProtocolError(KraftError):
    """A frame or message body that cannot be decoded: the connection must be closed."""

    code = ErrorCode.INVALID_REQUEST


class UnsupportedVersionError(KraftError):
    """An API key or version this node does not implement."""

    code = ErrorCode.UNSUPPORTED_VERSION


class InvalidRequestError(KraftError):
    """A decodable request whose contents break a protocol rule."""

    code = ErrorCode.INVALID_REQUEST


# --- storage -----------------------------------------------------------------


class StorageError(KraftError):
    """Anything that goes wrong reading or writing the log directory."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class LogCorruptionError(StorageError):
    """Invalid data found where it cannot be repaired by truncating the tail."""


class FatalLogError(StorageError):
    """An fsync or write failure: the log is unusable and must not be retried (fsyncgate)."""


class StateFileError(StorageError):
    """A malformed or unreadable state file (quorum-state, meta.properties, checkpoint)."""


class OffsetOutOfRangeError(KraftError):
    """A read or truncation at an offset outside [log start, log end]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


# --- quorum ------------------------------------------------------------------


class NotLeaderError(KraftError):
    """This node is not the leader; ``leader_id``/``leader_epoch`` say who is, if known (-1)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER

    def __init__(self, message: str = "not the leader", leader_id: int = -1, leader_epoch: int = -1):
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


class FencedLeaderEpochError(KraftError):
    """A request carried an epoch older than ours."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class InconsistentClusterIdError(KraftError):
    code = ErrorCode.INCONSISTENT_CLUSTER_ID


# --- configuration -----------------------------------------------------------


class ConfigError(KraftError):
    """A missing or invalid configuration value; the message names the key."""

    code = ErrorCode.INVALID_CONFIG


# --- protocol encoding (appended by kraft/protocol) ----------------------------


class EncodeError(KraftError, ValueError):
    """A message value that cannot be put on the wire: None in a non-nullable field, an int
    out of its type's range, a string longer than 32767 bytes. Always a bug in the caller."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


# --- metadata records (appended by kraft/metadata) ------------------------------


class MetadataParseError(CorruptRecordError):
    """Bytes that are not a metadata record in Kafka's framing (unknown frame version, record
    type or version, truncated or garbage body, trailing bytes): Kafka's MetadataParseException."""


class MetadataReplayError(InvalidRecordError):
    """A well-formed metadata record that does not fit the image it is replayed on (a partition
    of an unknown topic, fencing an unregistered broker, EndTransaction with none open...)."""


# --- network -----------------------------------------------------------------


class NetworkError(KraftError):
    """A connection failed, was closed, or could not be made; the request's fate is unknown."""

    code = ErrorCode.NETWORK_EXCEPTION


class PeerGoneError(NetworkError):
    """The peer closed or reset the connection, or refused it: its process is most likely
    gone (not merely slow), which a follower may act on at once."""


class RequestTimeoutError(NetworkError):
    """No response within the request timeout; the request may or may not have been applied."""

    code = ErrorCode.REQUEST_TIMED_OUT
