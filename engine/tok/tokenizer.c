/* The HF tokenizers pipeline for a Unigram model (see tokenizer.h).
**
** One text is encoded in a single pass over a few byte buffers that live in the
** Encoding's scratch, so steady-state encoding allocates nothing:
**   1. added tokens with normalized=false are matched in the raw text
**      (leftmost-longest, lstrip/rstrip swallowing whitespace; a single_word
**      token's match next to a word character is passed over), which cuts it
**      into segments;
**   2. each segment is copied and normalised (string Replaces); added tokens with
**      normalized=true are matched in the normalised text;
**   3. Metaspace turns ' ' into the replacement, prepends one, and splits before
**      every replacement; each word goes through the Unigram Viterbi.
** Every normalised byte carries the original byte span it came from (HF's
** alignments), kept only when offsets are wanted; a token's offsets are the start
** of its first byte's span and the end of its last byte's span.
**
** Alignment rules mirrored from HF's NormalizedString: a Replace's inserted bytes
** all take the span of the last byte they replace; a prepended replacement takes
** the span of the segment's first byte. */
#include "engine/core/json_text.h"
#include "engine/tok/tokenizer.h"
#include "engine/core/files.h"
#include "engine/core/buf.h"
#include "engine/tok/bert_text.h"
#include "engine/tok/bpe.h"
#include "engine/tok/bytelevel.h"
#include "engine/tok/unicode.h"
#include "engine/tok/vocab_scores.h"
#include "engine/tok/wordpiece.h"

#include <errno.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Added {
  int id;
  char *content;     /* as written in tokenizer.json */
  char *match;       /* what is searched for: content, normalised when `normalized` */
  size_t mlen;
  unsigned char lstrip, rstrip, single_word, normalized, special;
  unsigned char normalized_json, special_json;  /* as written back (differ only for repeated contents) */
} Added;

typedef struct Replace { char *pat, *content; size_t plen, clen; } Replace;

enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
typedef struct Metaspace {
  int present;
  char rep[8];       /* one UTF-8 character */
  size_t rlen;
  int prepend;
  int split;
} Metaspace;

/* The stages besides Unigram's (the BERT and RoBERTa pipelines). Which one runs is
** a kind; the JSON they were read from is kept to be written back as it was. */
enum { PRE_METASPACE, PRE_BERT, PRE_BYTELEVEL };        /* PRE_METASPACE with pre.present 0: none */
enum { DEC_NONE, DEC_METASPACE, DEC_WORDPIECE, DEC_BYTELEVEL };

typedef struct TItem { int special; char *name; int type_id; } TItem;  /* name: "A"/"B" or a special token */
typedef struct TSpecial { char *name; int n; int32_t *ids; char **tokens; } TSpecial;

struct Tokenizer {
  unsigned long serial;                 /* unique per tokenizer made in this process (cache key) */
  char *version;
  TokenizerFamily family;               /* which model: exactly one of model, wp, bpe is set */
  Unigram *model;
  WordPiece *wp;
  Bpe *bpe;
  json_t *root;                         /* a WordPiece / BPE tokenizer's JSON, written back as read */
  int bert_norm;                        /* the normalizer is BertNormalizer (bn) */
  BertNormalizer bn;
  int pre_kind;
  int bl_prefix_space;                  /* ByteLevel pre-tokenizer: add_prefix_space */
  int dec_kind;
  char *wp_dec_prefix;                  /* WordPiece decoder: prefix, cleanup */
  int wp_dec_cleanup;
  int trim_offsets;                     /* RobertaProcessing / ByteLevel post-processor: trim_offsets ... */
  int trim_prefix_space;                /* ... and its add_prefix_space */
  int byte_fallback_written;            /* the model had the key (written back the same) */
  char *score_text;                     /* Unigram scores as read: id i's is score_text + score_at[i], */
  size_t *score_at;                     /* ending at score_at[i + 1]; NULL for a model built in memory */
  Added *added;
  int n_added;
  int normalizer;                       /* 0 none, 1 single Replace, 2 Sequence */
  Replace *repl;
  int n_repl;
  Metaspace pre, dec;
  int has_post;
  TItem *single, *pair;
  int n_single, n_pair;
  TSpecial *tspec;
  int n_tspec;
  int vocab_size;                       /* max id + 1 */
  int32_t *added_of_id;                 /* id -> index into added, or -1 */
  unsigned char first_raw[256], first_norm[256];
  int n_raw, n_norm;
  /* The added tokens with a match string, raw [0] and normalized [1], as indices into
  ** added sorted by their match bytes (then index): find_added walks it as a trie. */
  int *by_match[2];
};

/* ---- small helpers ------------------------------------------------------- */

static char *xstrndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) { memcpy(d, s, n); d[n] = 0; }
  return d;
}

int tokenizer_utf8_valid(const char *str, size_t len, size_t *bad) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    if (c < 0x80) { i++; continue; }
    size_t n;
    unsigned cp, min;
    if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; min = 0x10000; }
    else goto invalid;
    if (i + n > len) goto invalid;
    for (size_t k = 1; k < n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) goto invalid;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto invalid;
    i += n;
  }
  return 1;
invalid:
  if (bad) *bad = i;
  return 0;
}

static size_t u8len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

static unsigned decode_at(const char *str, size_t i, size_t *n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t l = u8len(s[i]);
  unsigned cp = l == 1 ? s[i] : l == 2 ? s[i] & 0x1Fu : l == 3 ? s[i] & 0x0Fu : s[i] & 0x07u;
  for (size_t k = 1; k < l; k++) cp = (cp << 6) | (s[i + k] & 0x3Fu);
  *n = l;
  return cp;
}

/* Rust's char::is_whitespace (the Unicode White_Space property). */
static int is_ws(unsigned c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- the model, whichever family ------------------------------------------ */

/* Ids the model knows: max id + 1. */
static int model_size(const Tokenizer *t) {
  return t->family == TOKENIZER_WORDPIECE ? wordpiece_size(t->wp) : t->family == TOKENIZER_BPE ? bpe_size(t->bpe) : unigram_size(t->model);
}

/* The model's id of a token string (as its vocabulary writes it), or -1. */
static int model_token_id(const Tokenizer *t, const char *s, size_t n) {
  if (t->family == TOKENIZER_WORDPIECE) return wordpiece_token_id(t->wp, s, n);
  if (t->family == TOKENIZER_BPE) return bpe_token_id(t->bpe, s, n);
  return unigram_piece_id(t->model, s, n);
}

/* The model's token string of an id, or NULL. */
static const char *model_token(const Tokenizer *t, int id) {
  if (t->family == TOKENIZER_WORDPIECE) return wordpiece_token(t->wp, id);
  if (t->family == TOKENIZER_BPE) return bpe_token(t->bpe, id);
  return id >= 0 && id < unigram_size(t->model) ? unigram_piece(t->model, id) : NULL;
}

/* ---- scratch -------------------------------------------------------------- */

/* A word cache (the ids-only path): natural text repeats its words, and a hit
** costs a hash and a compare instead of a Viterbi pass. Direct mapped; words up
** to CW bytes with up to CT tokens. Keyed on the tokenizer's serial number, so a
** scratch reused with another tokenizer starts empty. HF keeps such a cache too. */
#define CACHE_SLOTS 4096
#define CW 30
#define CT 12
typedef struct CacheEntry {
  uint64_t hash;
  uint8_t wlen, ntok;
  char word[CW];
  int32_t ids[CT];
} CacheEntry;

typedef struct Work {
  char *nb, *tb;              /* normalised text, and a second buffer to transform into */
  int32_t *na0, *na1, *ta0, *ta1;
  size_t ncap;
  int32_t *wids, *wst;        /* one word's Viterbi output */
  size_t wcap;
  size_t nlen;
  CacheEntry *cache;
  unsigned long cache_serial;
  /* The BERT and byte-level stages' arrays, grown on demand (see grow()). */
  int32_t *from;              /* BertNormalizer: source byte of each output byte */
  size_t from_cap;
  void *scratch;              /* BertNormalizer's and BPE's scratch */
  size_t scratch_cap;
  int32_t *bounds;            /* pre-tokenizer word bounds */
  size_t bounds_cap;
  const char **toks;          /* token strings (offset trimming, decoding) */
  size_t toks_cap;
  int32_t *spans;             /* BPE: each token's [start, end) in its word */
  size_t spans_cap;
  char *strs;                 /* the strings of the encoding's normalized added tokens (their
                              ** normalized text, as HF reports them), back to back */
  size_t strs_len, strs_cap;
  /* Truncation's look at word boundaries (tokenizer_encode_truncated): with lazy_max > 0,
  ** lazy_len becomes the sequence's token count (from seq_start) at the end of the first
  ** word that brings it to lazy_max or more; -1 until then. */
  int lazy_max, lazy_len, seq_start;
} Work;

/* Makes *p hold at least need elements of elem bytes (growing by doubling); -1 when out of memory. */
static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

static uint64_t word_hash(const char *s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, s, 8);
    h = (h ^ v) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    s += 8; n -= 8;
  }
  uint64_t v = 0;
  memcpy(&v, s, n);
  h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

static void work_free(Work *w) {
  if (!w) return;
  free(w->nb); free(w->tb); free(w->na0); free(w->na1); free(w->ta0); free(w->ta1);
  free(w->wids); free(w->wst);
  free(w->cache);
  free(w->from); free(w->scratch); free(w->bounds); free(w->toks); free(w->spans); free(w->strs);
  free(w);
}

static int work_reserve(Work *w, size_t need) {
  if (need <= w->ncap) return 0;
  size_t cap = w->ncap ? w->ncap : 256;
  while (cap < need) cap *= 2;
  char *a = realloc(w->nb, cap); if (!a) return -1; w->nb = a;
  char *b = realloc(w->tb, cap); if (!b) return -1; w->tb = b;
  int32_t *c;
  c = realloc(w->na0, cap * 4); if (!c) return -1; w->na0 = c;
  c = realloc(w->na1, cap * 4); if (!c) return -1; w->na1 = c;
  c = realloc(w->ta0, cap * 4); if (!c) return -1; w->ta0 = c;
  c = realloc(w->ta1, cap * 4); if (!c) return -1; w->ta1 = c;
  w->ncap = cap;
  return 0;
}

static int work_reserve_word(Work *w, size_t need) {
  if (need <= w->wcap) return 0;
  size_t cap = w->wcap ? w->wcap : 256;
  while (cap < need) cap *= 2;
  int32_t *a = realloc(w->wids, cap * 4); if (!a) return -1; w->wids = a;
  int32_t *b = realloc(w->wst, cap * 4); if (!b) return -1; w->wst = b;
  w->wcap = cap;
  return 0;
}

static void swap_bufs(Work *w) {
  char *c = w->nb; w->nb = w->tb; w->tb = c;
  int32_t *p = w->na0; w->na0 = w->ta0; w->ta0 = p;
  p = w->na1; w->na1 = w->ta1; w->ta1 = p;
}

static int enc_reserve(Encoding *e, int need) {
  if (need <= e->cap) return 0;
  int cap = e->cap ? e->cap : 64;
  while (cap < need) cap *= 2;
  int32_t *a = realloc(e->ids, (size_t)cap * 4); if (!a) return -1; e->ids = a;
  a = realloc(e->type_ids, (size_t)cap * 4); if (!a) return -1; e->type_ids = a;
  a = realloc(e->offsets, (size_t)cap * 8); if (!a) return -1; e->offsets = a;
  a = realloc(e->cut, (size_t)cap * 8); if (!a) return -1; e->cut = a;
  uint8_t *s = realloc(e->special, (size_t)cap); if (!s) return -1; e->special = s;
  e->cap = cap;
  return 0;
}

void encoding_free(Encoding *e) {
  if (!e) return;
  free(e->ids); free(e->type_ids); free(e->offsets); free(e->cut); free(e->special);
  work_free(e->work);
  memset(e, 0, sizeof *e);
}

static int push_token(Encoding *e, int id, int type_id, int32_t a, int32_t b, int special) {
  if (e->n >= e->cap && enc_reserve(e, e->n + 1) < 0) return -1;
  e->ids[e->n] = id;
  e->type_ids[e->n] = type_id;
  e->offsets[2 * e->n] = a;
  e->offsets[2 * e->n + 1] = b;
  e->cut[2 * e->n] = special ? -1 : a;     /* an added token matched in the text, or a template token */
  e->cut[2 * e->n + 1] = special ? -1 : b;
  e->special[e->n] = (uint8_t)special;
  e->n++;
  return 0;
}

/* ---- normaliser and pre-tokenizer on the work buffers ---------------------- */

/* Replaces every non-overlapping occurrence (leftmost first) of r->pat in nb. */
static int apply_replace(Work *w, const Replace *r, int align) {
  size_t n = w->nlen, out = 0;
  if (r->plen == 0 || n < r->plen) return 0;
  if (!memmem(w->nb, n, r->pat, r->plen)) return 0;  /* the common case: nothing to copy */
  /* Grow first: the result is at most n / plen * clen + n. */
  size_t worst = r->clen > r->plen ? n + (n / r->plen) * (r->clen - r->plen) : n;
  if (work_reserve(w, worst + 8) < 0) return -1;
  const char *s = w->nb;
  size_t i = 0;
  while (i < n) {
    const char *hit = i + r->plen <= n ? memmem(s + i, n - i, r->pat, r->plen) : NULL;
    size_t upto = hit ? (size_t)(hit - s) : n;
    memcpy(w->tb + out, s + i, upto - i);
    if (align) {
      memcpy(w->ta0 + out, w->na0 + i, (upto - i) * 4);
      memcpy(w->ta1 + out, w->na1 + i, (upto - i) * 4);
    }
    out += upto - i;
    if (!hit) break;
    size_t last = upto + r->plen - 1;
    memcpy(w->tb + out, r->content, r->clen);
    if (align)
      for (size_t k = 0; k < r->clen; k++) { w->ta0[out + k] = w->na0[last]; w->ta1[out + k] = w->na1[last]; }
    out += r->clen;
    i = upto + r->plen;
  }
  swap_bufs(w);
  w->nlen = out;
  return 0;
}

