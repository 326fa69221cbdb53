/* Unigram training (see unigram_trainer.h for the algorithm and its source).
**
** Why it is fast: the corpus is reduced to distinct words with counts, and every
** word's lattice is computed once, from the suffix array itself: a seed piece is
** an LCP interval, so its occurrences are exactly the suffixes in that interval.
** Each word keeps its lattice as a list of edges (piece, start) sorted by start
** then length, which is the order HF's trie walk inserts nodes in, so Viterbi ties
** break as HF's do. When EM or pruning drops pieces, edges are renumbered and
** compacted; nothing is ever looked up in a trie again. A piece's own lattice
** (for pruning's "alternatives") is the window of the word it first occurs in.
**
** Forward-backward runs in probability space (a multiply per edge instead of an
** exp and a log), which is exact as long as no path underflows; words long enough
** for that to be possible take the log-space path instead.
**
** Seed frequencies: HF counts a substring once per distinct word it occurs in
** (esaxx over the "\0"-joined distinct words). SentencePiece runs esaxx over its
** distinct *sentences*, so on line-level text nearly every running occurrence
** counts. By default maskd counts every occurrence weighted by its word's count
** (SentencePiece's effect; on WikiText-2 at 8000 pieces it cuts test tokens by
** 10% against HF's choice); seed_distinct = 1 gives HF's counts exactly.
**
** Parity notes (deliberate copies of HF's behaviour):
**  - characters are counted with the word counts;
**  - pruning's loss uses HF's logsum_alt = ln(sum + freq * (#pieces - 1)) (HF
**    multiplies by the length of the whole alternatives table, not of the one
**    piece's alternatives as SentencePiece does);
**  - HF's inverted index only serves f = sum of counts of the words a piece's
**    Viterbi occurrences fall in, once per occurrence, which equals the piece's
**    Viterbi frequency, so the frequency is used directly. */
#include "engine/tok/unigram_trainer.h"
#include "engine/core/now.h"
#include "engine/core/files.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/platform.h"
#include "engine/tok/suffix_array.h"

#define UNK_PENALTY 10.0
#define EXPECTED_THRESHOLD 0.5
/* Probability-space forward-backward is used when the worst path of a word is
** above e^-LOG_UNDERFLOW, far from double's e^-708. */
#define LOG_UNDERFLOW 600.0

void ut_options_default(UtOptions *o) {
  memset(o, 0, sizeof *o);
  o->vocab_size = 8000;
  o->max_piece_length = 16;
  o->shrinking_factor = 0.75;
  o->seed_size = 1000000;
  o->n_sub_iterations = 2;
  o->threads = 0;
}

double ut_digamma(double x) {
  double r = 0.0;
  while (x < 7.0) { r -= 1.0 / x; x += 1.0; }
  x -= 0.5;
  double xx = 1.0 / x, xx2 = xx * xx, xx4 = xx2 * xx2;
  r += log(x) + (1.0 / 24.0) * xx2 - (7.0 / 960.0) * xx4 + (31.0 / 8064.0) * xx4 * xx2 - (127.0 / 30720.0) * xx4 * xx4;
  return r;
}

/* ---- UTF-8 ---------------------------------------------------------------- */

