# RecordBatch v2 layout, shared by the native modules (mirrors kraft/records/format.py;
# tests/records checks the two agree).
cdef enum:
    OFF_BASE_OFFSET = 0
    OFF_LENGTH = 8
    OFF_EPOCH = 12
    OFF_MAGIC = 16
    OFF_CRC = 17
    OFF_ATTRIBUTES = 21
    OFF_LAST_OFFSET_DELTA = 23
    OFF_BASE_TIMESTAMP = 27
    OFF_MAX_TIMESTAMP = 35
    OFF_PRODUCER_ID = 43
    OFF_PRODUCER_EPOCH = 51
    OFF_BASE_SEQUENCE = 53
    OFF_RECORDS_COUNT = 57
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    MIN_LENGTH = 49
    MIN_RECORD_SIZE = 7
    ATTR_COMPRESSION = 0x07
    ATTR_TIMESTAMP_TYPE = 0x08
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40
