/* libFuzzer harness: text-classification data files (engine/data/textcls.h), the
** user's CSV or JSON Lines as `maskd finetune` and POST /runs read them. Each input is
** read as a CSV (columns text, label) and as JSON Lines, and as a label file. Checks:
** an accepted file has rows, every text non-empty valid UTF-8 and every label
** non-empty; the sorted labels map every row; a label file's names are distinct; a
** refusal carries a one-line message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/textcls.h"
#include "tests/fuzz/fuzz_common.h"

static char csv_path[600], jsonl_path[600], labels_path[600];

static void write_seeds(const char *dir) {
  static const char csv[] =
      "text,label\n"
      "How do I locate my card?,card_arrival\n"
      "\"I still have not received my new card, I ordered over a week ago.\",card_arrival\n"
      "\"Two lines\nin one \"\"quoted\"\" text\",top_up_failed\r\n";
  static const char jsonl[] =
      "{\"text\": \"How do I locate my card?\", \"label\": \"card_arrival\"}\n"
      "\n"
      "{\"text\": \"caf\\u00e9 top up\", \"label\": 3}\n";
  static const char labels[] = "[\"card_arrival\", \"top_up_failed\", \"3\"]";
  fuzz_write_file(fuzz_seed_path(dir, "data.csv"), csv, strlen(csv));
  fuzz_write_file(fuzz_seed_path(dir, "data.jsonl"), jsonl, strlen(jsonl));
  fuzz_write_file(fuzz_seed_path(dir, "labels.json"), labels, strlen(labels));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fuzz_seeds_then_exit(write_seeds);
  snprintf(csv_path, sizeof csv_path, "%s/data.csv", fuzz_dir());
  snprintf(jsonl_path, sizeof jsonl_path, "%s/data.jsonl", fuzz_dir());
  snprintf(labels_path, sizeof labels_path, "%s/labels.json", fuzz_dir());
  return 0;
}

static int utf8_ok(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  while (*u) {
    int extra = *u < 0x80 ? 0 : (*u >> 5) == 6 ? 1 : (*u >> 4) == 14 ? 2 : (*u >> 3) == 30 ? 3 : -1;
    if (extra < 0) return 0;
    for (int k = 1; k <= extra; k++)
      if ((u[k] & 0xC0) != 0x80) return 0;
    u += 1 + extra;
  }
  return 1;
}

/* An integer label as textcls_labels_sorted orders by value: an optional '-', 1-18 digits,
** no leading zero, not "-0" (written independently of textcls.c's int_label). */
static int canonical_integer(const char *s) {
  const char *d = s + (s[0] == '-');
  size_t n = strlen(d);
  if (n < 1 || n > 18 || (n > 1 && d[0] == '0') || (d != s && !strcmp(d, "0"))) return 0;
  return strspn(d, "0123456789") == n;
}

static void check_read(const char *path) {
  TextClsRaw r = {0};
  Err err = {0};
  if (textcls_read(path, "text", "label", &r, &err)) {
    FUZZ_CHECK(err.msg[0] && !strchr(err.msg, '\n'), "a refusal without a one-line message: \"%s\"", err.msg);
    textcls_raw_free(&r);
    return;
  }
  FUZZ_CHECK(r.n > 0, "an accepted file without rows");
  for (size_t i = 0; i < r.n; i++) {
    FUZZ_CHECK(r.texts[i] && r.texts[i][0] && utf8_ok(r.texts[i]), "row %zu: an empty or non-UTF-8 text accepted", i);
    FUZZ_CHECK(r.labels[i] && r.labels[i][0], "row %zu: an empty label accepted", i);
  }
  TextClsLabels l = {0};
  if (textcls_labels_sorted(&r, &l, &err) == 0) {
    int32_t *ids = malloc(r.n * sizeof *ids);
    FUZZ_CHECK(ids && textcls_map_labels(&r, &l, TEXTCLS_BY_NAME, ids, &err) == 0, "the sorted labels do not map their own rows: %s", err.msg);
    /* Sorted and distinct: by value when every name is an integer (written without a sign
    ** of zero or leading zeros, so one value is one name), else bytewise. */
    int integers = 1;
    for (int i = 0; i < l.n && integers; i++) integers = canonical_integer(l.names[i]);
    for (int i = 1; i < l.n; i++)
      FUZZ_CHECK(integers ? strtoll(l.names[i - 1], NULL, 10) < strtoll(l.names[i], NULL, 10)
                          : strcmp(l.names[i - 1], l.names[i]) < 0,
                 "labels not sorted and distinct (%s)", integers ? "by value" : "bytewise");
    free(ids);
  }
  textcls_labels_free(&l);
  textcls_raw_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write_file(csv_path, data, size);
  fuzz_write_file(jsonl_path, data, size);
  fuzz_write_file(labels_path, data, size);
  check_read(csv_path);
  check_read(jsonl_path);
  TextClsLabels l = {0};
  Err err = {0};
  if (textcls_labels_load(labels_path, &l, &err) == 0) {
    FUZZ_CHECK(l.n >= 2, "a label file of %d names accepted", l.n);
    for (int i = 0; i < l.n; i++)
      for (int j = 0; j < i; j++) FUZZ_CHECK(strcmp(l.names[i], l.names[j]), "duplicate label accepted");
  } else {
    FUZZ_CHECK(err.msg[0], "a refusal without a message");
  }
  textcls_labels_free(&l);
  return 0;
}
