# C declarations of the plain-C primitives (crc32c.h, codec.h) for the native modules.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "crc32c.h" nogil:
    uint32_t kraft_crc32c(uint32_t crc, const void *buf, size_t length)
    uint32_t kraft_crc32c_portable(uint32_t crc, const void *buf, size_t length)
    const char *kraft_crc32c_implementation()
    void kraft_crc32c_force_portable(int on)

cdef extern from "codec.h" nogil:
    uint16_t kc_load_be16(const uint8_t *p)
    uint32_t kc_load_be32(const uint8_t *p)
    uint64_t kc_load_be64(const uint8_t *p)
    void kc_store_be16(uint8_t *p, uint16_t v)
    void kc_store_be32(uint8_t *p, uint32_t v)
    void kc_store_be64(uint8_t *p, uint64_t v)
    int64_t kc_wrap_add(int64_t a, int64_t b)
    int64_t kc_wrap_sub(int64_t a, int64_t b)
    int kc_sizeof_varint(int64_t v)
    int kc_sizeof_uvarint(uint64_t v)
    int kc_write_varint(uint8_t *p, int64_t v)
    int kc_write_uvarint(uint8_t *p, uint64_t v)
    int kc_read_uvarint(const uint8_t *p, const uint8_t *end, uint64_t *out, int maxbytes, int maxbits)
    int kc_read_varint64(const uint8_t *p, const uint8_t *end, int64_t *out)
    int kc_read_varint32(const uint8_t *p, const uint8_t *end, int32_t *out)
