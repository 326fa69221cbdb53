/* Unit tests of engine/tok/wordpiece: the greedy split on hand-made vocabularies
** and the decoder, each expected value HF tokenizers' (npm tokenizers@0.23.2:
** WordPiece.init(vocab, options) under a WhitespaceSplit tokenizer, encode's ids and
** offsets; wordPieceDecoder(prefix, cleanup).decode), pasted here; the model's
** lookups, limits and every refusal of wordpiece_from_json / wordpiece_new.
**
**   test_wordpiece --encode TOKENIZER.json FILE
**       prints the ids of each line of FILE through BertNormalizer, BertPreTokenizer
**       and the WordPiece model of TOKENIZER.json (as HF saves a trained one), one
**       line of space-separated ids per line: tests/long/long_wordpiece_hf.sh compares
**       them with HF's encoding of the same lines.
**   test_wordpiece --bench TOKENIZER.json FILE
**       the same pipeline over FILE's lines, timed on one thread: prints MB/s. */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tok/bert_text.h"
#include "engine/tok/unicode.h"
#include "engine/tok/wordpiece.h"
#include "tests/unit/check.h"

static WordPiece *make(const char *const *toks, int n, const char *prefix, int max_chars) {
  int32_t ids[64];
  for (int i = 0; i < n; i++) ids[i] = i;
  Err err = {0};
  WordPiece *w = wordpiece_new(n, toks, ids, "[UNK]", prefix, max_chars, &err);
  if (!w) printf("FAIL wordpiece_build: %s\n", err.msg);
  return w;
}

/* "id@start id@start ..." of wordpiece_encode, or "ERR" for -2, "CAP" for -1. */
static void encode_str(const WordPiece *w, const char *s, char *out, size_t cap) {
  int32_t ids[64], starts[64];
  int k = wordpiece_encode(w, s, strlen(s), ids, starts, 64);
  out[0] = 0;
  if (k == -2) { snprintf(out, cap, "ERR"); return; }
  if (k == -1) { snprintf(out, cap, "CAP"); return; }
  for (int i = 0; i < k; i++) snprintf(out + strlen(out), cap - strlen(out), "%s%d@%d", i ? " " : "", ids[i], starts[i]);
}

typedef struct EncCase { int vocab; const char *word, *want; } EncCase;

