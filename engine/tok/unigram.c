/* The Unigram model: pieces in one arena, a double-array trie over their bytes,
** and the lattice algorithms (Viterbi, forward-backward) on one word.
**
** The lattice is never built as a node list: every algorithm walks the word's
** character boundaries left to right and enumerates the pieces that start there
** with one trie descent (common-prefix search), which is both the fastest way
** and the order HF's encode_optimized visits nodes in, so ties break the same way.
**
** Unknown handling follows HF tokenizers (models/unigram/model.rs): at a position
** where no piece covers exactly the next character, an unk node spanning that
** whole UTF-8 character scores min_score - 10; after Viterbi, consecutive unk
** nodes fuse into one token whose id is looked up again as a piece (HF maps token
** strings back to ids), falling back to unk_id. */
#include "engine/tok/unigram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define UNK_PENALTY 10.0
/* Words up to this many bytes run on stack buffers; longer ones allocate. */
#define STACK_BYTES 512

struct Unigram {
  int n;
  int unk_id;
  int empty_id;      /* the (last) piece that is the empty string, which the trie cannot hold; or -1 */
  double min_score;
  double *score;
  uint32_t *off;     /* piece i is arena[off[i] .. off[i+1]) */
  char *arena;       /* pieces, each followed by a NUL */
  /* Double-array trie: the child of node s by byte c is t = da[s].base + c when
  ** da[t].check == s; da[t].term is the id of the piece ending there or -1. The
  ** three live side by side so one step touches one cache line. The array is
  ** padded by 256 slots past the largest base, so t never needs a bounds test. */
  struct DaUnit { int32_t base, check, term; } *da;
  int32_t da_size;
};

/* ---- UTF-8 ---------------------------------------------------------------- */

/* Length of the character whose lead byte is c (1 for a stray byte, so malformed
** input advances instead of looping; the tokenizer validates before this). */
static inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

static inline size_t char_len_at(const char *s, size_t pos, size_t len) {
  size_t m = utf8_len((unsigned char)s[pos]);
  return pos + m > len ? len - pos : m;
}

/* ---- double-array construction ------------------------------------------ */

/* Free slots form a doubly linked list (slot 0, the root, is its head sentinel)
** so that the search for a base visits only free slots: a first-fit scan over
** the dense low region would make construction quadratic. */
typedef struct Builder {
  Unigram *u;
  int32_t cap;
  int32_t *next, *prev;  /* free list; next[0] is the first free slot, 0 ends it */
  int32_t max_base;
  const int32_t *order;  /* piece ids sorted by bytes, duplicates removed */
} Builder;

static int da_grow(Builder *b, int32_t need) {
  if (need <= b->cap) return 0;
  int32_t cap = b->cap ? b->cap : 1024;
  while (cap < need) {
    if (cap > INT32_MAX / 2) return -1;
    cap *= 2;
  }
  Unigram *u = b->u;
  struct DaUnit *nd = realloc(u->da, (size_t)cap * sizeof *nd);
  if (!nd) return -1;
  u->da = nd;
  int32_t *nn = realloc(b->next, (size_t)cap * sizeof *nn);
  if (!nn) return -1;
  b->next = nn;
  int32_t *np = realloc(b->prev, (size_t)cap * sizeof *np);
  if (!np) return -1;
  b->prev = np;
  int32_t first_new = b->cap ? b->cap : 1;
  if (b->cap == 0) { b->next[0] = 0; b->prev[0] = 0; u->da[0].base = 0; u->da[0].check = -2; u->da[0].term = -1; }
  /* Append the new slots at the tail of the free list. */
  for (int32_t i = first_new; i < cap; i++) {
    u->da[i].base = 0; u->da[i].check = -1; u->da[i].term = -1;
    int32_t tail = b->prev[0];
    b->next[tail] = i; b->prev[i] = tail; b->next[i] = 0; b->prev[0] = i;
  }
  b->cap = cap;
  return 0;
}

static void da_take(Builder *b, int32_t t) {
  b->next[b->prev[t]] = b->next[t];
  b->prev[b->next[t]] = b->prev[t];
}

static const char *piece_bytes(const Unigram *u, int id, size_t *len) {
  *len = u->off[id + 1] - u->off[id] - 1;
  return u->arena + u->off[id];
}

