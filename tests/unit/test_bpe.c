/* The byte-level pieces (engine/tok/bytelevel.c) and the byte-level BPE model
** (engine/tok/bpe.c) against Hugging Face tokenizers (npm tokenizers@0.23.2).
**
** Two kinds of expected values: small hand-made vocabularies whose results were
** taken once from node (tests/unit/bpe_ref.js's library, noted at each check), and
** bulk comparisons that run node now through tests/unit/bpe_ref.js (the split on
** WikiText-2 and BANKING77 texts and hard cases, the decoder on broken UTF-8, a BPE
** trained by HF on WikiText-2 against HF's encode, RobertaProcessing's offsets).
** Those print SKIP when node or the data is missing. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/buf.h"
#include "engine/tok/bpe.h"
#include "engine/tok/bytelevel.h"
#include "engine/tok/unicode.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

#define REF "tests/unit/bpe_ref.js"
/* The data folder: $MASKD_DATA, else ../shared/data (as tests/lib.sh finds it). */
static const char *data_dir(void) {
  const char *d = getenv("MASKD_DATA");
  return d && *d ? d : "../shared/data";
}

static char tmp[512];
static int have_node;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- texts ------------------------------------------------------------------- */

typedef struct Texts { char **s; size_t *len; int n, cap; } Texts;

static void texts_add(Texts *t, const char *s, size_t len) {
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 64;
    t->s = realloc(t->s, (size_t)t->cap * sizeof *t->s);
    t->len = realloc(t->len, (size_t)t->cap * sizeof *t->len);
  }
  t->s[t->n] = malloc(len + 1);
  memcpy(t->s[t->n], s, len);
  t->s[t->n][len] = 0;
  t->len[t->n++] = len;
}

static void texts_free(Texts *t) {
  for (int i = 0; i < t->n; i++) free(t->s[i]);
  free(t->s); free(t->len);
  memset(t, 0, sizeof *t);
}

/* Adds up to max non-empty lines of a file (without their "\n"); 0, or -1 when unreadable. */
static int texts_from_file(Texts *t, const char *path, int max) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int k = 0;
  while (k < max && (n = getline(&line, &cap, f)) > 0) {
    if (line[n - 1] == '\n') n--;
    if (n == 0) continue;
    texts_add(t, line, (size_t)n);
    k++;
  }
  free(line);
  fclose(f);
  return 0;
}

/* Writes each text as one JSON string a line (the texts are valid UTF-8). */
static int write_jsonl(const char *path, const Texts *t) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  for (int i = 0; i < t->n; i++) {
    json_t *j = json_stringn(t->s[i], t->len[i]);
    char *d = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    fprintf(f, "%s\n", d ? d : "\"\"");
    free(d);
    json_decref(j);
  }
  return fclose(f);
}

/* Reads the output lines of the reference into an array (n lines expected). */
static char **read_lines(const char *path, int n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char **out = calloc((size_t)n + 1, sizeof *out);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int k = 0;
  while (k < n && (len = getline(&line, &cap, f)) >= 0) {
    if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
    out[k++] = strdup(line);
  }
  free(line);
  fclose(f);
  if (k < n) { for (int i = 0; i < k; i++) free(out[i]); free(out); return NULL; }
  return out;
}

static void free_lines(char **l, int n) {
  if (!l) return;
  for (int i = 0; i < n; i++) free(l[i]);
  free(l);
}

static int run_ref(const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "node " REF " %s", args);
  return system(cmd);
}

/* ---- the alphabet ---------------------------------------------------------- */

static void test_alphabet(void) {
  int ok = 1, seen[324] = {0};
  for (int b = 0; b < 256 && ok; b++) {
    char c[2], back[2];
    int m = bytelevel_char_of_byte((unsigned char)b, c);
    uint32_t cp = m == 1 ? (unsigned char)c[0] : ((uint32_t)(c[0] & 0x1F) << 6) | (c[1] & 0x3F);
    ok = cp < 324 && !seen[cp] && bytelevel_byte_of_char(cp) == b && bytelevel_token_bytes(c, (size_t)m, back) == 1 &&
         (unsigned char)back[0] == b;
    if (ok) seen[cp] = 1;
  }
  check(ok, "alphabet_bijection", "byte and char do not round-trip");
  char c[2];
  /* GPT-2's well-known chars: ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A, 0 -> 'Ā', 173 -> 'Ń' U+0143. */
  int m1 = bytelevel_char_of_byte(' ', c);
  int ok2 = m1 == 2 && memcmp(c, "\xC4\xA0", 2) == 0;
  m1 = bytelevel_char_of_byte('\n', c);
  ok2 = ok2 && m1 == 2 && memcmp(c, "\xC4\x8A", 2) == 0;
  m1 = bytelevel_char_of_byte(0, c);
  ok2 = ok2 && m1 == 2 && memcmp(c, "\xC4\x80", 2) == 0;
  m1 = bytelevel_char_of_byte(173, c);
  ok2 = ok2 && m1 == 2 && memcmp(c, "\xC5\x83", 2) == 0;
  m1 = bytelevel_char_of_byte('a', c);
  ok2 = ok2 && m1 == 1 && c[0] == 'a';
  check(ok2, "alphabet_known_chars", "Ġ Ċ Ā Ń or 'a' wrong");
  char out[8];
  check(bytelevel_token_bytes("a b", 3, out) == -1 && bytelevel_token_bytes("\xE6\x97\xA5", 3, out) == -1 &&
        bytelevel_token_bytes("\xC4", 1, out) == -1 && bytelevel_token_bytes("\xC4\xA0hi", 4, out) == 3,
        "alphabet_token_bytes", "a char outside the alphabet or broken UTF-8 not refused");
}

/* ---- the split ------------------------------------------------------------- */

