/* The byte-level BPE model: token strings in one arena, two open-addressing hash
** tables (token string -> id, (left id, right id) -> (rank, merged id)), and the
** merge loop on one word.
**
** The merge loop has two bodies with one result. HF keeps a binary heap of
** candidate pairs ordered by (rank, position) and skips entries a merge made stale;
** popping that heap is the same as taking, at every step, the lowest-ranked pair
** and the leftmost of equal ranks (positions only grow left to right). Words of
** up to SHORT_WORD symbols do exactly that with a scan over a small array, which
** beats any heap at the lengths most words have; longer words use the heap over a
** linked list, as HF does, so a 10,000-byte word costs n log n, not n^2.
**
** An entry is stale when the pair now at its position has another rank: a rank
** names one pair (a repeated merge keeps only its last rank), which is HF's test
** (the pair's merged id still equal) since spans at a position only grow. */
#include "engine/core/json_text.h"
#include "engine/tok/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "engine/tok/bytelevel.h"

/* Words of up to this many initial symbols merge by a linear scan (see above). */
#define SHORT_WORD 48

typedef struct MergeSlot {
  uint64_t key;    /* left << 32 | right; EMPTY_KEY when free */
  int32_t rank, id;
} MergeSlot;
#define EMPTY_KEY UINT64_MAX

struct Bpe {
  int size;             /* max id + 1 */
  char **tok;           /* by id: the byte-level string (into arena), NULL for a gap */
  uint32_t *tok_len;
  char *arena;
  int32_t *str_slot;    /* token string -> id hash; -1 free */
  uint32_t str_mask;
  MergeSlot *merge;
  uint32_t merge_mask;
  int n_merges;
  int32_t byte_id[256]; /* the token of each byte's alphabet char, or -1 */
  int unk_id;           /* -1 when none */
  int fuse_unk, ignore_merges;
};

/* ---- hashing --------------------------------------------------------------- */

static uint64_t str_hash(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  /* FNV-1a: tokens are short, and build time matters little */
  for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 0x100000001b3ull; }
  return h ^ (h >> 29);
}

static inline uint32_t pair_hash(uint64_t key) { return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32); }

int bpe_token_id(const Bpe *b, const char *tok, size_t len) {
  for (uint32_t i = (uint32_t)str_hash(tok, len) & b->str_mask;; i = (i + 1) & b->str_mask) {
    int32_t id = b->str_slot[i];
    if (id < 0) return -1;
    if (b->tok_len[id] == len && memcmp(b->tok[id], tok, len) == 0) return id;
  }
}

static inline const MergeSlot *merge_find(const Bpe *b, int32_t l, int32_t r) {
  uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
  for (uint32_t i = pair_hash(key) & b->merge_mask;; i = (i + 1) & b->merge_mask) {
    const MergeSlot *m = &b->merge[i];
    if (m->key == key) return m;
    if (m->key == EMPTY_KEY) return NULL;
  }
}

/* ---- building ---------------------------------------------------------------- */

/* Smallest power of two at least 2n (load factor at most one half), at least 16. */
static uint32_t table_size(size_t n) {
  uint32_t s = 16;
  while (s < 2 * n) s *= 2;
  return s;
}

void bpe_free(Bpe *b) {
  if (!b) return;
  free(b->tok); free(b->tok_len); free(b->arena); free(b->str_slot); free(b->merge);
  free(b);
}