/* Offset of the first byte that is not part of a valid UTF-8 character (NUL is
** reported too, as it is the separator of the seed text), or -1 when all valid. */
static long utf8_invalid_at(const unsigned char *s, size_t n, int *is_nul) {
  size_t i = 0;
  *is_nul = 0;
  while (i < n) {
    /* Fast path: eight ASCII bytes, none of them NUL. */
    while (i + 8 <= n) {
      uint64_t v;
      memcpy(&v, s + i, 8);
      if ((v & 0x8080808080808080ULL) || ((v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL)) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned c = s[i];
    if (c < 0x80) { if (c == 0) { *is_nul = 1; return (long)i; } i++; continue; }
    size_t m; unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) { m = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { m = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { m = 4; cp = c & 0x07; }
    else return (long)i;
    if (i + m > n) return (long)i;
    for (size_t k = 1; k < m; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return (long)i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((m == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (m == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return (long)i;
    i += m;
  }
  return -1;
}

/* Decodes one character of valid UTF-8 at s; *m gets its length. */
static inline uint32_t utf8_decode(const unsigned char *s, size_t *m) {
  unsigned c = s[0];
  if (c < 0x80) { *m = 1; return c; }
  if (c < 0xE0) { *m = 2; return ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu); }
  if (c < 0xF0) { *m = 3; return ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu); }
  *m = 4;
  return ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

static size_t utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* ---- word counts ---------------------------------------------------------- */

typedef struct WordEntry { size_t off; uint32_t len; uint32_t hash; uint64_t count; } WordEntry;

struct UtWords {
  char *arena; size_t arena_len, arena_cap;
  WordEntry *e; size_t n, cap;
  uint64_t *slots; size_t nslots;   /* open addressing: hash << 32 | (entry index + 1), 0 empty */
  uint64_t total;
  char *scratch; size_t scratch_cap;
  uint32_t *starts; size_t starts_cap;
  ReportFn report; void *report_ctx;   /* ut_words_set_report */
  double report_base, report_total;
};

UtWords *ut_words_new(void) {
  UtWords *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->nslots = 1024;
  w->slots = calloc(w->nslots, sizeof *w->slots);
  if (!w->slots) { free(w); return NULL; }
  return w;
}

void ut_words_free(UtWords *w) {
  if (!w) return;
  free(w->arena); free(w->e); free(w->slots); free(w->scratch); free(w->starts);
  free(w);
}

size_t ut_words_unique(const UtWords *w) { return w->n; }
uint64_t ut_words_total(const UtWords *w) { return w->total; }

const char *ut_words_get(const UtWords *w, size_t i, size_t *len, uint64_t *count) {
  if (len) *len = w->e[i].len;
  if (count) *count = w->e[i].count;
  return w->arena + w->e[i].off;
}

/* Eight bytes at a time: multiply, rotate; then a final mix. */
static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, s + i, 8);
    h = (h ^ v) * 0xff51afd7ed558ccdULL;
    h = (h << 29) | (h >> 35);
  }
  if (i < n) {
    uint64_t v = 0;
    memcpy(&v, s + i, n - i);
    h = (h ^ v) * 0xff51afd7ed558ccdULL;
  }
  h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
  return h;
}

static int words_rehash(UtWords *w) {
  size_t ns = w->nslots * 2;
  uint64_t *slots = calloc(ns, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < w->n; i++) {
    size_t j = w->e[i].hash & (ns - 1);
    while (slots[j]) j = (j + 1) & (ns - 1);
    slots[j] = (uint64_t)w->e[i].hash << 32 | (uint64_t)(i + 1);
  }
  free(w->slots);
  w->slots = slots; w->nslots = ns;
  return 0;
}

/* Counts one word; the caller has validated it. */
static int words_count(UtWords *w, const char *s, size_t len, uint64_t count, Err *err) {
  if (len > UINT32_MAX) return err_set(err, "a word of %zu bytes is too long", len);
  uint64_t h64 = hash_bytes(s, len);
  uint32_t h = (uint32_t)h64;
  size_t mask = w->nslots - 1, j = h & mask;
  for (uint64_t k; (k = w->slots[j]); j = (j + 1) & mask) {
    if ((uint32_t)(k >> 32) != h) continue;
    WordEntry *e = &w->e[(uint32_t)k - 1];
    if (e->len == len && !memcmp(w->arena + e->off, s, len)) { e->count += count; w->total += count; return 0; }
  }
  if (w->n >= UINT32_MAX - 1) return err_set(err, "too many distinct words");
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 4096;
    WordEntry *ne = realloc(w->e, cap * sizeof *ne);
    if (!ne) return err_set(err, "out of memory counting words");
    w->e = ne; w->cap = cap;
  }
  if (w->arena_len + len > w->arena_cap) {
    size_t cap = w->arena_cap ? w->arena_cap : 1 << 16;
    while (cap < w->arena_len + len) cap *= 2;
    char *na = realloc(w->arena, cap);
    if (!na) return err_set(err, "out of memory counting words");
    w->arena = na; w->arena_cap = cap;
  }
  memcpy(w->arena + w->arena_len, s, len);
  w->e[w->n] = (WordEntry){w->arena_len, (uint32_t)len, h, count};
  w->arena_len += len;
  w->slots[j] = (uint64_t)h << 32 | (uint64_t)(++w->n);
  w->total += count;
  if (w->n * 2 > w->nslots && words_rehash(w)) return err_set(err, "out of memory counting words");
  return 0;
}

int ut_words_add(UtWords *w, const char *word, size_t len, uint64_t count, Err *err) {
  int nul;
  long bad = utf8_invalid_at((const unsigned char *)word, len, &nul);
  if (bad >= 0) return err_set(err, nul ? "word contains a NUL byte" : "word is not valid UTF-8 (byte %ld)", bad);
  if (len == 0) return err_set(err, "empty word");
  return words_count(w, word, len, count, err);
}

/* The seed front end in one pass: Replace("``") and Replace("''") by '"' (their
** matches cannot overlap or create one another, so one left-to-right pass equals
** the two sequential passes), spaces to U+2581, a U+2581 prepended unless the
** text starts with one, and a word boundary before every U+2581. */
int ut_words_add_text(UtWords *w, const char *text, size_t len, Err *err) {
  int nul;
  long bad = utf8_invalid_at((const unsigned char *)text, len, &nul);
  if (bad >= 0) return err_set(err, nul ? "NUL byte at byte %ld" : "invalid UTF-8 at byte %ld", bad);
  if (len == 0) return 0;  /* HF's prepend leaves an empty string empty */
  size_t need = 3 * len + 3;
  if (need > w->scratch_cap) {
    char *ns = realloc(w->scratch, need);
    if (!ns) return err_set(err, "out of memory");
    w->scratch = ns; w->scratch_cap = need;
  }
  if (len + 2 > w->starts_cap) {
    uint32_t *nst = realloc(w->starts, (len + 2) * sizeof *nst);
    if (!nst) return err_set(err, "out of memory");
    w->starts = nst; w->starts_cap = len + 2;
  }
  if (need > UINT32_MAX) return err_set(err, "a line of %zu bytes is too long", len);
  char *o = w->scratch;
  size_t n = 0, ns = 0;
  const unsigned char *t = (const unsigned char *)text;
  int starts_with_meta = t[0] == ' ' || (len >= 3 && t[0] == 0xE2 && t[1] == 0x96 && t[2] == 0x81);
  if (!starts_with_meta) { w->starts[ns++] = 0; o[n++] = (char)0xE2; o[n++] = (char)0x96; o[n++] = (char)0x81; }
  for (size_t i = 0; i < len;) {
    /* Copy the run of bytes that need no attention in one go. */
    size_t j = i;
    while (j < len && t[j] != ' ' && t[j] != '`' && t[j] != '\'' && t[j] != 0xE2) j++;
    if (j > i) { memcpy(o + n, t + i, j - i); n += j - i; i = j; if (i >= len) break; }
    unsigned char c = t[i];
    if (c == ' ') { w->starts[ns++] = (uint32_t)n; o[n++] = (char)0xE2; o[n++] = (char)0x96; o[n++] = (char)0x81; i++; }
    else if ((c == '`' || c == '\'') && i + 1 < len && t[i + 1] == c) { o[n++] = '"'; i += 2; }
    else if (c == 0xE2 && i + 2 < len && t[i + 1] == 0x96 && t[i + 2] == 0x81) {
      w->starts[ns++] = (uint32_t)n; o[n++] = (char)0xE2; o[n++] = (char)0x96; o[n++] = (char)0x81; i += 3;
    } else o[n++] = (char)t[i++];
  }
  w->starts[ns] = (uint32_t)n;
  for (size_t k = 0; k < ns; k++)
    if (words_count(w, o + w->starts[k], w->starts[k + 1] - w->starts[k], 1, err)) return -1;
  return 0;
}

/* Counts the lines of buf[0..n) (each keeps its '\n'; the last may lack one);
** *lines counts the lines read, the failing one included. */
static int add_lines(UtWords *w, const char *buf, size_t n, long *lines, Err *err) {
  for (size_t i = 0; i < n;) {
    const char *nl = memchr(buf + i, '\n', n - i);
    size_t end = nl ? (size_t)(nl - buf) + 1 : n;
    (*lines)++;
    if (ut_words_add_text(w, buf + i, end - i, err)) return -1;
    i = end;
  }
  return 0;
}

/* Adds from's words to into, in from's order (so merging the tables of
** consecutive parts in order keeps first-seen order: the order is the same
** whatever the thread count). */
static int words_merge(UtWords *into, const UtWords *from, Err *err) {
  for (size_t i = 0; i < from->n; i++)
    if (words_count(into, from->arena + from->e[i].off, from->e[i].len, from->e[i].count, err)) return -1;
  return 0;
}

#define MAX_READ_THREADS 64
static size_t read_block = (size_t)32 << 20;

void ut_words_set_read_block(size_t bytes) { read_block = bytes >= 16 ? bytes : ((size_t)32 << 20); }

void ut_words_set_report(UtWords *w, ReportFn fn, void *ctx, double base, double total) {
  w->report = fn;
  w->report_ctx = ctx;
  w->report_base = base;
  w->report_total = total;
}

/* The number (from 1) of the first line of buf[0..n) longer than max bytes, 0 when none. */
static long first_long_line(const char *buf, size_t n, size_t max) {
  const char *p = buf, *end = buf + n;
  for (long line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if ((size_t)((nl ? nl : end) - p) > max) return line;
    if (!nl) break;
    p = nl + 1;
  }
  return 0;
}

int ut_words_add_file(UtWords *w, const char *path, int threads, Err *err) {
  FILE *f = files_fopen_regular(path, NULL, err);
  if (!f) return -1;
  if (threads <= 0) threads = platform_cpu_count();
  if (threads > MAX_READ_THREADS) threads = MAX_READ_THREADS;
  UtWords *part[MAX_READ_THREADS] = {0};
  Err perr[MAX_READ_THREADS];
  long plines[MAX_READ_THREADS];
  int prc[MAX_READ_THREADS];
  size_t cap = read_block, have = 0;
  char *buf = malloc(cap);
  long base = 0;
  uint64_t counted = 0;   /* bytes of the file counted so far, for the report */
  int rc = 0;
  if (!buf) { fclose(f); return err_set(err, "out of memory reading %s", path); }
  for (int t = 1; t < threads; t++)
    if (!(part[t] = ut_words_new())) { rc = err_set(err, "out of memory reading %s", path); goto done; }
  for (;;) {
    size_t got = fread(buf + have, 1, cap - have, f);
    if (ferror(f)) { rc = err_set(err, "%s: read error: %s", path, strerror(errno)); break; }
    have += got;
    int eof = feof(f);
    size_t cut = have;
    while (cut > 0 && buf[cut - 1] != '\n') cut--;
    if (have - cut > UT_MAX_LINE) {  /* the unfinished last line is already too long */
      long line = base + 1;
      for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + cut - p))); p++) line++;
      rc = err_set(err, "%s:%ld: a line of more than %zu bytes (the limit for one line)", path, line, (size_t)UT_MAX_LINE);
      break;
    }
    if (eof) cut = have;
    /* Every whole line too: the check above sees only the unfinished one, and a line
    ** that a grown buffer held whole (a 120 MB line ending in a newline) went through. */
    long too_long = first_long_line(buf, cut, UT_MAX_LINE);
    if (too_long) {
      rc = err_set(err, "%s:%ld: a line of more than %zu bytes (the limit for one line)", path, base + too_long,
                   (size_t)UT_MAX_LINE);
      break;
    }
    if (!eof && cut == 0) {  /* one line longer than the buffer: grow it (the check above bounds it) */
      char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!nb) { rc = err_set(err, "%s: out of memory for a line of more than %zu bytes", path, cap); break; }
      buf = nb; cap *= 2;
      continue;
    }
    /* Parts of about equal size, cut after a newline; part 0 goes straight into w. */
    int T = cut < read_block / 32 ? 1 : threads;
    size_t bound[MAX_READ_THREADS + 1];
    bound[0] = 0; bound[T] = cut;
    for (int t = 1; t < T; t++) {
      size_t b = cut / (size_t)T * (size_t)t;
      if (b < bound[t - 1]) b = bound[t - 1];
      const char *nl = memchr(buf + b, '\n', cut - b);
      bound[t] = nl ? (size_t)(nl - buf) + 1 : cut;
    }
    #pragma omp parallel for num_threads(T) schedule(static, 1)
    for (int t = 0; t < T; t++) {
      plines[t] = 0;
      prc[t] = add_lines(t ? part[t] : w, buf + bound[t], bound[t + 1] - bound[t], &plines[t], &perr[t]);
    }
    long lines = base;
    for (int t = 0; t < T && !rc; t++) {
      lines += plines[t];
      if (prc[t]) {
        char where[300];
        snprintf(where, sizeof where, "%s:%ld", path, lines);
        if (err) *err = perr[t];
        rc = err_prefix(err, where);
      } else if (t && words_merge(w, part[t], err)) rc = -1;
      if (t) { ut_words_free(part[t]); if (!(part[t] = ut_words_new()) && !rc) rc = err_set(err, "out of memory"); }
    }
    base = lines;
    counted += cut;
    if (w->report && !rc) w->report(w->report_ctx, "reading", w->report_base + (double)counted, w->report_total, "bytes");
    if (rc || eof) break;
    memmove(buf, buf + cut, have - cut);
    have -= cut;
  }