static const char *hard_cases[] = {
  "Hello world", "  leading spaces", "trailing spaces   ", "a  b   c    d", "don't stop", "DON'T 'S 's 'Re 're",
  "I'm we'll they've you'd she's it't", "'''", "x'", "'", "a\nb", "a \nb", "a\n b", "a \n b", "\n\n\nx", "tab\there",
  "\t\tword", "  \t x", "1234 5678 12ab ab12", " 12", "٣٤٥ ١٢ and ௧௨", "Ⅻ and ½ ²", "emoji 😀😀 x😀y", "日本語のテキスト 中文",
  "e\xCC\x81t\xC3\xA9 cafe\xCC\x81", "\xCC\x81\xCC\x81x", "nbsp\xC2\xA0here \xC2\xA0x", "ideo\xE3\x80\x80space\xE3\x80\x80 x",
  "space before newline \n", "ends with spaces  ", " ", "  ", "\n", "!!!??? ...", " !x", "a!b", "a ! b",
  "$100.00 (approx)", "mixed\r\nlines\r\n", "\xE2\x80\xA8line sep\xE2\x80\xA9", "\x0B\x0C vt ff", "\x1C\x1D\x1E\x1F x",
  "\xC2\x85nel", "a\xE2\x80\x8B" "b zero width", "\xEF\xBB\xBF" "bom", "'s'S'T'Ll'll", " 's", "!'s", "a's", "Ω Ωmega ωmega",
  "\xE1\x9A\x80ogham", "x\xE2\x80\x83\xE2\x80\x83y", "@user #tag http://x.y/z?a=1&b=2", "end'",
};

static void test_split_vs_hf(void) {
  if (!have_node) { check_skip("split_vs_hf", "node or " REF " not found"); return; }
  Texts t = {0};
  for (size_t i = 0; i < sizeof hard_cases / sizeof *hard_cases; i++) texts_add(&t, hard_cases[i], strlen(hard_cases[i]));
  /* Every ASCII char in a few contexts (the ASCII class table against HF's \s \p{L} \p{N}). */
  for (int c = 1; c < 128; c++) {
    char s[16];
    int n = snprintf(s, sizeof s, "a%c b %c%c1", c, c, c);
    texts_add(&t, s, (size_t)n);
  }
  int hard = t.n;
  char path[1024];
  snprintf(path, sizeof path, "%s/wikitext-2/valid.txt", data_dir());
  int have_wiki = texts_from_file(&t, path, 3000) == 0;
  int wiki_end = t.n;
  snprintf(path, sizeof path, "%s/banking77/test.csv", data_dir());
  int have_bank = texts_from_file(&t, path, 3100) == 0;
  char in[600], out[600], args[4096];
  snprintf(in, sizeof in, "%s/split.jsonl", tmp);
  snprintf(out, sizeof out, "%s/split.out", tmp);
  snprintf(args, sizeof args, "split %s %s", in, out);
  char **ref = NULL;
  if (write_jsonl(in, &t) == 0 && run_ref(args) == 0) ref = read_lines(out, t.n);
  if (!ref) { check(0, "split_vs_hf", "the reference did not run"); texts_free(&t); return; }
  int bad_hard = 0, bad_wiki = 0, bad_bank = 0, first_bad = -1;
  Buf got = {0};
  for (int i = 0; i < t.n; i++) {
    int32_t *st = malloc((t.len[i] + 1) * sizeof *st);
    size_t k = bytelevel_split(t.s[i], t.len[i], st);
    got.len = 0;
    buf_put(&got, "", 0);
    for (size_t j = 0; j < k; j++) buf_printf(&got, j ? " %d" : "%d", (int)st[j]);
    free(st);
    if (strcmp(got.p, ref[i]) != 0) {
      if (i < hard) bad_hard++; else if (i < wiki_end) bad_wiki++; else bad_bank++;
      if (first_bad < 0) {
        first_bad = i;
        printf("# split mismatch on \"%s\": maskd [%s] HF [%s]\n", t.s[i], got.p, ref[i]);
      }
    }
  }
  buf_free(&got);
  check(bad_hard == 0, "split_hard_cases_vs_hf", "%d of %d differ", bad_hard, hard);
  if (have_wiki) check(bad_wiki == 0, "split_wikitext_vs_hf", "%d of %d lines differ", bad_wiki, wiki_end - hard);
  else check_skip("split_wikitext_vs_hf", "no wikitext-2/valid.txt in $MASKD_DATA or ../shared/data");
  if (have_bank) check(bad_bank == 0, "split_banking77_vs_hf", "%d of %d lines differ", bad_bank, t.n - wiki_end);
  else check_skip("split_banking77_vs_hf", "no banking77/test.csv in $MASKD_DATA or ../shared/data");
  free_lines(ref, t.n);
  texts_free(&t);
}