/* The vocabulary from a JSON object {tok: id}: ids, arena, string hash, byte table. */
static Bpe *build_vocab(const json_t *vocab, Err *err) {
  if (!json_is_object(vocab)) { err_setk(err, ERR_BAD_INPUT, "BPE model: \"vocab\" is not an object"); return NULL; }
  Bpe *b = calloc(1, sizeof *b);
  if (!b) { err_setk(err, ERR_NOMEM, "BPE model: out of memory"); return NULL; }
  b->unk_id = -1;
  size_t n = json_object_size(vocab), bytes = 0;
  int32_t max_id = -1;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)vocab, key, val) {
    if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= INT32_MAX) {
      err_setk(err, ERR_BAD_INPUT, "BPE model: token \"%s\" has no id in [0, 2^31-1)", key);
      goto fail;
    }
    if ((int32_t)json_integer_value(val) > max_id) max_id = (int32_t)json_integer_value(val);
    bytes += strlen(key) + 1;
  }
  b->size = max_id + 1;
  b->tok = calloc((size_t)b->size + 1, sizeof *b->tok);
  b->tok_len = calloc((size_t)b->size + 1, sizeof *b->tok_len);
  b->arena = malloc(bytes + 1);
  b->str_mask = table_size(n) - 1;
  b->str_slot = malloc(((size_t)b->str_mask + 1) * sizeof *b->str_slot);
  if (!b->tok || !b->tok_len || !b->arena || !b->str_slot) { err_setk(err, ERR_NOMEM, "BPE model: out of memory"); goto fail; }
  memset(b->str_slot, 0xFF, ((size_t)b->str_mask + 1) * sizeof *b->str_slot);
  char *p = b->arena;
  json_object_foreach((json_t *)vocab, key, val) {
    int32_t id = (int32_t)json_integer_value(val);
    size_t len = strlen(key);
    if (b->tok[id]) {
      err_setk(err, ERR_BAD_INPUT, "BPE model: tokens \"%s\" and \"%s\" share id %d", b->tok[id], key, (int)id);
      goto fail;
    }
    memcpy(p, key, len + 1);
    b->tok[id] = p; b->tok_len[id] = (uint32_t)len;
    p += len + 1;
    /* JSON object keys are unique, so the string is new to the table. */
    uint32_t i = (uint32_t)str_hash(key, len) & b->str_mask;
    while (b->str_slot[i] >= 0) i = (i + 1) & b->str_mask;
    b->str_slot[i] = id;
  }
  for (int c = 0; c < 256; c++) {
    char ch[2];
    int m = bytelevel_char_of_byte((unsigned char)c, ch);
    b->byte_id[c] = bpe_token_id(b, ch, (size_t)m);
  }
  return b;
fail:
  bpe_free(b);
  return NULL;
}

/* A merge by its parts' strings, rank its index in the list. */
typedef struct MergeText { const char *a, *b; size_t alen, blen; } MergeText;

/* Resolves every merge to ids and fills the pair table; a later repeat of a pair
** overwrites the earlier rank, as collecting into HF's HashMap does. */
static int build_merges(Bpe *b, const MergeText *m, int n, Err *err) {
  b->merge_mask = table_size((size_t)n) - 1;
  b->merge = malloc(((size_t)b->merge_mask + 1) * sizeof *b->merge);
  if (!b->merge) return err_setk(err, ERR_NOMEM, "BPE model: out of memory");
  for (uint32_t i = 0; i <= b->merge_mask; i++) b->merge[i].key = EMPTY_KEY;
  b->n_merges = n;
  char small[256], *cat = small;
  size_t cat_cap = sizeof small;
  int rc = 0;
  for (int r = 0; r < n && rc == 0; r++) {
    const MergeText *t = &m[r];
    int la = bpe_token_id(b, t->a, t->alen), lb = bpe_token_id(b, t->b, t->blen);
    if (la < 0 || lb < 0) {
      const char *which = la < 0 ? t->a : t->b;
      int wl = (int)(la < 0 ? t->alen : t->blen);
      rc = err_setk(err, ERR_BAD_INPUT, "BPE model: merge %d: token \"%.*s\" is not in the vocabulary", r + 1, wl, which);
      break;
    }
    if (t->alen + t->blen > cat_cap) {
      char *nc = malloc(t->alen + t->blen);
      if (!nc) { rc = err_setk(err, ERR_NOMEM, "BPE model: out of memory"); break; }
      if (cat != small) free(cat);
      cat = nc; cat_cap = t->alen + t->blen;
    }
    memcpy(cat, t->a, t->alen);
    memcpy(cat + t->alen, t->b, t->blen);
    int id = bpe_token_id(b, cat, t->alen + t->blen);
    if (id < 0) {
      rc = err_setk(err, ERR_BAD_INPUT, "BPE model: merge %d: token \"%.*s\" is not in the vocabulary", r + 1,
                    (int)(t->alen + t->blen), cat);
      break;
    }
    uint64_t key = (uint64_t)(uint32_t)la << 32 | (uint32_t)lb;
    uint32_t i = pair_hash(key) & b->merge_mask;
    while (b->merge[i].key != EMPTY_KEY && b->merge[i].key != key) i = (i + 1) & b->merge_mask;
    b->merge[i].key = key; b->merge[i].rank = r; b->merge[i].id = id;
  }
  if (cat != small) free(cat);
  return rc;
}

