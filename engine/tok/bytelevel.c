/* The byte-level alphabet, split pattern, decoder and offset trimming of HF
** tokenizers (pre_tokenizers/byte_level.rs).
**
** The split is a hand-written matcher for the GPT-2 pattern, not a regex engine:
** every char starts a match of some alternative (a letter, a number, a space or
** anything else), so the matches tile the text and Oniguruma's leftmost-first
** search reduces to "which alternative wins at this char, and how far does it
** run". Only \s+(?!\S) needs a step back: it gives the run's last space to the
** word that follows. ASCII chars are classified by a table; others by unicode.h. */
#include "engine/tok/bytelevel.h"

#include <string.h>

#include "engine/tok/unicode.h"

/* ---- the alphabet ---------------------------------------------------------- */

/* Whether byte b is printable and stands for itself in GPT-2's alphabet. */
static int keeps_itself(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

/* The code point of byte b: itself, or 256 + its rank among the bytes that are not. */
static uint32_t cp_of_byte(unsigned b) {
  if (keeps_itself(b)) return b;
  /* Below 33 every byte is remapped; 127..160 follow those 33; 173 follows those 34 more. */
  if (b < 33) return 256 + b;
  if (b <= 160) return 256 + 33 + (b - 127);
  return 256 + 33 + 34;  /* 173 */
}

int bytelevel_char_of_byte(unsigned char b, char out[2]) {
  uint32_t c = cp_of_byte(b);
  if (c < 0x80) { out[0] = (char)c; return 1; }
  out[0] = (char)(0xC0 | (c >> 6));
  out[1] = (char)(0x80 | (c & 0x3F));
  return 2;
}

int bytelevel_byte_of_char(uint32_t c) {
  if (c < 256) return keeps_itself(c) ? (int)c : -1;
  if (c < 256 + 33) return (int)(c - 256);
  if (c < 256 + 67) return (int)(c - 256 - 33 + 127);
  if (c == 256 + 67) return 173;
  return -1;
}

/* ---- UTF-8 ----------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[i..n), or 0 when none starts there; the
** code point in *cp. Unicode's table of well-formed sequences (no overlongs, no
** surrogates, nothing above U+10FFFF); *bad gets the length of the maximal prefix
** of a well-formed sequence (at least 1), which from_utf8_lossy replaces by one
** U+FFFD. */
static size_t utf8_at(const unsigned char *s, size_t i, size_t n, uint32_t *cp, size_t *bad) {
  unsigned c = s[i];
  *bad = 1;
  if (c < 0x80) { *cp = c; return 1; }
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; else if (c == 0xED) hi = 0x9F; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; else if (c == 0xF4) hi = 0x8F; }
  else return 0;
  uint32_t v = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; k++) {
    if (i + k >= n) return 0;
    unsigned d = s[i + k];
    /* Only the second byte has a narrowed range. */
    if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
    v = (v << 6) | (d & 0x3F);
    *bad = k + 1;
  }
  *cp = v;
  return len;
}

int bytelevel_token_bytes(const char *tok, size_t len, char *out) {
  const unsigned char *s = (const unsigned char *)tok;
  int k = 0;
  for (size_t i = 0; i < len;) {
    uint32_t c;
    size_t bad, m = utf8_at(s, i, len, &c, &bad);
    if (!m) return -1;
    int b = bytelevel_byte_of_char(c);
    if (b < 0) return -1;
    out[k++] = (char)b;
    i += m;
  }
  return k;
}

void bytelevel_utf8_lossy(Buf *out, const char *raw, size_t n) {
  const unsigned char *s = (const unsigned char *)raw;
  size_t i = 0, run = 0;  /* s[run..i) is valid and not yet appended */
  while (i < n) {
    if (s[i] < 0x80) { i++; continue; }
    uint32_t c;
    size_t bad, m = utf8_at(s, i, n, &c, &bad);
    if (m) { i += m; continue; }
    buf_put(out, raw + run, i - run);
    buf_put(out, "\xEF\xBF\xBD", 3);
    i += bad;
    run = i;
  }
  buf_put(out, raw + run, n - run);
}

int bytelevel_decode(Buf *out, const char *const *tokens, int n) {
  Buf raw = {0};
  buf_put(&raw, "", 0);
  for (int t = 0; t < n; t++) {
    size_t len = strlen(tokens[t]);
    if (buf_reserve(&raw, len)) break;
    int k = bytelevel_token_bytes(tokens[t], len, raw.p + raw.len);
    if (k >= 0) { raw.len += (size_t)k; raw.p[raw.len] = 0; }
    else buf_put(&raw, tokens[t], len);  /* a char outside the alphabet: HF keeps the token's own UTF-8 */
  }
  int oom = raw.oom;
  if (!oom) bytelevel_utf8_lossy(out, raw.p, raw.len);
  buf_free(&raw);
  return oom || out->oom ? -1 : 0;
}

