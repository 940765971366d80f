/* Byte-level primitives of Kafka's record format: big-endian fields and varints.
 *
 * Plain C, header-only, no Python headers. Decoders never read past `end` and report
 * malformed input by returning 0 bytes consumed; they never allocate.
 */
#ifndef KRAFT_CODEC_H
#define KRAFT_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t kc_load_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t kc_load_be32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}
static inline uint64_t kc_load_be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
static inline void kc_store_be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void kc_store_be32(uint8_t *p, uint32_t v) {
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}
static inline void kc_store_be64(uint8_t *p, uint64_t v) {
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* Kafka adds offsets and timestamps as Java longs, which wrap; signed overflow is undefined
 * in C, so do it in unsigned arithmetic. */
static inline int64_t kc_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t kc_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

static inline uint64_t kc_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t kc_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static inline int kc_sizeof_uvarint(uint64_t v) {
    int n = 1;
    while (v > 0x7f) { v >>= 7; n++; }
    return n;
}
static inline int kc_sizeof_varint(int64_t v) { return kc_sizeof_uvarint(kc_zigzag(v)); }

/* Writes at most 10 bytes; returns the number written. */
static inline int kc_write_uvarint(uint8_t *p, uint64_t v) {
    int n = 0;
    while (v > 0x7f) { p[n++] = (uint8_t)((v & 0x7f) | 0x80); v >>= 7; }
    p[n++] = (uint8_t)v;
    return n;
}
static inline int kc_write_varint(uint8_t *p, int64_t v) { return kc_write_uvarint(p, kc_zigzag(v)); }

/* Reads an unsigned varint of at most `maxbytes` bytes whose value fits in `maxbits` bits.
 * Returns bytes consumed, 0 if truncated, too long or out of range. */
static inline int kc_read_uvarint(const uint8_t *p, const uint8_t *end, uint64_t *out,
                                  int maxbytes, int maxbits) {
    if (p < end && !(p[0] & 0x80)) { /* one byte: most lengths and deltas in a record */
        *out = p[0];
        return 1;
    }
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < maxbytes; i++) {
        if (p + i >= end) return 0;
        uint64_t b = p[i];
        if (shift == 63 && (b & 0x7e)) return 0; /* 10th byte may carry one bit only */
        v |= (b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (maxbits < 64 && (v >> maxbits)) return 0;
            *out = v;
            return i + 1;
        }
        shift += 7;
    }
    return 0;
}

/* Zig-zag int64 (Kafka varlong), up to 10 bytes. */
static inline int kc_read_varint64(const uint8_t *p, const uint8_t *end, int64_t *out) {
    uint64_t raw;
    int n = kc_read_uvarint(p, end, &raw, 10, 64);
    if (n) *out = kc_unzigzag(raw);
    return n;
}

/* Zig-zag int32 (Kafka varint), up to 5 bytes, value must fit 32 bits. */
static inline int kc_read_varint32(const uint8_t *p, const uint8_t *end, int32_t *out) {
    uint64_t raw;
    int n = kc_read_uvarint(p, end, &raw, 5, 32);
    if (n) *out = (int32_t)kc_unzigzag(raw);
    return n;
}

#endif