/* The char classes over the whole code space (every 7th code point, each in a context
** that shows whether it joins a letter, a number, an other char or a space). HF's
** Oniguruma knows Unicode 16.0's \p{L} and \p{N}; unicode.c's tables, generated from
** Python 3.11's unicodedata, are Unicode 14.0 (in full, 9,392 code points differ: the
** letters and numbers added by 15.0, 15.1 and 16.0, e.g. U+1C89, U+A7CB, U+105C0,
** U+31350, digits U+10D40, U+1CCF0). */
static void test_split_code_points(void) {
  if (!have_node) { check_skip("split_code_points_vs_hf", "node or " REF " not found"); return; }
  Texts t = {0};
  uint32_t cps[160000];
  int n = 0;
  for (uint32_t c = 0x80; c < 0x110000; c += 7) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    char u[4], s[64];
    int m = uni_encode(c, u), k = 0;
    static const char *const glue[] = {"a", "1", "!", " ", " x", ""};
    for (int g = 0; g < 6; g++) { memcpy(s + k, u, (size_t)m); k += m; size_t gl = strlen(glue[g]); memcpy(s + k, glue[g], gl); k += (int)gl; }
    texts_add(&t, s, (size_t)k);
    cps[n++] = c;
  }
  char in[600], out[600], args[4096];
  snprintf(in, sizeof in, "%s/cp.jsonl", tmp);
  snprintf(out, sizeof out, "%s/cp.out", tmp);
  snprintf(args, sizeof args, "split %s %s", in, out);
  char **ref = write_jsonl(in, &t) == 0 && run_ref(args) == 0 ? read_lines(out, t.n) : NULL;
  int bad = 0;
  Buf got = {0}, list = {0};
  buf_put(&list, "", 0);
  for (int i = 0; ref && i < t.n; i++) {
    int32_t st[64];
    size_t k = bytelevel_split(t.s[i], t.len[i], st);
    got.len = 0;
    buf_put(&got, "", 0);
    for (size_t j = 0; j < k; j++) buf_printf(&got, j ? " %d" : "%d", (int)st[j]);
    if (strcmp(got.p, ref[i]) != 0) {
      if (bad < 12) buf_printf(&list, " U+%04X", (unsigned)cps[i]);
      bad++;
    }
  }
  if (!ref) check(0, "split_code_points_vs_hf", "the reference did not run");
  else check(bad == 0, "split_code_points_vs_hf", "%d of %d code points classed otherwise than HF's Oniguruma (Unicode 16 \\p{L} \\p{N}):%s%s", bad, t.n,
             list.p, bad > 12 ? " ..." : "");
  buf_free(&got); buf_free(&list);
  free_lines(ref, t.n);
  texts_free(&t);
}

static void test_split_odd_input(void) {
  /* Any bytes (the tokenizer hands valid UTF-8, but nothing here may trust that):
  ** pieces start at 0, strictly increase, stay inside the text. */
  uint64_t x = 88172645463325252ull;
  int ok = 1;
  for (int trial = 0; trial < 2000 && ok; trial++) {
    size_t n = 1 + trial % 64;
    unsigned char s[64];
    for (size_t i = 0; i < n; i++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      /* Bias towards the interesting bytes: spaces, quotes, letters, lead and continuation bytes. */
      static const unsigned char pick[] = {' ', '\'', 's', 'a', '1', '\n', 0x80, 0xBF, 0xC2, 0xE2, 0xF0, 0xF4, 0xFF, 0xC0, 0xED};
      s[i] = (x >> 40) % 3 ? pick[(x >> 20) % sizeof pick] : (unsigned char)(x >> 8);
    }
    int32_t st[64];
    size_t k = bytelevel_split((const char *)s, n, st);
    ok = k >= 1 && k <= n && st[0] == 0;
    for (size_t j = 1; j < k && ok; j++) ok = st[j] > st[j - 1] && (size_t)st[j] < n;
  }
  int32_t st[1];
  check(ok && bytelevel_split("", 0, st) == 0, "split_odd_input", "pieces out of order or out of range");
}

/* ---- the decoder ----------------------------------------------------------- */

/* The byte-level token of raw bytes. */
static char *bl_token(const char *raw, size_t n) {
  char *t = malloc(2 * n + 1), *p = t;
  for (size_t i = 0; i < n; i++) p += bytelevel_char_of_byte((unsigned char)raw[i], p);
  *p = 0;
  return t;
}

