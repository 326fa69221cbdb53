/* SHA-1 as FIPS 180-4 specifies it (80 rounds over 512-bit blocks, the message padded
** with 0x80, zeros and its bit length, big-endian), over a git blob's header and bytes.
** Only for naming content the way git does: nothing here relies on SHA-1 resisting
** collisions (the store's own content addresses are sha256). */
#include "store/git_oid.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct Sha1 {
  uint32_t h[5];
  uint64_t bytes;
  unsigned char buf[64];
  size_t fill;
} Sha1;

static uint32_t rol(uint32_t x, int n) { return x << n | x >> (32 - n); }

static void block(uint32_t h[5], const unsigned char *p) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20) { f = (b & c) | (~b & d); k = 0x5A827999; }
    else if (i < 40) { f = b ^ c ^ d; k = 0x6ED9EBA1; }
    else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8F1BBCDC; }
    else { f = b ^ c ^ d; k = 0xCA62C1D6; }
    uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d; d = c; c = rol(b, 30); b = a; a = t;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
}

static void update(Sha1 *s, const void *data, size_t len) {
  const unsigned char *p = data;
  s->bytes += len;
  while (len) {
    size_t take = 64 - s->fill < len ? 64 - s->fill : len;
    memcpy(s->buf + s->fill, p, take);
    s->fill += take; p += take; len -= take;
    if (s->fill == 64) { block(s->h, s->buf); s->fill = 0; }
  }
}

void store_git_blob_oid(const void *data, size_t len, char hex[41]) {
  Sha1 s = {{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0}, 0, {0}, 0};
  char head[32];
  int n = snprintf(head, sizeof head, "blob %zu", len);
  update(&s, head, (size_t)n + 1);   /* the NUL after the size is part of the object */
  update(&s, data, len);
  uint64_t bits = s.bytes * 8;
  unsigned char pad[72] = {0x80};
  size_t padlen = (s.fill < 56 ? 56 : 120) - s.fill;
  for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
  update(&s, pad, padlen + 8);
  for (int i = 0; i < 5; i++) snprintf(hex + 8 * i, 9, "%08x", s.h[i]);
}
