/* Unit tests of engine/tok/bert_text (BertNormalizer, BertPreTokenizer): every rule
** on hand-made texts whose expected outputs are HF tokenizers' (npm tokenizers@0.23.2,
** normalizeString / preTokenizeString, pasted here), the byte map from[], canonical
** reordering across characters and over long runs, and the bounds.
**
**   test_bert_text --dump all FILE     one line per code point: what maskd's tables and
**                                      pipeline give, and whether it is a word character
**                                      (\w); tests/cli/test_unicode_hf.sh compares it
**                                      with HF over all of Unicode
**   test_bert_text --dump pairs FILE   NFD of every non-starter next to one mark of each
**                                      combining class, both orders (same script)
**   test_bert_text --texts IN OUT      for each line of IN (dot-joined hex code points):
**                                      the text under each of the 24 BertNormalizer
**                                      settings, then BertPreTokenizer's words (same script) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tok/bert_text.h"
#include "engine/tok/unicode.h"
#include "tests/unit/check.h"

/* Normalises s with bn into a malloc'd NUL-terminated string; from into *from_out when asked. */
static char *norm(BertNormalizer bn, const char *s, size_t n, int32_t **from_out, size_t *len_out) {
  char *out = malloc(bert_normalize_bound(n) + 1);
  int32_t *from = malloc((bert_normalize_bound(n) + 1) * sizeof *from);
  void *scratch = malloc(bert_normalize_scratch_bytes(n) + 1);
  size_t m = bert_normalize(&bn, s, n, out, from, scratch);
  out[m] = 0;
  free(scratch);
  if (from_out) *from_out = from; else free(from);
  if (len_out) *len_out = m;
  return out;
}

/* ---- normaliser against HF ---- */

/* in_len / want_len 0: strlen (the others hold NULs). */
typedef struct NormCase { const char *in; BertNormalizer bn; const char *want; size_t in_len, want_len; } NormCase;

