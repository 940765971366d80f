# cython: language_level=3
"""Compiled decoder of the hot KIP-631 metadata records: a whole batch's record values in one
C loop, each turned into the fields the image needs (kraft/metadata/batch_codec.py is the
pure-Python twin and says what the items are).

PartitionRecord becomes a PartitionRegistration (replica lists interned, directories resolved
as Kafka's ``defaultToMigrating``, the registration itself shared with equal ones through the
registrations table keyed as ``partition.intern_registration`` keys it); TopicRecord, PartitionChangeRecord
and RegisterBrokerRecord become tuples of their fields (a PartitionChangeRecord's item also
carries its header + body bytes, the key equal changes are merged once by). Anything else, and any value this
decoder is not sure about (unknown tagged fields, a version it does not know, a malformed
body, a registration replay would refuse), becomes None: the caller then uses the generic
decoder, which keeps unknown tagged fields and raises the proper errors. So this module never
accepts a value the generic decoder would reject, and never raises on bad input.
The encoding side is ``_metadata_encode.pyx``.
Must not import kraft Python modules: what it needs is handed over by ``configure``.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_SetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromVoidPtr
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from kraft._native._prims cimport *

cdef object _uuid_factory = None   # 16 bytes -> uuid.UUID
cdef object _migrating = None      # uuid.UUID of Kafka's DirectoryId.MIGRATING
cdef Py_ssize_t _cache_limit = 1 << 16
cdef dict _uuids = {}              # 16 bytes -> uuid.UUID, one object per distinct id
cdef uint8_t _last_uuid_raw[16]
cdef object _last_uuid = None
cdef tuple _EMPTY = ()
cdef bytes _MIGRATING_RAW = b"\x00" * 15 + b"\x02"
cdef object _registration_type = None  # PartitionRegistration
cdef dict _registrations = {}          # shared with kraft.metadata.partition._REGISTRATIONS
cdef dict _migrating_by_count = {}     # shared with kraft.metadata.partition._MIGRATING_BY_COUNT
# A PartitionRecord's registration is a function of its bytes but for the partition id and topic
# id: header (3 bytes) + body (after the topic id) -> registration. Partitions placed alike have
# equal bodies, so most records cost a lookup instead of a parse.
cdef dict _bodies = {}
# The same for a PartitionChangeRecord: header + body -> its fields but for the ids (the lists in
# them are then shared by the items: read-only, as every decoded record is to replay).
cdef dict _change_bodies = {}

# Item kinds (the record api keys).
cdef enum:
    K_REGISTER_BROKER = 0
    K_TOPIC = 2
    K_PARTITION = 3
    K_PARTITION_CHANGE = 5


def configure(uuid_factory, migrating_dir, Py_ssize_t cache_limit, registration_type, dict registrations,
              dict migrating_by_count):
    global _uuid_factory, _migrating, _cache_limit, _last_uuid, _registration_type, _registrations
    global _migrating_by_count
    _uuid_factory, _migrating, _cache_limit, _last_uuid = uuid_factory, migrating_dir, cache_limit, None
    _registration_type, _registrations, _migrating_by_count = registration_type, registrations, migrating_by_count
    _uuids.clear()
    _bodies.clear()
    _change_bodies.clear()


cdef object body_key(const uint8_t *v, Py_ssize_t size):
    """Header + body of a PartitionRecord value (None if too short to have a topic id)."""
    if size < 23:
        return None
    key = PyBytes_FromStringAndSize(NULL, size - 20)
    cdef char *k = PyBytes_AS_STRING(key)
    memcpy(k, v, 3)
    memcpy(k + 3, v + 23, size - 23)
    return key


cdef inline object _id(object o):
    return PyLong_FromVoidPtr(<void *>o)


cdef object registration_of(tuple f):
    """The shared registration of the eleven fields ``f`` (see partition.intern_registration)."""
    key = (_id(f[0]), _id(f[1]), _id(f[2]), _id(f[3]), _id(f[4]), f[5], f[6], f[7], f[8], _id(f[9]), _id(f[10]))
    cdef PyObject *hit = PyDict_GetItem(_registrations, key)
    if hit != NULL:
        return <object>hit
    if len(_registrations) >= _cache_limit:
        _registrations.clear()
    reg = tuple.__new__(_registration_type, f)
    _registrations[key] = reg
    return reg


cdef struct Rd:
    const uint8_t *p
    const uint8_t *end
    bint bad


cdef inline uint64_t rd_uvarint(Rd *r) noexcept:
    cdef uint64_t v = 0
    cdef int n
    if r.bad:
        return 0
    n = kc_read_uvarint(r.p, r.end, &v, 5, 32)
    if n == 0:
        r.bad = True
        return 0
    r.p += n
    return v


cdef inline bint rd_need(Rd *r, Py_ssize_t n) noexcept:
    if r.bad or r.end - r.p < n:
        r.bad = True
        return False
    return True


cdef inline int32_t rd_i32(Rd *r) noexcept:
    cdef int32_t v
    if not rd_need(r, 4):
        return 0
    v = <int32_t>kc_load_be32(r.p)
    r.p += 4
    return v


cdef inline int64_t rd_i64(Rd *r) noexcept:
    cdef int64_t v
    if not rd_need(r, 8):
        return 0
    v = <int64_t>kc_load_be64(r.p)
    r.p += 8
    return v


cdef inline int rd_i16(Rd *r) noexcept:
    cdef int v
    if not rd_need(r, 2):
        return 0
    v = <int16_t>kc_load_be16(r.p)
    r.p += 2
    return v


cdef inline int rd_u16(Rd *r) noexcept:
    cdef int v
    if not rd_need(r, 2):
        return 0
    v = kc_load_be16(r.p)
    r.p += 2
    return v


cdef inline int rd_i8(Rd *r) noexcept:
    cdef int v
    if not rd_need(r, 1):
        return 0
    v = <int8_t>r.p[0]
    r.p += 1
    return v


cdef object uuid_at(const uint8_t *raw):
    """The shared uuid.UUID of 16 raw bytes (consecutive records repeat their topic id)."""
    global _last_uuid
    if _last_uuid is not None and memcmp(raw, _last_uuid_raw, 16) == 0:
        return _last_uuid
    key = PyBytes_FromStringAndSize(<const char *>raw, 16)
    cdef PyObject *hit = PyDict_GetItem(_uuids, key)
    if hit != NULL:
        u = <object>hit
    else:
        if len(_uuids) >= _cache_limit:
            _uuids.clear()
        u = _uuid_factory(key)
        _uuids[key] = u
    memcpy(_last_uuid_raw, raw, 16)
    _last_uuid = u
    return u


cdef object rd_uuid(Rd *r):
    if not rd_need(r, 16):
        return None
    u = uuid_at(r.p)
    r.p += 16
    return u


cdef object rd_string(Rd *r, bint nullable):
    """A compact string; None for null (when allowed). Sets bad on anything the generic reader
    would refuse: null when not nullable, longer than 32767, past the end, not UTF-8."""
    cdef uint64_t n = rd_uvarint(r)
    if r.bad:
        return None
    if n == 0:
        if not nullable:
            r.bad = True
        return None
    n -= 1
    if n > 0x7FFF or not rd_need(r, <Py_ssize_t>n):
        r.bad = True
        return None
    try:
        s = PyUnicode_DecodeUTF8(<const char *>r.p, <Py_ssize_t>n, NULL)
    except UnicodeDecodeError:
        r.bad = True
        return None
    r.p += n
    return s


cdef Py_ssize_t rd_count(Rd *r, bint nullable, Py_ssize_t elem_size) noexcept:
    """A compact array's element count; -1 for null (or bad)."""
    cdef uint64_t n = rd_uvarint(r)
    if r.bad:
        return -1
    if n == 0:
        if not nullable:
            r.bad = True
        return -1
    n -= 1
    if <Py_ssize_t>n * elem_size > r.end - r.p:
        r.bad = True
        return -1
    return <Py_ssize_t>n