/* BertNormalizer from nb into tb; each output byte takes the span of the byte it came from. */
static int apply_bert_normalizer(const Tokenizer *t, Work *w, int align) {
  size_t n = w->nlen, bound = bert_normalize_bound(n);
  if (work_reserve(w, bound + 8) < 0 || grow((void **)&w->from, &w->from_cap, bound + 8, sizeof *w->from) < 0 ||
      grow(&w->scratch, &w->scratch_cap, bert_normalize_scratch_bytes(n) + 8, 1) < 0) return -1;
  size_t out = bert_normalize(&t->bn, w->nb, n, w->tb, w->from, w->scratch);
  if (align)
    for (size_t j = 0; j < out; j++) { w->ta0[j] = w->na0[w->from[j]]; w->ta1[j] = w->na1[w->from[j]]; }
  swap_bufs(w);
  w->nlen = out;
  return 0;
}

/* Copies text[a..b) into the work buffer with each byte's original character span,
** then runs the normaliser. */
static int load_segment(const Tokenizer *t, Work *w, const char *text, size_t a, size_t b, int align) {
  size_t n = b - a;
  if (work_reserve(w, n + 8) < 0) return -1;
  memcpy(w->nb, text + a, n);
  w->nlen = n;
  if (align) {
    for (size_t i = a; i < b;) {
      size_t l = u8len((unsigned char)text[i]);
      for (size_t k = 0; k < l; k++) { w->na0[i - a + k] = (int32_t)i; w->na1[i - a + k] = (int32_t)(i + l); }
      i += l;
    }
  }
  for (int r = 0; r < t->n_repl; r++)
    if (apply_replace(w, &t->repl[r], align) < 0) return -1;
  if (t->bert_norm) return apply_bert_normalizer(t, w, align);
  return 0;
}

/* ---- added tokens ------------------------------------------------------------ */

/* Leftmost-longest match of an added token from the set (normalized flag) in
** s[from..n): returns the Added index and sets *at, or -1. */
/* The longest added token (normalized flag) that s[i..n) starts with, the first in
** added's order among equal ones; -1 for none. by_match sorts a string's extensions
** right after it, so the range of tokens that agree with s on their first j bytes
** narrows byte by byte (two binary searches a byte) until it is empty; its first
** entry, when j bytes long, is a whole match. About log k steps a byte for k tokens,
** where trying each token made 5000 added tokens encode 60x slower than HF. */
static int longest_added_at(const Tokenizer *t, int normalized, const char *s, size_t i, size_t n) {
  const int *by = t->by_match[normalized];
  int lo = 0, hi = normalized ? t->n_norm : t->n_raw, best = -1;
  for (size_t j = 0; i + j < n && lo < hi; j++) {
    while (lo < hi && t->added[by[lo]].mlen == j) lo++;   /* matched (or not) already: shorter than j + 1 */
    unsigned char c = (unsigned char)s[i + j];
    int a = lo, b = hi;
    while (a < b) {   /* first entry whose byte j >= c */
      int m = a + (b - a) / 2;
      if ((unsigned char)t->added[by[m]].match[j] < c) a = m + 1; else b = m;
    }
    int e = a, f = hi;
    while (e < f) {   /* first entry whose byte j > c */
      int m = e + (f - e) / 2;
      if ((unsigned char)t->added[by[m]].match[j] <= c) e = m + 1; else f = m;
    }
    lo = a;
    hi = e;
    if (lo < hi && t->added[by[lo]].mlen == j + 1) best = by[lo];
  }
  return best;
}

/* Leftmost-longest match of an added token from the set (normalized flag) in
** s[from..n): returns the Added index and sets *at, or -1. */
static int find_added(const Tokenizer *t, int normalized, const char *s, size_t from, size_t n, size_t *at) {
  const unsigned char *first = normalized ? t->first_norm : t->first_raw;
  for (size_t i = from; i < n; i++) {
    if (!first[(unsigned char)s[i]]) continue;
    int best = longest_added_at(t, normalized, s, i, n);
    if (best >= 0) { *at = i; return best; }
  }
  return -1;
}

/* Start of the run of whitespace that ends s[0..end) (HF's space_leftmost_at_end). */
static size_t ws_left(const char *s, size_t end) {
  size_t i = end;
  while (i > 0) {
    size_t j = i - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
    size_t l;
    if (!is_ws(decode_at(s, j, &l))) break;
    i = j;
  }
  return i;
}

/* End of the run of whitespace that starts s[from..n). */
static size_t ws_right(const char *s, size_t from, size_t n) {
  size_t i = from;
  while (i < n) {
    size_t l;
    if (!is_ws(decode_at(s, i, &l))) break;
    i += l;
  }
  return i;
}

/* Whether the match s[start..stop) of a single_word token stands alone: no word
** character (\w) just before or just after it within s[0..n). HF's find_matches
** passes over a match that does not, and goes on searching after its end. */
static int alone_as_word(const char *s, size_t start, size_t stop, size_t n) {
  size_t l;
  if (stop < n && uni_is_word(decode_at(s, stop, &l))) return 0;
  if (start == 0) return 1;
  size_t j = start - 1;
  while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
  return !uni_is_word(decode_at(s, j, &l));
}

/* ---- the model over one word ------------------------------------------------------- */

/* The model on s[0..n) into w->wids / w->wst (room for n + 1 tokens): the count, or
** -1 (Unigram: a character no piece covers, and no unk id), -2 (WordPiece: the unk
** token is needed and missing from the vocabulary), -3 (out of memory). */
static int model_encode(const Tokenizer *t, Work *w, const char *s, size_t n) {
  switch (t->family) {
    case TOKENIZER_WORDPIECE: {
      int k = wordpiece_encode(t->wp, s, n, w->wids, w->wst, (int)w->wcap);
      return k == -1 ? -3 : k;
    }
    case TOKENIZER_BPE: {
      /* Spans, not starts: a byte without a token is dropped and HF's offsets shift. */
      if (grow(&w->scratch, &w->scratch_cap, bpe_scratch_bytes(n) + 8, 1) < 0 ||
          grow((void **)&w->spans, &w->spans_cap, 2 * w->wcap, sizeof *w->spans) < 0) return -3;
      int k = bpe_encode(t->bpe, s, n, w->wids, w->spans, (int)w->wcap, w->scratch);
      return k < 0 ? -3 : k;
    }
    default:
      return unigram_encode(t->model, s, n, w->wids, w->wst, (int)w->wcap);
  }
}

/* A word ends at e->n: where tokenizers 0.23's lazy encoding could stop (an added token
** is no such end: HF goes on to the next word's). */
static void word_ended(Work *w, const Encoding *e) {
  if (w->lazy_max > 0 && w->lazy_len < 0 && e->n - w->seq_start >= w->lazy_max) w->lazy_len = e->n - w->seq_start;
}

static int encode_word_tokens(const Tokenizer *t, Work *w, const char *wbuf, size_t ws, size_t we, const int32_t *w0,
                              const int32_t *w1, int type_id, int align, Encoding *e, Err *err);

/* Encodes the word wbuf[ws..we) (w0/w1: each wbuf byte's original span, when align)
** and appends its tokens. Without offsets, words go through the cache. */
static int encode_word(const Tokenizer *t, Work *w, const char *wbuf, size_t ws, size_t we, const int32_t *w0,
                       const int32_t *w1, int type_id, int align, Encoding *e, Err *err) {
  if (encode_word_tokens(t, w, wbuf, ws, we, w0, w1, type_id, align, e, err) < 0) return -1;
  word_ended(w, e);
  return 0;
}

