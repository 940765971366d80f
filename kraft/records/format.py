"""RecordBatch v2 layout constants and enums (Kafka's ``DefaultRecordBatch``).

Facts only: byte offsets of header fields, attribute bits, codec and control-record
numbers. Both codec implementations read their layout from here or mirror it; this
module must not contain encoding logic.
"""

from __future__ import annotations

from enum import IntEnum

# Byte offsets inside a batch header.
BASE_OFFSET = 0
LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57
RECORDS = 61

#: Bytes before the ``Length`` field ends: BaseOffset + Length. ``size = length + LOG_OVERHEAD``.
LOG_OVERHEAD = 12
#: Size of a batch with no records.
BATCH_HEADER_SIZE = RECORDS
#: Smallest legal value of the Length field (a header with zero records).
MIN_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
#: The CRC covers Attributes .. end of batch.
CRC_START = ATTRIBUTES
MAGIC_V2 = 2
#: Smallest encoded record: 7 one-byte fields (length, attrs, ts delta, offset delta,
#: key len, value len, header count). Used to bound record counts read from untrusted bytes.
MIN_RECORD_SIZE = 7

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

#: Decompression output is capped so a tiny "bomb" cannot exhaust memory.
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(IntEnum):
    """Type field of a control record's key (``ControlRecordType.java``)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
