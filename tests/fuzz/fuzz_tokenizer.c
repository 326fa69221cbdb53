/* libFuzzer harness: tokenizer.json (engine/tok/tokenizer.h), maskd's own layout and HF's.
** Input: the tokenizer.json text, optionally followed by a NUL byte and a text to
** encode. tokenizer_load (a file) and tokenizer_from_json (memory) must agree. For an
** accepted tokenizer, on that text and on probes made from its own vocabulary:
**   - ids lie in [0, vocab size), offsets in [0, len] with start <= end;
**   - the ids-only batch path (tokenizer_encode_many, word cache, template written
**     directly) gives the same ids as tokenizer_encode (alignments, post-processor);
**   - invalid UTF-8 is refused, decode and pair encoding work on what encodes;
**   - tokenizer_to_json reads back (tokenizer_from_json) to a tokenizer that writes
**     the same text and encodes the probes to the same ids and offsets. */
#include <stdint.h>
#include <string.h>

#include "engine/tok/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

#define MAX_PROBES 16

typedef struct Probe { const char *s; size_t n; } Probe;

static const char *const fixed[] = {
  "Hello world", "the cat [MASK] sat on the mat.", " ``quoted'' text  with   spaces\t\nand lines ",
  "h\xc3\xa9llo \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x98\x80", "", " ", "[CLS][SEP]<unk><pad>[MASK]",
  "a\xc2\xa0" "b\xe2\x80\x83" "c", "\xe2\x96\x81the \xe2\x96\x81", "bad \xff utf8", "x\xed\xa0\x80y",
};

static void check_encoding(const Tokenizer *t, const Encoding *e, size_t len, const char *what) {
  int V = tokenizer_vocab_size(t);
  for (int i = 0; i < e->n; i++) {
    FUZZ_CHECK(e->ids[i] >= 0 && e->ids[i] < V, "%s: id %d outside [0, %d)", what, e->ids[i], V);
    int32_t a = e->offsets[2 * i], b = e->offsets[2 * i + 1];
    FUZZ_CHECK(a >= 0 && a <= b && (size_t)b <= len, "%s: token %d offsets %d:%d in a text of %zu bytes", what, i, a, b, len);
  }
}

/* Encodes p both ways (with and without the post-processor) and checks they agree. */
static void probe(const Tokenizer *t, Probe p, Encoding *e) {
  Err err = {0};
  int valid = tokenizer_utf8_valid(p.s, p.n, NULL);
  for (int special = 0; special < 2; special++) {
    int rc = tokenizer_encode(t, p.s, p.n, special, e, &err);
    if (!valid) { FUZZ_CHECK(rc < 0, "invalid UTF-8 encoded"); continue; }
    int32_t *ids = NULL;
    size_t *starts = NULL;
    Err err2 = {0};
    const char *texts[1] = {p.s};
    size_t lens[1] = {p.n};
    int rc2 = tokenizer_encode_many(t, texts, lens, 1, special, 1, &ids, &starts, &err2);
    FUZZ_CHECK((rc < 0) == (rc2 < 0), "encode %s, encode_many %s (special %d)", rc < 0 ? err.msg : "works",
               rc2 < 0 ? err2.msg : "works", special);
    if (rc < 0) continue;
    check_encoding(t, e, p.n, special ? "encode with specials" : "encode");
    FUZZ_CHECK(starts[0] == 0 && starts[1] == (size_t)e->n, "encode gives %d ids, encode_many %zu (special %d)", e->n,
               starts[1] - starts[0], special);
    for (int i = 0; i < e->n; i++)
      FUZZ_CHECK(ids[i] == e->ids[i], "id %d: encode %d, encode_many %d (special %d)", i, e->ids[i], ids[i], special);
    free(ids);
    free(starts);
    for (int skip = 0; skip < 2; skip++) {
      char *d = tokenizer_decode(t, e->ids, e->n, skip, &err);
      FUZZ_CHECK(d, "decode failed: %s", err.msg);
      free(d);
    }
  }
  if (valid) {
    Encoding pair = {0};
    if (tokenizer_encode_pair(t, p.s, p.n, "x y", 3, 1, &pair, &err) == 0) check_encoding(t, &pair, p.n > 3 ? p.n : 3, "pair");
    encoding_free(&pair);
  }
}

/* Probes: the fixed texts, the input's text, and the tokenizer's first tokens run
** together and apart (so added tokens and pieces are found in the text). */
static int make_probes(const Tokenizer *t, const uint8_t *text, size_t text_len, Probe *out, char *joined[2]) {
  int n = 0;
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed && n < MAX_PROBES - 3; i++) out[n++] = (Probe){fixed[i], strlen(fixed[i])};
  if (text) out[n++] = (Probe){(const char *)text, text_len};
  for (int k = 0; k < 2; k++) {
    size_t cap = 1, len = 0;
    for (int id = 0; id < tokenizer_vocab_size(t) && id < 24; id++) {
      const char *s = tokenizer_id_to_token(t, id);
      if (s) cap += strlen(s) + 1;
    }
    joined[k] = malloc(cap);
    FUZZ_CHECK(joined[k], "oom");
    for (int id = 0; id < tokenizer_vocab_size(t) && id < 24; id++) {
      const char *s = tokenizer_id_to_token(t, id);
      if (!s) continue;
      memcpy(joined[k] + len, s, strlen(s));
      len += strlen(s);
      if (k) joined[k][len++] = ' ';
    }
    joined[k][len] = 0;
    out[n++] = (Probe){joined[k], len};
  }
  return n;
}