static int encode_word_tokens(const Tokenizer *t, Work *w, const char *wbuf, size_t ws, size_t we, const int32_t *w0,
                              const int32_t *w1, int type_id, int align, Encoding *e, Err *err) {
  size_t wl = we - ws;
  if (wl == 0) return 0;
  CacheEntry *ce = NULL;
  if (!align && wl <= CW) {
    if (w->cache_serial != t->serial || !w->cache) {
      if (!w->cache && !(w->cache = malloc(CACHE_SLOTS * sizeof *w->cache))) return err_setk(err, ERR_NOMEM, "out of memory");
      for (int i = 0; i < CACHE_SLOTS; i++) w->cache[i].wlen = 0xFF;  /* no word is that long: empty */
      w->cache_serial = t->serial;
    }
    uint64_t h = word_hash(wbuf + ws, wl);
    ce = &w->cache[h & (CACHE_SLOTS - 1)];
    if (ce->hash == h && ce->wlen == wl && !memcmp(ce->word, wbuf + ws, wl)) {
      if (enc_reserve(e, e->n + ce->ntok) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
      for (int i = 0; i < ce->ntok; i++) {
        e->ids[e->n] = ce->ids[i];
        e->type_ids[e->n] = type_id;
        e->offsets[2 * e->n] = 0;
        e->offsets[2 * e->n + 1] = 0;
        e->cut[2 * e->n] = e->cut[2 * e->n + 1] = -1;
        e->special[e->n] = 0;
        e->n++;
      }
      return 0;
    }
    ce->hash = h;
  }
  if (work_reserve_word(w, wl + 1) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  int k = model_encode(t, w, wbuf + ws, wl);
  if (ce) {
    if (k >= 0 && k <= CT) {
      ce->wlen = (uint8_t)wl;
      ce->ntok = (uint8_t)k;
      memcpy(ce->word, wbuf + ws, wl);
      memcpy(ce->ids, w->wids, (size_t)k * sizeof *ce->ids);
    } else ce->wlen = 0xFF;
  }
  int show = (int)(wl > 64 ? 64 : wl);
  if (k == -1) return err_set(err, "a character in \"%.*s\" has no piece and the model has no unk_id", show, wbuf + ws);
  if (k == -2) return err_set(err, "WordPiece: \"%.*s\" needs the unk token %s, which is not in the vocabulary", show, wbuf + ws, wordpiece_unk(t->wp));
  if (k < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  if (enc_reserve(e, e->n + k) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  for (int i = 0; i < k; i++) {
    int32_t oa = 0, ob = 0;
    if (align) {
      size_t s0, s1;
      if (t->family == TOKENIZER_BPE) { s0 = ws + (size_t)w->spans[2 * i]; s1 = ws + (size_t)w->spans[2 * i + 1]; }
      else { s0 = ws + (size_t)w->wst[i]; s1 = i + 1 < k ? ws + (size_t)w->wst[i + 1] : we; }
      if (s1 <= s0) s1 = s0 + 1;   /* no token is empty; kept inside the word all the same */
      oa = w0[s0]; ob = w1[s1 - 1];
    }
    e->ids[e->n] = w->wids[i];
    e->type_ids[e->n] = type_id;
    e->offsets[2 * e->n] = oa;
    e->offsets[2 * e->n + 1] = ob;
    e->cut[2 * e->n] = e->cut[2 * e->n + 1] = -1;
    e->special[e->n] = 0;
    e->n++;
  }
  return 0;
}

/* ---- the pre-tokenizers over one normalised range --------------------------------- */

/* BertPreTokenizer: whitespace splits (and goes), each punctuation character is a word. */
static int encode_bert_words(const Tokenizer *t, Work *w, size_t a, size_t b, int type_id, int align, Encoding *e, Err *err) {
  size_t n = b - a;
  if (grow((void **)&w->bounds, &w->bounds_cap, 2 * n + 2, sizeof *w->bounds) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  size_t k = bert_pretokenize(w->nb + a, n, w->bounds);
  const int32_t *w0 = align ? w->na0 + a : NULL, *w1 = align ? w->na1 + a : NULL;
  for (size_t i = 0; i < k; i++)
    if (encode_word(t, w, w->nb + a, (size_t)w->bounds[2 * i], (size_t)w->bounds[2 * i + 1], w0, w1, type_id, align, e, err) < 0) return -1;
  return 0;
}

/* ByteLevel: a space in front when add_prefix_space and the range does not start with
** one (HF's prepend: the space takes the span of the character it is put before), then the GPT-2
** split; the model maps each piece's bytes to its alphabet. */
static int encode_bytelevel_words(const Tokenizer *t, Work *w, size_t a, size_t b, int type_id, int align, Encoding *e, Err *err) {
  size_t n = b - a;
  const char *src;
  const int32_t *w0 = NULL, *w1 = NULL;
  if (t->bl_prefix_space && w->nb[a] != ' ') {
    if (work_reserve(w, n + 9) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
    w->tb[0] = ' ';
    memcpy(w->tb + 1, w->nb + a, n);
    if (align) {
      w->ta0[0] = w->na0[a]; w->ta1[0] = w->na1[a];
      memcpy(w->ta0 + 1, w->na0 + a, n * 4);
      memcpy(w->ta1 + 1, w->na1 + a, n * 4);
      w0 = w->ta0; w1 = w->ta1;
    }
    src = w->tb;
    n++;
  } else {
    src = w->nb + a;
    if (align) { w0 = w->na0 + a; w1 = w->na1 + a; }
  }
  if (grow((void **)&w->bounds, &w->bounds_cap, n + 2, sizeof *w->bounds) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  size_t k = bytelevel_split(src, n, w->bounds);
  for (size_t i = 0; i < k; i++) {
    size_t ws = (size_t)w->bounds[i], we = i + 1 < k ? (size_t)w->bounds[i + 1] : n;
    if (encode_word(t, w, src, ws, we, w0, w1, type_id, align, e, err) < 0) return -1;
  }
  return 0;
}

/* Encodes nb[a..b) (a normalised sub-segment): the pre-tokenizer, then the model per word.
** Metaspace's result is built in tb so nb stays intact for the caller. */
static int encode_normalized(const Tokenizer *t, Work *w, size_t a, size_t b, int type_id, int align,
                             Encoding *e, Err *err) {
  if (b <= a) return 0;
  if (t->pre_kind == PRE_BERT) return encode_bert_words(t, w, a, b, type_id, align, e, err);
  if (t->pre_kind == PRE_BYTELEVEL) return encode_bytelevel_words(t, w, a, b, type_id, align, e, err);
  const Metaspace *m = &t->pre;
  size_t n = b - a;
  char *src = w->nb + a;
  const char *wbuf;
  const int32_t *w0 = NULL, *w1 = NULL;
  size_t wn;
  if (m->present) {
    size_t worst = n * m->rlen + m->rlen + 8;
    if (worst > w->ncap) {
      if (work_reserve(w, worst) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
      src = w->nb + a;
    }
    size_t out = 0;
    int prepend = 0;
    if (m->prepend == PREPEND_ALWAYS) prepend = 1;
    else if (m->prepend == PREPEND_FIRST) prepend = align && w->na0[a] == 0;  /* First always has alignments */
    if (prepend && !(n >= m->rlen && !memcmp(src, m->rep, m->rlen)) && !(src[0] == ' ' && m->rlen > 0)) {
      memcpy(w->tb, m->rep, m->rlen);
      if (align) for (size_t k = 0; k < m->rlen; k++) { w->ta0[k] = w->na0[a]; w->ta1[k] = w->na1[a]; }
      out = m->rlen;
    }
    if (!align) {
      /* Runs between spaces are copied whole. */
      size_t i = 0;
      while (i < n) {
        const char *sp = memchr(src + i, ' ', n - i);
        size_t run = sp ? (size_t)(sp - src) - i : n - i;
        memcpy(w->tb + out, src + i, run);
        out += run;
        i += run;
        if (sp) { memcpy(w->tb + out, m->rep, m->rlen); out += m->rlen; i++; }
      }
    } else {
      for (size_t i = 0; i < n; i++) {
        if (src[i] == ' ') {
          memcpy(w->tb + out, m->rep, m->rlen);
          for (size_t k = 0; k < m->rlen; k++) { w->ta0[out + k] = w->na0[a + i]; w->ta1[out + k] = w->na1[a + i]; }
          out += m->rlen;
        } else {
          w->tb[out] = src[i];
          w->ta0[out] = w->na0[a + i]; w->ta1[out] = w->na1[a + i];
          out++;
        }
      }
    }
    wbuf = w->tb; wn = out;
    if (align) { w0 = w->ta0; w1 = w->ta1; }
  } else {
    wbuf = src; wn = n;
    if (align) { w0 = w->na0 + a; w1 = w->na1 + a; }
  }
  const int split = m->present && m->split;
  size_t ws = 0;
  while (ws < wn) {
    /* A word runs to the next replacement that is not at its start. */
    size_t we = wn;
    if (split) {
      size_t from = ws + 1;
      while (from < wn) {
        const char *hit = memchr(wbuf + from, m->rep[0], wn - from);
        if (!hit) break;
        size_t p = (size_t)(hit - wbuf);
        if (p + m->rlen <= wn && !memcmp(hit, m->rep, m->rlen)) { we = p; break; }
        from = p + 1;
      }
    }
    if (encode_word(t, w, wbuf, ws, we, w0, w1, type_id, align, e, err) < 0) return -1;
    ws = we;
  }
  return 0;
}

/* Steps 2-3 for the raw segment text[a..b). */
static int encode_segment(const Tokenizer *t, Work *w, const char *text, size_t a, size_t b, int type_id,
                          int align, Encoding *e, Err *err) {
  if (b <= a) return 0;
  /* The First prepend scheme needs original offsets; keep them then. */
  int al = align || t->pre.prepend == PREPEND_FIRST;
  if (load_segment(t, w, text, a, b, al) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  if (t->n_norm == 0) return encode_normalized(t, w, 0, w->nlen, type_id, al, e, err);
  size_t from = 0, pos = 0, at;
  int k;
  while ((k = find_added(t, 1, w->nb, pos, w->nlen, &at)) >= 0) {
    const Added *ad = &t->added[k];
    size_t start = at, stop = at + ad->mlen;
    pos = stop;
    if (ad->single_word && !alone_as_word(w->nb, start, stop, w->nlen)) continue;
    if (ad->lstrip) { size_t s = ws_left(w->nb, start); start = s > from ? s : from; }
    if (ad->rstrip) stop = ws_right(w->nb, stop, w->nlen);
    if (start > from && encode_normalized(t, w, from, start, type_id, al, e, err) < 0) return -1;
    if (push_token(e, ad->id, type_id, al ? w->na0[start] : 0, al ? w->na1[stop - 1] : 0, 0) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
    /* Its string is the normalized text it was cut from (HF's), kept in the work's
    ** strings: cut holds -2 - where, and the length. */
    if (grow((void **)&w->strs, &w->strs_cap, w->strs_len + (stop - start) + 1, 1) < 0 || w->strs_len > INT32_MAX / 2)
      return err_setk(err, ERR_NOMEM, "out of memory");
    memcpy(w->strs + w->strs_len, w->nb + start, stop - start);
    e->cut[2 * (e->n - 1)] = -2 - (int32_t)w->strs_len;
    e->cut[2 * (e->n - 1) + 1] = (int32_t)(stop - start);
    w->strs_len += stop - start;
    from = pos = stop;
  }
  if (from < w->nlen) return encode_normalized(t, w, from, w->nlen, type_id, al, e, err);
  return 0;
}

/* Step 1 for one sequence. */
static int encode_seq(const Tokenizer *t, const char *text, size_t len, int type_id, int align, Encoding *e, Err *err) {
  size_t bad;
  if (!tokenizer_utf8_valid(text, len, &bad)) return err_set(err, "invalid UTF-8 at byte %zu", bad);
  if (!e->work && !(e->work = calloc(1, sizeof(Work)))) return err_setk(err, ERR_NOMEM, "out of memory");
  Work *w = e->work;
  if (e->n == 0) w->strs_len = 0;   /* a new encoding (a pair's second sequence adds to the first's) */
  size_t from = 0, pos = 0, at;
  int k;
  while (t->n_raw > 0 && (k = find_added(t, 0, text, pos, len, &at)) >= 0) {
    const Added *ad = &t->added[k];
    size_t start = at, stop = at + ad->mlen;
    pos = stop;  /* matching resumes after the match itself, whatever rstrip takes */
    if (ad->single_word && !alone_as_word(text, start, stop, len)) continue;
    if (ad->lstrip) { size_t s = ws_left(text, start); start = s > from ? s : from; }
    if (ad->rstrip) stop = ws_right(text, stop, len);
    if (start > from && encode_segment(t, w, text, from, start, type_id, align, e, err) < 0) return -1;
    if (push_token(e, ad->id, type_id, (int32_t)start, (int32_t)stop, 0) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
    from = stop;
  }
  if (from < len) return encode_segment(t, w, text, from, len, type_id, align, e, err);
  return 0;
}

/* ---- post-processor ------------------------------------------------------------ */

static int apply_template(const Tokenizer *t, const TItem *items, int n_items, Encoding *e,
                          int na, int nb, Err *err) {
  /* The sequences were encoded into e as A then B; rebuild around them. */
  int total = 0;
  for (int i = 0; i < n_items; i++) {
    if (!items[i].special) total += items[i].name[0] == 'A' ? na : nb;
    else {
      int f = -1;
      for (int s = 0; s < t->n_tspec; s++) if (!strcmp(t->tspec[s].name, items[i].name)) f = s;
      if (f < 0) return err_set(err, "post_processor: template token %s has no entry in special_tokens", items[i].name);
      total += t->tspec[f].n;
    }
  }
  Encoding out = {0};
  if (enc_reserve(&out, total + 1) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  for (int i = 0; i < n_items; i++) {
    if (!items[i].special) {
      int from = items[i].name[0] == 'A' ? 0 : na, cnt = items[i].name[0] == 'A' ? na : nb;
      for (int j = from; j < from + cnt; j++) {
        out.ids[out.n] = e->ids[j];
        out.type_ids[out.n] = items[i].type_id;
        out.offsets[2 * out.n] = e->offsets[2 * j];
        out.offsets[2 * out.n + 1] = e->offsets[2 * j + 1];
        out.cut[2 * out.n] = e->cut[2 * j];
        out.cut[2 * out.n + 1] = e->cut[2 * j + 1];
        out.special[out.n] = e->special[j];
        out.n++;
      }
    } else {
      for (int s = 0; s < t->n_tspec; s++) {
        if (strcmp(t->tspec[s].name, items[i].name)) continue;
        for (int j = 0; j < t->tspec[s].n; j++) {
          out.ids[out.n] = t->tspec[s].ids[j];
          out.type_ids[out.n] = items[i].type_id;
          out.offsets[2 * out.n] = 0;
          out.offsets[2 * out.n + 1] = 0;
          out.cut[2 * out.n] = out.cut[2 * out.n + 1] = -1;
          out.special[out.n] = 1;
          out.n++;
        }
        break;
      }
    }
  }
  /* Swap the arrays in, keep the scratch. */
  void *work = e->work;
  e->work = NULL;
  encoding_free(e);
  *e = out;
  e->work = work;
  return 0;
}

const char *tokenizer_token_string(const Tokenizer *t, const Encoding *e, int i, const char *text, size_t *len) {
  if (i < 0 || i >= e->n) { *len = 0; return ""; }
  if (e->cut[2 * i] <= -2 && e->work) {   /* a normalized added token: its normalized text */
    *len = (size_t)e->cut[2 * i + 1];
    return ((const Work *)e->work)->strs + (-2 - e->cut[2 * i]);
  }
  if (text && e->cut[2 * i] >= 0 && e->cut[2 * i + 1] > e->cut[2 * i]) {
    *len = (size_t)(e->cut[2 * i + 1] - e->cut[2 * i]);
    return text + e->cut[2 * i];
  }
  const char *s = tokenizer_id_to_token(t, e->ids[i]);
  if (!s) s = "";
  *len = strlen(s);
  return s;
}

/* RobertaProcessing's (and the ByteLevel post-processor's) trim_offsets over the tokens
** [from, to) of one sequence, encoded from text: HF trims before it adds the special
** tokens, whether or not it adds them, and trims an added token by the whitespace its
** string took from the text. */
static int trim_offsets(const Tokenizer *t, Encoding *e, int from, int to, const char *text, size_t text_len, Err *err) {
  int n = to - from;
  if (!t->trim_offsets || n <= 0) return 0;
  Work *w = e->work;
  size_t bytes = 0;
  for (int i = from; i < to; i++) {
    size_t l;
    tokenizer_token_string(t, e, i, text, &l);
    bytes += l + 1;
  }
  if (grow((void **)&w->toks, &w->toks_cap, (size_t)n, sizeof *w->toks) < 0 || work_reserve(w, bytes + 8) < 0)
    return err_setk(err, ERR_NOMEM, "out of memory");
  /* NUL-terminated copies in tb (free here: the sequence is encoded). */
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    size_t l;
    const char *s = tokenizer_token_string(t, e, from + i, text, &l);
    memcpy(w->tb + at, s, l);
    w->tb[at + l] = 0;
    w->toks[i] = w->tb + at;
    at += l + 1;
  }
  bytelevel_trim_offsets(w->toks, e->offsets + 2 * from, n, t->trim_prefix_space, text, text_len);
  return 0;
}

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_special, Encoding *e, Err *err) {
  e->n = 0;
  if (encode_seq(t, text, len, 0, 1, e, err) < 0) return -1;
  if (trim_offsets(t, e, 0, e->n, text, len, err) < 0) return -1;
  if (add_special && t->has_post) return apply_template(t, t->single, t->n_single, e, e->n, 0, err);
  return 0;
}

int tokenizer_encode_pair(const Tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                          int add_special, Encoding *e, Err *err) {
  if (add_special) return tokenizer_encode_truncated(t, a, alen, b, blen, 0, TOK_TRUNC_NONE, e, err);
  e->n = 0;
  if (encode_seq(t, a, alen, 0, 1, e, err) < 0) return -1;
  int na = e->n;
  if (encode_seq(t, b, blen, 1, 1, e, err) < 0) return -1;
  return trim_offsets(t, e, 0, na, a, alen, err) < 0 || trim_offsets(t, e, na, e->n, b, blen, err) < 0 ? -1 : 0;
}

int tokenizer_added_tokens(const Tokenizer *t, int pair) {
  if (!t->has_post) return 0;
  const TItem *items = pair ? t->pair : t->single;
  int n_items = pair ? t->n_pair : t->n_single, total = 0;
  for (int i = 0; i < n_items; i++) {
    if (!items[i].special) continue;
    for (int s = 0; s < t->n_tspec; s++)
      if (!strcmp(t->tspec[s].name, items[i].name)) { total += t->tspec[s].n; break; }
  }
  return total;
}

int tokenizer_truncation_parse(const char *name, TokTruncation *out) {
  static const char *const names[] = {"do_not_truncate", "longest_first", "only_first", "only_second"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, names[i])) { *out = (TokTruncation)i; return 0; }
  return -1;
}

/* Removes tokens [from, from + count) of e (every per-token array). */
static void enc_drop(Encoding *e, int from, int count) {
  int rest = e->n - from - count;
  if (count <= 0) return;
  memmove(e->ids + from, e->ids + from + count, sizeof *e->ids * (size_t)rest);
  memmove(e->type_ids + from, e->type_ids + from + count, sizeof *e->type_ids * (size_t)rest);
  memmove(e->offsets + 2 * from, e->offsets + 2 * (from + count), sizeof *e->offsets * 2 * (size_t)rest);
  memmove(e->cut + 2 * from, e->cut + 2 * (from + count), sizeof *e->cut * 2 * (size_t)rest);
  memmove(e->special + from, e->special + from + count, sizeof *e->special * (size_t)rest);
  e->n -= count;
}

/* The lengths HF's truncation leaves to sequences of na and nb tokens (pair: nb
** counts) under target tokens (max_len with the template's tokens taken off); -1 with
** err when the strategy cannot. Measured against tokenizers 0.23.2 over every length
** up to 24 and max_len up to 22; tests/cli/test_tokenizer_pairs.sh keeps it so on real text. */
static int truncated_lengths(int na, int nb, int lazy_a, int lazy_b, int pair, int target, TokTruncation how, int *ka,
                             int *kb, Err *err) {
  *ka = na;
  *kb = nb;
  if (how == TOK_TRUNC_NONE || na + nb <= target) return 0;
  if (target == 0) { *ka = *kb = 0; return 0; }   /* HF empties both, whatever the strategy */
  int to_remove = na + nb - target;
  switch (how) {
  case TOK_TRUNC_LONGEST_FIRST: {
    if (!pair) { *ka = target; return 0; }
    /* HF's legacy rule, on the lengths at which tokenizers 0.23's lazy encoding stops
    ** (the end of the first word that reaches max_len; lazy_a, lazy_b): n1 the shorter
    ** keeps its length when the longer alone can give enough, else both get half the
    ** room, the longer the larger half, the first when they are level the smaller. */
    int swap = lazy_a > lazy_b, n1 = swap ? lazy_b : lazy_a, n2;
    n2 = n1 > target ? n1 : (n1 > target - n1 ? n1 : target - n1);
    if (n1 + n2 > target) { n1 = target / 2; n2 = n1 + target % 2; }
    *ka = swap ? n2 : n1;
    *kb = swap ? n1 : n2;
    if (*ka > na) *ka = na;
    if (*kb > nb) *kb = nb;
    return 0;
  }
  case TOK_TRUNC_ONLY_FIRST:
  case TOK_TRUNC_ONLY_SECOND: {
    int first = how == TOK_TRUNC_ONLY_FIRST;
    if (!first && !pair) return err_setk(err, ERR_BAD_INPUT, "truncation only_second: there is no second sequence to cut");
    int len = first ? na : nb;
    if (len <= to_remove)
      return err_setk(err, ERR_BAD_INPUT,
                      "truncation %s: the %s sequence has %d tokens, too few to give up the %d that do not fit", first ? "only_first" : "only_second",
                      first ? "first" : "second", len, to_remove);
    if (first) *ka = len - to_remove;
    else *kb = len - to_remove;
    return 0;
  }
  default:
    return err_setk(err, ERR_INVALID, "unknown truncation strategy %d", (int)how);
  }
}

int tokenizer_encode_truncated(const Tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                               int max_len, TokTruncation how, Encoding *e, Err *err) {
  const int pair = b != NULL, added = tokenizer_added_tokens(t, pair);
  if (how != TOK_TRUNC_NONE && max_len < added)
    return err_setk(err, ERR_BAD_INPUT, "a maximum length of %d leaves no room: the special tokens alone are %d", max_len,
                    added);
  e->n = 0;
  if (!e->work && !(e->work = calloc(1, sizeof(Work)))) return err_setk(err, ERR_NOMEM, "out of memory");
  Work *w = e->work;
  w->lazy_max = how != TOK_TRUNC_NONE ? max_len : 0;
  w->lazy_len = -1;
  w->seq_start = 0;
  int rc = encode_seq(t, a, alen, 0, 1, e, err);
  int na = e->n, lazy_a = w->lazy_len >= 0 ? w->lazy_len : na, lazy_b = 0;
  w->lazy_len = -1;
  w->seq_start = na;
  if (rc == 0 && pair) rc = encode_seq(t, b, blen, 1, 1, e, err);
  int nb = e->n - na, ka, kb;
  if (pair) lazy_b = w->lazy_len >= 0 ? w->lazy_len : nb;
  w->lazy_max = 0;
  if (rc < 0) return -1;
  if (trim_offsets(t, e, 0, na, a, alen, err) < 0 || (pair && trim_offsets(t, e, na, e->n, b, blen, err) < 0)) return -1;
  if (truncated_lengths(na, nb, lazy_a, lazy_b, pair, max_len - added, how, &ka, &kb, err) < 0) return -1;
  enc_drop(e, na + kb, nb - kb);
  enc_drop(e, ka, na - ka);
  if (!t->has_post) return 0;
  return pair ? apply_template(t, t->pair, t->n_pair, e, ka, kb, err) : apply_template(t, t->single, t->n_single, e, ka, 0, err);
}

/* Ids only: no alignments, template tokens written directly. */
static int encode_ids(const Tokenizer *t, const char *text, size_t len, int add_special, Encoding *e, Err *err) {
  e->n = 0;
  if (!add_special || !t->has_post) return encode_seq(t, text, len, 0, 0, e, err);
  /* A template without A still encodes the text first, as HF does (and fails where that
  ** fails); the full path does so. */
  int has_a = 0;
  for (int i = 0; i < t->n_single; i++) has_a |= !t->single[i].special;
  if (!has_a) return tokenizer_encode(t, text, len, 1, e, err);
  for (int i = 0; i < t->n_single; i++) {
    const TItem *it = &t->single[i];
    if (!it->special) {
      if (encode_seq(t, text, len, it->type_id, 0, e, err) < 0) return -1;
      continue;
    }
    int f = -1;
    for (int s = 0; s < t->n_tspec; s++) if (!strcmp(t->tspec[s].name, it->name)) f = s;
    if (f < 0) return err_set(err, "post_processor: template token %s has no entry in special_tokens", it->name);
    for (int j = 0; j < t->tspec[f].n; j++)
      if (push_token(e, t->tspec[f].ids[j], it->type_id, 0, 0, 1) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
  }
  return 0;
}

int tokenizer_encode_many(const Tokenizer *t, const char *const *texts, const size_t *lens, size_t n,
                          int add_special, int threads, int32_t **ids_out, size_t **starts_out, Err *err) {
  *ids_out = NULL; *starts_out = NULL;
  size_t *starts = malloc((n + 1) * sizeof *starts);
  if (!starts) return err_set(err, "out of memory");
  if (threads <= 0) threads = omp_get_num_procs();
  if ((size_t)threads > n / 64 + 1) threads = (int)(n / 64 + 1);
  /* Chunks of consecutive texts, each encoded into its own array, then joined. */
  size_t n_chunks = n == 0 ? 0 : (size_t)threads * 16;
  if (n_chunks > n) n_chunks = n;
  int32_t **chunk_ids = calloc(n_chunks + 1, sizeof *chunk_ids);
  size_t *chunk_n = calloc(n_chunks + 1, sizeof *chunk_n);
  long long first_bad = -1;
  Err first_err = {0};
  if (!chunk_ids || !chunk_n) { free(starts); free(chunk_ids); free(chunk_n); return err_set(err, "out of memory"); }
  #pragma omp parallel num_threads(threads)
  {
    Encoding e = {0};
    Err lerr;
    #pragma omp for schedule(dynamic, 1)
    for (size_t c = 0; c < n_chunks; c++) {
      size_t lo = n * c / n_chunks, hi = n * (c + 1) / n_chunks;
      size_t cap = 1024, used = 0;
      int32_t *buf = malloc(cap * sizeof *buf);
      for (size_t i = lo; i < hi; i++) {
        int bad = buf == NULL ? err_set(&lerr, "out of memory") : encode_ids(t, texts[i], lens[i], add_special, &e, &lerr);
        if (bad == 0 && used + (size_t)e.n > cap) {
          while (used + (size_t)e.n > cap) cap *= 2;
          int32_t *nb = realloc(buf, cap * sizeof *nb);
          if (nb) buf = nb; else bad = err_set(&lerr, "out of memory");
        }
        if (bad < 0) {
          #pragma omp critical(tok_err)
          if (first_bad < 0 || (long long)i < first_bad) { first_bad = (long long)i; first_err = lerr; }
          break;
        }
        if (e.n) memcpy(buf + used, e.ids, (size_t)e.n * sizeof *buf);  /* e.ids is NULL while nothing was encoded */
        used += (size_t)e.n;
        starts[i + 1] = (size_t)e.n;   /* a count for now; prefix sums below */
      }
      chunk_ids[c] = buf;
      chunk_n[c] = used;
    }
    encoding_free(&e);
  }
  int rc = 0;
  if (first_bad >= 0) {
    err_set(err, "text %lld: %s", first_bad, first_err.msg);
    rc = -1;
  }
  size_t total = 0;
  for (size_t c = 0; c < n_chunks; c++) total += chunk_n[c];
  int32_t *ids = rc == 0 ? malloc((total + 1) * sizeof *ids) : NULL;
  if (rc == 0 && !ids) rc = err_set(err, "out of memory");
  if (rc == 0) {
    size_t at = 0;
    for (size_t c = 0; c < n_chunks; c++) { memcpy(ids + at, chunk_ids[c], chunk_n[c] * sizeof *ids); at += chunk_n[c]; }
    starts[0] = 0;
    for (size_t i = 0; i < n; i++) starts[i + 1] += starts[i];
  }
  for (size_t c = 0; c < n_chunks; c++) free(chunk_ids[c]);
  free(chunk_ids); free(chunk_n);
  if (rc < 0) { free(starts); free(ids); return -1; }
  *ids_out = ids;
  *starts_out = starts;
  return 0;
}

int tokenizer_pretokenize(const Tokenizer *t, const char *text, size_t len,
                          void (*word)(void *ctx, const char *w, size_t n), void *ctx, Err *err) {
  size_t bad;
  if (!tokenizer_utf8_valid(text, len, &bad)) return err_set(err, "invalid UTF-8 at byte %zu", bad);
  if (t->pre_kind != PRE_METASPACE) return err_set(err, "training reads Metaspace tokenizers only (this one is a %s)", tokenizer_class_name(t));
  Work *w = calloc(1, sizeof *w);
  if (!w) return err_set(err, "out of memory");
  int rc = 0;
  if (load_segment(t, w, text, 0, len, 0) < 0) { rc = err_set(err, "out of memory"); goto done; }
  const Metaspace *m = &t->pre;
  if (!m->present) { if (w->nlen) word(ctx, w->nb, w->nlen); goto done; }
  size_t n = w->nlen, worst = n * m->rlen + m->rlen + 8;
  if (work_reserve(w, worst) < 0) { rc = err_set(err, "out of memory"); goto done; }
  size_t out = 0;
  /* The whole text starts at original offset 0, so First prepends like Always. */
  if (n > 0 && m->prepend != PREPEND_NEVER && w->nb[0] != ' ' && !(n >= m->rlen && !memcmp(w->nb, m->rep, m->rlen))) {
    memcpy(w->tb, m->rep, m->rlen); out = m->rlen;
  }
  for (size_t i = 0; i < n; i++) {
    if (w->nb[i] == ' ') { memcpy(w->tb + out, m->rep, m->rlen); out += m->rlen; }
    else w->tb[out++] = w->nb[i];
  }
  size_t ws = 0;
  while (ws < out) {
    size_t we = out;
    if (m->split)
      for (size_t p = ws + 1; p + m->rlen <= out; p++)
        if (w->tb[p] == m->rep[0] && !memcmp(w->tb + p, m->rep, m->rlen)) { we = p; break; }
    word(ctx, w->tb + ws, we - ws);
    ws = we;
  }
done:
  work_free(w);
  return rc;
}

/* ---- decode ------------------------------------------------------------------ */

char *tokenizer_decode(const Tokenizer *t, const int32_t *ids, int n, int skip_special, Err *err) {
  size_t len;
  return tokenizer_decode_len(t, ids, n, skip_special, &len, err);
}

char *tokenizer_decode_len(const Tokenizer *t, const int32_t *ids, int n, int skip_special, size_t *len, Err *err) {
  Buf b = {0};
  buf_put(&b, "", 0);
  /* The tokens kept, which is what the decoder sees. */
  const char **toks = malloc(((size_t)n + 1) * sizeof *toks);
  if (!toks) { free(b.p); err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  int k = 0;
  for (int i = 0; i < n; i++) {
    const char *tok = tokenizer_id_to_token(t, ids[i]);
    if (!tok || (skip_special && tokenizer_is_special(t, ids[i]))) continue;
    toks[k++] = tok;
  }
  if (t->dec_kind == DEC_WORDPIECE) wordpiece_decode(&b, toks, k, t->wp_dec_prefix, t->wp_dec_cleanup);
  else if (t->dec_kind == DEC_BYTELEVEL) bytelevel_decode(&b, toks, k);
  else
    for (int i = 0; i < k; i++) {
      if (t->dec_kind != DEC_METASPACE) {
        if (i > 0) buf_put(&b, " ", 1);
        buf_puts(&b, toks[i]);
        continue;
      }
      /* Metaspace decoder: the replacement becomes a space, except in the first
      ** token where it disappears (unless the scheme is never). */
      const Metaspace *m = &t->dec;
      int drop = i == 0 && m->prepend != PREPEND_NEVER;
      const char *p = toks[i];
      while (*p) {
        const char *hit = strstr(p, m->rep);
        if (!hit) { buf_puts(&b, p); break; }
        buf_put(&b, p, (size_t)(hit - p));
        if (!drop) buf_put(&b, " ", 1);
        p = hit + m->rlen;
      }
    }
  free(toks);
  if (b.oom) { free(b.p); err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  *len = b.len;
  return b.p;
}

size_t tokenizer_clean_up_spaces(char *s, size_t n) {
  static const char *from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
  static const char *to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
  for (int r = 0; r < 10; r++) {
    /* One pass per pattern, as Python's str.replace chain does. */
    size_t fl = strlen(from[r]), tl = strlen(to[r]);
    char *rd = s, *wr = s, *end = s + n, *hit;
    while ((hit = memmem(rd, (size_t)(end - rd), from[r], fl))) {
      size_t run = (size_t)(hit - rd);
      memmove(wr, rd, run);
      wr += run;
      memcpy(wr, to[r], tl);
      wr += tl;
      rd = hit + fl;
    }
    memmove(wr, rd, (size_t)(end - rd));
    n = (size_t)(wr - s) + (size_t)(end - rd);
  }
  s[n] = '\0';
  return n;
}

/* ---- lookups --------------------------------------------------------------------- */

const Unigram *tokenizer_model(const Tokenizer *t) { return t->model; }
TokenizerFamily tokenizer_family(const Tokenizer *t) { return t->family; }
int tokenizer_vocab_size(const Tokenizer *t) { return t->vocab_size; }

const char *tokenizer_class_name(const Tokenizer *t) {
  return t->family == TOKENIZER_WORDPIECE ? "BertTokenizer" : t->family == TOKENIZER_BPE ? "RobertaTokenizer" : "AlbertTokenizer";
}

const char *tokenizer_mask_token(const Tokenizer *t) {
  static const char *const names[] = {"[MASK]", "<mask>"};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < t->n_added; i++)
      if (t->added[i].special && !strcmp(t->added[i].content, names[k])) return names[k];
  return NULL;
}

const char *tokenizer_pad_token(const Tokenizer *t) {
  if (tokenizer_token_to_id(t, "<pad>") >= 0) return "<pad>";
  return tokenizer_token_to_id(t, "[PAD]") >= 0 ? "[PAD]" : NULL;
}

const char *tokenizer_cls_token(const Tokenizer *t) {
  const char *name = t->family == TOKENIZER_BPE ? "<s>" : "[CLS]";
  return tokenizer_token_to_id(t, name) >= 0 ? name : NULL;
}

const char *tokenizer_sep_token(const Tokenizer *t) {
  const char *name = t->family == TOKENIZER_BPE ? "</s>" : "[SEP]";
  return tokenizer_token_to_id(t, name) >= 0 ? name : NULL;
}

int tokenizer_token_to_id(const Tokenizer *t, const char *token) {
  for (int i = 0; i < t->n_added; i++) if (!strcmp(t->added[i].content, token)) return t->added[i].id;
  return model_token_id(t, token, strlen(token));
}

const char *tokenizer_id_to_token(const Tokenizer *t, int id) {
  if (id < 0 || id >= t->vocab_size) return NULL;
  if (t->added_of_id[id] >= 0) {
    /* HF's id-to-token map holds a normalized added token as normalized ("CAFE" under
    ** lowercasing decodes to "cafe"; its content stays "CAFE" in the file). */
    const Added *a = &t->added[t->added_of_id[id]];
    return a->normalized && a->mlen > 0 ? a->match : a->content;
  }
  return model_token(t, id);
}

const char *tokenizer_added_content(const Tokenizer *t, int id) {
  if (id < 0 || id >= t->vocab_size || t->added_of_id[id] < 0) return NULL;
  return t->added[t->added_of_id[id]].content;
}

int tokenizer_is_special(const Tokenizer *t, int id) {
  if (id < 0 || id >= t->vocab_size || t->added_of_id[id] < 0) return 0;
  return t->added[t->added_of_id[id]].special;
}

/* ---- construction ------------------------------------------------------------------ */

void tokenizer_free(Tokenizer *t) {
  if (!t) return;
  free(t->version);
  unigram_free(t->model);
  free(t->score_text);
  free(t->score_at);
  wordpiece_free(t->wp);
  bpe_free(t->bpe);
  if (t->root) json_decref(t->root);
  free(t->wp_dec_prefix);
  for (int i = 0; i < t->n_added; i++) { free(t->added[i].content); free(t->added[i].match); }
  free(t->added);
  for (int i = 0; i < t->n_repl; i++) { free(t->repl[i].pat); free(t->repl[i].content); }
  free(t->repl);
  for (int i = 0; i < t->n_single; i++) free(t->single[i].name);
  for (int i = 0; i < t->n_pair; i++) free(t->pair[i].name);
  free(t->single); free(t->pair);
  for (int i = 0; i < t->n_tspec; i++) {
    free(t->tspec[i].name); free(t->tspec[i].ids);
    for (int j = 0; j < t->tspec[i].n; j++) free(t->tspec[i].tokens[j]);
    free(t->tspec[i].tokens);
  }
  free(t->tspec);
  free(t->added_of_id);
  free(t->by_match[0]);
  free(t->by_match[1]);
  free(t);
}

/* by_match's order: match bytes (a prefix first), then index in added. */
typedef struct MatchKey { const char *match; size_t mlen; int index; } MatchKey;
static int cmp_match_key(const void *x, const void *y) {
  const MatchKey *a = x, *b = y;
  size_t n = a->mlen < b->mlen ? a->mlen : b->mlen;
  int c = memcmp(a->match, b->match, n);
  if (c) return c;
  if (a->mlen != b->mlen) return a->mlen < b->mlen ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* Ids of added tokens (a model piece's id when the content is one, else the next
** free id, as HF's AddedVocabulary assigns them), the match strings, the lookup
** tables. HF counts from the vocabulary's number of entries, not from its highest id
** + 1: where its ids have gaps, that count is some token's id, and a file whose added
** token would take it is refused (HF gives both the one id). */
static int finish(Tokenizer *t, Err *err) {
  static unsigned long serials;
  t->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
  int entries = 0, size = model_size(t);
  for (int id = 0; id < size; id++) entries += model_token(t, id) != NULL;
  int next = entries;
  for (int i = 0; i < t->n_added; i++) {
    Added *a = &t->added[i];
    int prev = -1;
    for (int j = 0; j < i; j++) if (!strcmp(t->added[j].content, a->content)) prev = t->added[j].id;
    int mid = model_token_id(t, a->content, strlen(a->content));
    if (prev < 0 && mid < 0 && next < size && model_token(t, next))
      return err_set(err, "added token '%.60s' would take id %d, as HF numbers tokens after the vocabulary's %d entries, "
                     "but the vocabulary's ids have gaps and '%.60s' has %d", a->content, next, entries, model_token(t, next), next);
    a->id = prev >= 0 ? prev : mid >= 0 ? mid : next++;
    if (a->id >= next) next = a->id + 1;
    /* Normalized added tokens are searched for in their normalised form. */
    Work *w = calloc(1, sizeof *w);
    if (!w) return err_set(err, "out of memory");
    if (a->normalized) {
      if (load_segment(t, w, a->content, 0, strlen(a->content), 0) < 0) { work_free(w); return err_set(err, "out of memory"); }
      a->match = xstrndup(w->nb, w->nlen);
      a->mlen = w->nlen;
    } else {
      a->match = xstrndup(a->content, strlen(a->content));
      a->mlen = strlen(a->content);
    }
    work_free(w);
    if (!a->match) return err_set(err, "out of memory");
    if (a->mlen > 0) {
      if (a->normalized) { t->first_norm[(unsigned char)a->match[0]] = 1; t->n_norm++; }
      else { t->first_raw[(unsigned char)a->match[0]] = 1; t->n_raw++; }
    }
  }
  for (int f = 0; f < 2; f++) {
    int count = f ? t->n_norm : t->n_raw, k = 0;
    MatchKey *keys = malloc(((size_t)count + 1) * sizeof *keys);
    if (!keys || !(t->by_match[f] = malloc(((size_t)count + 1) * sizeof *t->by_match[f]))) {
      free(keys);
      return err_set(err, "out of memory");
    }
    for (int i = 0; i < t->n_added; i++)
      if (t->added[i].mlen > 0 && t->added[i].normalized == f) keys[k++] = (MatchKey){t->added[i].match, t->added[i].mlen, i};
    qsort(keys, (size_t)count, sizeof *keys, cmp_match_key);
    for (int i = 0; i < count; i++) t->by_match[f][i] = keys[i].index;
    free(keys);
  }
  /* Ids run to the model's highest + 1 where its ids have gaps past the added tokens'. */
  if (next < size) next = size;
  t->vocab_size = next;
  t->added_of_id = malloc(((size_t)next + 1) * sizeof *t->added_of_id);
  if (!t->added_of_id) return err_set(err, "out of memory");
  for (int i = 0; i < next; i++) t->added_of_id[i] = -1;
  for (int i = 0; i < t->n_added; i++) t->added_of_id[t->added[i].id] = i;
  for (int i = 0; i < t->n_tspec; i++)
    for (int j = 0; j < t->tspec[i].n; j++)
      if (t->tspec[i].ids[j] < 0 || t->tspec[i].ids[j] >= next)
        return err_set(err, "post_processor: special token %s has id %d outside the vocabulary", t->tspec[i].name, t->tspec[i].ids[j]);
  return 0;
}

/* The template of BertProcessing ("CLS $A SEP" / "CLS $A SEP $B:1 SEP:1") or, with
** roberta, RobertaProcessing's ("CLS $A SEP" / "CLS $A SEP SEP $B SEP", type ids all 0,
** as HF gives them). */
static int set_template(Tokenizer *t, const char *cls_tok, int cls, const char *sep_tok, int sep, int roberta) {
  t->has_post = 1;
  t->n_single = 3; t->n_pair = roberta ? 6 : 5;
  t->single = calloc(3, sizeof *t->single);
  t->pair = calloc((size_t)t->n_pair, sizeof *t->pair);
  t->tspec = calloc(2, sizeof *t->tspec);
  if (!t->single || !t->pair || !t->tspec) return -1;
  const char *s_names[] = {cls_tok, "A", sep_tok};
  const char *p_bert[] = {cls_tok, "A", sep_tok, "B", sep_tok}, *p_rob[] = {cls_tok, "A", sep_tok, sep_tok, "B", sep_tok};
  const char *const *p_names = roberta ? p_rob : p_bert;
  for (int i = 0; i < 3; i++) { t->single[i].special = i != 1; t->single[i].name = strdup(s_names[i]); if (!t->single[i].name) return -1; }
  for (int i = 0; i < t->n_pair; i++) {
    int is_seq = !strcmp(p_names[i], "A") || !strcmp(p_names[i], "B");
    t->pair[i].special = !is_seq;
    t->pair[i].type_id = roberta ? 0 : i >= 3;
    t->pair[i].name = strdup(p_names[i]);
    if (!t->pair[i].name) return -1;
  }
  t->n_tspec = 2;
  const char *names[] = {cls_tok, sep_tok};
  int ids[] = {cls, sep};
  for (int i = 0; i < 2; i++) {
    TSpecial *sp = &t->tspec[i];
    sp->name = strdup(names[i]);
    sp->n = 1;
    sp->ids = malloc(sizeof *sp->ids);
    sp->tokens = malloc(sizeof *sp->tokens);
    if (!sp->name || !sp->ids || !sp->tokens) return -1;
    sp->ids[0] = ids[i];
    sp->tokens[0] = strdup(names[i]);
    if (!sp->tokens[0]) return -1;
  }
  return 0;
}

static void set_metaspace(Metaspace *m) {
  m->present = 1;
  memcpy(m->rep, "\xE2\x96\x81", 4);
  m->rlen = 3;
  m->prepend = PREPEND_ALWAYS;
  m->split = 1;
}

Tokenizer *tokenizer_new_seed(int n, const char *const *pieces, const double *scores, int unk_id, int n_special, Err *err) {
  if (n_special < 0 || n_special > n) { err_set(err, "tokenizer: %d special tokens out of %d pieces", n_special, n); return NULL; }
  Tokenizer *t = calloc(1, sizeof *t);
  if (!t) { err_set(err, "out of memory"); return NULL; }
  t->version = strdup("1.0");
  t->model = unigram_new(n, pieces, scores, unk_id, err);
  if (!t->model || !t->version) { tokenizer_free(t); return NULL; }
  t->byte_fallback_written = 1;
  t->normalizer = 2;
  t->n_repl = 2;
  t->repl = calloc(2, sizeof *t->repl);
  if (!t->repl) goto oom;
  const char *pats[] = {"``", "''"};
  for (int i = 0; i < 2; i++) {
    t->repl[i].pat = strdup(pats[i]); t->repl[i].plen = 2;
    t->repl[i].content = strdup("\""); t->repl[i].clen = 1;
    if (!t->repl[i].pat || !t->repl[i].content) goto oom;
  }
  set_metaspace(&t->pre);
  set_metaspace(&t->dec);
  t->dec_kind = DEC_METASPACE;
  t->added = calloc((size_t)n_special + 1, sizeof *t->added);
  if (!t->added) goto oom;
  int cls = -1, sep = -1;
  for (int i = 0; i < n_special; i++) {
    Added *a = &t->added[t->n_added++];
    a->content = strdup(pieces[i]);
    if (!a->content) goto oom;
    a->special = a->special_json = 1;
    a->lstrip = !strcmp(pieces[i], "[MASK]");
    if (!strcmp(pieces[i], "[CLS]")) cls = i;
    if (!strcmp(pieces[i], "[SEP]")) sep = i;
  }
  if (cls >= 0 && sep >= 0 && set_template(t, "[CLS]", cls, "[SEP]", sep, 0) < 0) goto oom;
  if (finish(t, err) < 0) { tokenizer_free(t); return NULL; }
  return t;
oom:
  tokenizer_free(t);
  err_set(err, "out of memory");
  return NULL;
}

/* ---- JSON in ------------------------------------------------------------------------- */

static int get_bool(json_t *o, const char *key, int dflt, int *out, const char *where, Err *err) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) { *out = dflt; return 0; }
  if (!json_is_boolean(v)) return err_set(err, "%s: \"%s\" is not a boolean", where, key);
  *out = json_is_true(v);
  return 0;
}

static int parse_metaspace(json_t *o, Metaspace *m, const char *where, Err *err) {
  json_t *rep = json_object_get(o, "replacement");
  const char *r = rep && json_is_string(rep) ? json_string_value(rep) : "\xE2\x96\x81";
  size_t rl = strlen(r);
  if (rl == 0 || rl > 4 || u8len((unsigned char)r[0]) != rl || !tokenizer_utf8_valid(r, rl, NULL))
    return err_set(err, "%s: Metaspace replacement must be one character", where);
  memcpy(m->rep, r, rl + 1);
  m->rlen = rl;
  m->present = 1;
  json_t *ps = json_object_get(o, "prepend_scheme");
  if (ps && json_is_string(ps)) {
    const char *s = json_string_value(ps);
    if (!strcmp(s, "always")) m->prepend = PREPEND_ALWAYS;
    else if (!strcmp(s, "first")) m->prepend = PREPEND_FIRST;
    else if (!strcmp(s, "never")) m->prepend = PREPEND_NEVER;
    else return err_set(err, "%s: unknown Metaspace prepend_scheme \"%s\"", where, s);
  } else {
    /* Legacy files say add_prefix_space instead (true unless stated). */
    int aps;
    if (get_bool(o, "add_prefix_space", 1, &aps, where, err) < 0) return -1;
    m->prepend = aps ? PREPEND_ALWAYS : PREPEND_NEVER;
  }
  if (get_bool(o, "split", 1, &m->split, where, err) < 0) return -1;
  return 0;
}

static const char *type_of(json_t *o) {
  json_t *ty = json_is_object(o) ? json_object_get(o, "type") : NULL;
  return ty && json_is_string(ty) ? json_string_value(ty) : NULL;
}

static int add_replace(Tokenizer *t, json_t *o, Err *err) {
  json_t *pat = json_object_get(o, "pattern"), *content = json_object_get(o, "content");
  if (!json_is_object(pat)) return err_set(err, "normalizer: Replace without a pattern");
  json_t *s = json_object_get(pat, "String");
  if (!s) {
    if (json_object_get(pat, "Regex")) return err_set(err, "normalizer: Replace with a Regex pattern is not supported (only String patterns)");
    return err_set(err, "normalizer: Replace pattern is neither String nor Regex");
  }
  if (!json_is_string(s) || !json_is_string(content)) return err_set(err, "normalizer: Replace pattern/content must be strings");
  /* HF inserts the content between every two characters for an empty pattern: refused
  ** rather than ignored (this normalizer replaces what it finds, and finds nothing). */
  if (json_string_length(s) == 0) return err_set(err, "normalizer: Replace with an empty pattern is not supported");
  Replace *r = realloc(t->repl, ((size_t)t->n_repl + 1) * sizeof *r);
  if (!r) return err_set(err, "out of memory");
  t->repl = r;
  r = &t->repl[t->n_repl];
  r->pat = strdup(json_string_value(s));
  r->content = strdup(json_string_value(content));
  if (!r->pat || !r->content) { free(r->pat); free(r->content); return err_set(err, "out of memory"); }
  r->plen = strlen(r->pat);
  r->clen = strlen(r->content);
  t->n_repl++;
  return 0;
}

static int parse_bert_normalizer(Tokenizer *t, json_t *o, Err *err) {
  BertNormalizer *bn = &t->bn;
  if (get_bool(o, "clean_text", 1, &bn->clean_text, "normalizer", err) < 0 ||
      get_bool(o, "handle_chinese_chars", 1, &bn->handle_chinese_chars, "normalizer", err) < 0 ||
      get_bool(o, "lowercase", 1, &bn->lowercase, "normalizer", err) < 0) return -1;
  json_t *sa = json_object_get(o, "strip_accents");
  if (!sa || json_is_null(sa)) bn->strip_accents = -1;   /* unset: follows lowercase */
  else if (json_is_boolean(sa)) bn->strip_accents = json_is_true(sa);
  else return err_set(err, "normalizer: \"strip_accents\" is neither a boolean nor null");
  t->bert_norm = 1;
  return 0;
}

static int parse_normalizer(Tokenizer *t, json_t *o, int depth, Err *err) {
  const char *ty = type_of(o);
  if (!ty) return err_set(err, "normalizer: missing \"type\"");
  if (!strcmp(ty, "Replace")) return add_replace(t, o, err);
  if (!strcmp(ty, "BertNormalizer") && depth == 0) return parse_bert_normalizer(t, o, err);
  if (!strcmp(ty, "Sequence") && depth == 0) {
    json_t *list = json_object_get(o, "normalizers");
    if (!json_is_array(list)) return err_set(err, "normalizer: Sequence without \"normalizers\"");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
      const char *ity = type_of(v);
      if (!ity || strcmp(ity, "Replace")) return err_set(err, "normalizer %s (in a Sequence) is not supported: a Sequence may hold Replace only", ity ? ity : "(no type)");
      if (add_replace(t, v, err) < 0) return -1;
    }
    return 0;
  }
  return err_set(err, "normalizer %s is not supported: maskd implements BertNormalizer, Replace and a Sequence of Replace", ty);
}

static int parse_template_items(json_t *arr, TItem **out, int *n, const char *which, Err *err) {
  if (!json_is_array(arr)) return err_set(err, "post_processor: TemplateProcessing \"%s\" is not a list", which);
  size_t cnt = json_array_size(arr);
  *out = calloc(cnt + 1, sizeof **out);
  if (!*out) return err_set(err, "out of memory");
  for (size_t i = 0; i < cnt; i++) {
    json_t *it = json_array_get(arr, i), *inner;
    TItem *ti = &(*out)[i];
    if ((inner = json_object_get(it, "SpecialToken"))) ti->special = 1;
    else if (!(inner = json_object_get(it, "Sequence"))) return err_set(err, "post_processor: bad item in \"%s\"", which);
    json_t *id = json_object_get(inner, "id"), *tid = json_object_get(inner, "type_id");
    if (!json_is_string(id)) return err_set(err, "post_processor: item without id in \"%s\"", which);
    ti->name = strdup(json_string_value(id));
    if (!ti->name) return err_set(err, "out of memory");
    (*n)++;
    ti->type_id = json_is_integer(tid) ? (int)json_integer_value(tid) : 0;
    if (!ti->special && strcmp(ti->name, "A") && strcmp(ti->name, "B"))
      return err_set(err, "post_processor: sequence id must be A or B, not %s", ti->name);
  }
  return 0;
}

/* BertProcessing's / RobertaProcessing's ["token", id] pair. */
static int token_pair(json_t *o, const char *key, const char **tok, int *id, Err *err) {
  json_t *v = json_object_get(o, key), *a = json_array_get(v, 0), *b = json_array_get(v, 1);
  if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(a) || !json_is_integer(b) ||
      json_integer_value(b) < 0 || json_integer_value(b) > INT32_MAX)
    return err_set(err, "post_processor: \"%s\" must be [token, id]", key);
  *tok = json_string_value(a);
  *id = (int)json_integer_value(b);
  return 0;
}

static int parse_post(Tokenizer *t, json_t *o, Err *err) {
  const char *ty = type_of(o);
  if (!ty) return err_set(err, "post_processor: missing \"type\"");
  int bert = !strcmp(ty, "BertProcessing"), roberta = !strcmp(ty, "RobertaProcessing");
  if (bert || roberta) {
    const char *cls, *sep;
    int cls_id, sep_id;
    if (token_pair(o, "cls", &cls, &cls_id, err) < 0 || token_pair(o, "sep", &sep, &sep_id, err) < 0) return -1;
    if (roberta && (get_bool(o, "trim_offsets", 1, &t->trim_offsets, "post_processor", err) < 0 ||
                    get_bool(o, "add_prefix_space", 1, &t->trim_prefix_space, "post_processor", err) < 0)) return -1;
    if (!strcmp(cls, "A") || !strcmp(cls, "B") || !strcmp(sep, "A") || !strcmp(sep, "B") || !strcmp(cls, sep))
      return err_set(err, "post_processor: %s with cls %s and sep %s is not supported", ty, cls, sep);
    if (set_template(t, cls, cls_id, sep, sep_id, roberta) < 0) return err_setk(err, ERR_NOMEM, "out of memory");
    return 0;
  }
  if (!strcmp(ty, "ByteLevel")) {
    /* Only trims offsets (it adds no tokens). */
    if (get_bool(o, "trim_offsets", 1, &t->trim_offsets, "post_processor", err) < 0 ||
        get_bool(o, "add_prefix_space", 1, &t->trim_prefix_space, "post_processor", err) < 0) return -1;
    return 0;
  }
  if (strcmp(ty, "TemplateProcessing"))
    return err_set(err, "post_processor %s is not supported: maskd implements TemplateProcessing, BertProcessing, RobertaProcessing and ByteLevel", ty);
  t->has_post = 1;
  if (parse_template_items(json_object_get(o, "single"), &t->single, &t->n_single, "single", err) < 0) return -1;
  if (parse_template_items(json_object_get(o, "pair"), &t->pair, &t->n_pair, "pair", err) < 0) return -1;
  /* One text has no B: HF indexes a second encoding that is not there and panics. */
  for (int i = 0; i < t->n_single; i++)
    if (!t->single[i].special && !strcmp(t->single[i].name, "B"))
      return err_set(err, "post_processor: the single template uses sequence B, which one text does not have");
  json_t *sp = json_object_get(o, "special_tokens");
  if (!json_is_object(sp)) return err_set(err, "post_processor: TemplateProcessing without special_tokens");
  t->tspec = calloc(json_object_size(sp) + 1, sizeof *t->tspec);
  if (!t->tspec) return err_set(err, "out of memory");
  const char *key;
  json_t *v;
  json_object_foreach(sp, key, v) {
    TSpecial *s = &t->tspec[t->n_tspec];
    json_t *id = json_object_get(v, "id"), *ids = json_object_get(v, "ids"), *toks = json_object_get(v, "tokens");
    if (!json_is_string(id) || !json_is_array(ids) || !json_is_array(toks) || json_array_size(ids) != json_array_size(toks))
      return err_set(err, "post_processor: bad special_tokens entry %s", key);
    /* HF finds an entry by its key and writes its id back; maskd finds it by id, so the
    ** two must agree (two entries with one id made the template count one entry and
    ** copy the other). */
    if (strcmp(json_string_value(id), key))
      return err_set(err, "post_processor: special_tokens entry %s has the id %s (they must be equal)", key, json_string_value(id));
    s->name = strdup(json_string_value(id));
    size_t n = json_array_size(ids);
    s->ids = calloc(n + 1, sizeof *s->ids);
    s->tokens = calloc(n + 1, sizeof *s->tokens);
    t->n_tspec++;
    if (!s->name || !s->ids || !s->tokens) return err_set(err, "out of memory");
    for (size_t j = 0; j < n; j++) {
      json_t *a = json_array_get(ids, j), *b = json_array_get(toks, j);
      if (!json_is_integer(a) || json_integer_value(a) < 0 || json_integer_value(a) > INT32_MAX || !json_is_string(b))
        return err_set(err, "post_processor: bad special_tokens entry %s", key);
      s->ids[j] = (int32_t)json_integer_value(a);
      s->tokens[j] = strdup(json_string_value(b));
      s->n++;
      if (!s->tokens[j]) return err_set(err, "out of memory");
    }
  }
  return 0;
}

/* The model; text[0..len) is the JSON o came from, whose scores are read again from
** their own digits as HF reads them (vocab_scores.h). */
static int parse_model(Tokenizer *t, json_t *o, const char *text, size_t len, Err *err) {
  if (!json_is_object(o)) return err_set(err, "model: missing");
  const char *ty = type_of(o);
  if (!ty) return err_set(err, "model: missing \"type\"");
  if (!strcmp(ty, "WordPiece")) {
    t->family = TOKENIZER_WORDPIECE;
    t->wp = wordpiece_from_json(o, err);
    return t->wp ? 0 : err_prefix(err, "model");
  }
  if (!strcmp(ty, "BPE")) {
    t->family = TOKENIZER_BPE;
    t->bpe = bpe_from_json(o, err);
    return t->bpe ? 0 : err_prefix(err, "model");
  }
  if (strcmp(ty, "Unigram")) return err_set(err, "model %s is not supported: maskd implements Unigram, WordPiece and BPE", ty);
  json_t *bf = json_object_get(o, "byte_fallback");
  t->byte_fallback_written = bf != NULL;
  if (bf && !json_is_boolean(bf)) return err_set(err, "model: byte_fallback is not a boolean");
  if (bf && json_is_true(bf)) return err_set(err, "model: Unigram with byte_fallback true is not supported");
  json_t *unk = json_object_get(o, "unk_id");
  int unk_id = -1;
  if (unk && !json_is_null(unk)) {
    if (!json_is_integer(unk)) return err_set(err, "model: unk_id is not an integer");
    unk_id = (int)json_integer_value(unk);
  }
  json_t *vocab = json_object_get(o, "vocab");
  if (!json_is_array(vocab)) return err_set(err, "model: vocab is not a list");
  size_t n = json_array_size(vocab);
  if (n > 100000000) return err_set(err, "model: vocab too large");
  const char **pieces = malloc((n + 1) * sizeof *pieces);
  double *scores = malloc((n + 1) * sizeof *scores);
  size_t *spans = malloc((2 * n + 1) * sizeof *spans);
  if (!pieces || !scores || !spans) { free(pieces); free(scores); free(spans); return err_set(err, "out of memory"); }
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(vocab, i);
    json_t *p = json_array_get(e, 0), *s = json_array_get(e, 1);
    if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) || !json_is_number(s)) {
      free(pieces); free(scores); free(spans);
      return err_set(err, "model: vocab entry %zu is not [piece, score]", i);
    }
    pieces[i] = json_string_value(p);
  }
  if (vocab_scores_read(text, len, scores, spans, n)) {
    free(pieces); free(scores); free(spans);
    return err_set(err, "model: a vocab score is out of range, or the vocab's text cannot be read");
  }
  /* Each score's text, to be written back as it was read. */
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += spans[2 * i + 1];
  t->score_text = malloc(total + 1);
  t->score_at = malloc((n + 1) * sizeof *t->score_at);
  if (!t->score_text || !t->score_at) { free(pieces); free(scores); free(spans); return err_set(err, "out of memory"); }
  total = 0;
  for (size_t i = 0; i < n; i++) {
    t->score_at[i] = total;
    memcpy(t->score_text + total, text + spans[2 * i], spans[2 * i + 1]);
    total += spans[2 * i + 1];
  }
  t->score_at[n] = total;
  free(spans);
  if (unk_id >= (int)n || unk_id < -1) { free(pieces); free(scores); return err_set(err, "model: unk_id %d outside the vocab of %zu", unk_id, n); }
  t->model = unigram_new((int)n, pieces, scores, unk_id, err);
  free(pieces); free(scores);
  return t->model ? 0 : err_prefix(err, "model");
}

/* 0 when o's key is absent, null or a non-negative integer; else -1 with err naming
** the key in where. */
static int check_count(json_t *o, const char *key, const char *where, Err *err) {
  json_t *v = json_object_get(o, key);
  if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0))
    return err_set(err, "%s: \"%s\" is not a non-negative integer", where, key);
  return 0;
}

/* 0 when o's key is absent or a string; else -1 with err naming the key in where. */
static int check_string(json_t *o, const char *key, const char *where, Err *err) {
  json_t *v = json_object_get(o, key);
  if (v && !json_is_string(v)) return err_set(err, "%s: \"%s\" is not a string", where, key);
  return 0;
}

/* "truncation" and "padding": null, or objects whose fields have the types HF's
** tokenizers reads them with. Their values are ignored: maskd applies its own length
** limit (the model's positions, a command's --max-length or --truncation) and pads
** batches itself, as transformers does, which sets both on the backend for each call
** from its own arguments; Hub folders such as sentence-transformers' BERT checkpoints
** carry them set. A tokenizer.json maskd writes has both null. Values HF would not
** read (a string where an object is expected) are still refused. */
static int check_ignored_settings(json_t *root, Err *err) {
  json_t *v = json_object_get(root, "truncation");
  if (v && !json_is_null(v)) {
    if (!json_is_object(v)) return err_set(err, "truncation: expected null or an object");
    if (check_count(v, "max_length", "truncation", err) < 0 || check_count(v, "stride", "truncation", err) < 0 ||
        check_string(v, "strategy", "truncation", err) < 0 || check_string(v, "direction", "truncation", err) < 0)
      return -1;
  }
  v = json_object_get(root, "padding");
  if (v && !json_is_null(v)) {
    if (!json_is_object(v)) return err_set(err, "padding: expected null or an object");
    json_t *st = json_object_get(v, "strategy");
    /* "BatchLongest", or {"Fixed": N} */
    if (st && !json_is_string(st) &&
        !(json_is_object(st) && json_object_size(st) == 1 && json_is_integer(json_object_get(st, "Fixed")) &&
          json_integer_value(json_object_get(st, "Fixed")) >= 0))
      return err_set(err, "padding: \"strategy\" is not \"BatchLongest\" nor {\"Fixed\": N}");
    if (check_string(v, "direction", "padding", err) < 0 || check_count(v, "pad_to_multiple_of", "padding", err) < 0 ||
        check_count(v, "pad_id", "padding", err) < 0 || check_count(v, "pad_type_id", "padding", err) < 0 ||
        check_string(v, "pad_token", "padding", err) < 0)
      return -1;
  }
  return 0;
}

static Tokenizer *from_root(json_t *root, const char *text, size_t len, Err *err) {
  Tokenizer *t = calloc(1, sizeof *t);
  if (!t) { err_set(err, "out of memory"); return NULL; }
  if (!json_is_object(root)) { err_set(err, "not a JSON object"); goto fail; }
  json_t *v = json_object_get(root, "version");
  t->version = strdup(v && json_is_string(v) ? json_string_value(v) : "1.0");
  if (check_ignored_settings(root, err) < 0) goto fail;
  if (parse_model(t, json_object_get(root, "model"), text, len, err) < 0) goto fail;
  v = json_object_get(root, "normalizer");
  if (v && !json_is_null(v)) {
    t->normalizer = !strcmp(type_of(v) ? type_of(v) : "", "Sequence") ? 2 : 1;
    if (parse_normalizer(t, v, 0, err) < 0) goto fail;
  }
  v = json_object_get(root, "pre_tokenizer");
  if (v && !json_is_null(v)) {
    const char *ty = type_of(v);
    if (ty && !strcmp(ty, "Metaspace")) {
      if (parse_metaspace(v, &t->pre, "pre_tokenizer", err) < 0) goto fail;
    } else if (ty && !strcmp(ty, "BertPreTokenizer")) {
      t->pre_kind = PRE_BERT;
    } else if (ty && !strcmp(ty, "ByteLevel")) {
      int regex = 1;
      t->pre_kind = PRE_BYTELEVEL;
      if (get_bool(v, "add_prefix_space", 1, &t->bl_prefix_space, "pre_tokenizer", err) < 0 ||
          get_bool(v, "use_regex", 1, &regex, "pre_tokenizer", err) < 0) goto fail;
      if (!regex) { err_set(err, "pre_tokenizer: ByteLevel with use_regex false is not supported"); goto fail; }
    } else {
      err_set(err, "pre_tokenizer %s is not supported: maskd implements Metaspace, BertPreTokenizer and ByteLevel", ty ? ty : "(no type)");
      goto fail;
    }
  }
  /* maskd's BPE maps a word's bytes to the byte-level alphabet itself, so the two come
  ** together: BPE without ByteLevel, or another model behind ByteLevel, would see the
  ** wrong characters. */
  if (t->family == TOKENIZER_BPE && t->pre_kind != PRE_BYTELEVEL) {
    err_set(err, "model BPE without the ByteLevel pre-tokenizer is not supported (maskd implements byte-level BPE, as RoBERTa uses it)");
    goto fail;
  }
  if (t->family != TOKENIZER_BPE && t->pre_kind == PRE_BYTELEVEL) {
    err_set(err, "pre_tokenizer ByteLevel with a %s model is not supported (maskd runs ByteLevel with byte-level BPE only)",
            t->family == TOKENIZER_WORDPIECE ? "WordPiece" : "Unigram");
    goto fail;
  }
  v = json_object_get(root, "decoder");
  if (v && !json_is_null(v)) {
    const char *ty = type_of(v);
    if (ty && !strcmp(ty, "Metaspace")) {
      t->dec_kind = DEC_METASPACE;
      if (parse_metaspace(v, &t->dec, "decoder", err) < 0) goto fail;
    } else if (ty && !strcmp(ty, "WordPiece")) {
      json_t *pre = json_object_get(v, "prefix");
      t->dec_kind = DEC_WORDPIECE;
      if (pre && !json_is_string(pre)) { err_set(err, "decoder: WordPiece prefix is not a string"); goto fail; }
      if (!(t->wp_dec_prefix = strdup(pre ? json_string_value(pre) : "##"))) { err_set(err, "out of memory"); goto fail; }
      if (get_bool(v, "cleanup", 1, &t->wp_dec_cleanup, "decoder", err) < 0) goto fail;
    } else if (ty && !strcmp(ty, "ByteLevel")) {
      t->dec_kind = DEC_BYTELEVEL;
    } else {
      err_set(err, "decoder %s is not supported: maskd implements Metaspace, WordPiece and ByteLevel", ty ? ty : "(no type)");
      goto fail;
    }
  }
  v = json_object_get(root, "post_processor");
  if (v && !json_is_null(v) && parse_post(t, v, err) < 0) goto fail;
  v = json_object_get(root, "added_tokens");
  if (v && !json_is_null(v)) {
    if (!json_is_array(v)) { err_set(err, "added_tokens is not a list"); goto fail; }
    t->added = calloc(json_array_size(v) + 1, sizeof *t->added);
    if (!t->added) { err_set(err, "out of memory"); goto fail; }
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
      json_t *c = json_object_get(a, "content");
      if (!json_is_string(c) || json_string_length(c) == 0) { err_set(err, "added_tokens[%zu]: no content", i); goto fail; }
      Added *ad = &t->added[t->n_added];
      int sw = 0, ls = 0, rs = 0, no = 0, sp = 0;
      if (get_bool(a, "single_word", 0, &sw, "added_tokens", err) < 0 || get_bool(a, "lstrip", 0, &ls, "added_tokens", err) < 0 ||
          get_bool(a, "rstrip", 0, &rs, "added_tokens", err) < 0 || get_bool(a, "special", 0, &sp, "added_tokens", err) < 0 ||
          get_bool(a, "normalized", !sp, &no, "added_tokens", err) < 0) goto fail;
      /* A repeated content is one token, as in HF's AddedVocabulary: the last
      ** definition's single_word and strip flags and what it writes back, special if
      ** any said so, matched where the first definition put it. */
      int dup = -1;
      for (int j = 0; j < t->n_added; j++) if (!strcmp(t->added[j].content, json_string_value(c))) dup = j;
      if (dup >= 0) {
        Added *d = &t->added[dup];
        d->single_word = (unsigned char)sw; d->lstrip = (unsigned char)ls; d->rstrip = (unsigned char)rs;
        d->special |= (unsigned char)sp;
        d->special_json = (unsigned char)sp; d->normalized_json = (unsigned char)no;
        continue;
      }
      ad->special_json = (unsigned char)sp; ad->normalized_json = (unsigned char)no;
      ad->content = strdup(json_string_value(c));
      if (!ad->content) { err_set(err, "out of memory"); goto fail; }
      ad->single_word = (unsigned char)sw; ad->lstrip = (unsigned char)ls; ad->rstrip = (unsigned char)rs;
      ad->normalized = (unsigned char)no; ad->special = (unsigned char)sp;
      t->n_added++;
    }
  }
  /* Every key must be one we understand (an unknown stage must not be ignored). */
  const char *key;
  json_object_foreach(root, key, v) {
    static const char *known[] = {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"};
    int ok = 0;
    for (size_t k = 0; k < sizeof known / sizeof *known; k++) ok |= !strcmp(key, known[k]);
    if (!ok) { err_set(err, "unknown top-level key \"%s\"", key); goto fail; }
  }
  if (!t->version) { err_set(err, "out of memory"); goto fail; }
  if (finish(t, err) < 0) goto fail;
  /* Unigram tokenizers are written back from their parts (byte for byte as HF would);
  ** the other families as read. */
  if (t->family != TOKENIZER_UNIGRAM) t->root = json_incref(root);
  return t;
fail:
  tokenizer_free(t);
  return NULL;
}

Tokenizer *tokenizer_from_json(const char *text, size_t len, Err *err) {
  json_error_t je;
  json_t *root = json_loadb(text, len, 0, &je);
  if (!root) { err_setk(err, ERR_BAD_INPUT, "invalid JSON at line %d column %d: %s", je.line, je.column, json_error_message(&je)); return NULL; }
  Tokenizer *t = from_root(root, text, len, err);
  json_decref(root);
  if (!t) err_kind_default(err, ERR_BAD_INPUT);  /* the text is refused, whatever the check */
  return t;
}

Tokenizer *tokenizer_load(const char *path, Err *err) {
  size_t n;
  char *text = files_read_all(path, TOKENIZER_MAX_FILE, &n, err);
  if (!text) return NULL;
  Tokenizer *t = tokenizer_from_json(text, n, err);
  free(text);
  if (!t) err_prefix(err, path);
  return t;
}

/* ---- JSON out: serde_json's pretty layout ------------------------------------------- */

static void put_indent(Buf *b, int depth) { buf_put(b, "\n", 1); for (int i = 0; i < depth; i++) buf_put(b, "  ", 2); }

static void put_string(Buf *b, const char *s) {
  buf_put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char tmp[8];
    switch (*p) {
      case '"': buf_put(b, "\\\"", 2); break;
      case '\\': buf_put(b, "\\\\", 2); break;
      case '\n': buf_put(b, "\\n", 2); break;
      case '\r': buf_put(b, "\\r", 2); break;
      case '\t': buf_put(b, "\\t", 2); break;
      case '\b': buf_put(b, "\\b", 2); break;
      case '\f': buf_put(b, "\\f", 2); break;
      default:
        if (*p < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", *p); buf_puts(b, tmp); }
        else buf_put(b, (const char *)p, 1);
    }
  }
  buf_put(b, "\"", 1);
}

/* The shortest decimal that reads back as x, written as Rust's f64 formatting
** does: "0.0", "-3.25", "1e-7". */
static void put_double(Buf *b, double x) {
  char tmp[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, x);
    if (strtod(tmp, NULL) == x) break;
  }
  char *e = strchr(tmp, 'e');
  if (e) {
    /* %g writes e-07 / e+16; Rust writes e-7 / e16. */
    char mant[40], out[48];
    memcpy(mant, tmp, (size_t)(e - tmp));
    mant[e - tmp] = 0;
    int ex = atoi(e + 1);
    snprintf(out, sizeof out, "%se%d", mant, ex);
    buf_puts(b, out);
    return;
  }
  buf_puts(b, tmp);
  if (!strchr(tmp, '.') && !strchr(tmp, 'n') && !strchr(tmp, 'i')) buf_put(b, ".0", 2);
}

/* The Unigram scores' own texts, written in place of their reals: put_json meets the
** score nodes in vocab order, and node[next] is the next one to meet. */
typedef struct ScoreTexts {
  json_t **node;
  const Tokenizer *t;
  int n, next;
} ScoreTexts;

static void put_json(Buf *b, json_t *v, int depth, ScoreTexts *st) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: {
      if (json_object_size(v) == 0) { buf_puts(b, "{}"); return; }
      buf_puts(b, "{");
      const char *k;
      json_t *x;
      int first = 1;
      json_object_foreach(v, k, x) {
        if (!first) buf_puts(b, ",");
        first = 0;
        put_indent(b, depth + 1);
        put_string(b, k);
        buf_puts(b, ": ");
        put_json(b, x, depth + 1, st);
      }
      put_indent(b, depth);
      buf_puts(b, "}");
      return;
    }
    case JSON_ARRAY: {
      if (json_array_size(v) == 0) { buf_puts(b, "[]"); return; }
      buf_puts(b, "[");
      size_t i;
      json_t *x;
      json_array_foreach(v, i, x) {
        if (i) buf_puts(b, ",");
        put_indent(b, depth + 1);
        put_json(b, x, depth + 1, st);
      }
      put_indent(b, depth);
      buf_puts(b, "]");
      return;
    }
    case JSON_STRING: put_string(b, json_string_value(v)); return;
    case JSON_INTEGER: { char tmp[32]; snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(v)); buf_puts(b, tmp); return; }
    case JSON_REAL:
      if (st && st->next < st->n && v == st->node[st->next]) {
        const Tokenizer *t = st->t;
        int i = st->next++;
        buf_put(b, t->score_text + t->score_at[i], t->score_at[i + 1] - t->score_at[i]);
        return;
      }
      put_double(b, json_real_value(v));
      return;
    case JSON_TRUE: buf_puts(b, "true"); return;
    case JSON_FALSE: buf_puts(b, "false"); return;
    case JSON_NULL: buf_puts(b, "null"); return;
  }
}