done:
  for (int t = 1; t < threads; t++) ut_words_free(part[t]);
  free(buf);
  fclose(f);
  return rc;
}

/* ---- training state ------------------------------------------------------- */

typedef struct Edge { int32_t piece, start; } Edge;

struct UtState {
  UtOptions o;
  int threads;
  /* corpus: distinct words as code points in `flat`, each followed by a 0 */
  int32_t nw, max_wlen;
  int32_t *wstart, *wlen;
  double *wcount;
  double total_count;
  /* lattices: the edges of word w are edges[eoff[w] .. eoff[w+1]) */
  int64_t *eoff;
  Edge *edges;
  /* seeds (fixed once made): UTF-8 text, length in characters, first occurrence */
  int32_t nseed, nchar_seeds;
  char *seed_text; int64_t *seed_off;
  int32_t *seed_len, *seed_word, *seed_pos;
  /* current pieces; piece 0 is always seed 0, the training <UNK> */
  int n;
  int32_t *seed_of, *plen;
  double *score;
  double min_score;
  int logspace;
  double t0;
};

void ut_state_free(UtState *s) {
  if (!s) return;
  free(s->wstart); free(s->wlen); free(s->wcount); free(s->eoff); free(s->edges);
  free(s->seed_text); free(s->seed_off); free(s->seed_len); free(s->seed_word); free(s->seed_pos);
  free(s->seed_of); free(s->plen); free(s->score);
  free(s);
}

int ut_state_size(const UtState *s) { return s->n; }
double ut_state_score(const UtState *s, int i) { return s->score[i]; }
void ut_state_set_logspace(UtState *s, int on) { s->logspace = on; }
const char *ut_state_piece(const UtState *s, int i, size_t *len) {
  int32_t k = s->seed_of[i];
  *len = (size_t)(s->seed_off[k + 1] - s->seed_off[k]);
  return s->seed_text + s->seed_off[k];
}

static void update_min_score(UtState *s) {
  double m = INFINITY;
  for (int i = 1; i < s->n; i++) if (s->score[i] < m) m = s->score[i];
  s->min_score = m;
}