cdef object int_seq(Rd *r, Py_ssize_t n, bint as_list):
    """``n`` int32 values as a list, or as a tuple (empty: the shared ``()``)."""
    cdef Py_ssize_t i
    cdef object seq, v  # v typed object: Cython would infer int32_t and break the INCREF below
    if as_list:
        seq = PyList_New(n)
    elif n == 0:
        return _EMPTY
    else:
        seq = PyTuple_New(n)
    for i in range(n):
        v = <int32_t>kc_load_be32(r.p + 4 * i)
        Py_INCREF(v)
        if as_list:
            PyList_SET_ITEM(seq, i, v)
        else:
            PyTuple_SET_ITEM(seq, i, v)
    r.p += 4 * n
    return seq


cdef object intern_tuple(tuple t, dict intern):
    if not t:
        return _EMPTY
    cdef PyObject *hit = PyDict_GetItem(intern, t)
    if hit != NULL:
        return <object>hit
    if len(intern) >= _cache_limit:
        intern.clear()
    intern[t] = t
    return t


cdef object rd_int_tuple(Rd *r, dict intern):
    """A non-nullable int32 array as an interned tuple."""
    cdef Py_ssize_t n = rd_count(r, False, 4)
    if r.bad:
        return None
    return intern_tuple(int_seq(r, n, False), intern)