/* Splits "a b" on its one space: HF's legacy merge, refused unless exactly two parts. */
static int split_merge(const char *s, size_t n, MergeText *out) {
  const char *sp = memchr(s, ' ', n);
  if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1)) return -1;
  out->a = s; out->alen = (size_t)(sp - s);
  out->b = sp + 1; out->blen = n - out->alen - 1;
  return 0;
}

static Bpe *finish(Bpe *b, const MergeText *m, int n, const char *unk, int fuse_unk, int ignore_merges, Err *err) {
  if (build_merges(b, m, n, err)) { bpe_free(b); return NULL; }
  if (unk) {
    b->unk_id = bpe_token_id(b, unk, strlen(unk));
    if (b->unk_id < 0) {
      err_setk(err, ERR_BAD_INPUT, "BPE model: unk_token \"%s\" is not in the vocabulary", unk);
      bpe_free(b);
      return NULL;
    }
  }
  b->fuse_unk = fuse_unk;
  b->ignore_merges = ignore_merges;
  return b;
}

/* A field that must be null (or absent) or the empty string. */
static int refuse_affix(const json_t *model, const char *name, Err *err) {
  const json_t *v = json_object_get(model, name);
  if (!v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0)) return 0;
  return err_setk(err, ERR_BAD_INPUT, "BPE model: %s is not supported (byte-level BPE has none)", name);
}

static int get_bool(const json_t *model, const char *name, int *out, Err *err) {
  const json_t *v = json_object_get(model, name);
  if (!v || json_is_null(v)) { *out = 0; return 0; }
  if (!json_is_boolean(v)) return err_setk(err, ERR_BAD_INPUT, "BPE model: \"%s\" is not a boolean", name);
  *out = json_is_true(v);
  return 0;
}