static void test_decode_vs_hf(void) {
  /* Token lists, each token given as raw bytes (turned byte-level) or, after '=', as itself. */
  static const char *cases[][4] = {
    {"hello", " world", NULL}, {"\xE2\x82", NULL}, {"\xE2\x82", "\xAC", NULL}, {"\xE2", "x", NULL},
    {"\xF0\x9F\x98", NULL}, {"\xF0\x9F", "\x98\x80", NULL}, {"\xF0", NULL}, {"\xC0\xAF", NULL}, {"\xE0\x80\xAF", NULL},
    {"\xED\xA0\x80", NULL}, {"\xED\x9F\xBF", NULL}, {"\x80\x80x\xBF", NULL}, {"\xF4\x90\x80\x80", NULL},
    {"\xF5\xFF\xFE", NULL}, {"\xC2", "\xC2\xA0", NULL}, {"=<s>", "a", "=</s>", NULL}, {"=a b", "\xE2\x82", NULL},
    {"=\xE6\x97\xA5\xE6\x9C\xAC", " x", NULL}, {"\xE0\xA0", NULL}, {"\xF1\x80\x80", "z", NULL}, {NULL},
  };
  int nc = (int)(sizeof cases / sizeof *cases);
  char *all_bytes = malloc(256);
  for (int b = 0; b < 256; b++) all_bytes[b] = (char)b;
  /* Each case's tokens, byte-level; the last case is every byte 0..255 in order. */
  Texts lines = {0};
  char **toks[64];
  int counts[64];
  for (int c = 0; c < nc; c++) {
    toks[c] = calloc(4, sizeof(char *));
    int k = 0;
    if (c == nc - 1) { toks[c][k++] = bl_token(all_bytes, 256); }
    for (int j = 0; c < nc - 1 && cases[c][j]; j++)
      toks[c][k++] = cases[c][j][0] == '=' ? strdup(cases[c][j] + 1) : bl_token(cases[c][j], strlen(cases[c][j]));
    counts[c] = k;
    json_t *arr = json_array();
    for (int j = 0; j < k; j++) json_array_append_new(arr, json_string(toks[c][j]));
    char *d = json_dumps(arr, JSON_COMPACT);
    texts_add(&lines, d, strlen(d));
    free(d);
    json_decref(arr);
  }
  free(all_bytes);
  int bad = 0, ran = 0;
  if (have_node) {
    char in[600], out[600], args[4096];
    snprintf(in, sizeof in, "%s/decode.jsonl", tmp);
    snprintf(out, sizeof out, "%s/decode.out", tmp);
    FILE *f = fopen(in, "wb");
    for (int c = 0; f && c < nc; c++) fprintf(f, "%s\n", lines.s[c]);
    if (f) fclose(f);
    snprintf(args, sizeof args, "decode %s %s", in, out);
    char **ref = run_ref(args) == 0 ? read_lines(out, nc) : NULL;
    if (ref) {
      ran = 1;
      for (int c = 0; c < nc; c++) {
        Buf b = {0}, hex = {0};
        bytelevel_decode(&b, (const char *const *)toks[c], counts[c]);
        buf_put(&hex, "", 0);
        for (size_t i = 0; i < b.len; i++) buf_printf(&hex, "%02x", (unsigned char)b.p[i]);
        if (strcmp(hex.p, ref[c]) != 0) {
          if (!bad) printf("# decode case %d: maskd %s HF %s\n", c, hex.p, ref[c]);
          bad++;
        }
        buf_free(&b); buf_free(&hex);
      }
      free_lines(ref, nc);
    }
  }
  if (ran) check(bad == 0, "decode_vs_hf", "%d of %d token lists differ", bad, nc);
  else check_skip("decode_vs_hf", "node or " REF " did not run");
  /* Rust's rule by hand (docs of Utf8Chunks): E2 82 then 'x' is one U+FFFD, F0 9F 98 one,
  ** C0 AF two (C0 is never a lead), ED A0 80 three (a surrogate is refused at A0). */
  Buf b = {0};
  const char *t1[] = {"\xC3\xA2\xC4\xA2x"};  /* 'âĢ' is bytes E2 82 */
  bytelevel_decode(&b, t1, 1);
  int ok = b.len == 4 && memcmp(b.p, "\xEF\xBF\xBDx", 4) == 0;
  buf_free(&b);
  Buf c2 = {0};
  bytelevel_utf8_lossy(&c2, "\xC0\xAF\xED\xA0\x80", 5);
  ok = ok && c2.len == 15;
  buf_free(&c2);
  check(ok, "decode_lossy_rule", "maximal invalid subsequences not replaced one by one");
  for (int c = 0; c < nc; c++) { for (int j = 0; j < counts[c]; j++) free(toks[c][j]); free(toks[c]); }
  texts_free(&lines);
}

/* ---- hand-made BPE models (expected values from node tokenizers 0.23.2) ------ */

static Bpe *model_of(const char *json, Err *err) {
  json_error_t je;
  json_t *j = json_loads(json, 0, &je);
  if (!j) { err_set(err, "test JSON: %s", je.text); return NULL; }
  Bpe *b = bpe_from_json(j, err);
  json_decref(j);
  return b;
}

/* Encodes s and compares "ids|starts" with want. */
static void expect_encode(const char *name, const char *model, const char *s, const char *want) {
  Err err = {0};
  Bpe *b = model_of(model, &err);
  if (!b) { check(0, name, "model refused: %s", err.msg); return; }
  size_t n = strlen(s);
  void *scratch = malloc(bpe_scratch_bytes(n));
  int32_t ids[64], sp[128];
  int k = bpe_encode(b, s, n, ids, sp, 64, scratch);
  Buf g = {0};
  buf_put(&g, "", 0);
  for (int i = 0; i < k; i++) buf_printf(&g, i ? " %d" : "%d", (int)ids[i]);
  buf_puts(&g, "|");
  for (int i = 0; i < k; i++) buf_printf(&g, i ? " %d:%d" : "%d:%d", (int)sp[2 * i], (int)sp[2 * i + 1]);
  check(k >= 0 && strcmp(g.p, want) == 0, name, "got %s, want %s", g.p, want);
  buf_free(&g);
  free(scratch);
  bpe_free(b);
}

static void expect_refused(const char *name, const char *model, const char *what) {
  Err err = {0};
  Bpe *b = model_of(model, &err);
  check(!b && strstr(err.msg, what) && err.kind == ERR_BAD_INPUT, name, "%s (want a refusal naming \"%s\")",
        b ? "accepted" : err.msg, what);
  bpe_free(b);
}

#define V1 "{\"a\":0,\"b\":1,\"c\":2,\"aa\":3,\"aaaa\":4,\"ab\":5,\"abab\":6,\"bb\":7,\"ca\":8,\"aaa\":9,\"bc\":10,\"abc\":11"
#define M(vocab_tail, merges, extra) "{\"type\":\"BPE\",\"dropout\":null,\"vocab\":" V1 vocab_tail "},\"merges\":" merges extra "}"