static void progress(const UtState *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const UtState *s, const char *fmt, ...) {
  if (!s->o.progress) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tokenizer train [%6.2fs] ", now_monotonic() - s->t0);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* Seed candidates: an LCP interval and its score, sorted by score then text, both
** descending, as HF sorts (score, chars) in reverse. */
typedef struct Cand { uint64_t score; int32_t left, right, depth, pos; } Cand;

static int cand_cmp(const void *pa, const void *pb, void *ctx) {
  const Cand *a = pa, *b = pb;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  const int32_t *cp = ctx;  /* code points of the flat text */
  int32_t n = a->depth < b->depth ? a->depth : b->depth;
  for (int32_t k = 0; k < n; k++)
    if (cp[a->pos + k] != cp[b->pos + k]) return cp[a->pos + k] > cp[b->pos + k] ? -1 : 1;
  return (a->depth < b->depth) - (a->depth > b->depth);
}

typedef struct CharCount { uint64_t count; uint32_t cp; int32_t first; } CharCount;

static int char_cmp(const void *pa, const void *pb) {
  const CharCount *a = pa, *b = pb;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return (a->cp < b->cp) - (a->cp > b->cp);
}

static int check_options(const UtOptions *o, Err *err) {
  if (o->vocab_size < 1) return err_set(err, "vocab size must be positive (got %d)", o->vocab_size);
  if (o->max_piece_length < 1 || o->max_piece_length > 255) return err_set(err, "max piece length must be in [1, 255] (got %d)", o->max_piece_length);
  if (!(o->shrinking_factor > 0 && o->shrinking_factor < 1)) return err_set(err, "shrinking factor must be in (0, 1) (got %g)", o->shrinking_factor);
  if (o->seed_size < 1) return err_set(err, "seed size must be positive (got %d)", o->seed_size);
  if (o->n_sub_iterations < 1) return err_set(err, "sub-iterations must be positive (got %d)", o->n_sub_iterations);
  if (o->threads < 0) return err_set(err, "threads must be >= 0 (got %d)", o->threads);
  if (o->n_special < 0 || (o->n_special > 0 && !o->special_tokens)) return err_set(err, "bad special token list");
  for (int i = 0; i < o->n_special; i++) {
    if (!o->special_tokens[i] || !o->special_tokens[i][0]) return err_set(err, "special token %d is empty", i);
    for (int j = 0; j < i; j++)
      if (!strcmp(o->special_tokens[i], o->special_tokens[j])) return err_set(err, "special token '%s' given twice", o->special_tokens[i]);
  }
  if (o->unk_token && !o->unk_token[0]) return err_set(err, "the unknown token is empty");
  return 0;
}

/* What the parts of ut_state_new hand one another; none of it outlives the call. */
typedef struct Build {
  const UtWords *words;
  int32_t nflat, K;           /* symbols in the flat text; distinct characters */
  int32_t *flat;              /* code points of every distinct word, each followed by a 0 */
  int32_t *sym, *word_of;     /* per flat position: dense symbol, word (-1 at a separator) */
  int32_t *dense;             /* code point -> dense symbol; part 5 reuses it */
  int32_t *sa, *run;          /* suffix array; characters left in the word from a position */
  CharCount *chars;           /* chars[1..K], most frequent first */
  Cand *cands;                /* substring candidates, best first */
  int64_t ncand, nsub;        /* candidates; those kept as seeds */
} Build;

static void build_free(Build *b) {
  free(b->flat); free(b->sym); free(b->word_of); free(b->sa); free(b->run); free(b->dense); free(b->chars);
  free(b->cands);
}

/* 1. The flat text: every distinct word as code points, then a 0. */
static int part_flat_text(UtState *s, Build *b, Err *err) {
  const UtWords *words = b->words;
  int64_t nflat64 = 0;
  for (size_t i = 0; i < words->n; i++) nflat64 += (int64_t)words->e[i].len + 1;  /* chars <= bytes */
  if (nflat64 > INT32_MAX - 2) return err_set(err, "corpus too large: %lld symbols in distinct words", (long long)nflat64);
  int32_t *flat = b->flat = malloc((size_t)nflat64 * sizeof *flat);
  s->wstart = malloc((size_t)s->nw * sizeof *s->wstart);
  s->wlen = malloc((size_t)s->nw * sizeof *s->wlen);
  s->wcount = malloc((size_t)s->nw * sizeof *s->wcount);
  if (!flat || !s->wstart || !s->wlen || !s->wcount) return err_set(err, "out of memory");
  int32_t nflat = 0;
  for (int32_t w = 0; w < s->nw; w++) {
    const WordEntry *e = &words->e[w];
    const unsigned char *p = (const unsigned char *)words->arena + e->off;
    s->wstart[w] = nflat;
    for (size_t i = 0, m; i < e->len; i += m) flat[nflat++] = (int32_t)utf8_decode(p + i, &m);
    s->wlen[w] = nflat - s->wstart[w];
    if (s->wlen[w] > s->max_wlen) s->max_wlen = s->wlen[w];
    s->wcount[w] = (double)e->count;
    s->total_count += (double)e->count;
    flat[nflat++] = 0;
  }
  b->nflat = nflat;
  return 0;
}

/* 2. Characters: dense symbols 1..K (0 is the separator), counts weighted by words. */
static int part_characters(UtState *s, Build *b, Err *err) {
  const int32_t *flat = b->flat;
  int32_t nflat = b->nflat;
  int32_t *dense = b->dense = calloc(0x110000, sizeof *dense);
  int32_t *word_of = b->word_of = malloc((size_t)nflat * sizeof *word_of);
  int32_t *sym = b->sym = malloc((size_t)nflat * sizeof *sym);
  if (!dense || !word_of || !sym) return err_set(err, "out of memory");
  int32_t K = 0;
  for (int32_t w = 0; w < s->nw; w++) {
    for (int32_t p = s->wstart[w]; p < s->wstart[w] + s->wlen[w]; p++) {
      int32_t c = flat[p];
      if (!dense[c]) dense[c] = ++K;
      sym[p] = dense[c];
      word_of[p] = w;
    }
    int32_t end = s->wstart[w] + s->wlen[w];
    sym[end] = 0; word_of[end] = -1;
  }
  CharCount *chars = b->chars = calloc((size_t)K + 1, sizeof *chars);
  if (!chars) return err_set(err, "out of memory");
  for (int32_t w = 0; w < s->nw; w++)
    for (int32_t p = s->wstart[w]; p < s->wstart[w] + s->wlen[w]; p++) {
      CharCount *c = &chars[sym[p]];
      if (!c->count) { c->cp = (uint32_t)flat[p]; c->first = p; }
      c->count += b->words->e[w].count;
    }
  qsort(chars + 1, (size_t)K, sizeof *chars, char_cmp);
  b->K = K;
  progress(s, "%d distinct words, %.0f words, %d characters", (int)s->nw, s->total_count, (int)K);
  return 0;
}

/* 3. Frequent substrings: suffix-tree nodes of the flat text (each distinct
** word once), no separator inside, 2..max_piece_length characters. */
static int part_substrings(UtState *s, Build *b, Err *err) {
  const UtOptions *o = &s->o;
  const int32_t *sym = b->sym, *word_of = b->word_of;
  int32_t nflat = b->nflat, K = b->K;
  int32_t *lcp = NULL;
  SaNode *nodes = NULL;
  uint64_t *wpref = NULL;
  int64_t nnodes, ncand = 0;
  int rc = -1;
  int32_t *sa = b->sa = malloc((size_t)nflat * sizeof *sa);
  lcp = malloc((size_t)nflat * sizeof *lcp);
  int32_t *run = b->run = malloc((size_t)nflat * sizeof *run);
  if (!sa || !lcp || !run) { err_set(err, "out of memory"); goto done; }
  if (sa_build(sym, nflat, K + 1, sa, err) || sa_lcp(sym, sa, nflat, lcp, err)) goto done;
  nnodes = sa_nodes(sa, lcp, nflat, &nodes, err);
  if (nnodes < 0) goto done;
  free(lcp); lcp = NULL;
  for (int32_t p = nflat - 1; p >= 0; p--) run[p] = sym[p] == 0 ? 0 : 1 + (p + 1 < nflat ? run[p + 1] : 0);
  Cand *cands = b->cands = malloc((size_t)(nnodes > 0 ? nnodes : 1) * sizeof *cands);
  /* Occurrence weights in suffix-array order, summed: the word-count-weighted
  ** frequency of an interval is a difference of two prefix sums. */
  wpref = o->seed_distinct ? NULL : malloc(((size_t)nflat + 1) * sizeof *wpref);
  if (!cands || (!o->seed_distinct && !wpref)) { err_set(err, "out of memory"); goto done; }
  if (wpref) {
    wpref[0] = 0;
    for (int32_t j = 0; j < nflat; j++) wpref[j + 1] = wpref[j] + (sym[sa[j]] ? b->words->e[word_of[sa[j]]].count : 0);
  }
  for (int64_t i = 0; i < nnodes; i++) {
    const SaNode *nd = &nodes[i];
    int32_t pos = sa[nd->left];
    if (nd->depth <= 1 || nd->depth > o->max_piece_length || nd->depth > run[pos]) continue;
    uint64_t fr = wpref ? wpref[nd->right] - wpref[nd->left] : (uint64_t)(nd->right - nd->left);
    cands[ncand++] = (Cand){fr * (uint64_t)nd->depth, nd->left, nd->right, nd->depth, pos};
  }
  free(wpref); wpref = NULL;
  free(nodes); nodes = NULL;
  qsort_r(cands, (size_t)ncand, sizeof *cands, cand_cmp, b->flat);
  /* HF pushes every character, then substrings until the table holds seed_size. */
  int64_t nsub = 0;
  if (ncand > 0) {
    nsub = (int64_t)o->seed_size - K;
    if (nsub < 1) nsub = 1;
    if (nsub > ncand) nsub = ncand;
  }
  b->ncand = ncand;
  b->nsub = nsub;
  s->nseed = (int32_t)(1 + K + nsub);
  s->nchar_seeds = K;
  rc = 0;
done:
  free(lcp); free(nodes); free(wpref);
  return rc;
}

/* 4. Seed texts, scores (log of count or count x length over their sum). */
static int part_seeds(UtState *s, Build *b, Err *err) {
  const int32_t *flat = b->flat, *word_of = b->word_of;
  const CharCount *chars = b->chars;
  const Cand *cands = b->cands;
  int32_t K = b->K;
  int64_t nsub = b->nsub;
  s->seed_off = malloc(((size_t)s->nseed + 1) * sizeof *s->seed_off);
  s->seed_len = malloc((size_t)s->nseed * sizeof *s->seed_len);
  s->seed_word = malloc((size_t)s->nseed * sizeof *s->seed_word);
  s->seed_pos = malloc((size_t)s->nseed * sizeof *s->seed_pos);
  s->seed_of = malloc((size_t)s->nseed * sizeof *s->seed_of);
  s->plen = malloc((size_t)s->nseed * sizeof *s->plen);
  s->score = malloc((size_t)s->nseed * sizeof *s->score);
  int64_t text_bytes = 5;
  for (int32_t k = 1; k <= K; k++) text_bytes += 4;
  for (int64_t i = 0; i < nsub; i++) text_bytes += 4 * (int64_t)cands[i].depth;
  s->seed_text = malloc((size_t)text_bytes);
  if (!s->seed_off || !s->seed_len || !s->seed_word || !s->seed_pos || !s->seed_of || !s->plen || !s->score || !s->seed_text)
    return err_set(err, "out of memory");
  int64_t tb = 0;
  memcpy(s->seed_text, "<UNK>", 5); tb = 5;
  s->seed_off[0] = 0; s->seed_len[0] = 5; s->seed_word[0] = -1; s->seed_pos[0] = 0;
  double sum = 0;
  for (int32_t k = 1; k <= K; k++) {
    s->seed_off[k] = tb;
    tb += (int64_t)utf8_encode(chars[k].cp, s->seed_text + tb);
    s->seed_len[k] = 1;
    s->seed_word[k] = word_of[chars[k].first];
    s->seed_pos[k] = chars[k].first - s->wstart[s->seed_word[k]];
    s->score[k] = (double)chars[k].count;
    sum += s->score[k];
  }
  for (int64_t i = 0; i < nsub; i++) {
    int32_t k = (int32_t)(1 + K + i);
    const Cand *c = &cands[i];
    s->seed_off[k] = tb;
    for (int32_t j = 0; j < c->depth; j++) tb += (int64_t)utf8_encode((uint32_t)flat[c->pos + j], s->seed_text + tb);
    s->seed_len[k] = c->depth;
    s->seed_word[k] = word_of[c->pos];
    s->seed_pos[k] = c->pos - s->wstart[s->seed_word[k]];
    s->score[k] = (double)c->score;
    sum += s->score[k];
  }
  s->seed_off[s->nseed] = tb;
  double logsum = log(sum);
  s->score[0] = NAN;
  for (int32_t k = 1; k < s->nseed; k++) s->score[k] = log(s->score[k]) - logsum;
  for (int32_t k = 0; k < s->nseed; k++) { s->seed_of[k] = k; s->plen[k] = s->seed_len[k]; }
  s->n = s->nseed;
  update_min_score(s);
  return 0;
}

/* 5. Lattices: the occurrences of seed k are the suffixes sa[left..right); one
** CSR over flat positions, filled by increasing length, gives every word its
** edges sorted by (start, length). */
static int part_lattices(UtState *s, Build *b, Err *err) {
  const int32_t *sym = b->sym, *word_of = b->word_of, *sa = b->sa;
  const CharCount *chars = b->chars;
  const Cand *cands = b->cands;
  int32_t nflat = b->nflat, K = b->K;
  int64_t nsub = b->nsub;
  int rc = -1;
  int32_t *pcount = calloc((size_t)nflat + 1, sizeof *pcount);
  int64_t *poff = malloc(((size_t)nflat + 1) * sizeof *poff);
  if (!pcount || !poff) { err_set(err, "out of memory"); goto done; }
  for (int32_t p = 0; p < nflat; p++) pcount[p] = sym[p] != 0;
  for (int64_t i = 0; i < nsub; i++)
    for (int32_t j = cands[i].left; j < cands[i].right; j++) pcount[sa[j]]++;
  poff[0] = 0;
  for (int32_t p = 0; p < nflat; p++) poff[p + 1] = poff[p] + pcount[p];
  int64_t nedges = poff[nflat];
  s->edges = malloc((size_t)(nedges > 0 ? nedges : 1) * sizeof *s->edges);
  s->eoff = malloc(((size_t)s->nw + 1) * sizeof *s->eoff);
  if (!s->edges || !s->eoff) { err_set(err, "out of memory for %lld lattice edges", (long long)nedges); goto done; }
  for (int32_t p = 0; p < nflat; p++) pcount[p] = 0;  /* now: edges written so far */
  {
    int32_t *char_piece = b->dense;  /* reuse: dense symbol -> char piece id */
    for (int32_t k = 1; k <= K; k++) char_piece[sym[chars[k].first]] = k;
    for (int32_t p = 0; p < nflat; p++)
      if (sym[p]) s->edges[poff[p] + pcount[p]++] = (Edge){char_piece[sym[p]], p - s->wstart[word_of[p]]};
  }
  for (int32_t len = 2; len <= s->o.max_piece_length; len++)
    for (int64_t i = 0; i < nsub; i++) {
      if (cands[i].depth != len) continue;
      int32_t k = (int32_t)(1 + K + i);
      for (int32_t j = cands[i].left; j < cands[i].right; j++) {
        int32_t p = sa[j];
        s->edges[poff[p] + pcount[p]++] = (Edge){k, p - s->wstart[word_of[p]]};
      }
    }
  for (int32_t w = 0; w < s->nw; w++) s->eoff[w] = poff[s->wstart[w]];
  s->eoff[s->nw] = nedges;
  progress(s, "seeds: %d pieces (%d characters, %lld substrings of %lld candidates), %lld lattice edges",
           (int)s->nseed - 1, (int)K, (long long)nsub, (long long)b->ncand, (long long)nedges);
  rc = 0;
done:
  free(pcount); free(poff);
  return rc;
}

UtState *ut_state_new(const UtWords *words, const UtOptions *o, Err *err) {
  if (check_options(o, err)) return NULL;
  if (!words || words->n == 0) { err_set(err, "empty corpus: no words to train on"); return NULL; }
  UtState *s = calloc(1, sizeof *s);
  if (!s) { err_set(err, "out of memory"); return NULL; }
  s->o = *o;
  s->t0 = now_monotonic();
  s->threads = o->threads > 0 ? o->threads : platform_cpu_count();
  s->nw = (int32_t)words->n;
  if (words->n > INT32_MAX / 2) { err_set(err, "too many distinct words (%zu)", words->n); ut_state_free(s); return NULL; }
  Build b = {.words = words};
  int rc = part_flat_text(s, &b, err) || part_characters(s, &b, err) || part_substrings(s, &b, err) ||
           part_seeds(s, &b, err) || part_lattices(s, &b, err);
  build_free(&b);
  if (rc) { ut_state_free(s); return NULL; }
  return s;
}

/* ---- E-step ---------------------------------------------------------------- */

static inline double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* Forward-backward on one word in log space; adds count x marginals to ex and
** returns log Z. A and B hold wlen + 1 entries. */
static double fb_log(const UtState *s, int32_t w, double unk, double *A, double *B, double *ex) {
  const Edge *e = s->edges + s->eoff[w], *end = s->edges + s->eoff[w + 1];
  const int32_t *plen = s->plen;
  const double *sc = s->score;
  int32_t n = s->wlen[w];
  for (int32_t i = 0; i <= n; i++) A[i] = -INFINITY;
  A[0] = 0;
  const Edge *k = e;
  for (int32_t b = 0; b < n; b++) {
    int single = k < end && k->start == b && plen[k->piece] == 1;
    for (; k < end && k->start == b; k++) A[b + plen[k->piece]] = log_add(A[b + plen[k->piece]], A[b] + sc[k->piece]);
    if (!single) A[b + 1] = log_add(A[b + 1], A[b] + unk);
  }
  B[n] = 0;
  k = end - 1;
  for (int32_t b = n - 1; b >= 0; b--) {
    double acc = -INFINITY;
    int single = 0;
    for (; k >= e && k->start == b; k--) {
      if (plen[k->piece] == 1) single = 1;
      acc = log_add(acc, sc[k->piece] + B[b + plen[k->piece]]);
    }
    if (!single) acc = log_add(acc, unk + B[b + 1]);
    B[b] = acc;
  }
  double z = A[n], c = s->wcount[w];
  k = e;
  for (int32_t b = 0; b < n; b++) {
    int single = k < end && k->start == b && plen[k->piece] == 1;
    for (; k < end && k->start == b; k++) ex[k->piece] += c * exp(A[b] + sc[k->piece] + B[b + plen[k->piece]] - z);
    if (!single) ex[0] += c * exp(A[b] + unk + B[b + 1] - z);
  }
  return z;
}

/* The same in probability space (p = exp(score)); returns log Z, or NAN when Z
** underflowed (the caller then uses fb_log). */
static double fb_prob(const UtState *s, int32_t w, const double *p, double punk, double *A, double *B, double *ex) {
  const Edge *e = s->edges + s->eoff[w], *end = s->edges + s->eoff[w + 1];
  const int32_t *plen = s->plen;
  int32_t n = s->wlen[w];
  for (int32_t i = 0; i <= n; i++) A[i] = 0;
  A[0] = 1;
  const Edge *k = e;
  for (int32_t b = 0; b < n; b++) {
    double a = A[b];
    int single = k < end && k->start == b && plen[k->piece] == 1;
    for (; k < end && k->start == b; k++) A[b + plen[k->piece]] += a * p[k->piece];
    if (!single) A[b + 1] += a * punk;
  }
  double z = A[n];
  if (!(z > 1e-290)) return NAN;
  B[n] = 1;
  k = end - 1;
  for (int32_t b = n - 1; b >= 0; b--) {
    double acc = 0;
    int single = 0;
    for (; k >= e && k->start == b; k--) {
      if (plen[k->piece] == 1) single = 1;
      acc += p[k->piece] * B[b + plen[k->piece]];
    }
    if (!single) acc += punk * B[b + 1];
    B[b] = acc;
  }
  double scale = s->wcount[w] / z;
  k = e;
  for (int32_t b = 0; b < n; b++) {
    double a = A[b] * scale;
    int single = k < end && k->start == b && plen[k->piece] == 1;
    for (; k < end && k->start == b; k++) ex[k->piece] += a * p[k->piece] * B[b + plen[k->piece]];
    if (!single) ex[0] += a * punk * B[b + 1];
  }
  return log(z);
}

/* The E-step's sums do not depend on the thread count: words are dealt to
** ESTEP_LANES lanes in chunks of ESTEP_CHUNK (chunk c to lane c % ESTEP_LANES),
** each lane adds its chunks in order, and the lanes are added in lane order.
** Floating-point addition is not associative, so summing per thread (as HF does)
** gave a tokenizer trained on 2 threads scores one unit apart from one trained on
** 1, and sometimes other pieces. More than ESTEP_LANES threads would idle; each lane
** holds a sum per piece (8 lanes of 1,000,000 seed pieces: 64 MB during the first rounds). */
#define ESTEP_LANES 8
#define ESTEP_CHUNK 512

double ut_state_estep(UtState *s, double *expected) {
  int n = s->n, T = s->threads < ESTEP_LANES ? s->threads : ESTEP_LANES;
  double unk = s->min_score - UNK_PENALTY, punk = exp(unk);
  double *p = malloc((size_t)n * sizeof *p);
  double *ex = calloc((size_t)ESTEP_LANES * (size_t)n, sizeof *ex);
  double *scratch = malloc((size_t)T * 2 * ((size_t)s->max_wlen + 1) * sizeof *scratch);
  if (!p || !ex || !scratch) { free(p); free(ex); free(scratch); return NAN; }
  p[0] = 0;
  for (int i = 1; i < n; i++) p[i] = exp(s->score[i]);
  /* Words up to this many characters cannot underflow in probability space. */
  double worst = UNK_PENALTY - s->min_score;
  int32_t prob_max = s->logspace ? -1 : (int32_t)(LOG_UNDERFLOW / (worst > 1 ? worst : 1));
  double lane_objective[ESTEP_LANES] = {0};
  #pragma omp parallel num_threads(T)
  {
    int t = omp_get_thread_num();
    double *A = scratch + (size_t)t * 2 * ((size_t)s->max_wlen + 1), *B = A + s->max_wlen + 1;
    #pragma omp for schedule(dynamic, 1)
    for (int lane = 0; lane < ESTEP_LANES; lane++) {
      double *mine = ex + (size_t)lane * (size_t)n, objective = 0;
      for (int64_t c0 = (int64_t)lane * ESTEP_CHUNK; c0 < s->nw; c0 += (int64_t)ESTEP_LANES * ESTEP_CHUNK) {
        int32_t end = c0 + ESTEP_CHUNK < s->nw ? (int32_t)(c0 + ESTEP_CHUNK) : s->nw;
        for (int32_t w = (int32_t)c0; w < end; w++) {
          double z = NAN;
          if (s->wlen[w] <= prob_max) z = fb_prob(s, w, p, punk, A, B, mine);
          if (z != z) z = fb_log(s, w, unk, A, B, mine);
          objective += s->wcount[w] * z;
        }
      }
      lane_objective[lane] = objective;
    }
  }
  double objective = 0;
  for (int lane = 0; lane < ESTEP_LANES; lane++) objective += lane_objective[lane];
  for (int i = 0; i < n; i++) {
    double acc = 0;
    for (int lane = 0; lane < ESTEP_LANES; lane++) acc += ex[(size_t)lane * (size_t)n + (size_t)i];
    expected[i] = acc;
  }
  free(p); free(ex); free(scratch);
  return objective;
}

/* ---- renumbering pieces ----------------------------------------------------- */

/* Keeps the pieces with new_id[old] >= 0 (new ids dense and in the order given by
** the caller through order[0..nnew)), compacting every word's edges. */
static int apply_pieces(UtState *s, const int32_t *order, int nnew, const double *new_score, Err *err) {
  int32_t *new_id = malloc((size_t)s->n * sizeof *new_id);
  int32_t *seed_of = malloc((size_t)nnew * sizeof *seed_of), *plen = malloc((size_t)nnew * sizeof *plen);
  double *score = malloc((size_t)nnew * sizeof *score);
  if (!new_id || !seed_of || !plen || !score) { free(new_id); free(seed_of); free(plen); free(score); return err_set(err, "out of memory"); }
  for (int i = 0; i < s->n; i++) new_id[i] = -1;
  for (int j = 0; j < nnew; j++) {
    new_id[order[j]] = j;
    seed_of[j] = s->seed_of[order[j]];
    plen[j] = s->plen[order[j]];
    score[j] = new_score ? new_score[j] : s->score[order[j]];
  }
  int64_t wpos = 0;
  for (int32_t w = 0; w < s->nw; w++) {
    int64_t from = s->eoff[w], to = s->eoff[w + 1];
    s->eoff[w] = wpos;
    for (int64_t k = from; k < to; k++) {
      int32_t id = new_id[s->edges[k].piece];
      if (id >= 0) s->edges[wpos++] = (Edge){id, s->edges[k].start};
    }
  }
  s->eoff[s->nw] = wpos;
  free(s->seed_of); free(s->plen); free(s->score); free(new_id);
  s->seed_of = seed_of; s->plen = plen; s->score = score; s->n = nnew;
  update_min_score(s);
  return 0;
}

int ut_state_mstep(UtState *s, const double *expected, Err *err) {
  int32_t *order = malloc((size_t)s->n * sizeof *order);
  double *score = malloc((size_t)s->n * sizeof *score);
  if (!order || !score) { free(order); free(score); return err_set(err, "out of memory"); }
  int nnew = 0;
  double sum = 0;
  order[nnew] = 0; score[nnew++] = NAN;
  for (int i = 1; i < s->n; i++) {
    if (expected[i] < EXPECTED_THRESHOLD) continue;
    order[nnew] = i; score[nnew++] = expected[i];
    sum += expected[i];
  }
  /* The Bayesian ("DP") EM of SentencePiece: digamma acts as a sparse prior. */
  double logsum = ut_digamma(sum);
  for (int j = 1; j < nnew; j++) score[j] = ut_digamma(score[j]) - logsum;
  int rc = apply_pieces(s, order, nnew, score, err);
  free(order); free(score);
  return rc;
}

/* ---- pruning ---------------------------------------------------------------- */

/* Viterbi over positions [off, off + n) of word w's lattice, skipping the edge
** (off, n, banned) when banned >= 0. Unknown nodes appear where no piece covers
** exactly one character (the banned piece counts as covering). Writes the best
** path's piece ids in order to ids and returns its length. */
static int viterbi_window(const UtState *s, int32_t w, int32_t off, int32_t n, int32_t banned,
                          double *best, int32_t *from, int32_t *pid, int32_t *ids) {
  const Edge *e = s->edges + s->eoff[w], *end = s->edges + s->eoff[w + 1];
  const int32_t *plen = s->plen;
  double unk = s->min_score - UNK_PENALTY;
  while (e < end && e->start < off) e++;
  for (int32_t i = 0; i <= n; i++) from[i] = -1;
  best[0] = 0;
  for (int32_t b = 0; b < n; b++) {
    int single = e < end && e->start == off + b && plen[e->piece] == 1;
    for (; e < end && e->start == off + b; e++) {
      int32_t L = plen[e->piece];
      if (b + L > n || (banned >= 0 && e->piece == banned && b == 0 && L == n)) continue;
      double c = best[b] + s->score[e->piece];
      if (from[b + L] < 0 || c > best[b + L]) { best[b + L] = c; from[b + L] = b; pid[b + L] = e->piece; }
    }
    if (!single) {
      double c = best[b] + unk;
      if (from[b + 1] < 0 || c > best[b + 1]) { best[b + 1] = c; from[b + 1] = b; pid[b + 1] = 0; }
    }
  }
  int cnt = 0;
  for (int32_t i = n; i > 0; i = from[i]) ids[cnt++] = pid[i];
  for (int a = 0, b = cnt - 1; a < b; a++, b--) { int32_t t = ids[a]; ids[a] = ids[b]; ids[b] = t; }
  return cnt;
}

typedef struct Loss { double loss; int32_t id; } Loss;

static int loss_cmp(const void *pa, const void *pb) {
  const Loss *a = pa, *b = pb;
  if (a->loss != b->loss) return a->loss > b->loss ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);  /* stable, as Rust's sort_by */
}

