/* SHA-256 (FIPS 180-4), streaming, for content-addressed blobs. */
#ifndef MASKD_STORE_SHA256_H
#define MASKD_STORE_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct StoreSha256 {
  uint32_t h[8];
  uint64_t bytes;        /* message length so far */
  unsigned char buf[64]; /* partial block */
  size_t fill;
} StoreSha256;

/* Starts a digest. */
void store_sha256_init(StoreSha256 *c);
/* Adds len bytes. */
void store_sha256_update(StoreSha256 *c, const void *data, size_t len);
/* Finishes: 32 digest bytes, and lower-case hex (65 bytes with the NUL) when hex != NULL. */
void store_sha256_final(StoreSha256 *c, unsigned char digest[32], char *hex);

#endif