static const char *prepend_name(int p) { return p == PREPEND_ALWAYS ? "always" : p == PREPEND_FIRST ? "first" : "never"; }

static json_t *metaspace_json(const Metaspace *m) {
  if (!m->present) return json_null();
  json_t *o = json_object();
  json_object_set_new(o, "type", json_string("Metaspace"));
  json_object_set_new(o, "replacement", json_string(m->rep));
  json_object_set_new(o, "prepend_scheme", json_string(prepend_name(m->prepend)));
  json_object_set_new(o, "split", json_boolean(m->split));
  return o;
}

static json_t *replace_json(const Replace *r) {
  json_t *o = json_object(), *p = json_object();
  json_object_set_new(o, "type", json_string("Replace"));
  json_object_set_new(p, "String", json_string(r->pat));
  json_object_set_new(o, "pattern", p);
  json_object_set_new(o, "content", json_string(r->content));
  return o;
}

static json_t *template_json(const TItem *items, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) {
    json_t *o = json_object(), *in = json_object();
    json_object_set_new(in, "id", json_string(items[i].name));
    json_object_set_new(in, "type_id", json_integer(items[i].type_id));
    json_object_set_new(o, items[i].special ? "SpecialToken" : "Sequence", in);
    json_array_append_new(a, o);
  }
  return a;
}