int ut_state_prune(UtState *s, Err *err) {
  int n = s->n, T = s->threads;
  int32_t W = s->max_wlen + 1;
  int rc = -1;
  char *always_keep = malloc((size_t)n);
  int32_t *alt_off = malloc(((size_t)n + 1) * sizeof *alt_off), *alt = NULL;
  double *freq = calloc((size_t)T * (size_t)n, sizeof *freq);
  double *dbuf = malloc((size_t)T * (size_t)W * sizeof *dbuf);
  int32_t *ibuf = malloc((size_t)T * 4 * (size_t)W * sizeof *ibuf);
  Loss *cands = malloc((size_t)n * sizeof *cands);
  int32_t *order = malloc((size_t)n * sizeof *order);
  if (!always_keep || !alt_off || !freq || !dbuf || !ibuf || !cands || !order) { err_set(err, "out of memory"); goto done; }

  /* 1. Alternatives: the second-best segmentation of each piece whose best
  ** segmentation is itself. Two passes: lengths, then ids. */
  int32_t *alt_len = order;  /* borrowed until step 3 */
  #pragma omp parallel num_threads(T)
  {
    int t = omp_get_thread_num();
    double *best = dbuf + (size_t)t * (size_t)W;
    int32_t *from = ibuf + (size_t)t * 4 * (size_t)W, *pid = from + W, *ids = pid + W;
    #pragma omp for schedule(dynamic, 256)
    for (int i = 0; i < n; i++) {
      alt_len[i] = 0;
      always_keep[i] = 1;
      if (i == 0) { always_keep[i] = 0; continue; }
      int32_t k = s->seed_of[i], L = s->plen[i];
      if (L == 1) continue;  /* a lone character has one segmentation: kept, no alternative */
      int nb = viterbi_window(s, s->seed_word[k], s->seed_pos[k], L, -1, best, from, pid, ids);
      if (nb >= 2) { always_keep[i] = 0; continue; }
      alt_len[i] = viterbi_window(s, s->seed_word[k], s->seed_pos[k], L, i, best, from, pid, ids);
    }
  }
  alt_off[0] = 0;
  for (int i = 0; i < n; i++) alt_off[i + 1] = alt_off[i] + alt_len[i];
  alt = malloc(((size_t)alt_off[n] + 1) * sizeof *alt);
  if (!alt) { err_set(err, "out of memory"); goto done; }
  #pragma omp parallel num_threads(T)
  {
    int t = omp_get_thread_num();
    double *best = dbuf + (size_t)t * (size_t)W;
    int32_t *from = ibuf + (size_t)t * 4 * (size_t)W, *pid = from + W, *ids = pid + W;
    #pragma omp for schedule(dynamic, 256)
    for (int i = 1; i < n; i++) {
      if (alt_off[i + 1] == alt_off[i]) continue;
      int32_t k = s->seed_of[i];
      int m = viterbi_window(s, s->seed_word[k], s->seed_pos[k], s->plen[i], i, best, from, pid, ids);
      memcpy(alt + alt_off[i], ids, (size_t)m * sizeof *ids);
    }
  }

  /* 2. Viterbi frequencies over the corpus. */
  #pragma omp parallel num_threads(T)
  {
    int t = omp_get_thread_num();
    double *best = dbuf + (size_t)t * (size_t)W, *mine = freq + (size_t)t * (size_t)n;
    int32_t *from = ibuf + (size_t)t * 4 * (size_t)W, *pid = from + W, *ids = pid + W;
    #pragma omp for schedule(dynamic, 512)
    for (int32_t w = 0; w < s->nw; w++) {
      int m = viterbi_window(s, w, 0, s->wlen[w], -1, best, from, pid, ids);
      for (int j = 0; j < m; j++) mine[ids[j]] += s->wcount[w];
    }
  }
  for (int t = 1; t < T; t++)
    for (int i = 0; i < n; i++) freq[i] += freq[(size_t)t * (size_t)n + (size_t)i];

  /* 3. Loss of removing each piece, assuming its occurrences become its alternatives. */
  double sum = 0;
  for (int i = 0; i < n; i++) sum += freq[i];
  double logsum = log(sum), vsum = s->total_count;
  int nkeep = 0, ncand = 0;
  order[nkeep++] = 0;
  for (int i = 1; i < n; i++) {
    if (freq[i] == 0.0 && !always_keep[i]) continue;  /* not on any Viterbi path */
    if (alt_off[i + 1] == alt_off[i]) { order[nkeep++] = i; continue; }
    double f = freq[i];
    if (f == 0.0 || f != f) continue;
    f /= vsum;
    double logprob_sp = log(freq[i]) - logsum;
    double logsum_alt = log(sum + freq[i] * (double)(n - 1));  /* HF's factor, see the top of the file */
    double logprob_alt = 0;
    for (int32_t j = alt_off[i]; j < alt_off[i + 1]; j++) logprob_alt += log(freq[alt[j]] + freq[i]) - logsum_alt;
    cands[ncand++] = (Loss){f * (logprob_sp - logprob_alt), i};
  }
  qsort(cands, (size_t)ncand, sizeof *cands, loss_cmp);
  int desired = (int)(((int64_t)s->o.vocab_size * 11) / 10);
  int pruned = (int)((double)n * s->o.shrinking_factor);
  if (pruned < desired) pruned = desired;
  for (int j = 0; j < ncand; j++) {
    if (nkeep == pruned) break;  /* HF tests equality: more kept-for-sure pieces than that keep every candidate */
    order[nkeep++] = cands[j].id;
  }
  rc = apply_pieces(s, order, nkeep, NULL, err);
done:
  free(always_keep); free(alt_off); free(alt); free(freq); free(dbuf); free(ibuf); free(cands); free(order);
  return rc;
}