static void test_normalize_hf(void) {
  /* Expected strings are HF's outputs: a tokenizer.json with this BertNormalizer
  ** (strip_accents -1 written as null), getNormalizer().normalizeString(in). */
  static const NormCase cases[] = {
    {"H\303\251llo W\303\266rld", {1, 1, -1, 1}, "hello world", 0, 0},
    {"H\303\251llo W\303\266rld", {1, 1, 0, 1}, "h\303\251llo w\303\266rld", 0, 0},
    {"H\303\251llo W\303\266rld", {1, 1, 1, 0}, "Hello World", 0, 0},
    {"H\303\251llo W\303\266rld", {0, 0, -1, 0}, "H\303\251llo W\303\266rld", 0, 0},
    {"\344\275\240\345\245\275\344\270\226\347\225\214abc", {1, 1, -1, 1}, " \344\275\240  \345\245\275  \344\270\226  \347\225\214 abc", 0, 0},
    {"\344\275\240\345\245\275\344\270\226\347\225\214abc", {1, 0, -1, 1}, "\344\275\240\345\245\275\344\270\226\347\225\214abc", 0, 0},
    {"I \342\235\244\357\270\217 \360\237\230\200! Cafe\314\201", {1, 1, -1, 1}, "i \342\235\244 \360\237\230\200! cafe", 0, 0},
    {"a\001b\011c\342\200\213d\302\240e\357\277\275f\000g\302\205h\342\200\250i\013j\014k\177l\315\270m\356\200\200n", {1, 1, -1, 1},
     "ab cd efgh ijkl\315\270mn", 38, 0},
    {"a\001b\011c\342\200\213d\302\240e\357\277\275f\000g\302\205h\342\200\250i", {0, 1, -1, 1},
     "a\001b\011c\342\200\213d\302\240e\357\277\275f\000g\302\205h\342\200\250i", 25, 25},
    {"\304\260stanbul \304\260I", {1, 1, -1, 1}, "istanbul ii", 0, 0},
    {"\304\260stanbul \304\260I", {1, 1, 0, 1}, "i\314\207stanbul i\314\207i", 0, 0},
    {"\316\243\316\221\316\243 STRASSE \303\237 \341\272\236 \307\205", {1, 1, 0, 1}, "\317\203\316\261\317\203 strasse \303\237 \303\237 \307\206", 0, 0},
    /* U+1D16D (class 226) and U+1D165 (216) are Mc: they survive strip_accents, so the
    ** order NFD gave them shows, here across a NUL clean_text removed first. */
    {"a\360\235\205\255\360\235\205\245b", {1, 1, 1, 0}, "a\360\235\205\245\360\235\205\255b", 0, 0},
    {"a\360\235\205\255\000\360\235\205\245b", {1, 1, 1, 0}, "a\360\235\205\245\360\235\205\255b", 11, 0},
    {"a\360\235\205\255\314\201\360\235\205\245\314\226\360\235\205\255\360\235\205\245c", {1, 1, 1, 0},
     "a\360\235\205\245\360\235\205\245\360\235\205\255\360\235\205\255c", 0, 0},
    {"\341\271\251\314\243 \315\204 \316\220 \352\260\201 \357\244\200", {1, 1, 1, 0}, "s  \316\271 \341\204\200\341\205\241\341\206\250  \350\261\210 ", 0, 0},
    {"\316\220\316\253\341\276\202", {1, 1, -1, 1}, "\316\271\317\205\316\261", 0, 0},
    {"x\343\200\200y\302\240z", {0, 0, 0, 0}, "x\343\200\200y\302\240z", 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const NormCase *c = &cases[i];
    size_t n = c->in_len ? c->in_len : strlen(c->in), m;
    char *got = norm(c->bn, c->in, n, NULL, &m);
    size_t wl = c->want_len ? c->want_len : strlen(c->want);
    char name[64];
    snprintf(name, sizeof name, "bert_normalize_hf_%zu", i);
    check(m == wl && memcmp(got, c->want, wl) == 0, name, "got \"%s\" (%zu bytes), HF \"%s\"", got, m, c->want);
    free(got);
  }
}

/* ---- the byte map ---- */

static void test_from_map(void) {
  BertNormalizer bn = {1, 1, -1, 1};
  /* "Ä你\tb": Ä (0..2) -> a; 你 (2..5) -> " 你 "; \t (5) -> ' '; b (6). */
  const char *s = "\303\204\344\275\240\tb";
  int32_t *from;
  size_t m;
  char *got = norm(bn, s, strlen(s), &from, &m);
  static const int32_t want[] = {0, 2, 2, 2, 2, 2, 5, 6};
  int ok = m == 8 && memcmp(got, "a \344\275\240  b", 8) == 0;
  for (size_t j = 0; ok && j < 8; j++) ok = from[j] == want[j];
  check(ok, "bert_normalize_from_map", "got \"%s\" (%zu bytes)", got, m);
  free(got); free(from);
  /* Reordered marks keep their own source: a + U+1D16D (1) + U+1D165 (5) -> a, 1D165, 1D16D. */
  BertNormalizer st = {1, 1, 1, 0};
  s = "a\360\235\205\255\360\235\205\245";
  got = norm(st, s, strlen(s), &from, &m);
  ok = m == 9 && from[0] == 0;
  for (size_t j = 1; ok && j < 5; j++) ok = from[j] == 5;
  for (size_t j = 5; ok && j < 9; j++) ok = from[j] == 1;
  check(ok, "bert_normalize_from_map_reordered", "got %zu bytes", m);
  free(got); free(from);
  /* Lowercase expansions (İ -> i + U+0307) all map to the source character. */
  BertNormalizer lo = {1, 1, 0, 1};
  got = norm(lo, "x\304\260", 3, &from, &m);
  check(m == 4 && from[0] == 0 && from[1] == 1 && from[2] == 1 && from[3] == 1, "bert_normalize_from_map_lowercase",
        "got %zu bytes", m);
  free(got); free(from);
}

/* A long run of marks is ordered like a short one (stable by class), and stays linear. */
static void test_long_run(void) {
  enum { K = 5000 };
  /* a, then K pairs (U+1D16D class 226, U+1D165 class 216): all 216s first, then all 226s. */
  size_t n = 1 + (size_t)K * 8;
  char *s = malloc(n);
  s[0] = 'a';
  for (int k = 0; k < K; k++) memcpy(s + 1 + 8 * k, "\360\235\205\255\360\235\205\245", 8);
  BertNormalizer st = {1, 1, 1, 0};
  int32_t *from;
  size_t m;
  char *got = norm(st, s, n, &from, &m);
  int ok = m == n && got[0] == 'a';
  for (int k = 0; ok && k < K; k++) {
    ok = memcmp(got + 1 + 4 * k, "\360\235\205\245", 4) == 0 && memcmp(got + 1 + 4 * K + 4 * k, "\360\235\205\255", 4) == 0 &&
         from[1 + 4 * k] == 1 + 8 * k + 4 && from[1 + 4 * K + 4 * k] == 1 + 8 * k;
  }
  check(ok, "bert_normalize_long_mark_run", "a run of %d marks is not in stable class order", 2 * K);
  free(got); free(from); free(s);
}

/* The bound holds for the worst characters, repeated. */
static void test_bound(void) {
  static const char *const worst[] = {"\316\220", "\304\260", "\344\275\240", "\357\244\200", "\341\276\202", "\360\240\200\200"};
  int ok = 1;
  for (size_t w = 0; w < sizeof worst / sizeof *worst; w++) {
    char s[64] = "";
    for (int r = 0; r < 10; r++) strcat(s, worst[w]);
    size_t m, n = strlen(s);
    BertNormalizer all = {1, 1, 1, 1};
    char *got = norm(all, s, n, NULL, &m);
    if (m > bert_normalize_bound(n)) ok = 0;
    free(got);
  }
  check(ok, "bert_normalize_bound", "an output exceeded bert_normalize_bound");
}

/* ---- pre-tokenizer against HF ---- */

static void test_pretokenize_hf(void) {
  /* Expected ranges are HF's: bertPreTokenizer().preTokenizeString(in), character
  ** offsets turned into byte offsets. */
  static const char *const cases[][2] = {
    {"Hey friend!     How are you\077!\077", "0:3 4:10 10:11 16:19 20:23 24:27 27:28 28:29 29:30"},
    {"", ""},
    {"  ", ""},
    {"a\302\240b\343\200\200c\342\200\246d\302\277e\302\247f$g", "0:1 3:4 7:8 8:11 11:12 12:14 14:15 15:17 17:18 18:19 19:20"},
    {"don't \343\200\214\345\274\225\343\200\215\302\267x\302\205y", "0:3 3:4 4:5 6:9 9:12 12:15 15:17 17:18 20:21"},
    /* U+166D and U+111C9 are still punctuation to HF, U+2E43 and U+061D not yet. */
    {"\341\231\255\360\221\207\211\342\271\203\330\235|", "0:3 3:7 7:12 12:13"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *s = cases[i][0];
    size_t n = strlen(s);
    int32_t b[128];
    size_t k = bert_pretokenize(s, n, b);
    char got[512] = "";
    for (size_t j = 0; j < k; j++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d:%d", j ? " " : "", b[2 * j], b[2 * j + 1]);
    char name[64];
    snprintf(name, sizeof name, "bert_pretokenize_hf_%zu", i);
    check(strcmp(got, cases[i][1]) == 0, name, "got \"%s\", HF \"%s\"", got, cases[i][1]);
  }
}

/* ---- dumps for tests/cli/test_unicode_hf.sh ---- */

/* NFD of a code point sequence by the tables alone: decompose, then a stable sort of
** each run of non-starters by combining class (the reference for the table check). */
static int ref_nfd(const uint32_t *in, int n, uint32_t *out) {
  int m = 0;
  for (int i = 0; i < n; i++) m += uni_nfd(in[i], out + m);
  for (int a = 1; a < m; a++) {
    uint32_t x = out[a];
    int cx = uni_combining_class(x), b = a;
    if (cx == 0) continue;
    while (b > 0 && uni_combining_class(out[b - 1]) > cx) { out[b] = out[b - 1]; b--; }
    out[b] = x;
  }
  return m;
}

static void put_hex_cps(FILE *f, const uint32_t *c, int n) {
  if (n == 0) fputc('-', f);
  for (int i = 0; i < n; i++) fprintf(f, i ? ".%X" : "%X", (unsigned)c[i]);
}

/* Writes the UTF-8 bytes s[0..n) as dot-joined hex code points. */
static void put_hex_utf8(FILE *f, const char *s, size_t n) {
  if (n == 0) fputc('-', f);
  for (size_t i = 0, len; i < n; i += len) fprintf(f, i ? ".%X" : "%X", (unsigned)uni_decode(s, i, &len));
}

static int dump_all(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) { perror(path); return 1; }
  static const BertNormalizer steps[4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 0}};
  char scratch[4096], out[64], s[16];
  int32_t from[64], b[32];
  for (uint32_t c = 0; c < 0x110000; c++) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    int n = uni_encode(c, s);
    fprintf(f, "%X", (unsigned)c);
    for (int k = 0; k < 4; k++) {
      size_t m = bert_normalize(&steps[k], s, (size_t)n, out, from, scratch);
      fputc('\t', f);
      put_hex_utf8(f, out, m);
    }
    uint32_t d[16], in[2];
    fputc('\t', f);
    put_hex_cps(f, d, ref_nfd(&c, 1, d));
    char w[8] = "a";
    memcpy(w + 1, s, (size_t)n);
    w[n + 1] = 'a';
    size_t words = bert_pretokenize(w, (size_t)n + 2, b);
    fprintf(f, "\t%c", words == 2 ? 'W' : words == 3 ? 'P' : '-');
    fprintf(f, "\t%c", uni_is_letter(c) ? 'L' : uni_is_number(c) ? 'N' : uni_is_regex_space(c) ? 'S' : '-');
    /* NFD next to the highest and the lowest class: shows whether c is a non-starter. */
    in[0] = 0x345; in[1] = c;
    fputc('\t', f);
    put_hex_cps(f, d, ref_nfd(in, 2, d));
    in[0] = c; in[1] = 0x334;
    fputc('\t', f);
    put_hex_cps(f, d, ref_nfd(in, 2, d));
    fprintf(f, "\t%c\n", uni_is_word(c) ? 'W' : '-');
  }
  return fclose(f) ? 1 : 0;
}

