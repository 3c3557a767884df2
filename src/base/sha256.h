/* sha256.h — SHA-256 (FIPS 180-4), streaming. Used to verify downloaded checkpoint files against
 * the hub's LFS object ids (src/hub). Plain C, about 300-400 MB/s of CPU time: downloads hash as
 * the bytes arrive, so it only shows on a resumed file's already-present prefix. */
#ifndef MTPLX_BASE_SHA256_H
#define MTPLX_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];          /* chaining state */
    uint64_t n_bytes;       /* message bytes absorbed so far */
    unsigned char buf[64];  /* pending partial block */
    size_t buf_len;         /* bytes used in buf, < 64 */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
/* Finish: out gets the 32-byte digest. The context must be re-initialised before reuse. */
void sha256_final(sha256_ctx *c, unsigned char out[32]);
/* Lower-case hex of a digest into hex[65] (NUL-terminated). */
void sha256_hex(const unsigned char digest[32], char hex[65]);

#endif