/* ---- finalize ----------------------------------------------------------------- */

void ut_result_free(UtResult *r) {
  if (!r) return;
  if (r->pieces) for (int i = 0; i < r->n; i++) free(r->pieces[i]);
  free(r->pieces); free(r->scores);
  memset(r, 0, sizeof *r);
}

typedef struct Final { double score; int32_t seed; int32_t rank; } Final;

static int final_cmp(const void *pa, const void *pb) {
  const Final *a = pa, *b = pb;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);  /* stable */
}

static int is_special(const UtOptions *o, const char *p, size_t len) {
  for (int i = 0; i < o->n_special; i++)
    if (strlen(o->special_tokens[i]) == len && !memcmp(o->special_tokens[i], p, len)) return 1;
  if (o->unk_token && strlen(o->unk_token) == len && !memcmp(o->unk_token, p, len)) return 1;
  return 0;
}

int ut_state_finalize(UtState *s, UtResult *out, Err *err) {
  const UtOptions *o = &s->o;
  memset(out, 0, sizeof *out);
  int unk_at = -1, add_unk = 0;
  if (o->unk_token) {
    for (int i = 0; i < o->n_special; i++) if (!strcmp(o->special_tokens[i], o->unk_token)) unk_at = i;
    if (unk_at < 0) { add_unk = 1; unk_at = 0; }
  }
  int nspecial = o->n_special + add_unk;
  int room = o->vocab_size - nspecial;
  if (room < s->nchar_seeds)
    return err_set(err, "vocab size %d is smaller than the alphabet (%d characters) plus %d special tokens",
                   o->vocab_size, (int)s->nchar_seeds, nspecial);
  Final *f = malloc(((size_t)s->nchar_seeds + (size_t)s->n) * sizeof *f);
  char *taken = calloc((size_t)s->nseed, 1);
  int32_t *cur_of_seed = malloc((size_t)s->nseed * sizeof *cur_of_seed);
  if (!f || !taken || !cur_of_seed) { free(f); free(taken); free(cur_of_seed); return err_set(err, "out of memory"); }
  for (int32_t k = 0; k < s->nseed; k++) cur_of_seed[k] = -1;
  for (int i = 0; i < s->n; i++) cur_of_seed[s->seed_of[i]] = i;
  int nf = 0;
  /* Required characters: every character of the corpus (by count), with its score
  ** if it survived, else min_score plus a growing 0.0001 penalty. */
  double penalty = 0;
  for (int32_t k = 1; k <= s->nchar_seeds; k++) {
    size_t len;
    const char *p = s->seed_text + s->seed_off[k];
    len = (size_t)(s->seed_off[k + 1] - s->seed_off[k]);
    taken[k] = 1;
    if (is_special(o, p, len)) continue;
    double sc;
    if (cur_of_seed[k] >= 0) sc = s->score[cur_of_seed[k]];
    else { sc = s->min_score + penalty; penalty += 0.0001; }
    f[nf] = (Final){sc, k, nf}; nf++;
  }
  for (int i = 1; i < s->n && nf < room; i++) {
    int32_t k = s->seed_of[i];
    if (taken[k]) continue;
    taken[k] = 1;
    size_t len = (size_t)(s->seed_off[k + 1] - s->seed_off[k]);
    if (is_special(o, s->seed_text + s->seed_off[k], len)) continue;  /* one id per string */
    double sc = s->score[i] != s->score[i] ? 0.0 : s->score[i];
    f[nf] = (Final){sc, k, nf}; nf++;
  }
  qsort(f, (size_t)nf, sizeof *f, final_cmp);
  out->n = nspecial + nf;
  out->pieces = calloc((size_t)out->n, sizeof *out->pieces);
  out->scores = malloc((size_t)out->n * sizeof *out->scores);
  out->unk_id = o->unk_token ? unk_at : -1;
  if (!out->pieces || !out->scores) { free(f); free(taken); free(cur_of_seed); ut_result_free(out); return err_set(err, "out of memory"); }
  int j = 0;
  if (add_unk) { out->pieces[j] = strdup(o->unk_token); out->scores[j++] = 0.0; }
  for (int i = 0; i < o->n_special; i++) { out->pieces[j] = strdup(o->special_tokens[i]); out->scores[j++] = 0.0; }
  for (int i = 0; i < nf; i++) {
    int32_t k = f[i].seed;
    size_t len = (size_t)(s->seed_off[k + 1] - s->seed_off[k]);
    out->pieces[j] = malloc(len + 1);
    if (out->pieces[j]) { memcpy(out->pieces[j], s->seed_text + s->seed_off[k], len); out->pieces[j][len] = 0; }
    out->scores[j++] = f[i].score;
  }
  free(f); free(taken); free(cur_of_seed);
  for (int i = 0; i < out->n; i++) if (!out->pieces[i]) { ut_result_free(out); return err_set(err, "out of memory"); }
  return 0;
}