/* Places the children of node s, whose keys are order[lo..hi) sharing their first
** `depth` bytes, then recurses into each child. */
static int da_place(Builder *b, int32_t s, int lo, int hi, size_t depth) {
  Unigram *u = b->u;
  size_t len;
  /* Sorted order puts the key that ends here (at most one: duplicates are gone) first. */
  piece_bytes(u, b->order[lo], &len);
  if (len == depth) { u->da[s].term = b->order[lo]; lo++; }
  if (lo >= hi) return 0;
  unsigned char labels[256];
  int child_lo[257], nl = 0;
  for (int i = lo; i < hi; i++) {
    unsigned char c = (unsigned char)piece_bytes(u, b->order[i], &len)[depth];
    if (nl == 0 || labels[nl - 1] != c) { labels[nl] = c; child_lo[nl] = i; nl++; }
  }
  child_lo[nl] = hi;
  /* First fit over free slots for the first label; the others must be free too. */
  int32_t bs;
  for (int32_t p = b->next[0];; p = b->next[p]) {
    if (p == 0) {  /* list exhausted: grow, and go on from the new slots */
      int32_t old = b->cap;
      if (da_grow(b, b->cap * 2) < 0) return -1;
      p = old;
    }
    bs = p - labels[0];
    if (bs < 1) continue;
    if (bs + 257 > b->cap && da_grow(b, bs + 257) < 0) return -1;
    int ok = 1;
    for (int k = 1; k < nl && ok; k++) ok = u->da[bs + labels[k]].check == -1;
    if (ok) break;
  }
  u->da[s].base = bs;
  if (bs > b->max_base) b->max_base = bs;
  for (int k = 0; k < nl; k++) { u->da[bs + labels[k]].check = s; da_take(b, bs + labels[k]); }
  for (int k = 0; k < nl; k++)
    if (da_place(b, bs + labels[k], child_lo[k], child_lo[k + 1], depth + 1) < 0) return -1;
  return 0;
}

/* qsort_r's comparator: the model comes as its argument, never through a global, since
** the server's handler threads build tokenizers at once (a shared pointer let one
** thread's sort read another's freed model). */
static int cmp_piece(const void *pa, const void *pb, void *model) {
  const Unigram *u = model;
  int a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  size_t la, lb;
  const char *sa = piece_bytes(u, a, &la), *sb = piece_bytes(u, b, &lb);
  int c = memcmp(sa, sb, la < lb ? la : lb);
  if (c) return c;
  if (la != lb) return la < lb ? -1 : 1;
  return a < b ? -1 : a > b;
}

/* ---- public: construction ------------------------------------------------ */

Unigram *unigram_new(int n, const char *const *pieces, const double *scores, int unk_id, Err *err) {
  if (n < 0 || (n > 0 && (!pieces || !scores))) { err_set(err, "unigram: bad arguments"); return NULL; }
  if (unk_id < -1 || unk_id >= n) { err_set(err, "unigram: unk_id %d out of range [0,%d)", unk_id, n); return NULL; }
  Unigram *u = calloc(1, sizeof *u);
  if (!u) { err_set(err, "unigram: out of memory"); return NULL; }
  u->n = n;
  u->unk_id = unk_id;
  u->score = malloc(((size_t)n + 1) * sizeof *u->score);
  u->off = malloc(((size_t)n + 1) * sizeof *u->off);
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    if (!pieces[i]) { err_set(err, "unigram: piece %d is NULL", i); unigram_free(u); return NULL; }
    total += strlen(pieces[i]) + 1;
  }
  if (total > UINT32_MAX - 1) { err_set(err, "unigram: pieces too large"); unigram_free(u); return NULL; }
  u->arena = malloc(total + 1);
  int32_t *order = malloc(((size_t)n + 1) * sizeof *order);
  if (!u->score || !u->off || !u->arena || !order) {
    free(order); unigram_free(u); err_set(err, "unigram: out of memory"); return NULL;
  }
  /* HF's min_score runs over every piece, special ones (score 0) included. */
  double mn = INFINITY;
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    if (!isfinite(scores[i])) { free(order); unigram_free(u); err_set(err, "unigram: score of piece %d is not finite", i); return NULL; }
    u->score[i] = scores[i];
    if (scores[i] < mn) mn = scores[i];
    size_t l = strlen(pieces[i]);
    u->off[i] = (uint32_t)at;
    memcpy(u->arena + at, pieces[i], l + 1);
    at += l + 1;
  }
  u->off[n] = (uint32_t)at;
  u->min_score = n ? mn : 0.0;

  /* Keys: non-empty pieces sorted by bytes; of duplicates the highest id stays,
  ** as HF's token_to_ids map keeps the last insertion. */
  int m = 0;
  u->empty_id = -1;
  for (int i = 0; i < n; i++) {
    if (u->off[i + 1] - u->off[i] > 1) order[m++] = i;
    else u->empty_id = i;
  }
  qsort_r(order, (size_t)m, sizeof *order, cmp_piece, u);
  int k = 0;
  for (int i = 0; i < m; i++) {
    if (k > 0) {
      size_t la, lb;
      const char *a = piece_bytes(u, order[k - 1], &la), *b = piece_bytes(u, order[i], &lb);
      if (la == lb && !memcmp(a, b, la)) { order[k - 1] = order[i]; continue; }
    }
    order[k++] = order[i];
  }
  Builder b = {.u = u, .order = order};
  int rc = da_grow(&b, 1024);  /* also makes slot 0 the root, nobody's child */
  if (rc == 0 && k > 0) rc = da_place(&b, 0, 0, k, 0);
  free(order);
  free(b.next);
  free(b.prev);
  if (rc < 0) { unigram_free(u); err_set(err, "unigram: out of memory building the trie"); return NULL; }
  u->da_size = b.cap;
  return u;
}

