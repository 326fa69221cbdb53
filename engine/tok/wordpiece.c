/* The WordPiece model and decoder (see wordpiece.h).
**
** Tokens live in one arena; an open-addressing hash table maps a token's bytes to
** its entry. The greedy split asks "is s[start..end) (with the prefix in front when
** start > 0) a token?" for every end from the longest possible down, so the lookup
** must not build the candidate string: the hash is FNV-1a, a byte-at-a-time state,
** so the state after the prefix is computed once, and one forward pass from start
** gives the hash of every candidate [start, end) at once (the state after byte end).
** Candidates longer than the longest token (with or without the prefix) are never
** tried, and ends inside a UTF-8 character are skipped, as HF only cuts at chars. */
#include "engine/tok/wordpiece.h"

#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
/* Candidate hashes kept per position: longer candidates (only tokens this long
** need them) are hashed on their own. */
#define STACK_BYTES 256

struct WordPiece {
  int n;             /* tokens */
  int size;          /* max id + 1 */
  char *arena;       /* tokens, each followed by a NUL */
  uint32_t *off;     /* entry i is arena[off[i] .. off[i+1] - 1) */
  int32_t *id;       /* entry i's id */
  int32_t *by_id;    /* id -> entry, or -1 */
  uint32_t *slot;    /* hash table: entry + 1, 0 for empty; mask + 1 slots */
  uint64_t *slot_hash;
  uint32_t mask;
  char *prefix, *unk;
  size_t prefix_len;
  uint64_t prefix_state;  /* FNV-1a state after the prefix's bytes */
  int unk_id;             /* -1 when the vocabulary lacks the unk token */
  int max_chars;
  size_t max_first, max_cont;  /* longest token; longest prefixed token without its prefix */
};

static inline uint64_t fnv_step(uint64_t h, unsigned char c) { return (h ^ c) * FNV_PRIME; }

static uint64_t fnv_bytes(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = fnv_step(h, (unsigned char)s[i]);
  return h;
}

/* The table index of a hash: FNV's low bits are weak for short keys, so mix first. */
static inline uint32_t slot_of(uint64_t h, uint32_t mask) {
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return (uint32_t)h & mask;
}

static inline size_t entry_len(const WordPiece *w, uint32_t e) { return w->off[e + 1] - w->off[e] - 1; }

/* The entry whose bytes are head[0..hl) followed by tail[0..tl) and whose hash is h, or -1. */
static int find(const WordPiece *w, uint64_t h, const char *head, size_t hl, const char *tail, size_t tl) {
  for (uint32_t i = slot_of(h, w->mask);; i = (i + 1) & w->mask) {
    uint32_t e1 = w->slot[i];
    if (e1 == 0) return -1;
    if (w->slot_hash[i] != h) continue;
    uint32_t e = e1 - 1;
    const char *p = w->arena + w->off[e];
    if (entry_len(w, e) == hl + tl && memcmp(p, head, hl) == 0 && memcmp(p + hl, tail, tl) == 0) return (int)e;
  }
}

void wordpiece_free(WordPiece *w) {
  if (!w) return;
  free(w->arena); free(w->off); free(w->id); free(w->by_id); free(w->slot); free(w->slot_hash);
  free(w->prefix); free(w->unk);
  free(w);
}