static int dump_pairs(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) { perror(path); return 1; }
  uint32_t rep[256] = {0};
  for (uint32_t c = 0x300; c < 0x110000; c++) {
    int k = uni_combining_class(c);
    if (k && !rep[k]) rep[k] = c;
  }
  for (uint32_t c = 0x300; c < 0x110000; c++) {
    if (!uni_combining_class(c)) continue;
    for (int k = 1; k < 256; k++) {
      if (!rep[k]) continue;
      for (int order = 0; order < 2; order++) {
        uint32_t in[2] = {order ? rep[k] : c, order ? c : rep[k]}, d[16];
        put_hex_cps(f, in, 2);
        fputc('\t', f);
        put_hex_cps(f, d, ref_nfd(in, 2, d));
        fputc('\n', f);
      }
    }
  }
  return fclose(f) ? 1 : 0;
}

/* The 24 settings in the order the script's HF side loops over them. */
static int texts(const char *in_path, const char *out_path) {
  FILE *in = fopen(in_path, "r"), *f = fopen(out_path, "w");
  if (!in || !f) { perror(in ? out_path : in_path); return 1; }
  char line[4096], s[4096], out[3 * 4096];
  static char scratch[2 * (2 * 4096 + 4) * 8];
  int32_t from[3 * 4096], b[2 * 4096];
  while (fgets(line, sizeof line, in)) {
    size_t n = 0;
    for (char *p = line; *p && *p != '\n';) {
      uint32_t c = (uint32_t)strtoul(p, &p, 16);
      n += (size_t)uni_encode(c, s + n);
      if (*p == '.') p++;
    }
    for (int clean = 0; clean < 2; clean++)
      for (int chinese = 0; chinese < 2; chinese++)
        for (int strip = -1; strip < 2; strip++)
          for (int lower = 0; lower < 2; lower++) {
            BertNormalizer bn = {clean, chinese, strip, lower};
            size_t m = bert_normalize(&bn, s, n, out, from, scratch);
            put_hex_utf8(f, out, m);
            fputc('\t', f);
          }
    size_t k = bert_pretokenize(s, n, b);
    if (k == 0) fputc('-', f);
    for (size_t j = 0; j < k; j++) { if (j) fputc(' ', f); put_hex_utf8(f, s + b[2 * j], (size_t)(b[2 * j + 1] - b[2 * j])); }
    fputc('\n', f);
  }
  fclose(in);
  return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--texts") == 0) return texts(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--dump") == 0) {
    if (strcmp(argv[2], "all") == 0) return dump_all(argv[3]);
    if (strcmp(argv[2], "pairs") == 0) return dump_pairs(argv[3]);
  }
  if (argc != 1) { fprintf(stderr, "usage: test_bert_text [--dump all|pairs FILE | --texts IN OUT]\n"); return 2; }
  test_normalize_hf();
  test_from_map();
  test_long_run();
  test_bound();
  test_pretokenize_hf();
  return check_exit();
}