Bpe *bpe_from_json(const json_t *model, Err *err) {
  if (!json_is_object(model)) { err_setk(err, ERR_BAD_INPUT, "BPE model: not an object"); return NULL; }
  const json_t *type = json_object_get(model, "type");
  if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0)) {
    err_setk(err, ERR_BAD_INPUT, "BPE model: type is not \"BPE\"");
    return NULL;
  }
  const json_t *dropout = json_object_get(model, "dropout");
  /* Dropout 0 never skips a merge (HF takes the cached, deterministic path for it). */
  if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0)) {
    err_setk(err, ERR_BAD_INPUT, "BPE model: dropout is not supported");
    return NULL;
  }
  if (refuse_affix(model, "continuing_subword_prefix", err) || refuse_affix(model, "end_of_word_suffix", err)) return NULL;
  int fuse_unk = 0, byte_fallback = 0, ignore_merges = 0;
  if (get_bool(model, "fuse_unk", &fuse_unk, err) || get_bool(model, "byte_fallback", &byte_fallback, err) ||
      get_bool(model, "ignore_merges", &ignore_merges, err))
    return NULL;
  if (byte_fallback) { err_setk(err, ERR_BAD_INPUT, "BPE model: byte_fallback is not supported"); return NULL; }
  const json_t *unk = json_object_get(model, "unk_token");
  if (unk && !json_is_null(unk) && !json_is_string(unk)) {
    err_setk(err, ERR_BAD_INPUT, "BPE model: unk_token is not a string");
    return NULL;
  }
  const json_t *merges = json_object_get(model, "merges");
  if (merges && !json_is_array(merges)) { err_setk(err, ERR_BAD_INPUT, "BPE model: \"merges\" is not an array"); return NULL; }
  Bpe *b = build_vocab(json_object_get(model, "vocab"), err);
  if (!b) return NULL;
  size_t n = merges ? json_array_size(merges) : 0;
  if (n >= INT32_MAX) { err_setk(err, ERR_BAD_INPUT, "BPE model: too many merges"); bpe_free(b); return NULL; }
  MergeText *m = malloc((n ? n : 1) * sizeof *m);
  if (!m) { err_setk(err, ERR_NOMEM, "BPE model: out of memory"); bpe_free(b); return NULL; }
  /* HF reads either layout for the whole list (an untagged enum), never a mix. */
  int pairs = n > 0 && json_is_array(json_array_get(merges, 0));
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(merges, i);
    int ok;
    if (pairs) {
      const json_t *x = json_array_get(e, 0), *y = json_array_get(e, 1);
      ok = json_is_array(e) && json_array_size(e) == 2 && json_is_string(x) && json_is_string(y);
      if (ok) { m[i].a = json_string_value(x); m[i].alen = json_string_length(x); m[i].b = json_string_value(y); m[i].blen = json_string_length(y); }
    } else {
      ok = json_is_string(e) && split_merge(json_string_value(e), json_string_length(e), &m[i]) == 0;
    }
    if (!ok) {
      err_setk(err, ERR_BAD_INPUT, "BPE model: merge %zu is not %s", i + 1, pairs ? "a pair of strings" : "\"a b\"");
      free(m); bpe_free(b);
      return NULL;
    }
  }
  b = finish(b, m, (int)n, unk && json_is_string(unk) ? json_string_value(unk) : NULL, fuse_unk, ignore_merges, err);
  free(m);
  return b;
}

Bpe *bpe_from_files_text(const char *vocab_json, size_t vlen, const char *merges_txt, size_t mlen, Err *err) {
  json_error_t je;
  json_t *vocab = json_loadb(vocab_json, vlen, 0, &je);
  if (!vocab) { err_setk(err, ERR_BAD_INPUT, "vocab.json: %s at line %d", json_error_message(&je), je.line); return NULL; }
  Bpe *b = build_vocab(vocab, err);
  json_decref(vocab);
  if (!b) return NULL;
  size_t lines = 1;
  for (size_t i = 0; i < mlen; i++) lines += merges_txt[i] == '\n';
  MergeText *m = malloc(lines * sizeof *m);
  if (!m) { err_setk(err, ERR_NOMEM, "merges.txt: out of memory"); bpe_free(b); return NULL; }
  int n = 0;
  /* Rust's lines(): split on "\n", strip one "\r" before it, no empty line after a final "\n". */
  for (size_t i = 0; i < mlen;) {
    const char *nl = memchr(merges_txt + i, '\n', mlen - i);
    size_t end = nl ? (size_t)(nl - merges_txt) : mlen, next = nl ? end + 1 : mlen;
    size_t e = end > i && merges_txt[end - 1] == '\r' && nl ? end - 1 : end;
    const char *line = merges_txt + i;
    size_t len = e - i;
    i = next;
    if (len >= 8 && memcmp(line, "#version", 8) == 0) continue;
    if (split_merge(line, len, &m[n])) {
      err_setk(err, ERR_BAD_INPUT, "merges.txt: merge %d is not \"a b\"", n + 1);
      free(m); bpe_free(b);
      return NULL;
    }
    if (++n == INT32_MAX) break;
  }
  b = finish(b, m, n, NULL, 0, 0, err);
  free(m);
  return b;
}

/* ---- accessors --------------------------------------------------------------- */

int bpe_size(const Bpe *b) { return b->size; }
const char *bpe_token(const Bpe *b, int id) { return id >= 0 && id < b->size ? b->tok[id] : NULL; }
const char *bpe_unk(const Bpe *b) { return b->unk_id >= 0 ? b->tok[b->unk_id] : NULL; }
int bpe_merge_count(const Bpe *b) { return b->n_merges; }

/* ---- encoding ------------------------------------------------------------------ */