/* ---- the split pattern ----------------------------------------------------- */

enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE };

/* ASCII classes as Oniguruma's \s, \p{L}, \p{N} see them (test_bpe checks this
** table against unicode.h): \t \n \v \f \r and ' ' are spaces. */
static const unsigned char ascii_class[128] = {
  ['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\v'] = C_SPACE, ['\f'] = C_SPACE, ['\r'] = C_SPACE, [' '] = C_SPACE,
  ['0'] = C_NUMBER, ['1'] = C_NUMBER, ['2'] = C_NUMBER, ['3'] = C_NUMBER, ['4'] = C_NUMBER,
  ['5'] = C_NUMBER, ['6'] = C_NUMBER, ['7'] = C_NUMBER, ['8'] = C_NUMBER, ['9'] = C_NUMBER,
  ['A'] = C_LETTER, ['B'] = C_LETTER, ['C'] = C_LETTER, ['D'] = C_LETTER, ['E'] = C_LETTER, ['F'] = C_LETTER,
  ['G'] = C_LETTER, ['H'] = C_LETTER, ['I'] = C_LETTER, ['J'] = C_LETTER, ['K'] = C_LETTER, ['L'] = C_LETTER,
  ['M'] = C_LETTER, ['N'] = C_LETTER, ['O'] = C_LETTER, ['P'] = C_LETTER, ['Q'] = C_LETTER, ['R'] = C_LETTER,
  ['S'] = C_LETTER, ['T'] = C_LETTER, ['U'] = C_LETTER, ['V'] = C_LETTER, ['W'] = C_LETTER, ['X'] = C_LETTER,
  ['Y'] = C_LETTER, ['Z'] = C_LETTER,
  ['a'] = C_LETTER, ['b'] = C_LETTER, ['c'] = C_LETTER, ['d'] = C_LETTER, ['e'] = C_LETTER, ['f'] = C_LETTER,
  ['g'] = C_LETTER, ['h'] = C_LETTER, ['i'] = C_LETTER, ['j'] = C_LETTER, ['k'] = C_LETTER, ['l'] = C_LETTER,
  ['m'] = C_LETTER, ['n'] = C_LETTER, ['o'] = C_LETTER, ['p'] = C_LETTER, ['q'] = C_LETTER, ['r'] = C_LETTER,
  ['s'] = C_LETTER, ['t'] = C_LETTER, ['u'] = C_LETTER, ['v'] = C_LETTER, ['w'] = C_LETTER, ['x'] = C_LETTER,
  ['y'] = C_LETTER, ['z'] = C_LETTER,
};

/* The class of the char at s[i] (i < n) and its length in *len. */
static inline int class_at(const unsigned char *s, size_t i, size_t n, size_t *len) {
  if (s[i] < 0x80) { *len = 1; return ascii_class[s[i]]; }
  uint32_t c;
  size_t bad, m = utf8_at(s, i, n, &c, &bad);
  if (!m) { *len = 1; return C_OTHER; }
  *len = m;
  if (uni_is_letter(c)) return C_LETTER;
  if (uni_is_number(c)) return C_NUMBER;
  if (uni_is_regex_space(c)) return C_SPACE;
  return C_OTHER;
}

/* The end of the run of chars of class cl that starts at i. */
static inline size_t run_end(const unsigned char *s, size_t i, size_t n, int cl) {
  while (i < n) {
    if (s[i] < 0x80) {
      if (ascii_class[s[i]] != cl) break;
      i++;
      continue;
    }
    size_t m;
    if (class_at(s, i, n, &m) != cl) break;
    i += m;
  }
  return i;
}

