/* CRC-32C with run-time dispatch; see crc32c.h.
 *
 * Why three streams: the hardware crc32 instruction has a latency of ~3 cycles but a
 * throughput of one per cycle, so running three independent CRCs over adjacent blocks and
 * combining them afterwards is ~3x faster than one dependent chain. Combining needs
 * "shift by N zero bytes" operators, which are linear maps on the 32-bit register; we
 * precompute them as 4x256 tables for the two block sizes we use.
 */
#include "crc32c.h"

#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256

static uint32_t table8[8][256];       /* slicing-by-8 */
static uint32_t shift_long[4][256];   /* x^(8*LONG_BLOCK) operator */
static uint32_t shift_short[4][256];  /* x^(8*SHORT_BLOCK) operator */
static int hw_available = 0;
static int force_portable = 0;

static uint32_t zeros_op(uint32_t crc, size_t nbytes) {
    /* Advance the raw register over nbytes zero bytes, byte at a time. */
    while (nbytes--) crc = (crc >> 8) ^ table8[0][crc & 0xff];
    return crc;
}

static void build_shift(uint32_t t[4][256], size_t nbytes) {
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) basis[bit] = zeros_op(1u << bit, nbytes);
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1 << i)) v ^= basis[8 * k + i];
            t[k][b] = v;
        }
    }
}

static inline uint32_t apply_shift(uint32_t t[4][256], uint32_t crc) {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* unaligned-safe; compiles to one load */
    return v;
}

/* ---- portable ------------------------------------------------------------------------ */

static uint32_t portable_raw(uint32_t crc, const unsigned char *p, size_t len) {
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ table8[0][(crc ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t w = load64(p);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = table8[7][w & 0xff] ^ table8[6][(w >> 8) & 0xff] ^ table8[5][(w >> 16) & 0xff] ^
              table8[4][(w >> 24) & 0xff] ^ table8[3][(w >> 32) & 0xff] ^
              table8[2][(w >> 40) & 0xff] ^ table8[1][(w >> 48) & 0xff] ^ table8[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ table8[0][(crc ^ *p++) & 0xff];
    return crc;
}

/* ---- hardware step functions ------------------------------------------------------------ */

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#define HW_TARGET __attribute__((target("sse4.2")))
#define HW_NAME "sse4.2"
HW_TARGET static inline uint32_t hw8(uint32_t c, uint64_t v) { return (uint32_t)__builtin_ia32_crc32di(c, v); }
HW_TARGET static inline uint32_t hw1(uint32_t c, unsigned char v) { return __builtin_ia32_crc32qi(c, v); }
static int detect_hw(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_SSE4_2) != 0;
}
#define HAVE_HW 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#define HW_TARGET __attribute__((target("arch=armv8-a+crc")))
#define HW_NAME "armv8-crc"
HW_TARGET static inline uint32_t hw8(uint32_t c, uint64_t v) { return __builtin_aarch64_crc32cx(c, v); }
HW_TARGET static inline uint32_t hw1(uint32_t c, unsigned char v) { return __builtin_aarch64_crc32cb(c, v); }
static int detect_hw(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#define HAVE_HW 1
#else
#define HAVE_HW 0
#define HW_NAME "portable"
static int detect_hw(void) { return 0; }
#endif

#if HAVE_HW
/* One step of the three streams at byte offset `o` of the current block. */
#define TRIPLET(block, o)                                                           \
    crc = hw8(crc, load64(p + (o)));                                                \
    c1 = hw8(c1, load64(p + (block) + (o)));                                        \
    c2 = hw8(c2, load64(p + 2 * (block) + (o)));

/* Three interleaved streams over blocks of `block` bytes (a multiple of 32), combined
 * with `shift`. Unrolled four times: the loop bookkeeping otherwise costs ~20%. */
#define THREE_WAY(block, shift)                                                     \
    while (len >= 3 * (block)) {                                                    \
        uint32_t c1 = 0, c2 = 0;                                                    \
        const unsigned char *end = p + (block);                                     \
        do {                                                                        \
            TRIPLET(block, 0)                                                       \
            TRIPLET(block, 8)                                                       \
            TRIPLET(block, 16)                                                      \
            TRIPLET(block, 24)                                                      \
            p += 32;                                                                \
        } while (p < end);                                                          \
        crc = apply_shift(shift, crc) ^ c1;                                         \
        crc = apply_shift(shift, crc) ^ c2;                                         \
        p += 2 * (block);                                                           \
        len -= 3 * (block);                                                         \
    }

HW_TARGET static uint32_t hw_raw(uint32_t crc, const unsigned char *p, size_t len) {
    while (len && ((uintptr_t)p & 7)) {
        crc = hw1(crc, *p++);
        len--;
    }
    THREE_WAY(LONG_BLOCK, shift_long)
    THREE_WAY(SHORT_BLOCK, shift_short)
    while (len >= 8) {
        crc = hw8(crc, load64(p));
        p += 8;
        len -= 8;
    }
    while (len--) crc = hw1(crc, *p++);
    return crc;
}
#endif

/* ---- set-up and entry points ------------------------------------------------------------ */

static void init_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table8[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table8[0][n];
        for (int k = 1; k < 8; k++) {
            c = table8[0][c & 0xff] ^ (c >> 8);
            table8[k][n] = c;
        }
    }
    build_shift(shift_long, LONG_BLOCK);
    build_shift(shift_short, SHORT_BLOCK);
    hw_available = detect_hw();
}

/* Runs when the shared object is loaded, before any caller can race on the tables. */
__attribute__((constructor)) static void kraft_crc32c_ctor(void) { init_tables(); }

uint32_t kraft_crc32c_portable(uint32_t crc, const void *buf, size_t len) {
    return ~portable_raw(~crc, (const unsigned char *)buf, len);
}

uint32_t kraft_crc32c(uint32_t crc, const void *buf, size_t len) {
#if HAVE_HW
    if (hw_available && !force_portable) return ~hw_raw(~crc, (const unsigned char *)buf, len);
#endif
    return ~portable_raw(~crc, (const unsigned char *)buf, len);
}

const char *kraft_crc32c_implementation(void) {
    return (hw_available && !force_portable) ? HW_NAME : "portable";
}

void kraft_crc32c_force_portable(int on) { force_portable = on; }