WordPiece *wordpiece_new(int n, const char *const *tokens, const int32_t *ids, const char *unk_token,
                         const char *prefix, int max_input_chars_per_word, Err *err) {
  if (n < 0) { err_setk(err, ERR_BAD_INPUT, "WordPiece: negative vocabulary size %d", n); return NULL; }
  if (max_input_chars_per_word < 0) {
    err_setk(err, ERR_BAD_INPUT, "WordPiece: max_input_chars_per_word %d is negative", max_input_chars_per_word);
    return NULL;
  }
  WordPiece *w = calloc(1, sizeof *w);
  if (!w) { err_setk(err, ERR_NOMEM, "WordPiece: out of memory"); return NULL; }
  w->n = n;
  w->max_chars = max_input_chars_per_word;
  w->unk_id = -1;
  w->prefix = strdup(prefix);
  w->unk = strdup(unk_token);
  size_t total = 0;
  int32_t max_id = -1;
  for (int i = 0; i < n; i++) {
    total += strlen(tokens[i]) + 1;
    if (ids[i] < 0 || ids[i] >= WORDPIECE_MAX_ID) {
      err_setk(err, ERR_BAD_INPUT, "WordPiece: token \"%.60s\" has id %ld, outside [0, %d)", tokens[i], (long)ids[i],
               WORDPIECE_MAX_ID);
      wordpiece_free(w);
      return NULL;
    }
    if (ids[i] > max_id) max_id = ids[i];
  }
  w->size = max_id + 1;
  uint32_t cap = 16;
  while (cap < 2u * (uint32_t)n + 1) cap *= 2;  /* load at most 1/2: probes stay short */
  w->mask = cap - 1;
  w->arena = malloc(total ? total : 1);
  w->off = malloc(((size_t)n + 1) * sizeof *w->off);
  w->id = malloc(((size_t)n + 1) * sizeof *w->id);
  w->by_id = malloc(((size_t)w->size + 1) * sizeof *w->by_id);
  w->slot = calloc(cap, sizeof *w->slot);
  w->slot_hash = malloc(cap * sizeof *w->slot_hash);
  if (!w->prefix || !w->unk || !w->arena || !w->off || !w->id || !w->by_id || !w->slot || !w->slot_hash) {
    err_setk(err, ERR_NOMEM, "WordPiece: out of memory for %d tokens", n);
    wordpiece_free(w);
    return NULL;
  }
  if (total > UINT32_MAX) { err_setk(err, ERR_BAD_INPUT, "WordPiece: vocabulary over 4 GB"); wordpiece_free(w); return NULL; }
  w->prefix_len = strlen(w->prefix);
  w->prefix_state = fnv_bytes(FNV_OFFSET, w->prefix, w->prefix_len);
  for (int i = 0; i < w->size; i++) w->by_id[i] = -1;
  size_t pos = 0;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(tokens[i]);
    uint64_t h = fnv_bytes(FNV_OFFSET, tokens[i], len);
    if (find(w, h, tokens[i], len, "", 0) >= 0) {
      err_setk(err, ERR_BAD_INPUT, "WordPiece: token \"%.60s\" appears twice in the vocabulary", tokens[i]);
      wordpiece_free(w);
      return NULL;
    }
    if (w->by_id[ids[i]] >= 0) {
      err_setk(err, ERR_BAD_INPUT, "WordPiece: id %ld is given to both \"%.60s\" and \"%.60s\"", (long)ids[i],
               w->arena + w->off[w->by_id[ids[i]]], tokens[i]);
      wordpiece_free(w);
      return NULL;
    }
    w->off[i] = (uint32_t)pos;
    memcpy(w->arena + pos, tokens[i], len + 1);
    pos += len + 1;
    w->off[i + 1] = (uint32_t)pos;
    w->id[i] = ids[i];
    w->by_id[ids[i]] = i;
    uint32_t s = slot_of(h, w->mask);
    while (w->slot[s]) s = (s + 1) & w->mask;
    w->slot[s] = (uint32_t)i + 1;
    w->slot_hash[s] = h;
    if (len > w->max_first) w->max_first = len;
    if (len >= w->prefix_len && memcmp(tokens[i], w->prefix, w->prefix_len) == 0 && len - w->prefix_len > w->max_cont)
      w->max_cont = len - w->prefix_len;
  }
  w->unk_id = wordpiece_token_id(w, w->unk, strlen(w->unk));
  return w;
}

/* A string member of the model object, or NULL with the error set. */
static const char *json_str_key(const json_t *model, const char *key, Err *err) {
  json_t *v = json_object_get(model, key);
  if (!v) { err_setk(err, ERR_BAD_INPUT, "WordPiece model: missing \"%s\"", key); return NULL; }
  if (!json_is_string(v)) { err_setk(err, ERR_BAD_INPUT, "WordPiece model: \"%s\" is not a string", key); return NULL; }
  return json_string_value(v);
}