static void test_rules(void) {
  /* node: BPE {vocab V1, merges [[a,a]]} on "aaa" -> ids [3,0] offsets (0,2),(2,3): leftmost first.
  ** Expected strings are "ids|start:end ...", the offsets as node gave them. */
  expect_encode("bpe_tie_leftmost", M("", "[[\"a\",\"a\"]]", ""), "aaa", "3 0|0:2 2:3");
  /* node: merges [[a,a],[aa,aa]] on "aaaaa" -> [4,0]. */
  expect_encode("bpe_tie_then_rank", M("", "[[\"a\",\"a\"],[\"aa\",\"aa\"]]", ""), "aaaaa", "4 0|0:4 4:5");
  /* node: merges [[b,c],[a,b]] on "abc" -> a, bc: the lower rank wins over the leftmost. */
  expect_encode("bpe_rank_order", M("", "[[\"b\",\"c\"],[\"a\",\"b\"]]", ""), "abc", "0 10|0:1 1:3");
  /* node: [[b,b],[a,b]] on "abbb" -> [0,7,1]. */
  expect_encode("bpe_rank_order2", M("", "[[\"b\",\"b\"],[\"a\",\"b\"]]", ""), "abbb", "0 7 1|0:1 1:3 3:4");
  /* node: [ab, bc, ab] on "abc" -> a, bc: a repeated merge keeps its last rank. */
  expect_encode("bpe_repeated_merge_last_rank", M("", "[[\"a\",\"b\"],[\"b\",\"c\"],[\"a\",\"b\"]]", ""), "abc", "0 10|0:1 1:3");
  /* node: ignore_merges true, "aaa" is a token -> [9]; "aaaaa" is not -> [3,3,0]. */
  expect_encode("bpe_ignore_merges", M("", "[[\"a\",\"a\"]]", ",\"ignore_merges\":true"), "aaa", "9|0:3");
  expect_encode("bpe_ignore_merges_miss", M("", "[[\"a\",\"a\"]]", ",\"ignore_merges\":true"), "aaaaa", "3 3 0|0:2 2:4 4:5");
  /* node: no unk_token: "axb" with merge [a,b] -> [5] (0,2): "x" dropped, "ab" merges across it,
  ** and HF's offsets count only the kept bytes. */
  expect_encode("bpe_unknown_dropped", M("", "[[\"a\",\"b\"]]", ""), "axb", "5|0:2");
  /* node: unk "<unk>": "axxa" -> a <unk> <unk> a; with fuse_unk -> a <unk> a (offsets 0,1,3). */
  expect_encode("bpe_unk", M(",\"<unk>\":12", "[]", ",\"unk_token\":\"<unk>\""), "axxa", "0 12 12 0|0:1 1:2 2:3 3:4");
  expect_encode("bpe_unk_fused", M(",\"<unk>\":12", "[]", ",\"unk_token\":\"<unk>\",\"fuse_unk\":true"), "axxa", "0 12 0|0:1 1:3 3:4");
  /* node: a fused unk takes part in merges: [<unk>,a] on "xxab" -> [<unk>a, b]. */
  expect_encode("bpe_unk_merges", M(",\"<unk>\":12,\"<unk>a\":13", "[[\"<unk>\",\"a\"]]", ",\"unk_token\":\"<unk>\",\"fuse_unk\":true"),
                "xxab", "13 1|0:3 3:4");
  /* node: legacy "a b" strings read like pairs: ["a a","b b"] on "aabb" -> [3,7]. */
  expect_encode("bpe_legacy_merges", M("", "[\"a a\",\"b b\"]", ""), "aabb", "3 7|0:2 2:4");
  expect_encode("bpe_empty_word", M("", "[]", ""), "", "|");
  expect_encode("bpe_dropout_zero", M("", "[[\"a\",\"b\"]]", ",\"dropout\":0.0"), "ab", "5|0:2");
  /* Raw bytes in: ' ' is the token "Ġ"; a byte >= 0x80 is its alphabet char's token. */
  expect_encode("bpe_raw_bytes", "{\"type\":\"BPE\",\"vocab\":{\"\xC4\xA0\":0,\"x\":1,\"\xC4\xA0x\":2,\"\xC3\xA9\":3},"
                "\"merges\":[[\"\xC4\xA0\",\"x\"]]}", " x\xE9", "2 3|0:2 2:3");

  /* node refuses: "Token `x` out of vocabulary" for a part, "Token `ca`..." for a result. */
  expect_refused("bpe_refuse_merge_part", M("", "[[\"a\",\"x\"]]", ""), "\"x\" is not in the vocabulary");
  expect_refused("bpe_refuse_merge_result", M("", "[[\"c\",\"b\"]]", ""), "\"cb\" is not in the vocabulary");
  /* node: "data did not match any variant of untagged enum MergeType" for a mix; "a b c" invalid. */
  expect_refused("bpe_refuse_mixed_merges", M("", "[\"a a\",[\"b\",\"b\"]]", ""), "merge 2");
  expect_refused("bpe_refuse_three_parts", M("", "[\"a b c\"]", ""), "merge 1");
  expect_refused("bpe_refuse_dropout", M("", "[]", ",\"dropout\":0.1"), "dropout");
  expect_refused("bpe_refuse_prefix", M("", "[]", ",\"continuing_subword_prefix\":\"##\""), "continuing_subword_prefix");
  expect_refused("bpe_refuse_suffix", M("", "[]", ",\"end_of_word_suffix\":\"</w>\""), "end_of_word_suffix");
  expect_refused("bpe_refuse_byte_fallback", M("", "[]", ",\"byte_fallback\":true"), "byte_fallback");
  expect_refused("bpe_refuse_unk_missing", M("", "[]", ",\"unk_token\":\"<zz>\""), "unk_token \"<zz>\"");
  expect_refused("bpe_refuse_shared_id", "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}", "share id 0");
  expect_refused("bpe_refuse_type", "{\"type\":\"WordPiece\",\"vocab\":{},\"merges\":[]}", "type");
  expect_refused("bpe_refuse_bad_id", "{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}", "\"a\"");
  /* Empty affixes are none (HF's Some("") adds nothing). */
  expect_encode("bpe_empty_affixes", M("", "[[\"a\",\"b\"]]", ",\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\""), "ab", "5|0:2");

  Err err = {0};
  Bpe *b = model_of(M(",\"<unk>\":20", "[[\"a\",\"b\"]]", ",\"unk_token\":\"<unk>\""), &err);
  int ok = b && bpe_size(b) == 21 && bpe_token_id(b, "ab", 2) == 5 && bpe_token_id(b, "zz", 2) == -1 &&
           strcmp(bpe_token(b, 5), "ab") == 0 && bpe_token(b, 15) == NULL && bpe_token(b, 21) == NULL &&
           bpe_token(b, -1) == NULL && strcmp(bpe_unk(b), "<unk>") == 0 && bpe_merge_count(b) == 1;
  /* cap too small: -1. */
  char scratch[1024];
  int32_t ids[2];
  ok = ok && bpe_encode(b, "abab", 4, ids, NULL, 1, scratch) == -1 && bpe_encode(b, "abab", 4, ids, NULL, 2, scratch) == 2;
  check(ok, "bpe_accessors", "size, ids, tokens or cap wrong%s%s", b ? "" : ": ", b ? "" : err.msg);
  bpe_free(b);
}