void unigram_free(Unigram *u) {
  if (!u) return;
  free(u->score); free(u->off); free(u->arena);
  free(u->da);
  free(u);
}

int unigram_size(const Unigram *u) { return u->n; }
const char *unigram_piece(const Unigram *u, int id) { return u->arena + u->off[id]; }
double unigram_score(const Unigram *u, int id) { return u->score[id]; }
int unigram_unk_id(const Unigram *u) { return u->unk_id; }
double unigram_min_score(const Unigram *u) { return u->min_score; }

int unigram_piece_id(const Unigram *u, const char *piece, size_t len) {
  if (len == 0) return u->empty_id;
  if (u->n == 0) return -1;
  int32_t s = 0;
  for (size_t i = 0; i < len; i++) {
    int32_t t = u->da[s].base + (unsigned char)piece[i];
    if (u->da[t].check != s) return -1;
    s = t;
  }
  return u->da[s].term;
}

/* ---- Viterbi --------------------------------------------------------------- */

/* Best path ending at each byte position: score, start of its last node, node id;
** start -1 marks a position no path reaches yet. */
typedef struct Best { double score; int32_t start, id; } Best;

/* Fills best[0..len] by HF's encode_optimized order: start positions ascending,
** pieces by length ascending, strict improvement only. banned (or -1) is left out
** of the lattice but still counts as covering its character, so no unk replaces it.
** Returns 0, or -1 when a character is uncovered and there is no unk id. */
static int viterbi(const Unigram *u, const char *s, size_t len, Best *best, int banned, int allow_unk) {
  const double unk_score = u->min_score - UNK_PENALTY;
  const struct DaUnit *da = u->da;
  for (size_t i = 0; i <= len; i++) best[i].start = -1;
  best[0].score = 0; best[0].start = 0; best[0].id = -1;
  size_t pos = 0;
  while (pos < len) {
    size_t mb = char_len_at(s, pos, len);
    if (best[pos].start >= 0) {
      double here = best[pos].score;
      int single = 0;
      int32_t st = 0;
      if (u->n > 0) {
        for (size_t k = pos; k < len; k++) {
          int32_t t = da[st].base + (unsigned char)s[k];
          if (da[t].check != st) break;
          st = t;
          int id = da[st].term;
          if (id < 0) continue;
          size_t end = k + 1;
          if (end - pos == mb) single = 1;
          if (id == banned) continue;
          double c = here + u->score[id];
          Best *b = &best[end];
          if (b->start < 0 || c > b->score) { b->score = c; b->start = (int32_t)pos; b->id = id; }
        }
      }
      if (!single) {
        if (!allow_unk || u->unk_id < 0) return -1;
        double c = here + unk_score;
        Best *b = &best[pos + mb];
        if (b->start < 0 || c > b->score) { b->score = c; b->start = (int32_t)pos; b->id = u->unk_id; }
      }
    }
    pos += mb;
  }
  return best[len].start >= 0 || len == 0 ? 0 : -1;
}

int unigram_encode(const Unigram *u, const char *s, size_t len, int32_t *ids, int32_t *starts, int cap) {
  if (len == 0) return 0;
  Best stack_best[STACK_BYTES + 1], *best = stack_best;
  if (len > STACK_BYTES) { best = malloc((len + 1) * sizeof *best); if (!best) return -1; }
  int n = -1;
  if (viterbi(u, s, len, best, -1, 1) < 0) goto done;
  /* Count tokens after fusing runs of unk nodes, then fill from the end. */
  int unk = u->unk_id, count = 0;
  for (size_t e = len; e > 0;) {
    int32_t st = best[e].start;
    if (unk >= 0 && best[e].id == unk) {
      while (st > 0 && best[st].id == unk) st = best[st].start;
    }
    count++;
    e = (size_t)st;
  }
  if (count > cap) goto done;
  n = count;
  for (size_t e = len; e > 0;) {
    int32_t st = best[e].start;
    int id = best[e].id;
    if (unk >= 0 && id == unk) {
      int fused = 0;
      while (st > 0 && best[st].id == unk) { st = best[st].start; fused = 1; }
      if (fused) {
        /* HF turns the fused string back into an id: a piece if one matches it. */
        int pid = unigram_piece_id(u, s + st, e - (size_t)st);
        id = pid >= 0 ? pid : unk;
      }
    }
    count--;
    ids[count] = id;
    if (starts) starts[count] = st;
    e = (size_t)st;
  }
done:
  if (best != stack_best) free(best);
  return n;
}