WordPiece *wordpiece_from_json(const json_t *model, Err *err) {
  if (!json_is_object(model)) { err_setk(err, ERR_BAD_INPUT, "WordPiece model: not a JSON object"); return NULL; }
  json_t *type = json_object_get(model, "type");
  if (type && !(json_is_string(type) && strcmp(json_string_value(type), "WordPiece") == 0)) {
    err_setk(err, ERR_BAD_INPUT, "WordPiece model: \"type\" is not \"WordPiece\"");
    return NULL;
  }
  const char *unk = json_str_key(model, "unk_token", err);
  if (!unk) return NULL;
  const char *prefix = json_str_key(model, "continuing_subword_prefix", err);
  if (!prefix) return NULL;
  json_t *mc = json_object_get(model, "max_input_chars_per_word");
  if (!mc) { err_setk(err, ERR_BAD_INPUT, "WordPiece model: missing \"max_input_chars_per_word\""); return NULL; }
  if (!json_is_integer(mc) || json_integer_value(mc) < 0) {
    err_setk(err, ERR_BAD_INPUT, "WordPiece model: \"max_input_chars_per_word\" is not a non-negative integer");
    return NULL;
  }
  /* HF's usize: any larger limit means no word is too long. */
  json_int_t mcv = json_integer_value(mc);
  int max_chars = mcv > 0x7fffffff ? 0x7fffffff : (int)mcv;
  json_t *vocab = json_object_get(model, "vocab");
  if (!vocab) { err_setk(err, ERR_BAD_INPUT, "WordPiece model: missing \"vocab\""); return NULL; }
  if (!json_is_object(vocab)) { err_setk(err, ERR_BAD_INPUT, "WordPiece model: \"vocab\" is not an object"); return NULL; }
  size_t n = json_object_size(vocab);
  if (n > WORDPIECE_MAX_ID) { err_setk(err, ERR_BAD_INPUT, "WordPiece model: %zu tokens, more than ids allow", n); return NULL; }
  const char **toks = malloc((n + 1) * sizeof *toks);
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  if (!toks || !ids) { free(toks); free(ids); err_setk(err, ERR_NOMEM, "WordPiece model: out of memory"); return NULL; }
  size_t k = 0;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)vocab, key, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= WORDPIECE_MAX_ID) {
      err_setk(err, ERR_BAD_INPUT, "WordPiece model: token \"%.60s\" has an id that is not an integer in [0, %d)", key,
               WORDPIECE_MAX_ID);
      free(toks); free(ids);
      return NULL;
    }
    toks[k] = key;
    ids[k++] = (int32_t)json_integer_value(v);
  }
  WordPiece *w = wordpiece_new((int)k, toks, ids, unk, prefix, max_chars, err);
  free(toks); free(ids);
  return w;
}

int wordpiece_size(const WordPiece *w) { return w->size; }
int wordpiece_count(const WordPiece *w) { return w->n; }
const char *wordpiece_prefix(const WordPiece *w) { return w->prefix; }
const char *wordpiece_unk(const WordPiece *w) { return w->unk; }
int wordpiece_max_chars(const WordPiece *w) { return w->max_chars; }

int wordpiece_token_id(const WordPiece *w, const char *tok, size_t len) {
  int e = find(w, fnv_bytes(FNV_OFFSET, tok, len), tok, len, "", 0);
  return e < 0 ? -1 : w->id[e];
}

const char *wordpiece_token(const WordPiece *w, int id) {
  if (id < 0 || id >= w->size || w->by_id[id] < 0) return NULL;
  return w->arena + w->off[w->by_id[id]];
}

/* The whole word as the unk token, or -2 when the vocabulary lacks it. */
static int encode_unk(const WordPiece *w, int32_t *ids, int32_t *starts, int cap) {
  if (w->unk_id < 0) return -2;
  if (cap < 1) return -1;
  ids[0] = w->unk_id;
  if (starts) starts[0] = 0;
  return 1;
}

