from libc.stdint cimport uint8_t

cdef class Buffer:
    """A buffer export held for as long as any view into it lives."""
    cdef Py_buffer view
    cdef bint acquired
    cdef const uint8_t *ptr
    cdef Py_ssize_t size
    cdef object obj

cdef Buffer acquire(object obj, bint writable=*)

cdef class Hooks:
    """What kraft.records hands the native modules (they may not import kraft themselves)."""
    cdef public object corrupt_error
    cdef public object codec_error
    cdef public object compress
    cdef public object decompress
    cdef public object decoded_batch

cdef Hooks get_hooks()