static void test_encode_hf(void) {
  static const char *const v1[] = {"[UNK]", "h", "##e", "##llo", "h\303\251", "##\303\251", "un", "##aff", "##able", "##a", "a",
                                   "##", "###", "#", "w", "##\303\266", "##rld", "w\303\266rld", "\360\237\230\200",
                                   "##\360\237\230\200"};
  static const char *const v2[] = {"a", "b", "ab", "c", "[UNK]"};
  static const char *const v3[] = {"a", "##a"};
  WordPiece *w[3] = {make(v1, 20, "##", 8), make(v2, 5, "", 100), make(v3, 2, "##", 100)};
  if (!w[0] || !w[1] || !w[2]) return;
  /* HF's ids@byte offsets (ERR: HF's "Missing [UNK] token from the vocabulary"). */
  static const EncCase cases[] = {
    {0, "hello", "1@0 2@1 3@2"},
    {0, "h\303\251llo", "4@0 3@3"},
    {0, "unaffable", "0@0"},  /* 9 characters, max 8 */
    {0, "unaffablea", "0@0"},
    {0, "w\303\266rld", "17@0"},
    {0, "w\303\266rlds", "0@0"},
    {0, "w", "14@0"},
    {0, "aaa", "10@0 9@1 9@2"},
    {0, "a##", "10@0 12@1 12@2"},
    {0, "##", "11@0"},
    {0, "###", "12@0"},
    {0, "####", "12@0 12@3"},
    {0, "#a", "13@0 9@1"},
    {0, "\360\237\230\200\360\237\230\200", "18@0 19@4"},
    {0, "h\360\237\230\200", "1@0 19@1"},
    {0, "h\303\251\303\251\303\251\303\251", "4@0 5@3 5@5 5@7"},
    {0, "h\303\251\303\251\303\251\303\251\303\251", "4@0 5@3 5@5 5@7 5@9"},
    {0, "h\303\251\303\251\303\251\303\251\303\251\303\251\303\251", "4@0 5@3 5@5 5@7 5@9 5@11 5@13"},
    {0, "h\303\251\303\251\303\251\303\251\303\251\303\251\303\251\303\251", "0@0"},
    {0, "x", "0@0"},
    {0, "unaffx", "0@0"},
    {1, "ab", "2@0"},
    {1, "abc", "2@0 3@2"},
    {1, "abca", "2@0 3@2 0@3"},
    {1, "ca", "3@0 0@1"},
    {1, "cab", "3@0 2@1"},
    {1, "d", "4@0"},
    {2, "aa", "0@0 1@1"},
    {2, "ab", "ERR"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char got[512], name[64];
    encode_str(w[cases[i].vocab], cases[i].word, got, sizeof got);
    snprintf(name, sizeof name, "wordpiece_encode_hf_%zu", i);
    check(strcmp(got, cases[i].want) == 0, name, "\"%s\": got \"%s\", HF \"%s\"", cases[i].word, got, cases[i].want);
  }
  /* An empty word is no token (HF's loop never runs). */
  int32_t ids[4];
  check(wordpiece_encode(w[0], "", 0, ids, NULL, 4) == 0, "wordpiece_encode_empty", "an empty word gave tokens");
  /* cap: too small is -1, unless the word ends up as one unk. */
  check(wordpiece_encode(w[0], "hello", 5, ids, NULL, 2) == -1, "wordpiece_encode_cap", "3 tokens fit in 2");
  check(wordpiece_encode(w[0], "hellox", 6, ids, NULL, 1) == 1 && ids[0] == 0, "wordpiece_encode_cap_unk",
        "a word that is one unk needs 1 slot");
  check(wordpiece_encode(w[0], "hello", 5, ids, NULL, 3) == 3, "wordpiece_encode_cap_exact", "3 tokens in 3 slots");
  for (int i = 0; i < 3; i++) wordpiece_free(w[i]);
}

/* A word longer than every token and than the stack's hash room still splits. */
static void test_long_word(void) {
  static const char *const v[] = {"[UNK]", "a", "##a"};
  WordPiece *w = make(v, 3, "##", 1000);
  char s[600];
  memset(s, 'a', sizeof s);
  int32_t ids[600];
  int k = wordpiece_encode(w, s, sizeof s, ids, NULL, 600);
  int ok = k == 600 && ids[0] == 1;
  for (int i = 1; ok && i < 600; i++) ok = ids[i] == 2;
  check(ok, "wordpiece_encode_long_word", "600 a's gave %d tokens", k);
  wordpiece_free(w);
  /* A 300-byte token (past the stack's 256) is found whole. */
  char big[301];
  memset(big, 'b', 300);
  big[300] = 0;
  const char *v2[] = {"[UNK]", big, "b"};
  w = make(v2, 3, "##", 1000);
  k = wordpiece_encode(w, big, 300, ids, NULL, 600);
  check(k == 1 && ids[0] == 1, "wordpiece_encode_long_token", "a 300-byte token gave %d tokens", k);
  wordpiece_free(w);
}

static void test_lookups(void) {
  static const char *const toks[] = {"[UNK]", "x", "##y"};
  static const int32_t ids[] = {5, 0, 9};
  Err err = {0};
  WordPiece *w = wordpiece_new(3, toks, ids, "[UNK]", "##", 100, &err);
  if (!w) { check(0, "wordpiece_lookups", "%s", err.msg); return; }
  check(wordpiece_size(w) == 10 && wordpiece_count(w) == 3, "wordpiece_size", "size %d count %d", wordpiece_size(w),
        wordpiece_count(w));
  check(wordpiece_token_id(w, "##y", 3) == 9 && wordpiece_token_id(w, "##yz", 2) == -1 && wordpiece_token_id(w, "y", 1) == -1 &&
            wordpiece_token_id(w, "[UNK]", 5) == 5,
        "wordpiece_token_id", "lookups wrong");
  check(wordpiece_token(w, 9) && strcmp(wordpiece_token(w, 9), "##y") == 0 && wordpiece_token(w, 3) == NULL &&
            wordpiece_token(w, 10) == NULL && wordpiece_token(w, -1) == NULL,
        "wordpiece_token", "reverse lookups wrong");
  check(strcmp(wordpiece_prefix(w), "##") == 0 && strcmp(wordpiece_unk(w), "[UNK]") == 0 && wordpiece_max_chars(w) == 100,
        "wordpiece_settings", "settings wrong");
  wordpiece_free(w);
}

static void test_json(void) {
  const char *ok_json = "{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
                        "\"max_input_chars_per_word\":100,\"vocab\":{\"[UNK]\":0,\"a\":1,\"##b\":2}}";
  json_t *j = json_loads(ok_json, 0, NULL);
  Err err = {0};
  WordPiece *w = wordpiece_from_json(j, &err);
  char got[64];
  if (w) encode_str(w, "ab", got, sizeof got);
  check(w && wordpiece_size(w) == 3 && strcmp(got, "1@0 2@1") == 0, "wordpiece_from_json", "%s", w ? got : err.msg);
  wordpiece_free(w);
  json_decref(j);
  static const char *const bad[][2] = {
    {"{\"type\":\"BPE\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1,\"vocab\":{}}", "type"},
    {"{\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1,\"vocab\":{}}", "unk_token"},
    {"{\"unk_token\":\"[UNK]\",\"max_input_chars_per_word\":1,\"vocab\":{}}", "continuing_subword_prefix"},
    {"{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"vocab\":{}}", "max_input_chars_per_word"},
    {"{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1}", "vocab"},
    {"{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":-1,\"vocab\":{}}", "max_input_chars_per_word"},
    {"{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1,\"vocab\":{\"a\":0,\"b\":0}}", "id 0"},
    {"{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1,\"vocab\":{\"a\":-1}}", "\"a\""},
    {"{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1,\"vocab\":{\"a\":1.5}}", "\"a\""},
    {"{\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1,\"vocab\":{\"a\":99999999}}", "\"a\""},
    {"{\"unk_token\":7,\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":1,\"vocab\":{}}", "unk_token"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    j = json_loads(bad[i][0], 0, NULL);
    Err e = {0};
    w = wordpiece_from_json(j, &e);
    char name[64];
    snprintf(name, sizeof name, "wordpiece_from_json_refuses_%zu", i);
    check(!w && e.kind == ERR_BAD_INPUT && strstr(e.msg, bad[i][1]) != NULL, name, "%s -> \"%s\"", bad[i][0], e.msg);
    wordpiece_free(w);
    json_decref(j);
  }
  /* wordpiece_new: a token twice. */
  static const char *const dup[] = {"a", "a"};
  static const int32_t dup_ids[] = {0, 1};
  Err e = {0};
  w = wordpiece_new(2, dup, dup_ids, "[UNK]", "##", 100, &e);
  check(!w && e.kind == ERR_BAD_INPUT && strstr(e.msg, "twice"), "wordpiece_new_refuses_duplicate_token", "\"%s\"", e.msg);
  wordpiece_free(w);
}

/* ---- decoder ---- */

typedef struct DecCase { const char *toks[12]; int n; const char *prefix; int cleanup; const char *want; } DecCase;

static void test_decode_hf(void) {
  static const DecCase cases[] = {
    {{"##uelo", "Ara", "##\303\272j", "##o", "No", "##guera"}, 6, "##", 0, "##uelo Ara\303\272jo Noguera"},
    {{"hello", ",", "world", "!", "do", "n't", "it", "'s", ".", "a", "##b", "\077"}, 12, "##", 1, "hello, world! don't it's. ab\077"},
    {{"I", "'m", "'", "s", "'ve", " do not", "x .y", " .", " .a"}, 9, "##", 1, "I'm ' s've  don't x.y . .a"},
    {{"##a", "##b", "c"}, 3, "##", 1, "##ab c"},
    {{"a", "b", "##c"}, 3, "", 1, "ab##c"},
    {{"a", "b@@", "@@c"}, 3, "@@", 0, "a b@@c"},
    {{0}, 0, "##", 1, ""},
    {{"it", " ' s"}, 2, "##", 1, "it's"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    Buf b = {0};
    wordpiece_decode(&b, cases[i].toks, cases[i].n, cases[i].prefix, cases[i].cleanup);
    char name[64];
    snprintf(name, sizeof name, "wordpiece_decode_hf_%zu", i);
    check(b.p && !b.oom && strcmp(b.p, cases[i].want) == 0, name, "got \"%s\", HF \"%s\"", b.p ? b.p : "(null)", cases[i].want);
    buf_free(&b);
  }
}

/* ---- the end-to-end driver for tests/long/long_wordpiece_hf.sh ---- */

/* Buffers one line's pipeline reuses (grown, never shrunk). */
typedef struct Work { char *out; int32_t *from, *bounds; void *scratch; size_t cap; } Work;

static int work_fit(Work *wk, size_t len) {
  if (len <= wk->cap) return 0;
  size_t cap = len * 2 + 64;
  free(wk->out); free(wk->from); free(wk->bounds); free(wk->scratch);
  wk->out = malloc(bert_normalize_bound(cap));
  wk->from = malloc(bert_normalize_bound(cap) * sizeof *wk->from);
  wk->bounds = malloc((2 * bert_normalize_bound(cap) + 2) * sizeof *wk->bounds);
  wk->scratch = malloc(bert_normalize_scratch_bytes(cap));
  wk->cap = cap;
  return wk->out && wk->from && wk->bounds && wk->scratch ? 0 : -1;
}

/* normalize + pretokenize + encode of one line; returns the token count. */
static long encode_line(const WordPiece *w, const BertNormalizer *bn, Work *wk, const char *line, size_t len, FILE *print) {
  size_t m = bert_normalize(bn, line, len, wk->out, wk->from, wk->scratch);
  size_t words = bert_pretokenize(wk->out, m, wk->bounds);
  long total = 0;
  for (size_t k = 0; k < words; k++) {
    int32_t ids[512], starts[513];
    int32_t a = wk->bounds[2 * k], b = wk->bounds[2 * k + 1];
    int c = wordpiece_encode(w, wk->out + a, (size_t)(b - a), ids, starts, 512);
    if (c < 0) { if (print) fprintf(print, "%sERR%d", total ? " " : "", c); continue; }
    starts[c] = b - a;
    /* A token's span in the line: from the source character of its first byte to
    ** the end of the source character of its last. */
    for (int t = 0; print && t < c; t++) {
      int32_t first = wk->from[a + starts[t]], last = wk->from[a + starts[t + 1] - 1];
      size_t cl;
      uni_decode(line, (size_t)last, &cl);
      fprintf(print, "%s%d@%d:%zu", total + t ? " " : "", ids[t], first, (size_t)last + cl);
    }
    total += c;
  }
  if (print) fputc('\n', print);
  return total;
}

static int encode_file(const char *tok_path, const char *path, int bench) {
  json_error_t je;
  json_t *root = json_load_file(tok_path, 0, &je);
  if (!root) { fprintf(stderr, "%s: %s\n", tok_path, je.text); return 1; }
  Err err = {0};
  WordPiece *w = wordpiece_from_json(json_object_get(root, "model"), &err);
  if (!w) { fprintf(stderr, "%s: %s\n", tok_path, err.msg); return 1; }
  json_t *nj = json_object_get(root, "normalizer");
  json_t *sa = json_object_get(nj, "strip_accents");
  BertNormalizer bn = {json_is_true(json_object_get(nj, "clean_text")), json_is_true(json_object_get(nj, "handle_chinese_chars")),
                       json_is_null(sa) || !sa ? -1 : json_is_true(sa), json_is_true(json_object_get(nj, "lowercase"))};
  FILE *f = fopen(path, "r");
  if (!f) { perror(path); return 1; }
  /* The bench reads the whole file first, so only the pipeline is timed. */
  char *text = NULL;
  size_t tcap = 0, tlen = 0, r;
  char chunk[65536];
  while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (tlen + r > tcap) { tcap = (tlen + r) * 2; text = realloc(text, tcap); }
    memcpy(text + tlen, chunk, r);
    tlen += r;
  }
  Work wk = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long tokens = 0;
  for (size_t i = 0; i < tlen;) {
    const char *nl = memchr(text + i, '\n', tlen - i);
    size_t len = nl ? (size_t)(nl - (text + i)) : tlen - i;
    if (work_fit(&wk, len)) { fprintf(stderr, "out of memory\n"); return 1; }
    tokens += encode_line(w, &bn, &wk, text + i, len, bench ? NULL : stdout);
    i += len + (nl != NULL);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (bench) printf("{\"seconds\": %.4f, \"bytes\": %zu, \"tokens\": %ld, \"mb_per_s\": %.2f}\n", s, tlen, tokens, (double)tlen / 1e6 / s);
  free(wk.out); free(wk.from); free(wk.bounds); free(wk.scratch);
  free(text);
  fclose(f);
  wordpiece_free(w);
  json_decref(root);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--encode") == 0) return encode_file(argv[2], argv[3], 0);
  if (argc == 4 && strcmp(argv[1], "--bench") == 0) return encode_file(argv[2], argv[3], 1);
  if (argc != 1) { fprintf(stderr, "usage: test_wordpiece [--encode|--bench TOKENIZER.json FILE]\n"); return 2; }
  test_encode_hf();
  test_long_word();
  test_lookups();
  test_json();
  test_decode_hf();
  return check_exit();
}
