/* Stand-alone check of kraft/_native/crc32c.c, compiled without Python.
 *
 * Compares the dispatched implementation (hardware when the CPU has it) and the portable
 * table path against a bit-at-a-time reference written here from the polynomial alone,
 * over many lengths and every start alignment 0..15, plus the published vectors and
 * chaining. Prints "impl=<name>" and "ok" and exits 0 on success; with --expect-hw it
 * also fails when the hardware path was not selected. Used by test_crc32c_c.py.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

static int failures = 0;

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            if (failures < 20) {                                  \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                     \
                fputc('\n', stderr);                              \
            }                                                     \
            failures++;                                           \
        }                                                         \
    } while (0)

/* Bitwise CRC-32C, reflected polynomial 0x82F63B78: slow, obviously right. */
static uint32_t reference(uint32_t crc, const unsigned char *p, size_t len) {
    crc = ~crc;
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static unsigned char next_byte(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned char)(rng_state >> 24);
}

static void vectors(void) {
    unsigned char buf[32];
    memset(buf, 0, 32);
    CHECK(kraft_crc32c(0, buf, 32) == 0x8A9136AAu, "32 zero bytes");
    memset(buf, 0xFF, 32);
    CHECK(kraft_crc32c(0, buf, 32) == 0x62A8AB43u, "32 0xFF bytes");
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)i;
    CHECK(kraft_crc32c(0, buf, 32) == 0x46DD794Eu, "ascending");
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)(31 - i);
    CHECK(kraft_crc32c(0, buf, 32) == 0x113FDB5Cu, "descending");
    CHECK(kraft_crc32c(0, "123456789", 9) == 0xE3069283u, "check value");
    CHECK(kraft_crc32c_portable(0, "123456789", 9) == 0xE3069283u, "portable check value");
    CHECK(kraft_crc32c(0, "", 0) == 0u, "empty");
    CHECK(kraft_crc32c(0x12345678u, NULL, 0) == 0x12345678u, "empty keeps the running value");
}

/* Lengths cover every tail size, the 3x256 short-block and 3x8192 long-block paths and
 * their boundaries; each at start alignments 0..15. */
static void sweep(const unsigned char *data) {
    static const size_t extra[] = {767, 768, 769, 1535, 1536, 24575, 24576, 24577,
                                   24576 + 768 + 7, 49152, 49159, 65536, 100003};
    size_t nlens = 1101 + sizeof extra / sizeof extra[0];
    for (size_t li = 0; li < nlens; li++) {
        size_t len = li <= 1100 ? li : extra[li - 1101];
        for (size_t align = 0; align < 16; align++) {
            if (len > 4096 && align % 5) continue; /* keep the run short: 0, 5, 10, 15 */
            const unsigned char *p = data + align;
            uint32_t want = reference(0, p, len);
            uint32_t hw = kraft_crc32c(0, p, len);
            uint32_t sw = kraft_crc32c_portable(0, p, len);
            CHECK(hw == want, "dispatched len=%zu align=%zu got %08x want %08x", len, align, hw, want);
            CHECK(sw == want, "portable len=%zu align=%zu got %08x want %08x", len, align, sw, want);
        }
    }
}

static void chaining(const unsigned char *data) {
    size_t len = 30000;
    uint32_t whole = reference(0, data, len);
    for (size_t cut = 0; cut <= len; cut += 997) {
        uint32_t a = kraft_crc32c(0, data, cut);
        CHECK(kraft_crc32c(a, data + cut, len - cut) == whole, "chain at %zu", cut);
        a = kraft_crc32c_portable(0, data, cut);
        CHECK(kraft_crc32c_portable(a, data + cut, len - cut) == whole, "portable chain at %zu", cut);
    }
}

static void force_portable(const unsigned char *data) {
    kraft_crc32c_force_portable(1);
    CHECK(strcmp(kraft_crc32c_implementation(), "portable") == 0, "forced portable reports %s",
          kraft_crc32c_implementation());
    CHECK(kraft_crc32c(0, data, 5000) == reference(0, data, 5000), "forced portable result");
    kraft_crc32c_force_portable(0);
}

int main(int argc, char **argv) {
    int expect_hw = argc > 1 && strcmp(argv[1], "--expect-hw") == 0;
    size_t size = 100003 + 16;
    unsigned char *data = malloc(size);
    if (!data) return 2;
    for (size_t i = 0; i < size; i++) data[i] = next_byte();

    const char *impl = kraft_crc32c_implementation();
    printf("impl=%s\n", impl);
    vectors();
    sweep(data);
    chaining(data);
    force_portable(data);
    CHECK(strcmp(kraft_crc32c_implementation(), impl) == 0, "implementation restored");
    if (expect_hw) CHECK(strcmp(impl, "portable") != 0, "hardware path expected, got %s", impl);
    free(data);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