char *tokenizer_to_json(const Tokenizer *t, Err *err) {
  if (t->root) {
    Buf b = {0};
    put_json(&b, t->root, 0, NULL);
    if (b.oom) { free(b.p); err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
    return b.p;
  }
  json_t *root = json_object();
  json_object_set_new(root, "version", json_string(t->version));
  json_object_set_new(root, "truncation", json_null());
  json_object_set_new(root, "padding", json_null());
  json_t *added = json_array();
  for (int i = 0; i < t->n_added; i++) {
    const Added *a = &t->added[i];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(a->id));
    json_object_set_new(o, "content", json_string(a->content));
    json_object_set_new(o, "single_word", json_boolean(a->single_word));
    json_object_set_new(o, "lstrip", json_boolean(a->lstrip));
    json_object_set_new(o, "rstrip", json_boolean(a->rstrip));
    json_object_set_new(o, "normalized", json_boolean(a->normalized_json));
    json_object_set_new(o, "special", json_boolean(a->special_json));
    json_array_append_new(added, o);
  }
  json_object_set_new(root, "added_tokens", added);
  if (t->normalizer == 0) json_object_set_new(root, "normalizer", json_null());
  else if (t->normalizer == 1 && t->n_repl == 1) json_object_set_new(root, "normalizer", replace_json(&t->repl[0]));
  else {
    json_t *o = json_object(), *list = json_array();
    json_object_set_new(o, "type", json_string("Sequence"));
    for (int i = 0; i < t->n_repl; i++) json_array_append_new(list, replace_json(&t->repl[i]));
    json_object_set_new(o, "normalizers", list);
    json_object_set_new(root, "normalizer", o);
  }
  json_object_set_new(root, "pre_tokenizer", metaspace_json(&t->pre));
  if (!t->has_post) json_object_set_new(root, "post_processor", json_null());
  else {
    json_t *o = json_object(), *sp = json_object();
    json_object_set_new(o, "type", json_string("TemplateProcessing"));
    json_object_set_new(o, "single", template_json(t->single, t->n_single));
    json_object_set_new(o, "pair", template_json(t->pair, t->n_pair));
    for (int i = 0; i < t->n_tspec; i++) {
      json_t *e = json_object(), *ids = json_array(), *toks = json_array();
      for (int j = 0; j < t->tspec[i].n; j++) {
        json_array_append_new(ids, json_integer(t->tspec[i].ids[j]));
        json_array_append_new(toks, json_string(t->tspec[i].tokens[j]));
      }
      json_object_set_new(e, "id", json_string(t->tspec[i].name));
      json_object_set_new(e, "ids", ids);
      json_object_set_new(e, "tokens", toks);
      json_object_set_new(sp, t->tspec[i].name, e);
    }
    json_object_set_new(o, "special_tokens", sp);
    json_object_set_new(root, "post_processor", o);
  }
  json_object_set_new(root, "decoder", metaspace_json(&t->dec));
  json_t *model = json_object(), *vocab = json_array();
  json_object_set_new(model, "type", json_string("Unigram"));
  int unk = unigram_unk_id(t->model);
  json_object_set_new(model, "unk_id", unk >= 0 ? json_integer(unk) : json_null());
  int n = unigram_size(t->model);
  ScoreTexts st = {t->score_text ? malloc((size_t)(n + 1) * sizeof *st.node) : NULL, t, t->score_text ? n : 0, 0};
  if (t->score_text && !st.node) { json_decref(model); json_decref(vocab); json_decref(root); err_set(err, "out of memory"); return NULL; }
  for (int i = 0; i < n; i++) {
    json_t *e = json_array();
    json_array_append_new(e, json_string(unigram_piece(t->model, i)));
    json_t *score = json_real(unigram_score(t->model, i));
    if (st.node) st.node[i] = score;
    json_array_append_new(e, score);
    json_array_append_new(vocab, e);
  }
  json_object_set_new(model, "vocab", vocab);
  json_object_set_new(model, "byte_fallback", json_false());
  json_object_set_new(root, "model", model);
  Buf b = {0};
  put_json(&b, root, 0, &st);
  free(st.node);
  json_decref(root);
  if (b.oom) { free(b.p); err_set(err, "out of memory"); return NULL; }
  return b.p;
}

