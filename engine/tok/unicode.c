/* Unicode properties by bisection over the generated tables (see unicode.h). */
#include "engine/tok/unicode.h"
#include "engine/tok/unicode_tables.h"

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t c) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < r[mid][0]) hi = mid;
    else if (c > r[mid][1]) lo = mid + 1;
    else return 1;
  }
  return 0;
}

int uni_is_whitespace(uint32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || c == 0x20;
  return in_ranges(uni_white_space_ranges, uni_white_space_count, c);
}

int uni_is_regex_space(uint32_t c) { return uni_is_whitespace(c); }

int uni_is_letter(uint32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return in_ranges(uni_letter_ranges, uni_letter_count, c);
}

int uni_is_number(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(uni_number_ranges, uni_number_count, c);
}

int uni_is_punctuation(uint32_t c) { return in_ranges(uni_punctuation_ranges, uni_punctuation_count, c); }
int uni_is_mark_nonspacing(uint32_t c) { return c >= 0x300 && in_ranges(uni_mark_nonspacing_ranges, uni_mark_nonspacing_count, c); }
int uni_is_other(uint32_t c) { return in_ranges(uni_other_ranges, uni_other_count, c); }
int uni_is_word(uint32_t c) { return in_ranges(uni_word_ranges, uni_word_count, c); }

int uni_combining_class(uint32_t c) {
  if (c < 0x300) return 0;
  size_t lo = 0, hi = uni_combining_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < uni_combining_runs[mid][0]) hi = mid;
    else if (c > uni_combining_runs[mid][1]) lo = mid + 1;
    else return (int)uni_combining_runs[mid][2];
  }
  return 0;
}

/* Hangul syllables decompose by formula (Unicode 3.12). */
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

int uni_nfd(uint32_t c, uint32_t out[4]) {
  out[0] = c;
  if (c < 0xC0) return 1;
  if (c >= SBASE && c < SBASE + SCOUNT) {
    uint32_t s = c - SBASE;
    out[0] = LBASE + s / NCOUNT;
    out[1] = VBASE + (s % NCOUNT) / TCOUNT;
    if (s % TCOUNT == 0) return 2;
    out[2] = TBASE + s % TCOUNT;
    return 3;
  }
  size_t lo = 0, hi = uni_nfd_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < uni_nfd_map[mid][0]) hi = mid;
    else if (c > uni_nfd_map[mid][0]) lo = mid + 1;
    else {
      int n = 0;
      while (n < 4 && uni_nfd_map[mid][1 + n]) { out[n] = uni_nfd_map[mid][1 + n]; n++; }
      return n;
    }
  }
  return 1;
}

int uni_lower(uint32_t c, uint32_t out[3]) {
  out[0] = c;
  if (c < 0x80) { if (c >= 'A' && c <= 'Z') out[0] = c + 32; return 1; }
  size_t lo = 0, hi = uni_lower_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < uni_lower_map[mid][0]) hi = mid;
    else if (c > uni_lower_map[mid][0]) lo = mid + 1;
    else {
      int n = 0;
      while (n < 3 && uni_lower_map[mid][1 + n]) { out[n] = uni_lower_map[mid][1 + n]; n++; }
      return n;
    }
  }
  return 1;
}

uint32_t uni_decode(const char *str, size_t i, size_t *len) {
  const unsigned char *s = (const unsigned char *)str + i;
  if (s[0] < 0x80) { *len = 1; return s[0]; }
  if (s[0] < 0xE0) { *len = 2; return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F); }
  if (s[0] < 0xF0) { *len = 3; return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F); }
  *len = 4;
  return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

int uni_encode(uint32_t c, char *out) {
  unsigned char *o = (unsigned char *)out;
  if (c < 0x80) { o[0] = (unsigned char)c; return 1; }
  if (c < 0x800) { o[0] = (unsigned char)(0xC0 | (c >> 6)); o[1] = (unsigned char)(0x80 | (c & 0x3F)); return 2; }
  if (c < 0x10000) {
    o[0] = (unsigned char)(0xE0 | (c >> 12)); o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (c & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | (c >> 18)); o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (unsigned char)(0x80 | (c & 0x3F));
  return 4;
}