/* merges.txt as HF's BPE::from_file reads it (node BPE.fromFile: a blank line is
** "Merges text file invalid at line 2", a "#foo" line at line 1, CRLF accepted). */
static void test_files_text(void) {
  const char *vocab = "{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"bc\":4}";
  static const struct { const char *name, *merges; int ok; const char *err; } cases[] = {
    {"merges_txt_plain", "#version: 0.2\na b\nb c\n", 1, NULL},
    {"merges_txt_crlf", "#version: 0.2\r\na b\r\nb c\r\n", 1, NULL},
    {"merges_txt_no_version", "a b\nb c", 1, NULL},
    {"merges_txt_blank_line", "#version: 0.2\na b\n\nb c\n", 0, "merge 2"},
    {"merges_txt_trailing_blank", "a b\n\n", 0, "merge 2"},
    {"merges_txt_comment", "#version: 0.2\n#foo\na b\n", 0, "merge 1"},
    {"merges_txt_three_parts", "a b c\n", 0, "merge 1"},
    {"merges_txt_unknown_part", "a x\n", 0, "\"x\" is not in the vocabulary"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    Err err = {0};
    Bpe *b = bpe_from_files_text(vocab, strlen(vocab), cases[i].merges, strlen(cases[i].merges), &err);
    if (cases[i].ok) {
      char scratch[1024];
      int32_t ids[4];
      int k = b ? bpe_encode(b, "abc", 3, ids, NULL, 4, scratch) : -1;
      /* "abc" with a b (rank 0), b c (rank 1): ab, c. */
      check(b && bpe_merge_count(b) == 2 && k == 2 && ids[0] == 3 && ids[1] == 2, cases[i].name, "%s",
            b ? "wrong merges" : err.msg);
    } else {
      check(!b && strstr(err.msg, cases[i].err), cases[i].name, "%s", b ? "accepted" : err.msg);
    }
    bpe_free(b);
  }
  Err err = {0};
  Bpe *b = bpe_from_files_text("{", 1, "", 0, &err);
  check(!b && strstr(err.msg, "vocab.json"), "merges_txt_bad_vocab", "%s", b ? "accepted" : err.msg);
  bpe_free(b);
}

/* ---- end to end: a BPE trained by HF ---------------------------------------- */

/* Split + BPE of a text with bpe_encode: ids, and byte offsets (2 a token, widened
** to whole chars as HF's are) in off; "ids|start:end ..." into g. */
static int encode_text(const Bpe *b, const char *s, size_t n, Buf *g, int32_t *ids, int32_t *off, int cap, void *scratch,
                       int32_t *pieces) {
  size_t k = bytelevel_split(s, n, pieces);
  int total = 0;
  for (size_t p = 0; p < k; p++) {
    size_t a = (size_t)pieces[p], e = p + 1 < k ? (size_t)pieces[p + 1] : n;
    int m = bpe_encode(b, s + a, e - a, ids + total, off + 2 * total, cap - total, scratch);
    if (m < 0) return -1;
    for (int j = 0; j < 2 * m; j++) off[2 * total + j] += (int32_t)a;
    total += m;
  }
  bytelevel_char_offsets(s, n, off, total);
  if (g) {
    g->len = 0;
    buf_put(g, "", 0);
    for (int i = 0; i < total; i++) buf_printf(g, i ? " %d" : "%d", (int)ids[i]);
    buf_puts(g, "|");
    for (int i = 0; i < total; i++) buf_printf(g, i ? " %d:%d" : "%d:%d", (int)off[2 * i], (int)off[2 * i + 1]);
  }
  return total;
}

static void e2e_texts(Texts *t) {
  char valid[600];
  snprintf(valid, sizeof valid, "%s/wikitext-2/valid.txt", data_dir());
  texts_from_file(t, valid, 1500);
  /* Long words take the heap body (over 48 bytes), crossing the threshold on the way. */
  Buf w = {0};
  for (int len = 40; len <= 70; len += 3) {
    w.len = 0;
    buf_put(&w, "", 0);
    for (int i = 0; i < len; i++) buf_put(&w, &"thequickbrownfox"[i % 16], 1);
    texts_add(t, w.p, w.len);
  }
  w.len = 0;
  for (int i = 0; i < 300; i++) buf_puts(&w, "the");
  buf_puts(&w, " ");
  for (int i = 0; i < 200; i++) buf_puts(&w, "1234567890");
  buf_puts(&w, " ");
  for (int i = 0; i < 200; i++) buf_puts(&w, "=@,.");
  buf_puts(&w, " antidisestablishmentarianismsupercalifragilisticexpialidocious");
  texts_add(t, w.p, w.len);
  w.len = 0;
  for (int i = 0; i < 100; i++) buf_puts(&w, "\xE6\x97\xA5\xE6\x9C\xAC\xC3\xA9");  /* bytes the training text may lack */
  buf_puts(&w, " caf\xC3\xA9 \xF0\x9F\x98\x80!");
  texts_add(t, w.p, w.len);
  buf_free(&w);
}

static void test_e2e(void) {
  if (!have_node) { check_skip("bpe_trained_vs_hf", "node or " REF " not found"); return; }
  char train[600], model[600], args[4096];
  snprintf(train, sizeof train, "%s/train.txt", tmp);
  snprintf(model, sizeof model, "%s/bpe.json", tmp);
  /* The first 2 MB of WikiText-2's training text: HF trains on it in about a second. */
  char train_src[600];
  snprintf(train_src, sizeof train_src, "%s/wikitext-2/train.txt", data_dir());
  FILE *in = fopen(train_src, "rb"), *out = fopen(train, "wb");
  if (!in || !out) {
    if (in) fclose(in);
    if (out) fclose(out);
    check_skip("bpe_trained_vs_hf", "no wikitext-2/train.txt in $MASKD_DATA or ../shared/data");
    return;
  }
  char *buf = malloc(2 << 20);
  size_t got = fread(buf, 1, 2 << 20, in);
  fwrite(buf, 1, got, out);
  free(buf);
  fclose(in); fclose(out);
  snprintf(args, sizeof args, "train %s %s > /dev/null", train, model);
  json_error_t je;
  json_t *tj = run_ref(args) == 0 ? json_load_file(model, 0, &je) : NULL;
  if (!tj) { check(0, "bpe_trained_vs_hf", "HF did not train"); return; }
  Err err = {0};
  Bpe *b = bpe_from_json(json_object_get(tj, "model"), &err);
  check(b != NULL, "bpe_load_hf_trained", "%s", err.msg);
  if (!b) { json_decref(tj); return; }

  Texts t = {0};
  e2e_texts(&t);
  char tin[600], tout[600];
  snprintf(tin, sizeof tin, "%s/e2e.jsonl", tmp);
  snprintf(tout, sizeof tout, "%s/e2e.out", tmp);
  snprintf(args, sizeof args, "encode %s %s %s", model, tin, tout);
  char **ref = write_jsonl(tin, &t) == 0 && run_ref(args) == 0 ? read_lines(tout, t.n) : NULL;
  size_t maxlen = 0;
  for (int i = 0; i < t.n; i++) if (t.len[i] > maxlen) maxlen = t.len[i];
  void *scratch = malloc(bpe_scratch_bytes(maxlen));
  int32_t *ids = malloc((maxlen + 1) * sizeof *ids), *st = malloc((maxlen + 1) * 2 * sizeof *st);
  int32_t *pieces = malloc((maxlen + 1) * sizeof *pieces);
  Buf g = {0};
  int bad_ids = 0, bad_starts = 0, ntok = 0;
  for (int i = 0; ref && i < t.n; i++) {
    int k = encode_text(b, t.s[i], t.len[i], &g, ids, st, (int)maxlen + 1, scratch, pieces);
    ntok += k;
    char *bar_g = strchr(g.p, '|'), *bar_r = strchr(ref[i], '|');
    if (!bar_r || (size_t)(bar_g - g.p) != (size_t)(bar_r - ref[i]) || memcmp(g.p, ref[i], (size_t)(bar_g - g.p))) {
      if (!bad_ids) printf("# ids differ on line %d: maskd %.200s HF %.200s\n", i, g.p, ref[i]);
      bad_ids++;
    } else if (strcmp(bar_g, bar_r) != 0) {
      if (!bad_starts) printf("# offsets differ on line %d: maskd %.200s HF %.200s\n", i, bar_g, bar_r);
      bad_starts++;
    }
  }
  if (!ref) check(0, "bpe_trained_vs_hf", "HF did not encode");
  else {
    check(bad_ids == 0, "bpe_trained_ids_vs_hf", "%d of %d texts differ", bad_ids, t.n);
    check(bad_starts == 0, "bpe_trained_offsets_vs_hf", "%d of %d texts differ", bad_starts, t.n);
    printf("# %d texts, %d tokens compared with HF\n", t.n, ntok);
  }
  free_lines(ref, t.n);

  /* The same model as legacy vocab.json + merges.txt encodes every text the same way. */
  json_t *mj = json_object_get(tj, "model");
  char *vtext = json_dumps(json_object_get(mj, "vocab"), JSON_COMPACT);
  Buf mt = {0};
  buf_puts(&mt, "#version: 0.2\n");
  json_t *pair;
  size_t pi;
  json_array_foreach(json_object_get(mj, "merges"), pi, pair) {
    buf_puts(&mt, json_string_value(json_array_get(pair, 0)));
    buf_puts(&mt, " ");
    buf_puts(&mt, json_string_value(json_array_get(pair, 1)));
    buf_puts(&mt, "\n");
  }
  Bpe *b2 = bpe_from_files_text(vtext, strlen(vtext), mt.p, mt.len, &err);
  int same = b2 != NULL;
  int32_t *ids2 = malloc((maxlen + 1) * sizeof *ids2), *st2 = malloc((maxlen + 1) * 2 * sizeof *st2);
  for (int i = 0; same && i < t.n; i++) {
    int k1 = encode_text(b, t.s[i], t.len[i], NULL, ids, st, (int)maxlen + 1, scratch, pieces);
    int k2 = encode_text(b2, t.s[i], t.len[i], NULL, ids2, st2, (int)maxlen + 1, scratch, pieces);
    same = k1 == k2 && memcmp(ids, ids2, (size_t)k1 * sizeof *ids) == 0;
  }
  check(same, "bpe_files_text_same_as_json", "%s", b2 ? "encodings differ" : err.msg);
  free(ids2); free(st2); free(vtext); buf_free(&mt); bpe_free(b2);

  /* RobertaProcessing's trimmed offsets, with and without add_prefix_space. */
  Texts r = {0};
  static const char *rt[] = {" hello world", "hello  world", "  two leading", "trailing   ", "a \n b", " ", "   ",
                             "x  ", " caf\xC3\xA9  \xE6\x97\xA5 end", "tab\t word"};
  for (size_t i = 0; i < sizeof rt / sizeof *rt; i++) texts_add(&r, rt[i], strlen(rt[i]));
  for (int i = 0; i < 200 && i < t.n; i++) texts_add(&r, t.s[i], t.len[i]);
  char rin[600], rout[600];
  snprintf(rin, sizeof rin, "%s/rob.jsonl", tmp);
  snprintf(rout, sizeof rout, "%s/rob.out", tmp);
  write_jsonl(rin, &r);
  for (int aps = 0; aps <= 1; aps++) {
    snprintf(args, sizeof args, "roberta %s %s %s %d", model, rin, rout, aps);
    char **rr = run_ref(args) == 0 ? read_lines(rout, r.n) : NULL;
    int bad = 0;
    for (int i = 0; rr && i < r.n; i++) {
      int k = encode_text(b, r.s[i], r.len[i], NULL, ids, st, (int)maxlen + 1, scratch, pieces);
      int32_t *off = st;
      const char **toks = malloc(((size_t)k + 1) * sizeof *toks);
      for (int j = 0; j < k; j++) toks[j] = bpe_token(b, ids[j]);
      bytelevel_trim_offsets(toks, off, k, aps, NULL, 0);
      g.len = 0;
      buf_put(&g, "", 0);
      for (int j = 0; j < k; j++) buf_printf(&g, j ? " %d:%d" : "%d:%d", (int)off[2 * j], (int)off[2 * j + 1]);
      if (strcmp(g.p, rr[i]) != 0) {
        if (!bad) printf("# trimmed offsets differ on \"%.80s\" (aps %d): maskd %.200s HF %.200s\n", r.s[i], aps, g.p, rr[i]);
        bad++;
      }
      free(toks);
    }
    if (!rr) check(0, aps ? "trim_offsets_prefix_space_vs_hf" : "trim_offsets_vs_hf", "HF did not run");
    else check(bad == 0, aps ? "trim_offsets_prefix_space_vs_hf" : "trim_offsets_vs_hf", "%d of %d differ", bad, r.n);
    free_lines(rr, r.n);
  }
  texts_free(&r);

  /* RobertaProcessing's pair type ids: all 0 (what bytelevel.h documents). */
  char tout2[600];
  snprintf(tout2, sizeof tout2, "%s/pair.out", tmp);
  snprintf(args, sizeof args, "pair %s 'hello world' 'again here' > %s", model, tout2);
  char **pl = run_ref(args) == 0 ? read_lines(tout2, 1) : NULL;
  int zeros = pl && strlen(pl[0]) > 0;
  for (const char *p = pl ? pl[0] : ""; zeros && *p; p++) zeros = *p == '0' || *p == ' ';
  check(zeros, "roberta_pair_type_ids_zero", "HF gave %s", pl ? pl[0] : "nothing");
  free_lines(pl, 1);

  /* Speed without any cache: every word of the texts encoded from scratch. */
  size_t bytes = 0;
  double t0 = now_s();
  for (int rep = 0; rep < 3; rep++)
    for (int i = 0; i < t.n; i++) {
      encode_text(b, t.s[i], t.len[i], NULL, ids, st, (int)maxlen + 1, scratch, pieces);
      bytes += t.len[i];
    }
  double dt = now_s() - t0;
  printf("# split + bpe_encode without a cache: %.1f MB/s\n", bytes / dt / 1e6);

  /* A 10,000-byte word is not quadratic: well under a second. */
  char *longw = malloc(10000);
  for (int i = 0; i < 10000; i++) longw[i] = "abcdefghij"[(i * 7 + i / 13) % 10];
  void *ls = malloc(bpe_scratch_bytes(10000));
  int32_t *lids = malloc(10000 * sizeof *lids);
  t0 = now_s();
  int lk = bpe_encode(b, longw, 10000, lids, NULL, 10000, ls);
  dt = now_s() - t0;
  check(lk > 0 && dt < 0.5, "bpe_long_word_fast", "%d tokens in %.3f s", lk, dt);
  printf("# 10,000-byte word: %d tokens in %.2f ms\n", lk, dt * 1e3);

  /* Any bytes: no crash, ids in range, starts increasing. */
  uint64_t x = 0x9E3779B97F4A7C15ull;
  int ok = 1;
  for (int trial = 0; trial < 3000 && ok; trial++) {
    size_t n = 1 + (size_t)trial % 200;
    for (size_t i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; longw[i] = (char)(x >> 32); }
    int32_t sp[400];
    int k = bpe_encode(b, longw, n, lids, sp, 200, ls);
    ok = k >= 0 && k <= (int)n;
    for (int j = 0; j < k && ok; j++)
      ok = lids[j] >= 0 && lids[j] < bpe_size(b) && (j == 0 || sp[2 * j] >= sp[2 * j - 2]) && sp[2 * j] < sp[2 * j + 1] &&
           (size_t)sp[2 * j + 1] <= n;
  }
  check(ok, "bpe_odd_bytes", "bad ids or starts on random bytes");
  free(longw); free(ls); free(lids);

  buf_free(&g);
  free(scratch); free(ids); free(st); free(pieces);
  texts_free(&t);
  bpe_free(b);
  json_decref(tj);
}

int main(void) {
  if (fixture_tmpdir(tmp, sizeof tmp, "test_bpe")) { printf("FAIL tmpdir: cannot create %s\n", tmp); return 1; }
  have_node = access(REF, R_OK) == 0 && access("tests/node_modules/tokenizers", R_OK) == 0 &&
              system("node --version > /dev/null 2>&1") == 0;
  test_alphabet();
  test_split_odd_input();
  test_split_vs_hf();
  test_split_code_points();
  test_decode_vs_hf();
  test_rules();
  test_files_text();
  test_e2e();
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  if (system(cmd) != 0) printf("# could not remove %s\n", tmp);
  return check_exit();
}
