# cython: language_level=3
"""Shared plumbing of the native modules: buffer exports and the injected hooks.

Must not import kraft Python modules; ``kraft.records`` calls :func:`configure` once.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE


cdef class Buffer:
    def __dealloc__(self):
        if self.acquired:
            PyBuffer_Release(&self.view)


cdef Buffer acquire(object obj, bint writable=False):
    cdef Buffer b = Buffer.__new__(Buffer)
    b.obj = obj
    if type(obj) is bytes and not writable:
        # bytes never move or change: no export needed.
        b.ptr = <const uint8_t *>PyBytes_AS_STRING(obj)
        b.size = PyBytes_GET_SIZE(obj)
        return b
    PyObject_GetBuffer(obj, &b.view, PyBUF_WRITABLE if writable else PyBUF_SIMPLE)
    b.acquired = True
    b.ptr = <const uint8_t *>b.view.buf
    b.size = b.view.len
    return b


cdef class Hooks:
    pass


cdef Hooks _hooks = Hooks()
_hooks.corrupt_error = ValueError
_hooks.codec_error = ValueError


cdef Hooks get_hooks():
    return _hooks


def configure(*, corrupt_error, codec_error, compress, decompress, decoded_batch):
    _hooks.corrupt_error = corrupt_error
    _hooks.codec_error = codec_error
    _hooks.compress = compress
    _hooks.decompress = decompress
    _hooks.decoded_batch = decoded_batch