/* Length of a contraction ('s 't 're 've 'm 'll 'd, case-sensitive) at s[i] == '\'', or 0. */
static inline size_t contraction(const unsigned char *s, size_t i, size_t n) {
  if (i + 1 >= n) return 0;
  unsigned a = s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= n) return 0;
  unsigned b = s[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

size_t bytelevel_split(const char *str, size_t n, int32_t *starts) {
  const unsigned char *s = (const unsigned char *)str;
  size_t k = 0, i = 0;
  while (i < n) {
    starts[k++] = (int32_t)i;
    if (s[i] == '\'') {
      size_t c = contraction(s, i, n);
      if (c) { i += c; continue; }
    }
    size_t m;
    int cl = class_at(s, i, n, &m);
    if (s[i] == ' ' && i + 1 < n) {
      /* " ?X+": an ASCII space joins the letters, numbers or other chars after it. */
      size_t m2;
      int cl2 = class_at(s, i + 1, n, &m2);
      if (cl2 != C_SPACE) { i = run_end(s, i + 1 + m2, n, cl2); continue; }
    }
    if (cl != C_SPACE) { i = run_end(s, i + m, n, cl); continue; }
    /* \s+(?!\S), else \s+: a run of spaces followed by a non-space gives its last
    ** space char to the next match, unless that space is the whole run. */
    size_t last = i, j = i;
    while (j < n) {
      size_t mj;
      if (class_at(s, j, n, &mj) != C_SPACE) break;
      last = j;
      j += mj;
    }
    i = (j < n && last > i) ? last : j;
  }
  return k;
}

/* ---- offsets --------------------------------------------------------------- */

void bytelevel_char_offsets(const char *str, size_t n, int32_t *offsets, int count) {
  const unsigned char *s = (const unsigned char *)str;
  for (int t = 0; t < count; t++) {
    int32_t *o = offsets + 2 * t;
    /* Continuation bytes (10xxxxxx) never start a char; at most 3 follow a lead. */
    for (int k = 0; k < 3 && o[0] > 0 && (size_t)o[0] < n && (s[o[0]] & 0xC0) == 0x80; k++) o[0]--;
    for (int k = 0; k < 3 && o[1] > o[0] && (size_t)o[1] < n && (s[o[1]] & 0xC0) == 0x80; k++) o[1]++;
  }
}

/* Bytes in the original text of the "space" char at tok[i] ('Ġ' = U+0120 stands for
** one ' '; a whitespace char for itself), or 0 when it is none; its length in *m. */
static size_t space_bytes(const unsigned char *t, size_t i, size_t n, size_t *m) {
  uint32_t c;
  size_t bad;
  *m = utf8_at(t, i, n, &c, &bad);
  if (!*m) return 0;
  if (c == 0x120) return 1;
  return uni_is_whitespace(c) ? *m : 0;
}

/* The offset k chars after (dir 1) or before (dir -1) byte offset at in text[0..len). */
static int32_t step_chars(const char *text, size_t len, int32_t at, size_t k, int dir) {
  const unsigned char *s = (const unsigned char *)text;
  size_t i = (size_t)at;
  for (; k > 0; k--) {
    if (dir > 0) {
      if (i >= len) break;
      i++;
      while (i < len && (s[i] & 0xC0) == 0x80) i++;
    } else {
      if (i == 0) break;
      i--;
      while (i > 0 && (s[i] & 0xC0) == 0x80) i--;
    }
  }
  return (int32_t)i;
}

void bytelevel_trim_offsets(const char *const *tokens, int32_t *offsets, int n, int add_prefix_space, const char *text, size_t text_len) {
  for (int t = 0; t < n; t++) {
    const unsigned char *s = (const unsigned char *)tokens[t];
    size_t len = strlen(tokens[t]);
    /* Leading and trailing space chars, counted in chars (HF's test and its unit) and bytes. */
    size_t lead_chars = 0, lead = 0, trail_chars = 0, trail = 0, i = 0, m, b;
    while (i < len && (b = space_bytes(s, i, len, &m)) > 0) { lead_chars++; lead += b; i += m; }
    /* Walk back over the trailing ones: find each char's start from the end. */
    size_t e = len;
    while (e > 0) {
      size_t st = e - 1;
      while (st > 0 && (s[st] & 0xC0) == 0x80 && e - st < 4) st--;
      if ((b = space_bytes(s, st, len, &m)) == 0 || st + m != e) break;
      trail += b;
      trail_chars++;
      e = st;
    }
    int32_t *o = offsets + 2 * t;
    /* HF moves the offsets by chars of the original text: a space ByteLevel prepended
    ** spans the whole first char it was put before. */
    if (lead > 0) {
      int is_first = t == 0 || o[0] == 0;
      if (!(is_first && add_prefix_space && lead_chars == 1)) {
        int64_t a = text ? step_chars(text, text_len, o[0], lead_chars, 1) : (int64_t)o[0] + (int64_t)lead;
        o[0] = a < o[1] ? (int32_t)a : o[1];
      }
    }
    if (trail > 0 && (text ? (size_t)o[1] >= trail_chars : (size_t)o[1] >= trail)) {
      int32_t z = text ? step_chars(text, text_len, o[1], trail_chars, -1) : o[1] - (int32_t)trail;
      o[1] = z > o[0] ? z : o[0];
    }
  }
}