int wordpiece_encode(const WordPiece *w, const char *s, size_t len, int32_t *ids, int32_t *starts, int cap) {
  const unsigned char *u = (const unsigned char *)s;
  size_t chars = 0;
  for (size_t i = 0; i < len; i++) chars += (u[i] & 0xC0) != 0x80;
  if (chars > (size_t)w->max_chars) return encode_unk(w, ids, starts, cap);
  uint64_t hs[STACK_BYTES + 1];
  int k = 0;
  size_t start = 0;
  while (start < len) {
    /* hs[m] is the hash of the candidate of m bytes from start (prefix in front
    ** after the first piece). */
    const char *head = start ? w->prefix : "";
    size_t hl = start ? w->prefix_len : 0;
    size_t lim = start ? w->max_cont : w->max_first;
    if (lim > len - start) lim = len - start;
    uint64_t h0 = start ? w->prefix_state : FNV_OFFSET, h = h0;
    size_t stored = lim < STACK_BYTES ? lim : STACK_BYTES;
    for (size_t m = 1; m <= stored; m++) hs[m] = h = fnv_step(h, u[start + m - 1]);
    size_t m = lim;
    int e = -1;
    for (; m > 0; m--) {
      if (start + m < len && (u[start + m] & 0xC0) == 0x80) continue;
      /* Candidates past the stored states (tokens over STACK_BYTES bytes, rare)
      ** hash from scratch, so encoding never allocates. */
      uint64_t hm = m <= stored ? hs[m] : fnv_bytes(h0, s + start, m);
      if ((e = find(w, hm, head, hl, s + start, m)) >= 0) break;
    }
    if (e < 0) return encode_unk(w, ids, starts, cap);
    /* Past cap, go on counting: the word may still turn out to be one unk. */
    if (k < cap) {
      ids[k] = w->id[e];
      if (starts) starts[k] = (int32_t)start;
    }
    k++;
    start += m;
  }
  return k > cap ? -1 : k;
}

/* ---- decoder --------------------------------------------------------------- */

/* HF's cleanup(), in its order; each replacement runs over the whole token. */
static const char *const cleanup_from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not", " 's", " 've", " 're"};
static const char *const cleanup_to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve", "'re"};

/* Replaces every non-overlapping occurrence of from in a (left to right) into b. */
static void replace_all(Buf *b, const char *a, size_t n, const char *from, const char *to) {
  size_t fl = strlen(from), tl = strlen(to), i = 0;
  b->len = 0;
  buf_put(b, "", 0);
  while (i < n) {
    if (i + fl <= n && memcmp(a + i, from, fl) == 0) { buf_put(b, to, tl); i += fl; }
    else { buf_put(b, a + i, 1); i++; }
  }
}

void wordpiece_decode(Buf *out, const char *const *tokens, int n, const char *prefix, int cleanup) {
  size_t pl = strlen(prefix);
  Buf t[2] = {{0}, {0}};
  for (int i = 0; i < n; i++) {
    const char *tok = tokens[i];
    size_t tl = strlen(tok);
    t[0].len = 0;
    if (i == 0) buf_put(&t[0], tok, tl);
    /* starts_with then replacen(prefix, "", 1): the first occurrence is the prefix itself. */
    else if (tl >= pl && memcmp(tok, prefix, pl) == 0) buf_put(&t[0], tok + pl, tl - pl);
    else { buf_put(&t[0], " ", 1); buf_put(&t[0], tok, tl); }
    int cur = 0;
    if (cleanup) {
      for (size_t r = 0; r < sizeof cleanup_from / sizeof *cleanup_from; r++) {
        replace_all(&t[1 - cur], t[cur].p, t[cur].len, cleanup_from[r], cleanup_to[r]);
        cur = 1 - cur;
      }
    }
    buf_put(out, t[cur].p, t[cur].len);
  }
  buf_put(out, "", 0);
  if (t[0].oom || t[1].oom) out->oom = 1;
  buf_free(&t[0]);
  buf_free(&t[1]);
}