cdef object rd_int_list(Rd *r, bint nullable):
    """An int32 array as the generic decoder gives it: a list, or None for null."""
    cdef Py_ssize_t n = rd_count(r, nullable, 4)
    if r.bad or n < 0:
        return None
    return int_seq(r, n, True)


cdef object rd_uuid_list(Rd *r, bint nullable):
    cdef Py_ssize_t n = rd_count(r, nullable, 16), i
    if r.bad or n < 0:
        return None
    out = PyList_New(n)
    for i in range(n):
        u = uuid_at(r.p)
        r.p += 16
        Py_INCREF(u)
        PyList_SET_ITEM(out, i, u)
    return out


cdef inline bint rd_no_tags(Rd *r) noexcept:
    """A tagged-field section that must be empty (else: not ours, let the generic decoder keep it)."""
    if not rd_need(r, 1) or r.p[0] != 0:
        r.bad = True
        return False
    r.p += 1
    return True


cdef object migrating_dirs(Py_ssize_t n, dict intern):
    """(MIGRATING,) * n: one object per count, shared with partition.migrating_directories."""
    cdef PyObject *hit = PyDict_GetItem(_migrating_by_count, n)
    if hit != NULL:
        return <object>hit
    cdef tuple t = PyTuple_New(n)
    cdef Py_ssize_t i
    for i in range(n):
        Py_INCREF(_migrating)
        PyTuple_SET_ITEM(t, i, _migrating)
    _migrating_by_count[n] = t
    return t


cdef object resolve_dirs(const uint8_t *raw, Py_ssize_t n_dirs, Py_ssize_t n_replicas, dict intern,
                         dict dir_cache):
    """Kafka's defaultToMigrating: none, or all MIGRATING, means MIGRATING for each replica."""
    cdef Py_ssize_t i
    cdef bint all_migrating = True
    cdef const char *mig = PyBytes_AS_STRING(_MIGRATING_RAW)
    if n_dirs == 0:
        return migrating_dirs(n_replicas, intern)
    for i in range(n_dirs):
        if memcmp(raw + 16 * i, mig, 16) != 0:
            all_migrating = False
            break
    if all_migrating:
        return migrating_dirs(n_replicas, intern)
    key = PyBytes_FromStringAndSize(<const char *>raw, 16 * n_dirs)
    cdef PyObject *hit = PyDict_GetItem(dir_cache, key)
    if hit != NULL:
        return <object>hit
    cdef tuple t = PyTuple_New(n_dirs)
    for i in range(n_dirs):
        u = uuid_at(raw + 16 * i)
        Py_INCREF(u)
        PyTuple_SET_ITEM(t, i, u)
    resolved = intern_tuple(t, intern)
    if len(dir_cache) >= _cache_limit:
        dir_cache.clear()
    dir_cache[key] = resolved
    return resolved