/* Scratch: the word's byte-level string (2 bytes a byte, for ignore_merges), then
** 4 int32 arrays of len + 2 entries (symbols; after merging, the offsets of a word
** that lost bytes), then the heap (3 entries a symbol: the initial pairs and at
** most two new ones per merge). */
#define ARR(len) (((len) + 2 + 1) / 2 * 2)  /* int32 entries, rounded so the heap stays 8-aligned */
size_t bpe_scratch_bytes(size_t len) { return (2 * len + 8) / 8 * 8 + 4 * ARR(len) * 4 + 24 * len + 64; }

/* The rank of the pair (l, r) and its merged id in *id; INT32_MAX when none. */
static inline int32_t rank_of(const Bpe *b, int32_t l, int32_t r, int32_t *id) {
  const MergeSlot *m = merge_find(b, l, r);
  if (!m) return INT32_MAX;
  *id = m->id;
  return m->rank;
}

/* Min-heap of (rank << 32 | position): lowest rank, then leftmost, first. */
static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h[p] <= v) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
  uint64_t top = h[0], v = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (v <= h[c]) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = v;
  return top;
}

/* The linear-scan body on id[0..n), st[0..n); returns the symbol count left. */
static int merge_short(const Bpe *b, int32_t *id, int32_t *st, int32_t *rank, int32_t *nid, int n) {
  for (int i = 0; i + 1 < n; i++) rank[i] = rank_of(b, id[i], id[i + 1], &nid[i]);
  while (n > 1) {
    int best = -1;
    int32_t br = INT32_MAX;
    for (int i = 0; i + 1 < n; i++)
      if (rank[i] < br) { br = rank[i]; best = i; }
    if (best < 0) break;
    id[best] = nid[best];
    int tail = n - best - 2;  /* entries after the absorbed symbol */
    memmove(id + best + 1, id + best + 2, (size_t)tail * sizeof *id);
    memmove(st + best + 1, st + best + 2, (size_t)tail * sizeof *st);
    memmove(rank + best + 1, rank + best + 2, (size_t)tail * sizeof *rank);
    memmove(nid + best + 1, nid + best + 2, (size_t)tail * sizeof *nid);
    n--;
    if (best + 1 < n) rank[best] = rank_of(b, id[best], id[best + 1], &nid[best]);
    else rank[best] = INT32_MAX;
    if (best > 0) rank[best - 1] = rank_of(b, id[best - 1], id[best], &nid[best - 1]);
  }
  return n;
}

/* The heap body over a linked list of symbols (dead ones have id -1); compacts the
** survivors into id/st and returns their count. */
static int merge_long(const Bpe *b, int32_t *id, int32_t *st, int32_t *prv, int32_t *nxt, uint64_t *heap, int n) {
  size_t hn = 0;
  int32_t tmp;
  for (int i = 0; i < n; i++) { prv[i] = i - 1; nxt[i] = i + 1 < n ? i + 1 : -1; }
  for (int i = 0; i + 1 < n; i++) {
    int32_t r = rank_of(b, id[i], id[i + 1], &tmp);
    if (r != INT32_MAX) heap_push(heap, &hn, (uint64_t)(uint32_t)r << 32 | (uint32_t)i);
  }
  while (hn > 0) {
    uint64_t top = heap_pop(heap, &hn);
    int32_t pos = (int32_t)(uint32_t)top, r = (int32_t)(top >> 32), nx;
    if (id[pos] < 0 || (nx = nxt[pos]) < 0) continue;
    int32_t merged = -1;
    if (rank_of(b, id[pos], id[nx], &merged) != r) continue;  /* stale: the pair here changed */
    id[pos] = merged;
    id[nx] = -1;
    nxt[pos] = nxt[nx];
    if (nxt[nx] >= 0) prv[nxt[nx]] = pos;
    int32_t p = prv[pos], q = nxt[pos];
    if (p >= 0 && (r = rank_of(b, id[p], id[pos], &tmp)) != INT32_MAX)
      heap_push(heap, &hn, (uint64_t)(uint32_t)r << 32 | (uint32_t)p);
    if (q >= 0 && (r = rank_of(b, id[pos], id[q], &tmp)) != INT32_MAX)
      heap_push(heap, &hn, (uint64_t)(uint32_t)r << 32 | (uint32_t)pos);
  }
  int k = 0;
  for (int i = 0; i < n; i++)
    if (id[i] >= 0) { id[k] = id[i]; st[k] = st[i]; k++; }
  return k;
}

