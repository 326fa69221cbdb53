/* BertNormalizer and BertPreTokenizer (see bert_text.h).
**
** HF runs the normaliser's steps one after another over the whole string; here
** they run in one pass, character by character, which gives the same text because
** every step but NFD works on one character at a time, and NFD's only look across
** characters, the canonical reordering of combining marks, is done on the pending
** run of non-starters (combining class > 0) after clean_text and the CJK spaces,
** exactly where HF's NFD sees it. Mark removal and lowercasing come after the run
** is ordered, as in HF. ASCII, most text, never decomposes, is never a mark and
** never reorders, so it takes a table-driven path that touches no Unicode table. */
#include "engine/tok/bert_text.h"

#include "engine/tok/unicode.h"

/* ---- ASCII classes -------------------------------------------------------- */

enum { A_KEEP = 0, A_DROP = 1, A_SPACE = 2 };
/* clean_text on ASCII: \t \n \r become spaces (HF counts them as whitespace, not
** controls); every other C0 control and DEL is Cc and goes, \v and \f included
** (is_control is tested before is_whitespace). */
static const unsigned char ascii_clean[128] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  [127] = 1,
};

enum { P_WORD = 0, P_SPACE = 1, P_PUNCT = 2 };
/* BertPreTokenizer on ASCII: char::is_whitespace (\t \n \v \f \r and space) and
** char::is_ascii_punctuation. */
static const unsigned char ascii_pretok[128] = {
  ['\t'] = 1, ['\n'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1, [' '] = 1,
  ['!'] = 2, ['"'] = 2, ['#'] = 2, ['$'] = 2, ['%'] = 2, ['&'] = 2, ['\''] = 2, ['('] = 2, [')'] = 2,
  ['*'] = 2, ['+'] = 2, [','] = 2, ['-'] = 2, ['.'] = 2, ['/'] = 2, [':'] = 2, [';'] = 2, ['<'] = 2,
  ['='] = 2, ['>'] = 2, ['?'] = 2, ['@'] = 2, ['['] = 2, ['\\'] = 2, [']'] = 2, ['^'] = 2, ['_'] = 2,
  ['`'] = 2, ['{'] = 2, ['|'] = 2, ['}'] = 2, ['~'] = 2,
};

int bert_is_chinese_char(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

int bert_is_punctuation(uint32_t c) {
  if (c < 0x80) return ascii_pretok[c] == P_PUNCT;
  return uni_is_punctuation(c);
}

/* ---- normaliser ------------------------------------------------------------- */

/* One decomposed code point waiting in a run of non-starters: combining class in
** the top 8 bits, code point in the low 24 (so the sort key reads one word). */
typedef struct Pending { uint32_t key; int32_t src; } Pending;

/* A character of at least 2 bytes decomposes into at most 4 code points, so a run
** holds at most 2 per input byte; the sort needs as much again. */
static size_t run_cap(size_t n) { return 2 * n + 4; }

size_t bert_normalize_bound(size_t n) {
  /* The largest growth per input byte: U+0390 (2 bytes) becomes ι + two marks
  ** (6 bytes) under NFD; lowercasing (İ: 2 -> 3) and the CJK spaces (3 -> 5) grow less. */
  return 3 * n;
}

size_t bert_normalize_scratch_bytes(size_t n) { return 2 * run_cap(n) * sizeof(Pending); }

typedef struct Norm {
  char *out;
  int32_t *from;
  size_t j;
  int strip, lower;
  Pending *run, *tmp;
  size_t nrun;
} Norm;

static inline void put_utf8(Norm *o, uint32_t c, int32_t src) {
  int k = uni_encode(c, o->out + o->j);
  for (int t = 0; t < k; t++) o->from[o->j + t] = src;
  o->j += (size_t)k;
}

/* The last two steps on one code point in final order: mark removal, then lowercase. */
static void put_final(Norm *o, uint32_t c, int32_t src) {
  if (o->strip && uni_is_mark_nonspacing(c)) return;
  if (!o->lower) { put_utf8(o, c, src); return; }
  uint32_t l[3];
  int k = uni_lower(c, l);
  for (int t = 0; t < k; t++) put_utf8(o, l[t], src);
}

/* Emits the pending non-starters in canonical order: a stable sort by combining
** class. Runs are almost always one or two marks (insertion sort); a long run
** (adversarial input) takes a counting sort, so the pass stays linear. */
static void flush_run(Norm *o) {
  size_t m = o->nrun;
  if (m == 0) return;
  Pending *r = o->run;
  if (m <= 16) {
    for (size_t a = 1; a < m; a++) {
      Pending x = r[a];
      size_t b = a;
      while (b > 0 && (r[b - 1].key >> 24) > (x.key >> 24)) { r[b] = r[b - 1]; b--; }
      r[b] = x;
    }
  } else {
    size_t count[257] = {0};
    for (size_t a = 0; a < m; a++) count[(r[a].key >> 24) + 1]++;
    for (int k = 1; k < 257; k++) count[k] += count[k - 1];
    for (size_t a = 0; a < m; a++) o->tmp[count[r[a].key >> 24]++] = r[a];
    r = o->tmp;
  }
  for (size_t a = 0; a < m; a++) put_final(o, r[a].key & 0xFFFFFF, r[a].src);
  o->nrun = 0;
}

/* A character after clean_text and the CJK step: NFD (when stripping accents), its
** starters ending the pending run, its non-starters joining it. */
static void put_char(Norm *o, uint32_t c, int32_t src) {
  if (!o->strip) { put_final(o, c, src); return; }
  uint32_t d[4];
  int k = uni_nfd(c, d);
  for (int t = 0; t < k; t++) {
    int ccc = uni_combining_class(d[t]);
    if (ccc == 0) {
      flush_run(o);
      put_final(o, d[t], src);
    } else {
      o->run[o->nrun].key = ((uint32_t)ccc << 24) | d[t];
      o->run[o->nrun].src = src;
      o->nrun++;
    }
  }
}

size_t bert_normalize(const BertNormalizer *bn, const char *s, size_t n, char *out, int32_t *from, void *scratch) {
  Norm o = {.out = out, .from = from, .j = 0, .lower = bn->lowercase != 0,
            .strip = bn->strip_accents == 1 || (bn->strip_accents < 0 && bn->lowercase),
            .run = scratch, .tmp = (Pending *)scratch + run_cap(n), .nrun = 0};
  const int clean = bn->clean_text != 0, chinese = bn->handle_chinese_chars != 0;
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    if (u[i] < 0x80) {
      do {
        unsigned char c = u[i];
        if (clean && ascii_clean[c] != A_KEEP) {
          if (ascii_clean[c] == A_DROP) { i++; continue; }
          c = ' ';
        }
        /* ASCII is a starter that NFD keeps as it is: it ends a pending run (a
        ** character clean_text removed never reached NFD, so it does not). */
        if (o.nrun) flush_run(&o);
        if (o.lower && (unsigned)(c - 'A') < 26u) c = (unsigned char)(c + 32);
        out[o.j] = (char)c;
        from[o.j++] = (int32_t)i++;
      } while (i < n && u[i] < 0x80);
      continue;
    }
    size_t len;
    uint32_t c = uni_decode(s, i, &len);
    int32_t src = (int32_t)i;
    i += len;
    if (clean) {
      if (c == 0xFFFD || uni_is_other(c)) continue;
      if (uni_is_whitespace(c)) c = ' ';
    }
    if (chinese && bert_is_chinese_char(c)) {
      /* The inserted spaces are starters: the one before ends a pending run. */
      put_char(&o, ' ', src);
      put_char(&o, c, src);
      put_char(&o, ' ', src);
    } else {
      put_char(&o, c, src);
    }
  }
  flush_run(&o);
  return o.j;
}

/* ---- pre-tokenizer ---------------------------------------------------------- */

size_t bert_pretokenize(const char *s, size_t n, int32_t *bounds) {
  const unsigned char *u = (const unsigned char *)s;
  size_t k = 0, i = 0, start = 0;
  int in_word = 0;
  while (i < n) {
    size_t len = 1;
    int cls;
    if (u[i] < 0x80) {
      cls = ascii_pretok[u[i]];
    } else {
      uint32_t c = uni_decode(s, i, &len);
      cls = uni_is_whitespace(c) ? P_SPACE : uni_is_punctuation(c) ? P_PUNCT : P_WORD;
    }
    if (cls == P_WORD) {
      if (!in_word) { start = i; in_word = 1; }
    } else {
      if (in_word) { bounds[2 * k] = (int32_t)start; bounds[2 * k + 1] = (int32_t)i; k++; in_word = 0; }
      if (cls == P_PUNCT) { bounds[2 * k] = (int32_t)i; bounds[2 * k + 1] = (int32_t)(i + len); k++; }
    }
    i += len;
  }
  if (in_word) { bounds[2 * k] = (int32_t)start; bounds[2 * k + 1] = (int32_t)n; k++; }
  return k;
}