int tokenizer_save(const Tokenizer *t, const char *path, Err *err) {
  char *s = tokenizer_to_json(t, err);
  if (!s) return -1;
  int rc = files_write_atomic(path, s, strlen(s), err);
  free(s);
  return rc;
}

/* transformers' save_pretrained writes json.dumps(..., indent=2, sort_keys=True,
** ensure_ascii=False) + "\n"; the layout below is that for the family's fast
** tokenizer built around this tokenizer:
**   Unigram: AlbertTokenizerFast, with do_lower_case false, remove_space false and
**     keep_accents true: no-ops, so that every library encodes as tokenizer.json says.
**     transformers' fast tokenizer only keeps these keys as attributes when it loads
**     tokenizer.json, but transformers.js (4.x, @huggingface/tokenizers) applies
**     remove_space: true itself before tokenizer.json's normalizer (trims the text and
**     collapses its runs of whitespace), and the class's defaults (true, true, false)
**     would lowercase and strip accents wherever a library rebuilds the pipeline from them;
**   WordPiece: BertTokenizerFast, with do_lower_case, strip_accents and
**     tokenize_chinese_chars as the BertNormalizer says;
**   BPE: RobertaTokenizerFast, with add_prefix_space and trim_offsets as the
**     pre-tokenizer and post-processor say.
** clean_up_tokenization_spaces is stated explicitly because its default changed
** across transformers versions; true is what transformers 4.x used. */
int tokenizer_pretrained_json(const Tokenizer *t, int max_length, char **config, char **special_map, Err *err) {
  *config = *special_map = NULL;
  /* Each family's role names, looked up among the special tokens. */
  static const char *albert_roles[][2] = {{"bos_token", "[CLS]"}, {"cls_token", "[CLS]"}, {"eos_token", "[SEP]"},
                                          {"mask_token", "[MASK]"}, {"pad_token", "<pad>"}, {"sep_token", "[SEP]"}};
  static const char *bert_roles[][2] = {{"cls_token", "[CLS]"}, {"mask_token", "[MASK]"}, {"pad_token", "[PAD]"},
                                        {"sep_token", "[SEP]"}};
  static const char *roberta_roles[][2] = {{"bos_token", "<s>"}, {"cls_token", "<s>"}, {"eos_token", "</s>"},
                                           {"mask_token", "<mask>"}, {"pad_token", "<pad>"}, {"sep_token", "</s>"}};
  const char *(*roles)[2] = albert_roles;
  int n_roles = 6;
  const char *unk_tok = NULL;
  if (t->family == TOKENIZER_WORDPIECE) { roles = bert_roles; n_roles = 4; unk_tok = wordpiece_unk(t->wp); }
  else if (t->family == TOKENIZER_BPE) { roles = roberta_roles; unk_tok = bpe_unk(t->bpe); if (!unk_tok && tokenizer_token_to_id(t, "<unk>") >= 0) unk_tok = "<unk>"; }
  else { int unk = unigram_unk_id(t->model); unk_tok = unk >= 0 ? tokenizer_id_to_token(t, unk) : NULL; }
  if (unk_tok && tokenizer_token_to_id(t, unk_tok) < 0) unk_tok = NULL;
  Buf c = {0}, m = {0};
  buf_puts(&c, "{\n  \"added_tokens_decoder\": {");
  int first = 1;
  for (int id = 0; id < t->vocab_size; id++) {
    int k = t->added_of_id[id];
    if (k < 0) continue;
    const Added *a = &t->added[k];
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s\n    \"%d\": {\n      \"content\": ", first ? "" : ",", id);
    buf_puts(&c, tmp);
    put_string(&c, a->content);
    snprintf(tmp, sizeof tmp, ",\n      \"lstrip\": %s,\n", a->lstrip ? "true" : "false");
    buf_puts(&c, tmp);
    snprintf(tmp, sizeof tmp, "      \"normalized\": %s,\n", a->normalized ? "true" : "false");
    buf_puts(&c, tmp);
    snprintf(tmp, sizeof tmp, "      \"rstrip\": %s,\n", a->rstrip ? "true" : "false");
    buf_puts(&c, tmp);
    snprintf(tmp, sizeof tmp, "      \"single_word\": %s,\n", a->single_word ? "true" : "false");
    buf_puts(&c, tmp);
    snprintf(tmp, sizeof tmp, "      \"special\": %s\n    }", a->special ? "true" : "false");
    buf_puts(&c, tmp);
    first = 0;
  }
  buf_puts(&c, first ? "}" : "\n  }");
  buf_puts(&m, "{");
  int mfirst = 1;
  /* Config keys in sorted order, interleaving the roles. */
  struct { const char *key; const char *val; int raw; } cfg[16];
  int nc = 0;
  for (int r = 0; r < n_roles; r++) {
    if (tokenizer_token_to_id(t, roles[r][1]) < 0) continue;
    cfg[nc].key = roles[r][0]; cfg[nc].val = roles[r][1]; cfg[nc].raw = 0; nc++;
  }