/* Byte length of byte c's char in the byte-level string HF's model sees. */
static inline int32_t bl_len(unsigned char c) { return c >= 33 && c <= 126 ? 1 : 2; }

/* HF's offsets for a word that lost bytes (no unk token): its Word counts only the
** kept symbols' lengths in the byte-level string, so later tokens shift left, and
** the shifted positions map back through the whole string to raw bytes. Writes
** spans[2i], spans[2i+1] for the k tokens starting at raw bytes st[]; cum and all
** hold len + 1 entries each. */
static void dropped_spans(const Bpe *b, const unsigned char *s, size_t len, const int32_t *st, int k, int32_t *cum,
                          int32_t *all, int32_t *spans) {
  cum[0] = all[0] = 0;
  for (size_t j = 0; j < len; j++) {
    int kept = b->byte_id[s[j]] >= 0 || b->unk_id >= 0;
    cum[j + 1] = cum[j] + (kept ? bl_len(s[j]) : 0);
    all[j + 1] = all[j] + bl_len(s[j]);
  }
  size_t j = 0;  /* raw byte whose chars hold position p: all[j] <= p < all[j + 1] */
  for (int i = 0; i < k; i++) {
    int32_t a = cum[st[i]], e = i + 1 < k ? cum[st[i + 1]] : cum[len];
    while (j + 1 < len && all[j + 1] <= a) j++;
    spans[2 * i] = (int32_t)j;
    size_t q = j;
    while (q + 1 < len && all[q + 1] <= e - 1) q++;
    spans[2 * i + 1] = (int32_t)q + 1;
  }
}

int bpe_encode(const Bpe *b, const char *s, size_t len, int32_t *ids, int32_t *spans, int cap, void *scratch) {
  if (len == 0) return 0;
  char *text = scratch;
  int32_t *id = (int32_t *)((char *)scratch + (2 * len + 8) / 8 * 8);
  int32_t *st = id + ARR(len), *a3 = st + ARR(len), *a4 = a3 + ARR(len);
  uint64_t *heap = (uint64_t *)(a4 + ARR(len));
  if (b->ignore_merges) {
    size_t k = 0;
    for (size_t i = 0; i < len; i++) k += (size_t)bytelevel_char_of_byte((unsigned char)s[i], text + k);
    int w = bpe_token_id(b, text, k);
    if (w >= 0) {
      if (cap < 1) return -1;
      ids[0] = w;
      if (spans) { spans[0] = 0; spans[1] = (int32_t)len; }
      return 1;
    }
  }
  /* One symbol per byte; unknown bytes become unk (fused when fuse_unk) or vanish. */
  int n = 0, prev_unk = 0, dropped = 0;
  for (size_t i = 0; i < len; i++) {
    int32_t t = b->byte_id[(unsigned char)s[i]];
    if (t < 0) {
      if (b->unk_id < 0) { dropped = 1; continue; }
      if (prev_unk && b->fuse_unk) continue;
      t = b->unk_id;
      prev_unk = 1;
    } else {
      prev_unk = 0;
    }
    id[n] = t; st[n] = (int32_t)i; n++;
  }
  n = n <= SHORT_WORD ? merge_short(b, id, st, a3, a4, n) : merge_long(b, id, st, a3, a4, heap, n);
  if (n > cap) return -1;
  memcpy(ids, id, (size_t)n * sizeof *ids);
  if (!spans) return n;
  if (dropped) {
    dropped_spans(b, (const unsigned char *)s, len, st, n, a3, a4, spans);
  } else {
    for (int i = 0; i < n; i++) { spans[2 * i] = st[i]; spans[2 * i + 1] = i + 1 < n ? st[i + 1] : (int32_t)len; }
  }
  return n;
}