int unigram_encode_without(const Unigram *u, const char *s, size_t len, int banned_id, int32_t *ids, int cap) {
  if (len == 0) return 0;
  Best stack_best[STACK_BYTES + 1], *best = stack_best;
  if (len > STACK_BYTES) { best = malloc((len + 1) * sizeof *best); if (!best) return -1; }
  int n = -1;
  if (viterbi(u, s, len, best, banned_id, 1) < 0 || best[len].start < 0) goto done;
  int count = 0;
  for (size_t e = len; e > 0; e = (size_t)best[e].start) count++;
  if (count > cap) goto done;
  n = count;
  for (size_t e = len; e > 0; e = (size_t)best[e].start) ids[--count] = best[e].id;
done:
  if (best != stack_best) free(best);
  return n;
}

/* ---- forward-backward ------------------------------------------------------ */

/* log(exp(a) + exp(b)) without overflow; -inf is the empty sum. */
static inline double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

double unigram_expected_counts(const Unigram *u, const char *s, size_t len, double freq, double *expected) {
  if (len == 0) return 0.0;
  double stack_buf[2 * (STACK_BYTES + 1)], *alpha = stack_buf;
  size_t stack_pos[STACK_BYTES + 1], *bounds = stack_pos;
  if (len > STACK_BYTES) {
    alpha = malloc(2 * (len + 1) * sizeof *alpha);
    bounds = malloc((len + 1) * sizeof *bounds);
    if (!alpha || !bounds) { free(alpha); free(bounds); return NAN; }
  }
  double *beta = alpha + len + 1;
  const double unk_score = u->min_score - UNK_PENALTY;
  const struct DaUnit *da = u->da;
  for (size_t i = 0; i <= len; i++) { alpha[i] = -INFINITY; beta[i] = -INFINITY; }
  alpha[0] = 0;
  size_t nb = 0;
  for (size_t pos = 0; pos < len;) {
    size_t mb = char_len_at(s, pos, len);
    bounds[nb++] = pos;
    int single = 0;
    int32_t st = 0;
    if (u->n > 0) {
      for (size_t k = pos; k < len; k++) {
        int32_t t = da[st].base + (unsigned char)s[k];
        if (da[t].check != st) break;
        st = t;
        int id = da[st].term;
        if (id < 0) continue;
        if (k + 1 - pos == mb) single = 1;
        alpha[k + 1] = log_add(alpha[k + 1], alpha[pos] + u->score[id]);
      }
    }
    if (!single && u->unk_id >= 0) alpha[pos + mb] = log_add(alpha[pos + mb], alpha[pos] + unk_score);
    pos += mb;
  }
  double z = alpha[len];
  if (z != -INFINITY) {
    beta[len] = 0;
    while (nb > 0) {
      size_t pos = bounds[--nb];
      size_t mb = char_len_at(s, pos, len);
      int single = 0;
      int32_t st = 0;
      if (u->n > 0) {
        for (size_t k = pos; k < len; k++) {
          int32_t t = da[st].base + (unsigned char)s[k];
          if (da[t].check != st) break;
          st = t;
          int id = da[st].term;
          if (id < 0) continue;
          if (k + 1 - pos == mb) single = 1;
          double w = u->score[id] + beta[k + 1];
          beta[pos] = log_add(beta[pos], w);
          if (expected && alpha[pos] != -INFINITY && beta[k + 1] != -INFINITY)
            expected[id] += freq * exp(alpha[pos] + w - z);
        }
      }
      if (!single && u->unk_id >= 0) {
        double w = unk_score + beta[pos + mb];
        beta[pos] = log_add(beta[pos], w);
        if (expected && alpha[pos] != -INFINITY && beta[pos + mb] != -INFINITY)
          expected[u->unk_id] += freq * exp(alpha[pos] + w - z);
      }
    }
  }
  if (alpha != stack_buf) { free(alpha); free(bounds); }
  return z;
}