/* ---- the whole training -------------------------------------------------------- */

int ut_train(const UtWords *w, const UtOptions *o, UtResult *out, Err *err) {
  memset(out, 0, sizeof *out);
  if (o->report) o->report(o->report_ctx, "seeding", 0, -1, "pieces");
  UtState *s = ut_state_new(w, o, err);
  if (!s) return -1;
  /* Fail early, before EM, when the alphabet cannot fit. */
  int nspecial = o->n_special;
  if (o->unk_token) {
    int found = 0;
    for (int i = 0; i < o->n_special; i++) found |= !strcmp(o->special_tokens[i], o->unk_token);
    nspecial += !found;
  }
  if (o->vocab_size - nspecial < s->nchar_seeds) {
    err_set(err, "vocab size %d is smaller than the alphabet (%d characters) plus %d special tokens",
            o->vocab_size, (int)s->nchar_seeds, nspecial);
    ut_state_free(s);
    return -1;
  }
  int desired = (int)(((int64_t)o->vocab_size * 11) / 10);
  int expected_rounds = (int)((log((double)desired) - log((double)s->n)) / log(o->shrinking_factor)) + 1;
  if (expected_rounds < 1) expected_rounds = 1;
  double *expected = NULL;
  int rc = -1;
  double t_em = now_monotonic();
  for (int round = 1;; round++) {
    for (int it = 0; it < o->n_sub_iterations; it++) {
      double *ne = realloc(expected, (size_t)s->n * sizeof *expected);
      if (!ne) { err_set(err, "out of memory"); goto done; }
      expected = ne;
      double ll = ut_state_estep(s, expected);
      if (ll != ll) { err_set(err, "E-step failed (out of memory or a NaN likelihood)"); goto done; }
      int before = s->n;
      if (ut_state_mstep(s, expected, err)) goto done;
      double el = now_monotonic() - t_em;
      int left = expected_rounds - round;
      if (o->report) {
        int total = (expected_rounds > round ? expected_rounds : round) * o->n_sub_iterations;
        o->report(o->report_ctx, "EM iterations", (double)((round - 1) * o->n_sub_iterations + it + 1), total, "iterations");
      }
      progress(s, "EM round %d/%d iter %d: %d -> %d pieces, objective %.4f, %.2f s/round, ETA %.1fs",
               round, expected_rounds, it + 1, before - 1, s->n - 1, -ll / s->total_count,
               el / round, left > 0 ? el / round * left : 0.0);
    }
    if (s->n <= desired) break;
    int before = s->n;
    if (o->report) o->report(o->report_ctx, "pruning", round, expected_rounds > round ? expected_rounds : round, "rounds");
    if (ut_state_prune(s, err)) goto done;
    progress(s, "prune round %d: %d -> %d pieces", round, before - 1, s->n - 1);
  }
  rc = ut_state_finalize(s, out, err);
  if (!rc) progress(s, "done: %d pieces (unk id %d)", out->n, out->unk_id);
done:
  free(expected);
  ut_state_free(s);
  return rc;
}