#define CFG(k, v, r) do { cfg[nc].key = (k); cfg[nc].val = (v); cfg[nc].raw = (r); nc++; } while (0)
  CFG("clean_up_tokenization_spaces", "true", 1);
  /* transformers saves the model's input size here (512 for roberta-base and bert-base)
  ** and truncation=True cuts to it; a tokenizer saved alone gets int(1e30), its "none". */
  char max_len[16];
  snprintf(max_len, sizeof max_len, "%d", max_length);
  CFG("model_max_length", max_length > 0 ? max_len : "1000000000000000019884624838656", 1);
  CFG("tokenizer_class", tokenizer_class_name(t), 0);
  if (unk_tok) CFG("unk_token", unk_tok, 0);
  if (t->family == TOKENIZER_WORDPIECE) {
    int lower = t->bert_norm && t->bn.lowercase;
    CFG("do_lower_case", lower ? "true" : "false", 1);
    CFG("strip_accents", !t->bert_norm || t->bn.strip_accents < 0 ? "null" : t->bn.strip_accents ? "true" : "false", 1);
    CFG("tokenize_chinese_chars", !t->bert_norm || t->bn.handle_chinese_chars ? "true" : "false", 1);
  } else if (t->family == TOKENIZER_BPE) {
    CFG("add_prefix_space", t->bl_prefix_space ? "true" : "false", 1);
    CFG("errors", "replace", 0);
    CFG("trim_offsets", t->trim_offsets ? "true" : "false", 1);
  } else {
    CFG("do_lower_case", "false", 1);
    CFG("keep_accents", "true", 1);
    CFG("remove_space", "false", 1);
  }
