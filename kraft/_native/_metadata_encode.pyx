# cython: language_level=3
"""Compiled encoder of PartitionRecords straight from the image's registrations: the hot loop of
the snapshot writer. Byte for byte what ``image_records.partition_record`` + ``encode_record``
give, same version choice (kraft/metadata/batch_codec.py holds the pure twin; its tests compare
the two). Must not import kraft Python modules.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int8_t, int32_t, uint8_t, uint32_t
from libc.string cimport memcmp, memcpy

from kraft._native._prims cimport *

cdef bytes _MIGRATING_RAW = b"\x00" * 15 + b"\x02"  # Kafka's DirectoryId.MIGRATING
cdef enum:
    K_PARTITION = 3


# PartitionRegistration field positions.
cdef enum:
    R_REPLICAS = 0
    R_DIRS = 1
    R_ISR = 2
    R_REMOVING = 3
    R_ADDING = 4
    R_LEADER = 5
    R_LRS = 6
    R_LEADER_EPOCH = 7
    R_PARTITION_EPOCH = 8
    R_ELR = 9
    R_LAST_ELR = 10


cdef inline Py_ssize_t int_array_size(tuple t) noexcept:
    return kc_sizeof_uvarint(len(t) + 1) + 4 * len(t)


cdef inline uint8_t *put_int_array(uint8_t *p, tuple t) except NULL:
    cdef Py_ssize_t i
    p += kc_write_uvarint(p, len(t) + 1)
    for i in range(len(t)):
        kc_store_be32(p, <uint32_t><int32_t>t[i])
        p += 4
    return p


cdef bytes dirs_raw(tuple dirs, dict raw_cache):
    """The 16-byte wire form of each directory, concatenated; cached by the (interned) tuple."""
    key = id(dirs)
    cdef PyObject *hit = PyDict_GetItem(raw_cache, key)
    if hit != NULL:
        return <bytes>(<tuple>hit)[1]
    raw = b"".join([u.bytes for u in dirs])
    raw_cache[key] = (dirs, raw)  # keeps the tuple alive, so its id cannot be reused meanwhile
    return raw


def encode_partitions(bytes topic_id, list pids, dict partitions, dict raw_cache):
    """Framed PartitionRecord values of ``partitions[pid]`` for each pid, byte for byte what
    ``image_records.partition_record`` + ``encode_record`` give (same version choice)."""
    cdef Py_ssize_t i, n = len(pids), size, n_tags, tags_size
    cdef list out = PyList_New(n)
    cdef tuple reg, replicas, isr, removing, adding, elr, last_elr, dirs
    cdef bytes raw
    cdef int version, lrs
    cdef bint migrating
    cdef uint8_t *p
    cdef uint8_t *start
    cdef const char *mig = PyBytes_AS_STRING(_MIGRATING_RAW)
    cdef Py_ssize_t j, n_dirs
    if len(topic_id) != 16:
        raise ValueError("topic id must be 16 bytes")
    for i in range(n):
        pid = pids[i]
        reg = <tuple>partitions[pid]
        replicas, dirs, isr = reg[R_REPLICAS], reg[R_DIRS], reg[R_ISR]
        removing, adding = reg[R_REMOVING], reg[R_ADDING]
        elr, last_elr = reg[R_ELR], reg[R_LAST_ELR]
        lrs = reg[R_LRS]
        raw = dirs_raw(dirs, raw_cache)
        n_dirs = len(dirs)
        migrating = True
        for j in range(n_dirs):
            if memcmp(PyBytes_AS_STRING(raw) + 16 * j, mig, 16) != 0:
                migrating = False
                break
        version = 2 if (elr or last_elr) else (0 if migrating else 1)
        size = 3 + 4 + 16 + int_array_size(replicas) + int_array_size(isr) + int_array_size(removing)
        size += int_array_size(adding) + 12
        if version >= 1:
            size += kc_sizeof_uvarint((0 if migrating else n_dirs) + 1) + (0 if migrating else 16 * n_dirs)
        n_tags = tags_size = 0
        if lrs != 0:
            n_tags += 1
            tags_size += 3  # tag, size, int8
        if elr:
            n_tags += 1
            tags_size += 1 + kc_sizeof_uvarint(int_array_size(elr)) + int_array_size(elr)
        if last_elr:
            n_tags += 1
            tags_size += 1 + kc_sizeof_uvarint(int_array_size(last_elr)) + int_array_size(last_elr)
        size += kc_sizeof_uvarint(n_tags) + tags_size
        value = PyBytes_FromStringAndSize(NULL, size)
        start = p = <uint8_t *>PyBytes_AS_STRING(value)
        p[0], p[1], p[2] = 1, K_PARTITION, version
        p += 3
        kc_store_be32(p, <uint32_t><int32_t>pid)
        memcpy(p + 4, PyBytes_AS_STRING(topic_id), 16)
        p += 20
        p = put_int_array(p, replicas)
        p = put_int_array(p, isr)
        p = put_int_array(p, removing)
        p = put_int_array(p, adding)
        kc_store_be32(p, <uint32_t><int32_t>reg[R_LEADER])
        kc_store_be32(p + 4, <uint32_t><int32_t>reg[R_LEADER_EPOCH])
        kc_store_be32(p + 8, <uint32_t><int32_t>reg[R_PARTITION_EPOCH])
        p += 12
        if version >= 1:
            if migrating:
                p[0] = 1
                p += 1
            else:
                p += kc_write_uvarint(p, n_dirs + 1)
                memcpy(p, PyBytes_AS_STRING(raw), 16 * n_dirs)
                p += 16 * n_dirs
        p += kc_write_uvarint(p, n_tags)
        if lrs != 0:
            p[0], p[1], p[2] = 0, 1, <uint8_t><int8_t>lrs
            p += 3
        if elr:
            p[0] = 1
            p += 1 + kc_write_uvarint(p + 1, int_array_size(elr))
            p = put_int_array(p, elr)
        if last_elr:
            p[0] = 2
            p += 1 + kc_write_uvarint(p + 1, int_array_size(last_elr))
            p = put_int_array(p, last_elr)
        if p - start != size:
            raise AssertionError(f"PartitionRecord size {p - start} != {size}")
        Py_INCREF(value)
        PyList_SET_ITEM(out, i, value)
    return out
