/* CRC-32C (Castagnoli), as used by Kafka's RecordBatch v2.
 *
 * Plain C with no Python headers, so it can be compiled, tested and cross-compiled on its
 * own. The implementation is picked at run time: SSE4.2 on x86_64, the ARMv8 CRC
 * extension on aarch64, a slicing-by-8 table otherwise. All entry points take and return
 * the *finished* CRC value (pre/post inversion applied), so kraft_crc32c(kraft_crc32c(0, a), b)
 * equals the CRC of a concatenated with b.
 */
#ifndef KRAFT_CRC32C_H
#define KRAFT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Dispatched: the fastest implementation this CPU supports. */
uint32_t kraft_crc32c(uint32_t crc, const void *buf, size_t len);
/* Always the table-driven portable implementation (used by tests to cross-check). */
uint32_t kraft_crc32c_portable(uint32_t crc, const void *buf, size_t len);
/* "sse4.2", "armv8-crc" or "portable". */
const char *kraft_crc32c_implementation(void);
/* Force the portable path (1) or restore detection (0); for tests and benchmarks. */
void kraft_crc32c_force_portable(int on);

#ifdef __cplusplus
}
#endif
#endif