cdef object partition_item(Rd *r, int version, dict intern, dict dir_cache):
    """(3, topic_id, partition_id, registration fields) or None."""
    cdef int32_t pid, leader, leader_epoch, partition_epoch
    cdef int lrs = 0
    cdef Py_ssize_t n_dirs = 0, n_tags, k, n
    cdef const uint8_t *dirs_raw = NULL
    cdef const uint8_t *tag_end
    cdef uint64_t tag, size
    elr = _EMPTY
    last_elr = _EMPTY
    pid = rd_i32(r)
    topic_id = rd_uuid(r)
    replicas = rd_int_tuple(r, intern)
    isr = rd_int_tuple(r, intern)
    removing = rd_int_tuple(r, intern)
    adding = rd_int_tuple(r, intern)
    leader = rd_i32(r)
    leader_epoch = rd_i32(r)
    partition_epoch = rd_i32(r)
    if version >= 1:
        n_dirs = rd_count(r, False, 16)
        if r.bad:
            return None
        dirs_raw = r.p
        r.p += 16 * n_dirs
    n_tags = <Py_ssize_t>rd_uvarint(r)
    if r.bad or n_tags > r.end - r.p:
        return None
    for k in range(n_tags):
        tag = rd_uvarint(r)
        size = rd_uvarint(r)
        if r.bad or <Py_ssize_t>size > r.end - r.p:
            return None
        tag_end = r.p + size
        if tag == 0:
            lrs = rd_i8(r)
        elif tag == 1 and version >= 2:
            n = rd_count(r, True, 4)
            if not r.bad and n >= 0:
                elr = intern_tuple(int_seq(r, n, False), intern)
        elif tag == 2 and version >= 2:
            n = rd_count(r, True, 4)
            if not r.bad and n >= 0:
                last_elr = intern_tuple(int_seq(r, n, False), intern)
        else:
            return None  # unknown tag: the generic decoder keeps it
        if r.bad or r.p != tag_end:
            return None
    if r.bad or r.p != r.end:
        return None
    cdef Py_ssize_t n_replicas = len(<tuple>replicas)
    if (n_dirs and n_dirs != n_replicas) or (lrs != 0 and lrs != 1):
        return None  # replay refuses it: let the generic path raise its error
    dirs = resolve_dirs(dirs_raw, n_dirs, n_replicas, intern, dir_cache)
    fields = (replicas, dirs, isr, removing, adding, leader, lrs, leader_epoch, partition_epoch, elr, last_elr)
    return (K_PARTITION, topic_id, pid, registration_of(fields))


cdef object topic_item(Rd *r):
    name = rd_string(r, False)
    topic_id = rd_uuid(r)
    if not rd_no_tags(r) or r.p != r.end:
        return None
    return (K_TOPIC, 0, (name, topic_id))


cdef object partition_change_item(Rd *r, int version):
    cdef Py_ssize_t n_tags, k
    cdef uint64_t tag, size
    cdef const uint8_t *tag_end
    cdef int32_t leader = -2
    cdef int lrs = -1
    isr = replicas = removing = adding = dirs = elr = last_elr = None
    pid = rd_i32(r)
    topic_id = rd_uuid(r)
    n_tags = <Py_ssize_t>rd_uvarint(r)
    if r.bad or n_tags > r.end - r.p:
        return None
    for k in range(n_tags):
        tag = rd_uvarint(r)
        size = rd_uvarint(r)
        if r.bad or <Py_ssize_t>size > r.end - r.p:
            return None
        tag_end = r.p + size
        if tag == 0:
            isr = rd_int_list(r, True)
        elif tag == 1:
            leader = rd_i32(r)
        elif tag == 2:
            replicas = rd_int_list(r, True)
        elif tag == 3:
            removing = rd_int_list(r, True)
        elif tag == 4:
            adding = rd_int_list(r, True)
        elif tag == 5:
            lrs = rd_i8(r)
        elif tag == 8 and version >= 1:
            dirs = rd_uuid_list(r, True)
        elif tag == 6 and version >= 2:
            elr = rd_int_list(r, True)
        elif tag == 7 and version >= 2:
            last_elr = rd_int_list(r, True)
        else:
            return None
        if r.bad or r.p != tag_end:
            return None
    if r.bad or r.p != r.end:
        return None
    return (K_PARTITION_CHANGE, version,
            (pid, topic_id, isr, leader, replicas, removing, adding, lrs, dirs, elr, last_elr))


cdef object register_broker_item(Rd *r, int version):
    cdef int32_t broker_id
    cdef int64_t epoch
    cdef bint migrating = False, fenced, shutdown = False
    cdef Py_ssize_t n, i, n_tags, k
    cdef uint64_t tag, size
    cdef const uint8_t *tag_end
    broker_id = rd_i32(r)
    if version >= 2:
        migrating = rd_i8(r) != 0
    incarnation = rd_uuid(r)
    epoch = rd_i64(r)
    n = rd_count(r, False, 6)  # name, host (1 byte each at least), port, protocol, tags
    if r.bad:
        return None
    endpoints = PyList_New(0)
    for i in range(n):
        name = rd_string(r, False)
        host = rd_string(r, False)
        port = rd_u16(r)
        protocol = rd_i16(r)
        if not rd_no_tags(r):
            return None
        endpoints.append((name, host, port, protocol))
    n = rd_count(r, False, 6)
    if r.bad:
        return None
    features = PyList_New(0)
    for i in range(n):
        name = rd_string(r, False)
        lo = rd_i16(r)
        hi = rd_i16(r)
        if not rd_no_tags(r):
            return None
        features.append((name, lo, hi))
    rack = rd_string(r, True)
    fenced = rd_i8(r) != 0
    if version >= 1:
        shutdown = rd_i8(r) != 0
    log_dirs = []
    n_tags = <Py_ssize_t>rd_uvarint(r)
    if r.bad or n_tags > r.end - r.p:
        return None
    for k in range(n_tags):
        tag = rd_uvarint(r)
        size = rd_uvarint(r)
        if r.bad or <Py_ssize_t>size > r.end - r.p:
            return None
        tag_end = r.p + size
        if tag == 0 and version >= 3:
            log_dirs = rd_uuid_list(r, False)
        else:
            return None
        if r.bad or r.p != tag_end:
            return None
    if r.bad or r.p != r.end:
        return None
    return (K_REGISTER_BROKER, version,
            (broker_id, migrating, incarnation, epoch, endpoints, features, rack, fenced, shutdown, log_dirs))