/* Seeds: tokenizer.json as maskd writes it (the seed recipe, with and without the
** template), one followed by a text; HF-written files are added by make_seeds. */
static void write_seeds(const char *dir) {
  static const char *pieces[] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]", "\xe2\x96\x81", "\xe2\x96\x81the",
                                 "\xe2\x96\x81" "cat", "s", "a", "t", "e", "\xe2\x96\x81" "caf\xc3\xa9", ".", "\""};
  int n = (int)(sizeof pieces / sizeof *pieces);
  double sc[32];
  for (int i = 0; i < n; i++) sc[i] = i < 5 ? 0 : -1.0 - 0.25 * i;
  for (int k = 0; k < 3; k++) {
    Err err = {0};
    /* k = 1: no [CLS]/[SEP] specials, so no post-processor; k = 2: no unk. */
    Tokenizer *t = k == 1 ? tokenizer_new_seed(n - 2, pieces + 2, sc + 2, 0, 3, &err)
                          : tokenizer_new_seed(n, pieces, sc, k == 2 ? -1 : 2, 5, &err);
    FUZZ_CHECK(t, "%s", err.msg);
    char *json = tokenizer_to_json(t, &err);
    FUZZ_CHECK(json, "%s", err.msg);
    static const char *names[] = {"maskd_seed.json", "maskd_no_template.json", "maskd_no_unk.json"};
    fuzz_write_file(fuzz_seed_path(dir, names[k]), json, strlen(json));
    if (k == 0) {
      static const char text[] = "the ``cat'' [MASK] sat on the caf\xc3\xa9 mat.";
      size_t len = strlen(json);
      char *both = malloc(len + 1 + sizeof text);
      memcpy(both, json, len);
      both[len] = 0;
      memcpy(both + len + 1, text, sizeof text - 1);
      fuzz_write_file(fuzz_seed_path(dir, "maskd_seed_with_text.bin"), both, len + sizeof text);
      free(both);
    }
    free(json);
    tokenizer_free(t);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fuzz_seeds_then_exit(write_seeds);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t json_len = nul ? (size_t)(nul - data) : size;
  const uint8_t *text = nul ? nul + 1 : NULL;
  size_t text_len = nul ? size - json_len - 1 : 0;

  Err err = {0}, ferr = {0};
  Tokenizer *t = tokenizer_from_json((const char *)data, json_len, &err);
  Tokenizer *tf = tokenizer_load(fuzz_memfd_path(data, json_len), &ferr);
  FUZZ_CHECK(!t == !tf, "memory %s, file %s", t ? "accepts" : err.msg, tf ? "accepts" : ferr.msg);
  tokenizer_free(tf);
  if (!t) {
    FUZZ_CHECK(err.msg[0], "a refusal without a message");
    return 0;
  }
  int V = tokenizer_vocab_size(t);
  if (tokenizer_model(t))
    FUZZ_CHECK(V >= unigram_size(tokenizer_model(t)), "vocab size %d below the model's %d", V, unigram_size(tokenizer_model(t)));
  for (int id = 0; id < V && id < 256; id++) {
    const char *s = tokenizer_id_to_token(t, id);
    if (s) {
      /* Every token looks up, but a normalized added token's normalized text, which HF's
      ** token_to_id does not find either (its content does). */
      int back = tokenizer_token_to_id(t, s);
      const char *content = tokenizer_added_content(t, id);
      if (back < 0 && content && strcmp(content, s)) back = tokenizer_token_to_id(t, content);
      FUZZ_CHECK(back >= 0 && back < V, "token \"%s\" (id %d) looks up %d", s, id, back);
    }
  }

  Probe probes[MAX_PROBES];
  char *joined[2];
  int np = make_probes(t, text, text_len, probes, joined);
  Encoding e = {0};
  for (int i = 0; i < np; i++) probe(t, probes[i], &e);

  /* Written and read back: the same text, the same encodings. */
  char *j1 = tokenizer_to_json(t, &err);
  FUZZ_CHECK(j1, "tokenizer_to_json failed: %s", err.msg);
  Tokenizer *t2 = tokenizer_from_json(j1, strlen(j1), &err);
  FUZZ_CHECK(t2, "the written tokenizer.json is refused: %s", err.msg);
  char *j2 = tokenizer_to_json(t2, &err);
  FUZZ_CHECK(j2 && !strcmp(j1, j2), "written, read and written again: the text changed");
  FUZZ_CHECK(tokenizer_vocab_size(t2) == V, "vocab size %d -> %d", V, tokenizer_vocab_size(t2));
  Encoding e2 = {0};
  for (int i = 0; i < np; i++) {
    for (int special = 0; special < 2; special++) {
      Err a = {0}, b = {0};
      int r1 = tokenizer_encode(t, probes[i].s, probes[i].n, special, &e, &a);
      int r2 = tokenizer_encode(t2, probes[i].s, probes[i].n, special, &e2, &b);
      FUZZ_CHECK(r1 == r2, "probe %d: %s before writing, %s after", i, r1 ? a.msg : "works", r2 ? b.msg : "works");
      if (r1) continue;
      FUZZ_CHECK(e.n == e2.n && (!e.n || (!memcmp(e.ids, e2.ids, (size_t)e.n * 4) && !memcmp(e.offsets, e2.offsets, (size_t)e.n * 8))),
                 "probe %d encodes differently after writing and reading back", i);
    }
  }
  encoding_free(&e);
  encoding_free(&e2);
  free(j1);
  free(j2);
  free(joined[0]);
  free(joined[1]);
  tokenizer_free(t2);
  tokenizer_free(t);
  return 0;
}