#undef CFG
  for (int i = 1; i < nc; i++)
    for (int j = i; j > 0 && strcmp(cfg[j - 1].key, cfg[j].key) > 0; j--) { __typeof__(cfg[0]) x = cfg[j]; cfg[j] = cfg[j - 1]; cfg[j - 1] = x; }
  for (int i = 0; i < nc; i++) {
    buf_puts(&c, ",\n  \"");
    buf_puts(&c, cfg[i].key);
    buf_puts(&c, "\": ");
    if (cfg[i].raw) buf_puts(&c, cfg[i].val); else put_string(&c, cfg[i].val);
    /* special_tokens_map.json: the role tokens; the mask token with its flags. */
    int is_role = strstr(cfg[i].key, "_token") && strcmp(cfg[i].key, "extra_special_tokens") && !cfg[i].raw;
    if (!is_role) continue;
    buf_puts(&m, mfirst ? "\n  \"" : ",\n  \"");
    mfirst = 0;
    buf_puts(&m, cfg[i].key);
    buf_puts(&m, "\": ");
    int id = tokenizer_token_to_id(t, cfg[i].val);
    int k = id >= 0 && id < t->vocab_size ? t->added_of_id[id] : -1;
    if (k >= 0 && (t->added[k].lstrip || t->added[k].rstrip || t->added[k].normalized)) {
      const Added *a = &t->added[k];
      buf_puts(&m, "{\n    \"content\": ");
      put_string(&m, a->content);
      char tmp[160];
      snprintf(tmp, sizeof tmp, ",\n    \"lstrip\": %s,\n    \"normalized\": %s,\n    \"rstrip\": %s,\n    \"single_word\": %s\n  }",
               a->lstrip ? "true" : "false", a->normalized ? "true" : "false", a->rstrip ? "true" : "false", a->single_word ? "true" : "false");
      buf_puts(&m, tmp);
    } else put_string(&m, cfg[i].val);
  }
  buf_puts(&c, "\n}\n");
  buf_puts(&m, mfirst ? "}\n" : "\n}\n");
  if (c.oom || m.oom) { free(c.p); free(m.p); return err_set(err, "out of memory"); }
  *config = c.p;
  *special_map = m.p;
  return 0;
}

/* The three files change together: all are written beside their names first, and
** renamed over them only when every one was written whole. */
int tokenizer_save_pretrained(const Tokenizer *t, int max_length, const char *dir, Err *err) {
  static const char *const names[3] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};
  char *text[3] = {NULL, NULL, NULL};
  FilesAtomic f[3];
  memset(f, 0, sizeof f);
  for (int i = 0; i < 3; i++) f[i].fd = -1;
  int rc = -1, i;
  if (!(text[0] = tokenizer_to_json(t, err)) || tokenizer_pretrained_json(t, max_length, &text[1], &text[2], err)) goto done;
  for (i = 0; i < 3; i++) {
    char *path = files_join(dir, names[i]);
    int r = path ? files_atomic_open(&f[i], path, err) : err_set(err, "out of memory");
    free(path);
    if (r || files_atomic_write(&f[i], text[i], strlen(text[i]), err) || files_atomic_finish(&f[i], err)) goto done;
  }
  for (i = 0; i < 3; i++)
    if (files_atomic_commit(&f[i], err)) goto done;
  rc = 0;
done:
  for (i = 0; i < 3; i++) { files_atomic_abort(&f[i]); free(text[i]); }
  return rc;
}
