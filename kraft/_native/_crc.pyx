# cython: language_level=3
"""CRC-32C and varints exposed to Python (the C lives in crc32c.c and codec.h).

Must not import kraft Python modules.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

from kraft._native._buffer cimport Buffer, Hooks, acquire, get_hooks
from kraft._native._prims cimport *

cdef Hooks H = get_hooks()


def crc32c(data, uint32_t value=0):
    """CRC-32C of ``data`` (any bytes-like), continuing from a previous CRC ``value``."""
    cdef Py_buffer view
    cdef uint32_t out
    if type(data) is bytes:
        return kraft_crc32c(value, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= 65536:  # big buffers: let other threads run meanwhile
            with nogil:
                out = kraft_crc32c(value, view.buf, view.len)
        else:
            out = kraft_crc32c(value, view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return out


def crc32c_portable(data, uint32_t value=0):
    """The table-driven fallback, whatever the CPU supports (for tests)."""
    cdef Buffer b = acquire(data)
    return kraft_crc32c_portable(value, b.ptr, b.size)


def crc32c_implementation():
    """Which CRC path this CPU uses: "sse4.2", "armv8-crc" or "portable"."""
    return kraft_crc32c_implementation().decode()


def crc32c_force_portable(bint on):
    kraft_crc32c_force_portable(on)


def encode_varint(int64_t value):
    cdef uint8_t tmp[10]
    return PyBytes_FromStringAndSize(<char *>tmp, kc_write_varint(tmp, value))


def encode_unsigned_varint(value):
    if value < 0 or value > 0xFFFFFFFF:
        raise OverflowError(f"unsigned varint out of range: {value}")
    cdef uint8_t tmp[10]
    return PyBytes_FromStringAndSize(<char *>tmp, kc_write_uvarint(tmp, <uint64_t>value))


def size_of_varint(int64_t value):
    return kc_sizeof_varint(value)


def decode_varint(buf, Py_ssize_t pos=0):
    """Zig-zag varlong at ``pos``: ``(value, next_pos)``."""
    cdef Buffer b = acquire(buf)
    cdef int64_t v
    if pos < 0 or pos > b.size:
        raise H.corrupt_error("varint position outside the buffer")
    cdef int n = kc_read_varint64(b.ptr + pos, b.ptr + b.size, &v)
    if n == 0:
        raise H.corrupt_error("truncated or over-long varint")
    return v, pos + n


def decode_unsigned_varint(buf, Py_ssize_t pos=0):
    cdef Buffer b = acquire(buf)
    cdef uint64_t v
    if pos < 0 or pos > b.size:
        raise H.corrupt_error("varint position outside the buffer")
    cdef int n = kc_read_uvarint(b.ptr + pos, b.ptr + b.size, &v, 5, 32)
    if n == 0:
        raise H.corrupt_error("truncated or over-long unsigned varint")
    return v, pos + n
