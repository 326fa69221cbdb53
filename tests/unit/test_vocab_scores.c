/* engine/tok/vocab_scores: serde_json's number reading on hand-picked texts whose
** values HF tokenizers gives (npm tokenizers@0.23.2: a tokenizer.json holding them,
** loaded and re-saved, read back exactly), the scan of tokenizer.json for the scores'
** texts, and a tokenizer that writes its scores back as it read them.
**
**   test_vocab_scores --dump FILE   each Unigram score of the tokenizer.json FILE as
**                                   maskd reads it, one C99 hex float a line
**                                   (tests/cli/test_tokenizer_hf.sh compares them
**                                   with HF's over 3000 texts of every shape) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/files.h"
#include "engine/tok/tokenizer.h"
#include "engine/tok/vocab_scores.h"
#include "tests/unit/check.h"

static int dump(const char *path) {
  Err e = {0};
  size_t len = 0;
  char *text = files_read_all(path, (size_t)1 << 30, &len, &e);
  if (!text) { fprintf(stderr, "%s\n", e.msg); return 1; }
  json_error_t je;
  json_t *root = json_loadb(text, len, 0, &je);
  size_t n = json_array_size(json_object_get(json_object_get(root, "model"), "vocab"));
  double *scores = malloc((n + 1) * sizeof *scores);
  int rc = !scores || vocab_scores_read(text, len, scores, NULL, n);
  if (rc) fprintf(stderr, "%s: no Unigram vocabulary of %zu entries read\n", path, n);
  for (size_t i = 0; !rc && i < n; i++) printf("%a\n", scores[i]);
  json_decref(root);
  free(scores);
  free(text);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--dump")) return dump(argv[2]);
  if (argc != 1) { fprintf(stderr, "usage: test_vocab_scores [--dump tokenizer.json]\n"); return 2; }

  /* Texts and the bits HF reads from them (hex floats of its re-saved values). */
  static const struct { const char *text; double want; } cases[] = {
      {"-12.152813876606297", -0x1.84e3d9ed4cc4cp+3},   /* HF re-saves -12.152813876606295: one unit lower */
      {"-0.1", -0x1.999999999999ap-4},
      {"5", 5.0},
      {"-0", -0.0},
      {"1e-320", 0x0.00000000007e8p-1022},
      {"-2.5E+2", -250.0},
      {"-9223372036854775808", -0x1p+63},
      {"-1e22", -1e22},
  };
  int ok = 1;
  char failed[300] = "";
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int oor = 0;
    double v = vocab_scores_serde_f64(cases[i].text, strlen(cases[i].text), &oor);
    if (oor || memcmp(&v, &cases[i].want, sizeof v)) {
      ok = 0;
      snprintf(failed, sizeof failed, "%s read as %a, HF %a", cases[i].text, v, cases[i].want);
    }
  }
  check(ok, "serde_f64_hand_cases", "%s", failed);
  int oor = 0;
  vocab_scores_serde_f64("1e400", 5, &oor);
  check(oor, "serde_f64_out_of_range", "1e400 not refused");
  oor = 0;
  double z = vocab_scores_serde_f64("1e-400", 6, &oor);
  check(!oor && z == 0, "serde_f64_underflow_is_zero", "%a", z);

  /* The scan: the last "model" key, escaped keys, nested values before the vocab. */
  const char *j = "{\"model\": {\"vocab\": [[\"a\", 1.5]]}, \"x\": [{\"vocab\": [1]}],"
                  " \"mod\\u0065l\": {\"other\": {\"vocab\": [[\"no\", 9]]}, \"type\": \"Unigram\","
                  " \"v\\u006fcab\": [[\"a\\\"]\", -1.25], [\"b\", -0.5e1]]}}";
  double s[2] = {0, 0};
  size_t spans[4];
  int r = vocab_scores_read(j, strlen(j), s, spans, 2);
  check(r == 0 && s[0] == -1.25 && s[1] == -5.0 && !strncmp(j + spans[2], "-0.5e1", spans[3]),
        "scan_finds_the_last_model_vocab", "rc %d scores %g %g", r, s[0], s[1]);
  check(vocab_scores_read(j, strlen(j), s, NULL, 1) != 0 && vocab_scores_read(j, strlen(j), s, NULL, 3) != 0,
        "scan_refuses_another_count", "a wrong count was accepted");
  size_t bad_cut = 0;   /* every cut text is refused, read within its bounds (ASan sees a read past) */
  for (size_t cut = 0; cut < strlen(j); cut++)
    if (vocab_scores_read(j, cut, s, NULL, 2) == 0) bad_cut = cut + 1;
  check(!bad_cut, "scan_refuses_truncated_texts", "the text cut at %zu was read", bad_cut - 1);

  /* A tokenizer writes each score back as its text was, whatever its digits. */
  const char *tj = "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [], \"normalizer\": null,"
                   " \"pre_tokenizer\": null, \"post_processor\": null, \"decoder\": null, \"model\": {\"type\": \"Unigram\","
                   " \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0], [\"a\", -12.152813876606297], [\"b\", -1.50000000000000000000001],"
                   " [\"c\", -3E0]]}}";
  Err e = {0};
  Tokenizer *t = tokenizer_from_json(tj, strlen(tj), &e);
  char *out = t ? tokenizer_to_json(t, &e) : NULL;
  check(out && strstr(out, "\"a\",\n        -12.152813876606297\n") && strstr(out, "-1.50000000000000000000001") &&
            strstr(out, "-3E0") && strstr(out, "0.0"),
        "tokenizer_writes_scores_as_read", "%s", out ? out : e.msg);
  free(out);
  tokenizer_free(t);
  return check_exit();
}