def decode_values(list values, dict intern, dict dir_cache):
    """One item per value (see the module doc); ``intern`` shares equal tuples with the image,
    ``dir_cache`` maps raw directory bytes to their resolved tuple."""
    cdef Py_ssize_t i, n = len(values)
    cdef list out = PyList_New(n)
    cdef Rd r
    cdef const uint8_t *p
    cdef int api_key, version
    cdef PyObject *hit
    cdef int32_t pid
    for i in range(n):
        v = values[i]
        item = None
        if type(v) is bytes and PyBytes_GET_SIZE(v) > 3:
            p = <const uint8_t *>PyBytes_AS_STRING(v)
            api_key, version = p[1], p[2]
            if p[0] == 1 and api_key < 0x80 and version < 0x80:
                r.p, r.end, r.bad = p + 3, p + PyBytes_GET_SIZE(v), False
                if api_key == K_PARTITION and version <= 2:
                    key = body_key(p, PyBytes_GET_SIZE(v))
                    hit = NULL if key is None else PyDict_GetItem(_bodies, key)
                    if hit != NULL:
                        pid = rd_i32(&r)
                        item = (K_PARTITION, rd_uuid(&r), pid, <object>hit)
                    else:
                        item = partition_item(&r, version, intern, dir_cache)
                        if item is not None and key is not None and not r.bad:
                            if len(_bodies) >= _cache_limit:
                                _bodies.clear()
                            _bodies[key] = (<tuple>item)[3]
                elif api_key == K_TOPIC and version == 0:
                    item = topic_item(&r)
                elif api_key == K_PARTITION_CHANGE and version <= 2:
                    key = body_key(p, PyBytes_GET_SIZE(v))
                    hit = NULL if key is None else PyDict_GetItem(_change_bodies, key)
                    if hit != NULL:
                        pid = rd_i32(&r)
                        item = (K_PARTITION_CHANGE, version, (pid, rd_uuid(&r)) + <tuple>hit, key)
                    else:
                        item = partition_change_item(&r, version)
                        if item is not None and key is not None and not r.bad:
                            if len(_change_bodies) >= _cache_limit:
                                _change_bodies.clear()
                            _change_bodies[key] = (<tuple>(<tuple>item)[2])[2:]
                            item = (<tuple>item) + (key,)
                elif api_key == K_REGISTER_BROKER and version <= 3:
                    item = register_broker_item(&r, version)
                if r.bad:
                    item = None
        Py_INCREF(item)
        PyList_SET_ITEM(out, i, item)
    return out



def partitions_touching(dict partitions, long broker, bint with_elr, int which=0):
    """The ids of the partitions in ``partitions`` (partition id -> registration tuple) that
    ``broker`` leads or is in the ISR of (or, with ``with_elr``, the ELR of), in dict order; with
    ``which`` 1 only those it leads, 2 only those it does not: a fence's scan of a million
    partitions in C (the registration's fields are read by position: isr 2, leader 5, elr 9)."""
    cdef list out = []
    cdef Py_ssize_t pos = 0
    cdef PyObject *k
    cdef PyObject *v
    cdef tuple reg
    cdef bint leads
    while PyDict_Next(partitions, &pos, &k, &v):
        reg = <tuple>v
        leads = <long>reg[5] == broker
        if which == 1:
            if leads:
                out.append(<object>k)
        elif leads:
            if which == 0:
                out.append(<object>k)
        elif broker in <tuple>reg[2] or (with_elr and broker in <tuple>reg[9]):
            out.append(<object>k)
    return out
