/* Text-classification data (engine/data/textcls.h): the CSV and JSON Lines readers on
** their edge cases (quotes, embedded line ends, CRLF, BOM, missing columns, field
** counts, empty and non-UTF-8 texts, empty files), label files of both shapes, label
** mapping, the seeded split against its written definition, and the batcher: padding,
** masks, labels, the epoch permutation, HF's length grouping against an independent
** reference, seek, drop_last. BANKING77 is read whole and compared, row by row, with
** what Python's csv module reads from the same files (no Python is a failure). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/data/textcls.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char root[512];

/* Writes n bytes into root/name; returns the path (one of a ring of buffers). */
static const char *put(const char *name, const char *bytes, size_t n) {
  static char bufs[8][768];
  static int k;
  char *p = bufs[k++ % 8];
  snprintf(p, 768, "%s/%s", root, name);
  FILE *f = fopen(p, "wb");
  if (f) { fwrite(bytes, 1, n, f); fclose(f); }
  return p;
}
static const char *puts_(const char *name, const char *text) { return put(name, text, strlen(text)); }

/* Reads path expecting success with n rows; texts/labels compared when given. */
static void expect_rows(const char *name, const char *path, const char *tc, const char *lc, size_t n, const char *const *texts,
                        const char *const *labels) {
  TextClsRaw r;
  Err e = {0};
  if (textcls_read(path, tc, lc, &r, &e) != 0) { check(0, name, "refused: %s", e.msg); return; }
  int ok = r.n == n;
  size_t bad = (size_t)-1;
  for (size_t i = 0; ok && i < n; i++)
    if ((texts && strcmp(r.texts[i], texts[i]) != 0) || (labels && strcmp(r.labels[i], labels[i]) != 0)) { ok = 0; bad = i; }
  check(ok, name, "%zu rows (want %zu); first difference at row %zu: [%s] [%s]", r.n, n, bad, bad < r.n ? r.texts[bad] : "",
        bad < r.n ? r.labels[bad] : "");
  textcls_raw_free(&r);
}

/* Reads path expecting a refusal of the kind with every one of the fragments in the message. */
static void expect_error(const char *name, const char *path, const char *tc, const char *lc, ErrKind kind, const char *frag1,
                         const char *frag2) {
  TextClsRaw r;
  Err e = {0};
  int rc = textcls_read(path, tc, lc, &r, &e);
  int ok = rc == -1 && e.kind == kind && (!frag1 || strstr(e.msg, frag1)) && (!frag2 || strstr(e.msg, frag2)) && r.n == 0 &&
           !r.texts && !r.labels;
  check(ok, name, "rc %d kind %s message [%s] (want %s with [%s] [%s])", rc, err_kind_name(e.kind), e.msg, err_kind_name(kind),
        frag1 ? frag1 : "", frag2 ? frag2 : "");
  if (rc == 0) textcls_raw_free(&r);
}

static void test_csv(void) {
  /* Quotes, "" escapes, commas and line ends (LF and CRLF) inside quotes, CRLF record
  ** ends, a BOM, an extra column, the label column first, no final newline. */
  static const char csv[] =
      "\xEF\xBB\xBF" "label,text,extra\r\n"
      "a,plain text,1\r\n"
      "b,\"with, comma\",2\r\n"
      "c,\"say \"\"hi\"\"\",3\r\n"
      "d,\"two\nlines\",4\r\n"
      "e,\"crlf\r\ninside\",5\r\n"
      "\"f\",\"\"\"\",6\r\n"
      "g,5\" screen,7\r\n"
      "h,caf\xC3\xA9 \xF0\x9F\x98\x80,\"\"";
  static const char *const texts[] = {"plain text", "with, comma", "say \"hi\"", "two\nlines", "crlf\r\ninside", "\"", "5\" screen",
                                      "caf\xC3\xA9 \xF0\x9F\x98\x80"};
  static const char *const labels[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
  expect_rows("csv_quotes_newlines_crlf_bom", puts_("a.csv", csv), "text", "label", 8, texts, labels);

  /* LF line ends, blank lines (skipped, as DictReader does), a final newline. */
  static const char *const t2[] = {"x", "y", "z"};
  static const char *const l2[] = {"1", "2", "3"};
  expect_rows("csv_lf_blank_lines", puts_("b.csv", "text,label\n\nx,1\n\ny,2\nz,3\n\n"), "text", "label", 3, t2, l2);
  expect_rows("csv_lone_cr", puts_("c.csv", "text,label\rx,1\ry,2\rz,3\r"), "text", "label", 3, t2, l2);

  /* The physical line where a record starts, counted past a field with line ends. */
  expect_error("csv_field_count_line", puts_("d.csv", "text,label\n\"a\nb\nc\",1\nx,2,3\n"), "text", "label", ERR_BAD_INPUT,
               "d.csv: line 5 (row 2): 3 fields, the header has 2", NULL);
  expect_error("csv_too_few_fields", puts_("e.csv", "text,label\r\nonly\r\n"), "text", "label", ERR_BAD_INPUT,
               "line 2 (row 1): 1 field, the header has 2", NULL);
  expect_error("csv_missing_column", puts_("f.csv", "sentence,intent\nx,y\n"), "text", "intent", ERR_BAD_INPUT,
               "no column 'text'", "(columns: 'sentence', 'intent')");
  expect_error("csv_missing_label_column", puts_("f2.csv", "text,intent\nx,y\n"), "text", "label", ERR_BAD_INPUT,
               "no column 'label'", "'text', 'intent'");
  expect_error("csv_duplicate_column", puts_("g.csv", "text,label,text\nx,y,z\n"), "text", "label", ERR_BAD_INPUT,
               "names column 'text' twice", NULL);
  expect_error("csv_empty_text", puts_("h.csv", "text,label\nx,1\n,2\n"), "text", "label", ERR_BAD_INPUT,
               "line 3 (row 2): the text is empty", NULL);
  expect_error("csv_empty_quoted_text", puts_("h2.csv", "text,label\n\"\",2\n"), "text", "label", ERR_BAD_INPUT,
               "line 2 (row 1): the text is empty", NULL);
  expect_error("csv_empty_label", puts_("h3.csv", "text,label\nx,\n"), "text", "label", ERR_BAD_INPUT, "the label is empty", NULL);
  expect_error("csv_not_utf8", puts_("i.csv", "text,label\nok,1\nbad \xFF byte,2\n"), "text", "label", ERR_BAD_INPUT,
               "line 3 (row 2): the text is not valid UTF-8", "byte 4");
  expect_error("csv_overlong_utf8", puts_("i2.csv", "text,label\n\xC0\x80,1\n"), "text", "label", ERR_BAD_INPUT, "not valid UTF-8", NULL);
  expect_error("csv_surrogate_utf8", puts_("i3.csv", "text,label\n\xED\xA0\x80,1\n"), "text", "label", ERR_BAD_INPUT, "not valid UTF-8",
               NULL);
  expect_error("csv_truncated_utf8", puts_("i4.csv", "text,label\nab\xE2\x82,1\n"), "text", "label", ERR_BAD_INPUT, "not valid UTF-8",
               NULL);
  expect_error("csv_above_10ffff", puts_("i5.csv", "text,label\n\xF4\x90\x80\x80,1\n"), "text", "label", ERR_BAD_INPUT,
               "not valid UTF-8", NULL);
  expect_error("csv_nul_in_text", put("i6.csv", "text,label\na\0b,1\n", 17), "text", "label", ERR_BAD_INPUT, "NUL at byte 1", NULL);
  expect_error("csv_bad_utf8_label", puts_("i7.csv", "text,label\nx,\xFE\n"), "text", "label", ERR_BAD_INPUT,
               "the label is not valid UTF-8", NULL);
  expect_error("csv_empty_file", puts_("j.csv", ""), "text", "label", ERR_BAD_INPUT, "j.csv: empty file", NULL);
  expect_error("csv_only_bom", puts_("j2.csv", "\xEF\xBB\xBF\r\n\n"), "text", "label", ERR_BAD_INPUT, "empty file", NULL);
  expect_error("csv_header_only", puts_("j3.csv", "text,label\n"), "text", "label", ERR_BAD_INPUT, "a header and no rows", NULL);
  expect_error("csv_unclosed_quote", puts_("k.csv", "text,label\nx,1\n\"open\nstill,2\n"), "text", "label", ERR_BAD_INPUT,
               "line 3: the quoted field opened on line 3 is not closed", NULL);
  expect_error("csv_text_after_quote", puts_("k2.csv", "text,label\n\"a\"b,1\n"), "text", "label", ERR_BAD_INPUT,
               "line 2: text after the closing quote of field 1", NULL);
  expect_error("csv_missing_file", "/nonexistent/dir/x.csv", "text", "label", ERR_NOT_FOUND, "/nonexistent/dir/x.csv", NULL);
  expect_error("csv_no_column_names", puts_("l.csv", "text,label\nx,1\n"), "", "label", ERR_INVALID, NULL, NULL);
}

static void test_jsonl(void) {
  static const char jl[] = "{\"text\": \"hello, world\", \"label\": \"greet\"}\n"
                           "\n"
                           "   \r\n"
                           "{\"label\": 7, \"text\": \"seven\\nlines\", \"other\": [1]}\r\n"
                           "{\"text\": \"neg\", \"label\": -3}";
  static const char *const texts[] = {"hello, world", "seven\nlines", "neg"};
  static const char *const labels[] = {"greet", "7", "-3"};
  expect_rows("jsonl_strings_ints_blank_lines", puts_("a.jsonl", jl), "text", "label", 3, texts, labels);
  expect_rows("json_extension_is_jsonl", puts_("a2.JSON", "{\"t\":\"x\",\"l\":\"y\"}\n"), "t", "l", 1, NULL, NULL);
  expect_error("jsonl_float_label", puts_("b.jsonl", "{\"text\":\"a\",\"label\":1}\n{\"text\":\"b\",\"label\":1.5}\n"), "text", "label",
               ERR_BAD_INPUT, "line 2 (row 2): field 'label' is neither a string nor an integer", NULL);
  expect_error("jsonl_missing_field", puts_("c.jsonl", "\n{\"sentence\":\"a\",\"label\":1}\n"), "text", "label", ERR_BAD_INPUT,
               "line 2 (row 1): no field 'text' (fields: 'sentence', 'label')", NULL);
  expect_error("jsonl_not_object", puts_("d.jsonl", "[\"a\", 1]\n"), "text", "label", ERR_BAD_INPUT, "line 1 (row 1): not a JSON object",
               NULL);
  expect_error("jsonl_bad_json", puts_("e.jsonl", "{\"text\":\"a\",\"label\":1}\n{\"text\": \n"), "text", "label", ERR_BAD_INPUT,
               "line 2 (row 2): not valid JSON", NULL);
  expect_error("jsonl_text_not_string", puts_("f.jsonl", "{\"text\":5,\"label\":1}\n"), "text", "label", ERR_BAD_INPUT,
               "field 'text' is not a string", NULL);
  expect_error("jsonl_empty_text", puts_("g.jsonl", "{\"text\":\"\",\"label\":1}\n"), "text", "label", ERR_BAD_INPUT, "the text is empty",
               NULL);
  expect_error("jsonl_not_utf8", puts_("h.jsonl", "{\"text\":\"\xFF\",\"label\":1}\n"), "text", "label", ERR_BAD_INPUT, "line 1", NULL);
  expect_error("jsonl_nul_escape", puts_("h2.jsonl", "{\"text\":\"a\\u0000b\",\"label\":1}\n"), "text", "label", ERR_BAD_INPUT, "line 1",
               "a NUL character (\\u0000) in a string is not allowed");
  expect_error("jsonl_duplicate_key", puts_("h3.jsonl", "{\"text\":\"a\",\"text\":\"b\",\"label\":1}\n"), "text", "label", ERR_BAD_INPUT,
               "line 1", NULL);
  expect_error("jsonl_empty_file", puts_("i.jsonl", "\n \n"), "text", "label", ERR_BAD_INPUT, "empty file", NULL);
  expect_error("jsonl_bool_label", puts_("j.jsonl", "{\"text\":\"a\",\"label\":true}\n"), "text", "label", ERR_BAD_INPUT,
               "neither a string nor an integer", NULL);

  /* A .json array of records (pandas' to_json(orient="records"), HF datasets' to_json(lines=False)). */
  static const char arr[] = "\xEF\xBB\xBF \n[\n  {\"text\": \"hello\", \"label\": \"greet\"},\n  {\"label\": 7,\n   \"text\": \"[seven]\"}, "
                            "{\"text\": \"x\", \"label\": \"y\"}\n]\n";
  static const char *const atexts[] = {"hello", "[seven]", "x"};
  static const char *const alabels[] = {"greet", "7", "y"};
  expect_rows("json_array_of_records", puts_("arr.json", arr), "text", "label", 3, atexts, alabels);
  {
    TextClsRaw r;
    Err e = {0};
    int rc = textcls_read(puts_("arr2.json", arr), "text", "label", &r, &e);
    check(rc == 0 && r.n == 3 && r.lines && r.lines[0] == 3 && r.lines[1] == 4 && r.lines[2] == 5 && r.path && strstr(r.path, "arr2.json"),
          "json_array_record_lines", "rc %d n %zu lines %ld %ld %ld (%s)", rc, r.n, r.lines ? r.lines[0] : -1,
          r.lines ? r.lines[1] : -1, r.lines ? r.lines[2] : -1, e.msg);
    if (rc == 0) textcls_raw_free(&r);
  }
  expect_error("json_array_missing_field", puts_("ab.json", "[\n{\"text\":\"a\",\"label\":1},\n{\"text\":\"b\"}\n]"), "text", "label",
               ERR_BAD_INPUT, "ab.json: line 3 (row 2): no field 'label'", NULL);
  expect_error("json_array_not_object", puts_("ac.json", "[{\"text\":\"a\",\"label\":1}, 5]"), "text", "label", ERR_BAD_INPUT,
               "ac.json: line 1 (row 2): not a JSON object", NULL);
  expect_error("json_array_empty", puts_("ad.json", "  []"), "text", "label", ERR_BAD_INPUT, "ad.json: an empty JSON array", NULL);
  expect_error("json_array_bad_json", puts_("ae.json", "[{\"text\":\"a\",\"label\":1},\n{\"text\": }]"), "text", "label",
               ERR_BAD_INPUT, "ae.json: line 2: not valid JSON", NULL);
  expect_error("json_array_nul", puts_("af.json", "[{\"text\":\"a\\u0000\",\"label\":1}]"), "text", "label", ERR_BAD_INPUT,
               "af.json: line 1: not valid JSON: a NUL character (\\u0000) in a string is not allowed", NULL);
  expect_error("json_array_empty_text", puts_("ag.json", "[{\"text\":\"a\",\"label\":1},\n\n {\"text\":\"\",\"label\":1}]"), "text",
               "label", ERR_BAD_INPUT, "ag.json: line 3 (row 2): the text is empty", NULL);
}

/* One file's label ids, read as a run of that one file reads them. */
static int map_one(const TextClsRaw *r, const TextClsLabels *l, TextClsIds ids_allowed, int32_t *ids, Err *e) {
  TextClsReading how;
  int bad;
  if (textcls_label_reading(&r, 1, l, ids_allowed, &how, &bad, e)) return -1;
  return textcls_map_labels(r, l, how, ids, e);
}

static void test_labels(void) {
  TextClsLabels l;
  Err e = {0};
  int rc = textcls_labels_load(puts_("l1.json", "[\"b\", \"a\", \"c\"]"), &l, &e);
  check(rc == 0 && l.n == 3 && !strcmp(l.names[0], "b") && !strcmp(l.names[2], "c") && textcls_label_id(&l, "a") == 1 &&
            textcls_label_id(&l, "zz") == -1,
        "labels_list", "rc %d n %d: %s", rc, l.n, e.msg);
  textcls_labels_free(&l);
  rc = textcls_labels_load(puts_("l2.json", "{\"names\": [\"neg\", \"pos\"], \"_type\": \"ClassLabel\", \"id\": null}"), &l, &e);
  check(rc == 0 && l.n == 2 && !strcmp(l.names[1], "pos"), "labels_object_names", "rc %d n %d: %s", rc, l.n, e.msg);
  textcls_labels_free(&l);
  textcls_labels_free(&l);  /* twice: a zeroed struct is fine */

  struct { const char *name, *json, *frag; } bad[] = {
      /* Every message is "FILE:LINE: ...", the line the name (or the list) is on. */
      {"labels_duplicate", "[\n\"a\",\n\"b\",\n\"a\"\n]", "lb.json:4: label 'a' appears twice (ids 0 and 2; the first on line 2)"},
      {"labels_not_string", "[\"a\",\n 3]", "lb.json:2: label 1 is not a string"},
      {"labels_empty_name", "{\"_type\": [\"x\",\n\"y\"], \"names\": [\"a\",\n\n\"\"]}", "lb.json:4: label 1 is empty"},
      {"labels_one", "\n[\"a\"]", "lb.json:2: 1 label; classification needs at least 2"},
      {"labels_none", "[]", "lb.json:1: 0 labels"},
      {"labels_object_without_names", "{\"labels\": [\"a\", \"b\"]}", "lb.json:1: an object without a \"names\" list"},
      {"labels_number", "7", "lb.json:1: not valid JSON"},
      {"labels_bad_json", "[\"a\",\n\"b\" \"c\"]", "lb.json:2: not valid JSON"},
      {"labels_nul", "[\"a\", \"b\\u0000\"]", "lb.json:1: not valid JSON: a NUL character (\\u0000) in a string is not allowed"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    Err be = {0};
    rc = textcls_labels_load(puts_("lb.json", bad[i].json), &l, &be);
    check(rc == -1 && be.kind == ERR_BAD_INPUT && strstr(be.msg, bad[i].frag) && l.n == 0 && !l.names, bad[i].name,
          "rc %d kind %s [%s], want [%s]", rc, err_kind_name(be.kind), be.msg, bad[i].frag);
    if (rc == 0) textcls_labels_free(&l);
  }
  /* A cell names its label exactly or with the whitespace around it stripped, as HF
  ** datasets' ClassLabel.str2int retries; integers so too, as Python's int() reads them. */
  {
    rc = textcls_labels_load(puts_("l3.json", "[\"a\", \"b c\", \"d\"]"), &l, &e);
    char *t3[] = {"t", "t", "t", "t"};
    char *spaced[] = {" a", "b c ", "\td\r", "a"};
    TextClsRaw rs = {.n = 4, .texts = t3, .labels = spaced};
    int32_t ids[4] = {-1, -1, -1, -1};
    int r1 = rc == 0 ? map_one(&rs, &l, TEXTCLS_IDS_AGREEING, ids, &e) : -1;
    check(r1 == 0 && ids[0] == 0 && ids[1] == 1 && ids[2] == 2 && ids[3] == 0, "labels_cells_stripped", "rc %d ids %d %d %d %d (%s)",
          r1, ids[0], ids[1], ids[2], ids[3], e.msg);
    char *spaced_ids[] = {" 2", "0 ", "1", " 1\t"};
    TextClsRaw ri2 = {.n = 4, .texts = t3, .labels = spaced_ids};
    r1 = rc == 0 ? map_one(&ri2, &l, TEXTCLS_IDS_AGREEING, ids, &e) : -1;
    check(r1 == 0 && ids[0] == 2 && ids[1] == 0 && ids[2] == 1 && ids[3] == 1, "labels_id_cells_stripped", "rc %d ids %d %d %d %d (%s)",
          r1, ids[0], ids[1], ids[2], ids[3], e.msg);
    /* A cell that is no label, read from a file: the message names the file and the line. */
    TextClsRaw rf;
    Err fe = {0};
    const char *csv = puts_("cells.csv", "text,label\nx, a \n\"multi\nline\",b c\ny, zz\n");
    int r2 = textcls_read(csv, "text", "label", &rf, &fe);
    int32_t fids[3];
    if (r2 == 0) r2 = map_one(&rf, &l, TEXTCLS_IDS_AGREEING, fids, &fe);
    check(r2 == -1 && strstr(fe.msg, "cells.csv: line 5 (row 3): label ' zz' is not one of the 3 labels"), "labels_miss_names_file_line",
          "rc %d: %s", r2, fe.msg);
    textcls_raw_free(&rf);
    textcls_labels_free(&l);
  }
  Err me = {0};
  rc = textcls_labels_load("/nonexistent/labels.json", &l, &me);
  check(rc == -1 && me.kind == ERR_NOT_FOUND, "labels_missing_file", "rc %d kind %s", rc, err_kind_name(me.kind));

  /* Sorted labels of examples: bytewise (uppercase before lowercase, UTF-8 after ASCII), distinct. */
  char *texts[] = {"t", "t", "t", "t", "t", "t"};
  char *labels[] = {"b", "\xC3\xA9t\xC3\xA9", "B", "b", "a", "B"};
  TextClsRaw r = {.n = 6, .texts = texts, .labels = labels};
  rc = textcls_labels_sorted(&r, &l, &e);
  check(rc == 0 && l.n == 4 && !strcmp(l.names[0], "B") && !strcmp(l.names[1], "a") && !strcmp(l.names[2], "b") &&
            !strcmp(l.names[3], "\xC3\xA9t\xC3\xA9"),
        "labels_sorted_bytewise", "rc %d n %d", rc, l.n);
  int32_t ids[6];
  rc = map_one(&r, &l, TEXTCLS_NAMES_ONLY, ids, &e);
  check(rc == 0 && ids[0] == 2 && ids[1] == 3 && ids[2] == 0 && ids[3] == 2 && ids[4] == 1 && ids[5] == 0, "map_labels", "rc %d: %s", rc,
        e.msg);
  textcls_labels_free(&l);
  /* Integer labels by value (an integer column's order: 0..n-1 keep their values as ids);
  ** one name among them, or a leading zero, and all are names, bytewise. */
  char *nums[] = {"10", "2", "0", "1", "-3", "2"};
  TextClsRaw rn = {.n = 6, .texts = texts, .labels = nums};
  rc = textcls_labels_sorted(&rn, &l, &e);
  check(rc == 0 && l.n == 5 && !strcmp(l.names[0], "-3") && !strcmp(l.names[1], "0") && !strcmp(l.names[2], "1") &&
            !strcmp(l.names[3], "2") && !strcmp(l.names[4], "10"),
        "labels_sorted_integers_by_value", "rc %d n %d", rc, l.n);
  textcls_labels_free(&l);
  char *mixed[] = {"10", "2", "02", "1", "x1", "2"};
  char *mixed_want[][2] = {{"02", "1"}, {"x1", "x1"}};
  for (int k = 0; k < 2; k++) {
    char *lab[6];
    memcpy(lab, mixed, sizeof lab);
    if (k == 1) lab[2] = "0";
    TextClsRaw rm = {.n = 6, .texts = texts, .labels = lab};
    rc = textcls_labels_sorted(&rm, &l, &e);
    check(rc == 0 && l.n == 5 && !strcmp(l.names[0], k ? "0" : mixed_want[0][0]) && !strcmp(l.names[1], "1") &&
              !strcmp(l.names[2], "10") && !strcmp(l.names[3], "2") && !strcmp(l.names[4], mixed_want[1][1]),
          k ? "labels_sorted_a_name_among_integers_bytewise" : "labels_sorted_leading_zero_bytewise", "rc %d n %d", rc, l.n);
    textcls_labels_free(&l);
  }
  char *one[] = {"x", "x"};
  TextClsRaw r1 = {.n = 2, .texts = texts, .labels = one};
  Err oe = {0};
  rc = textcls_labels_sorted(&r1, &l, &oe);
  check(rc == -1 && oe.kind == ERR_BAD_INPUT && strstr(oe.msg, "1 label ('x')"), "labels_sorted_one", "rc %d [%s]", rc, oe.msg);

  /* Integer labels beside a names file (an integer column and its ClassLabel names): the
  ** integer is the id; one out of range, or names mixed with integers, is refused. */
  {
    char *abc[] = {"a", "b", "c"};
    TextClsLabels l3 = {3, abc};
    char *as_ids[] = {"2", "0", "1", "0"};
    TextClsRaw ri = {.n = 4, .texts = texts, .labels = as_ids};
    int32_t got[4];
    Err ie = {0};
    rc = map_one(&ri, &l3, TEXTCLS_IDS_AGREEING, got, &ie);
    check(rc == 0 && got[0] == 2 && got[1] == 0 && got[2] == 1 && got[3] == 0, "map_labels_integer_ids", "rc %d: %s", rc, ie.msg);
    char *past[] = {"2", "0", "3"};
    TextClsRaw rp = {.n = 3, .texts = texts, .labels = past};
    rc = map_one(&rp, &l3, TEXTCLS_IDS_AGREEING, got, &ie);
    check(rc == -1 && strstr(ie.msg, "row 3: label 3 is no id of the 3 labels"), "map_labels_integer_past_names_refused", "rc %d: %s", rc, ie.msg);
    char *mixed2[] = {"a", "1"};
    TextClsRaw rx = {.n = 2, .texts = texts, .labels = mixed2};
    rc = map_one(&rx, &l3, TEXTCLS_IDS_AGREEING, got, &ie);
    check(rc == -1 && strstr(ie.msg, "row 2: label '1'"), "map_labels_names_and_integers_refused", "rc %d: %s", rc, ie.msg);
    /* Without a labels file the names are train's own: integers are never ids. */
    rc = map_one(&ri, &l3, TEXTCLS_NAMES_ONLY, got, &ie);
    check(rc == -1 && strstr(ie.msg, "row 1: label '2' is not one of the 3 labels"), "map_labels_no_ids_without_labels_file",
          "rc %d: %s", rc, ie.msg);
  }
  /* One reading for every file of a run. Names "1".."5" (stars): train holds a 0, so its
  ** integers are ids; a test file of 1..4 alone, all names, was read by name, and its 1
  ** meant another label than train's 1. */
  {
    char *stars[] = {"1", "2", "3", "4", "5"};
    TextClsLabels l5 = {5, stars};
    char *train_cells[] = {"0", "1", "4"}, *test_cells[] = {"1", "2"};
    TextClsRaw tr = {.n = 3, .texts = texts, .labels = train_cells}, te = {.n = 2, .texts = texts, .labels = test_cells};
    const TextClsRaw *both[2] = {&tr, &te};
    TextClsReading how = TEXTCLS_BY_NAME;
    int bad_file = -2;
    Err re = {0};
    int32_t a[3] = {-1, -1, -1}, b[2] = {-1, -1};
    rc = textcls_label_reading(both, 2, &l5, TEXTCLS_IDS_AGREEING, &how, &bad_file, &re);
    if (rc == 0) rc = textcls_map_labels(&tr, &l5, how, a, &re) || textcls_map_labels(&te, &l5, how, b, &re) ? -1 : 0;
    check(rc == 0 && how == TEXTCLS_BY_ID && a[1] == 1 && b[0] == 1 && b[1] == 2, "label_reading_one_for_all_files",
          "rc %d how %d train 1 -> %d, test 1 -> %d: %s", rc, (int)how, a[1], b[0], re.msg);
    /* Every cell a name and an id, the readings differing: refused, naming the file. */
    const TextClsRaw *test_only[2] = {&tr, &te};
    test_only[0] = &te;
    rc = textcls_label_reading(test_only, 1, &l5, TEXTCLS_IDS_AGREEING, &how, &bad_file, &re);
    check(rc == -1 && bad_file == 0 && re.kind == ERR_BAD_INPUT &&
              strstr(re.msg, "row 1: label 1 is both a name in the labels file (id 0) and an id into it (the label '2')"),
          "label_reading_ambiguous_refused", "rc %d file %d: %s", rc, bad_file, re.msg);
    /* Names "0".."4": both readings agree, nothing to refuse. */
    char *zero_based[] = {"0", "1", "2", "3", "4"};
    TextClsLabels lz = {5, zero_based};
    rc = textcls_label_reading(test_only, 1, &lz, TEXTCLS_IDS_AGREEING, &how, &bad_file, &re);
    check(rc == 0 && how == TEXTCLS_BY_NAME, "label_reading_names_equal_ids", "rc %d: %s", rc, re.msg);
    /* Against a model's labels (maskd evaluate) the names win: a run fine-tuned without
    ** a labels file on cells 1..5 named its labels "1".."5", ids 0..4, and its own files
    ** are read as it read them; a file holding a 0, no name, is read by id. */
    rc = textcls_label_reading(test_only, 1, &l5, TEXTCLS_NAMES_FIRST, &how, &bad_file, &re);
    if (rc == 0) rc = textcls_map_labels(&te, &l5, how, b, &re);
    check(rc == 0 && how == TEXTCLS_BY_NAME && b[0] == 0 && b[1] == 1, "label_reading_names_first",
          "rc %d how %d: 1 -> %d, 2 -> %d: %s", rc, (int)how, b[0], b[1], re.msg);
    const TextClsRaw *train_only[1] = {&tr};
    rc = textcls_label_reading(train_only, 1, &l5, TEXTCLS_NAMES_FIRST, &how, &bad_file, &re);
    if (rc == 0) rc = textcls_map_labels(&tr, &l5, how, a, &re);
    check(rc == 0 && how == TEXTCLS_BY_ID && a[0] == 0 && a[2] == 4, "label_reading_names_first_ids",
          "rc %d how %d: 0 -> %d, 4 -> %d: %s", rc, (int)how, a[0], a[2], re.msg);
  }

  /* A label the set does not have: named, with its row. */
  char *names2[] = {"a", "b"};
  TextClsLabels l2 = {2, names2};
  char *labels3[] = {"a", "b", "zzz", "q"};
  TextClsRaw r3 = {.n = 4, .texts = texts, .labels = labels3};
  Err ue = {0};
  rc = map_one(&r3, &l2, TEXTCLS_NAMES_ONLY, ids, &ue);
  check(rc == -1 && ue.kind == ERR_BAD_INPUT && strstr(ue.msg, "row 3: label 'zzz' is not one of the 2 labels"), "map_labels_unknown",
        "rc %d kind %s [%s]", rc, err_kind_name(ue.kind), ue.msg);
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

static void test_split(void) {
  size_t *tr, *va, ntr, nva, *tr2, *va2, ntr2, nva2;
  Err e = {0};
  size_t n = 1001;
  int rc = textcls_split(n, 0.1, 42, &tr, &ntr, &va, &nva, &e);
  if (rc) { check(0, "split", "%s", e.msg); return; }
  /* Disjoint, covering, ascending, sized round(n x f). */
  unsigned char *seen = calloc(n, 1);
  int ok = ntr + nva == n && nva == 100;
  for (size_t i = 0; ok && i < nva; i++) { ok &= va[i] < n && !seen[va[i]] && (i == 0 || va[i] > va[i - 1]); seen[va[i]] = 1; }
  for (size_t i = 0; ok && i < ntr; i++) { ok &= tr[i] < n && !seen[tr[i]] && (i == 0 || tr[i] > tr[i - 1]); seen[tr[i]] = 2; }
  free(seen);
  check(ok, "split_disjoint_covering_sorted", "%zu train + %zu valid", ntr, nva);

  /* The written definition: Fisher-Yates (i from n-1 down, j = rng_below(i + 1)) over
  ** rng_split(rng_seed(seed), TEXTCLS_SPLIT_STREAM); the first n_valid are validation. */
  Rng base, r;
  rng_seed(&base, 42);
  r = rng_split(&base, TEXTCLS_SPLIT_STREAM);
  size_t *perm = malloc(n * sizeof *perm);
  for (size_t i = 0; i < n; i++) perm[i] = i;
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = rng_below(&r, (uint32_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  qsort(perm, 100, sizeof *perm, cmp_size);
  check(memcmp(perm, va, 100 * sizeof *va) == 0, "split_definition", "validation differs from the documented permutation");
  free(perm);

  rc = textcls_split(n, 0.1, 42, &tr2, &ntr2, &va2, &nva2, &e);
  check(rc == 0 && ntr2 == ntr && nva2 == nva && !memcmp(tr, tr2, ntr * sizeof *tr) && !memcmp(va, va2, nva * sizeof *va),
        "split_deterministic", "same seed, another split");
  free(tr2); free(va2);
  rc = textcls_split(n, 0.1, 43, &tr2, &ntr2, &va2, &nva2, &e);
  check(rc == 0 && nva2 == nva && memcmp(va, va2, nva * sizeof *va) != 0, "split_seed_matters", "seeds 42 and 43 give one split");
  free(tr2); free(va2);
  free(tr); free(va);

  /* Edges: at least one on each side; bad fractions and sizes refused. */
  rc = textcls_split(2, 0.99, 1, &tr, &ntr, &va, &nva, &e);
  check(rc == 0 && ntr == 1 && nva == 1 && tr[0] + va[0] == 1, "split_two_examples", "rc %d: %zu/%zu", rc, ntr, nva);
  free(tr); free(va);
  rc = textcls_split(10, 0.001, 1, &tr, &ntr, &va, &nva, &e);
  check(rc == 0 && ntr == 9 && nva == 1, "split_at_least_one_valid", "rc %d: %zu/%zu", rc, ntr, nva);
  free(tr); free(va);
  double fr[] = {0, 1, -0.5, 1.5, NAN};
  for (int i = 0; i < 5; i++) {
    Err fe = {0};
    rc = textcls_split(10, fr[i], 1, &tr, &ntr, &va, &nva, &fe);
    char name[64];
    snprintf(name, sizeof name, "split_refuses_fraction_%d", i);
    check(rc == -1 && fe.kind == ERR_INVALID && !tr && !va, name, "fraction %g: rc %d kind %s", fr[i], rc, err_kind_name(fe.kind));
  }
  Err ne = {0};
  rc = textcls_split(1, 0.5, 1, &tr, &ntr, &va, &nva, &ne);
  check(rc == -1 && ne.kind == ERR_INVALID, "split_refuses_one_example", "rc %d kind %s", rc, err_kind_name(ne.kind));
}

/* ---- batcher ---- */

enum { PAD = 1 };

/* Example i: length 1 + (i * 7 + i / 3) % maxlen_mod, ids 1000 i + t + 2, label i % 5 (every 7th -100). */
static void make_set(TextClsSet *s, size_t n, int mod) {
  memset(s, 0, sizeof *s);
  s->n = n;
  s->starts = malloc((n + 1) * sizeof *s->starts);
  s->labels = malloc(n * sizeof *s->labels);
  s->starts[0] = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = 1 + (i * 7 + i / 3) % (size_t)mod;
    s->starts[i + 1] = s->starts[i] + len;
    if ((int)len > s->max_len) s->max_len = (int)len;
    s->labels[i] = i % 7 == 6 ? -100 : (int32_t)(i % 5);
  }
  s->ids = malloc(s->starts[n] * sizeof *s->ids);
  for (size_t i = 0; i < n; i++)
    for (size_t t = s->starts[i]; t < s->starts[i + 1]; t++) s->ids[t] = (int32_t)(1000 * i + (t - s->starts[i]) + 2);
}

static size_t len_of(const TextClsSet *s, size_t i) { return s->starts[i + 1] - s->starts[i]; }

/* The first index where a and b differ over n entries, or n; its text into why for messages. */
static size_t first_diff(const size_t *a, const size_t *b, size_t n, char *why, size_t whylen) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) { snprintf(why, whylen, "order differs at %zu: %zu, want %zu", i, a[i], b[i]); return i; }
  return n;
}

/* The epoch permutation as documented: Fisher-Yates over rng_split(rng_seed(seed), epoch). */
static void ref_perm(size_t n, uint64_t seed, int epoch, size_t *p) {
  Rng base, r;
  rng_seed(&base, seed);
  r = rng_split(&base, (uint64_t)epoch);
  for (size_t i = 0; i < n; i++) p[i] = i;
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = rng_below(&r, (uint32_t)(i + 1)), t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

/* transformers' get_length_grouped_indices, transcribed: megabatches of mult x batch with
** mult = min(n // (4 batch), 50) or 1, each sorted by length descending (stable), then the
** first element of the megabatch with the largest first length swapped with element 0. */
static const TextClsSet *sort_set;
static const size_t *sort_base;
static int cmp_len_desc_stable(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;  /* positions in the megabatch */
  size_t lx = len_of(sort_set, sort_base[x]), ly = len_of(sort_set, sort_base[y]);
  if (lx != ly) return lx > ly ? -1 : 1;
  return x < y ? -1 : x > y;
}
static void ref_length_grouped(const TextClsSet *s, int batch, uint64_t seed, int epoch, size_t *out) {
  size_t n = s->n, mult = n / (4 * (size_t)batch);
  if (mult > 50) mult = 50;
  if (mult == 0) mult = 1;
  size_t m = mult * (size_t)batch;
  size_t *p = malloc(n * sizeof *p), *pos = malloc(n * sizeof *pos);
  ref_perm(n, seed, epoch, p);
  size_t nmb = (n + m - 1) / m, best = 0;
  for (size_t k = 0; k < nmb; k++) {
    size_t a = k * m, e = a + m < n ? a + m : n;
    for (size_t i = 0; i < e - a; i++) pos[i] = i;
    sort_set = s;
    sort_base = p + a;
    qsort(pos, e - a, sizeof *pos, cmp_len_desc_stable);
    for (size_t i = 0; i < e - a; i++) out[a + i] = p[a + pos[i]];
  }
  for (size_t k = 1; k < nmb; k++)
    if (len_of(s, out[k * m]) > len_of(s, out[best * m])) best = k;
  size_t t = out[0];
  out[0] = out[best * m];
  out[best * m] = t;
  free(p);
  free(pos);
}

/* transformers' get_length_grouped_indices as trainer_pt_utils.py writes it, run by Python
** with torch, on our epoch permutation in place of torch.randperm (the one line changed).
** Each input file (argv[1], argv[3], ...) holds n, batch, the lengths and the permutation;
** the output file after it receives the order. One run for every case: torch loads slowly. */
static const char py_grouped[] =
    "import sys, torch\n"
    "def get_length_grouped_indices(lengths, batch_size, perm, mega_batch_mult=None):\n"
    "    if mega_batch_mult is None:\n"
    "        mega_batch_mult = min(len(lengths) // (batch_size * 4), 50)\n"
    "        if mega_batch_mult == 0:\n"
    "            mega_batch_mult = 1\n"
    "    indices = torch.tensor(perm)\n"
    "    megabatch_size = mega_batch_mult * batch_size\n"
    "    megabatches = [indices[i : i + megabatch_size].tolist() for i in range(0, len(lengths), megabatch_size)]\n"
    "    megabatches = [sorted(megabatch, key=lambda i: lengths[i], reverse=True) for megabatch in megabatches]\n"
    "    megabatch_maximums = [lengths[megabatch[0]] for megabatch in megabatches]\n"
    "    max_idx = torch.argmax(torch.tensor(megabatch_maximums)).item()\n"
    "    megabatches[0][0], megabatches[max_idx][0] = megabatches[max_idx][0], megabatches[0][0]\n"
    "    return [i for megabatch in megabatches for i in megabatch]\n"
    "for a in range(1, len(sys.argv), 2):\n"
    "    words = open(sys.argv[a]).read().split()\n"
    "    n, batch = int(words[0]), int(words[1])\n"
    "    lengths = [int(w) for w in words[2 : 2 + n]]\n"
    "    perm = [int(w) for w in words[2 + n : 2 + 2 * n]]\n"
    "    open(sys.argv[a + 1], 'w').write(' '.join(map(str, get_length_grouped_indices(lengths, batch, perm))))\n";

typedef struct GroupedCase { const char *name; size_t n; int mod, batch; uint64_t seed; int epoch; } GroupedCase;

static void grouped_against_python(const GroupedCase *cases, int n_cases) {
  char script[700], cmd[4000], why[200];
  snprintf(script, sizeof script, "%s/grouped.py", root);
  puts_("grouped.py", py_grouped);
  int used = snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s'", script);
  for (int c = 0; c < n_cases; c++) {
    const GroupedCase *g = &cases[c];
    TextClsSet s;
    make_set(&s, g->n, g->mod);
    size_t *perm = malloc(g->n * sizeof *perm);
    ref_perm(g->n, g->seed, g->epoch, perm);
    char in[700];
    snprintf(in, sizeof in, "%s/grouped%d.in", root, c);
    FILE *f = fopen(in, "w");
    fprintf(f, "%zu %d\n", g->n, g->batch);
    for (size_t i = 0; i < g->n; i++) fprintf(f, "%zu ", len_of(&s, i));
    for (size_t i = 0; i < g->n; i++) fprintf(f, "%zu ", perm[i]);
    fclose(f);
    used += snprintf(cmd + used, sizeof cmd - (size_t)used, " '%s' '%s/grouped%d.out'", in, root, c);
    free(perm);
    textcls_set_free(&s);
  }
  int st = system(cmd);
  for (int c = 0; c < n_cases; c++) {
    const GroupedCase *g = &cases[c];
    if (st != 0) { check(0, g->name, "'%s' failed (status %d): /usr/bin/python3 with torch (python3-torch) is needed", cmd, st); continue; }
    TextClsSet s;
    make_set(&s, g->n, g->mod);
    TextClsBatcherOptions o = {g->batch, 1, 1, 0, PAD, g->seed};
    Err e = {0};
    TextClsBatcher *b = textcls_batcher_new(&s, &o, &e);
    size_t *order = malloc(g->n * sizeof *order), *py = malloc(g->n * sizeof *py), got = 0;
    if (b) textcls_batcher_order(b, g->epoch, order);
    char out[700];
    snprintf(out, sizeof out, "%s/grouped%d.out", root, c);
    FILE *f = fopen(out, "r");
    while (f && got < g->n && fscanf(f, "%zu", &py[got]) == 1) got++;
    if (f) fclose(f);
    why[0] = '\0';
    if (!b) check(0, g->name, "%s", e.msg);
    else check(got == g->n && first_diff(order, py, g->n, why, sizeof why) == g->n, g->name, "%zu of %zu read from Python; %s", got,
               g->n, why);
    free(order);
    free(py);
    textcls_batcher_free(b);
    textcls_set_free(&s);
  }
}

/* Runs one epoch from the batcher, checking every batch's shape, padding, mask, labels and
** examples against the set; appends the examples to order. Returns batches, or -1 on a bad batch. */
static long run_epoch(TextClsBatcher *b, const TextClsSet *s, int batch, size_t *order, size_t *visited, char *why, size_t whylen) {
  int32_t *ids = malloc((size_t)batch * (size_t)s->max_len * sizeof *ids), *mask = malloc((size_t)batch * (size_t)s->max_len * sizeof *mask);
  int32_t *labels = malloc((size_t)batch * sizeof *labels);
  size_t *ex = malloc((size_t)batch * sizeof *ex);
  int rows, seq;
  long k = 0;
  *visited = 0;
  while (textcls_batcher_next(b, &rows, &seq, ids, mask, labels, ex)) {
    size_t longest = 0;
    for (int r = 0; r < rows; r++) if (len_of(s, ex[r]) > longest) longest = len_of(s, ex[r]);
    if (rows < 1 || rows > batch || (size_t)seq != longest) {
      snprintf(why, whylen, "batch %ld: rows %d seq %d (longest %zu)", k, rows, seq, longest);
      k = -1;
      break;
    }
    for (int r = 0; r < rows && k >= 0; r++) {
      size_t e = ex[r], len = len_of(s, e);
      if (labels[r] != s->labels[e]) { snprintf(why, whylen, "batch %ld row %d: label %d, want %d", k, r, labels[r], s->labels[e]); k = -1; }
      for (int t = 0; t < seq && k >= 0; t++) {
        int32_t want = (size_t)t < len ? s->ids[s->starts[e] + (size_t)t] : PAD;
        if (ids[r * seq + t] != want || mask[r * seq + t] != ((size_t)t < len)) {
          snprintf(why, whylen, "batch %ld row %d pos %d: id %d mask %d, want %d %d", k, r, t, ids[r * seq + t], mask[r * seq + t],
                   want, (size_t)t < len);
          k = -1;
        }
      }
      order[(*visited)++] = e;
    }
    if (k < 0) break;
    k++;
  }
  free(ids); free(mask); free(labels); free(ex);
  return k;
}

static void test_batcher(void) {
  TextClsSet s;
  make_set(&s, 23, 9);
  Err e = {0};
  char why[256] = "";
  size_t order[2000], order2[2000], ref[2000], visited;

  /* Evaluation order: the set's order, 5 batches of 5,5,5,5,3, padded to each batch's longest. */
  TextClsBatcherOptions o = {5, 0, 0, 0, PAD, 7};
  TextClsBatcher *b = textcls_batcher_new(&s, &o, &e);
  if (!b) { check(0, "batcher_new", "%s", e.msg); return; }
  long k = run_epoch(b, &s, 5, order, &visited, why, sizeof why);
  int ok = k == 5 && visited == 23 && textcls_batches_per_epoch(b) == 5;
  for (size_t i = 0; ok && i < 23; i++) ok &= order[i] == i;
  check(ok, "batcher_sequential_padding_masks_labels", "%ld batches, %zu rows: %s", k, visited, why);
  int rows = -1, seq = -1;
  int32_t ids[5 * 9], mask[5 * 9], labels[5];
  check(textcls_batcher_next(b, &rows, &seq, ids, mask, labels, NULL) == 0 && rows == 0, "batcher_epoch_end", "a batch past the end");
  /* No mask, labels or examples wanted: still the ids. */
  textcls_batcher_seek(b, 0, 4);
  ok = textcls_batcher_next(b, &rows, &seq, ids, NULL, NULL, NULL) == 1 && rows == 3 && ids[0] == 20002;
  check(ok, "batcher_optional_outputs", "rows %d id %d", rows, ids[0]);
  textcls_batcher_free(b);

  /* drop_last: 4 batches, 20 rows, the order's first 20. */
  o.drop_last = 1;
  o.shuffle = 1;
  b = textcls_batcher_new(&s, &o, &e);
  k = b ? run_epoch(b, &s, 5, order, &visited, why, sizeof why) : -1;
  size_t n_order = b ? textcls_batcher_order(b, 0, order2) : 0;
  ok = k == 4 && visited == 20 && n_order == 20 && textcls_batches_per_epoch(b) == 4 && !memcmp(order, order2, 20 * sizeof *order);
  ref_perm(23, 7, 0, ref);
  ok &= !memcmp(order, ref, 20 * sizeof *order);
  check(ok, "batcher_drop_last", "%ld batches, %zu rows, order %zu: %s", k, visited, n_order, why);
  textcls_batcher_free(b);

  /* Shuffle: epoch e is the documented permutation; every row once; epochs and seeds differ. */
  o.drop_last = 0;
  b = textcls_batcher_new(&s, &o, &e);
  ok = b != NULL;
  for (int ep = 0; ok && ep < 4; ep++) {
    textcls_batcher_seek(b, ep, 0);
    k = run_epoch(b, &s, 5, order, &visited, why, sizeof why);
    ref_perm(23, 7, ep, ref);
    ok &= k == 5 && visited == 23 && first_diff(order, ref, 23, why, sizeof why) == 23 && textcls_batcher_order(b, ep, order2) == 23 &&
          !memcmp(order2, ref, 23 * sizeof *order);
    if (ep == 1) { ref_perm(23, 7, 0, order2); ok &= memcmp(order2, ref, 23 * sizeof *order) != 0; }
  }
  check(ok, "batcher_shuffle_is_documented_permutation", "%s", why);
  ref_perm(23, 8, 0, order2);
  ref_perm(23, 7, 0, ref);
  check(memcmp(order2, ref, 23 * sizeof *ref) != 0, "batcher_seed_matters", "seeds 7 and 8 give one order");

  /* Seek: batch k of epoch e after a seek equals batch k of a full run of e. */
  textcls_batcher_seek(b, 3, 0);
  int32_t all_ids[5][5 * 9];
  int all_rows[5], all_seq[5];
  for (int i = 0; i < 5; i++) textcls_batcher_next(b, &all_rows[i], &all_seq[i], all_ids[i], mask, labels, NULL);
  ok = 1;
  for (int i = 0; i < 5; i++) {
    textcls_batcher_seek(b, 1, 2);  /* another epoch in between */
    textcls_batcher_next(b, &rows, &seq, ids, mask, labels, NULL);
    textcls_batcher_seek(b, 3, i);
    ok &= textcls_batcher_next(b, &rows, &seq, ids, mask, labels, NULL) == 1 && rows == all_rows[i] && seq == all_seq[i] &&
          !memcmp(ids, all_ids[i], (size_t)rows * (size_t)seq * sizeof *ids);
  }
  textcls_batcher_seek(b, 3, 5);
  ok &= textcls_batcher_next(b, &rows, &seq, ids, mask, labels, NULL) == 0;
  textcls_batcher_seek(b, 3, 99);
  ok &= textcls_batcher_next(b, &rows, &seq, ids, mask, labels, NULL) == 0;
  check(ok, "batcher_seek", "a batch after seek differs from the uninterrupted epoch's");
  textcls_batcher_free(b);

  /* Length grouping: the small set (mult 1: megabatches of 5) and a larger one (n 1000, batch
  ** 4: mult 50, megabatches of 200), against the transcription of HF's function. */
  o.length_grouped = 1;
  b = textcls_batcher_new(&s, &o, &e);
  ok = b != NULL;
  for (int ep = 0; ok && ep < 3; ep++) {
    textcls_batcher_seek(b, ep, 0);
    k = run_epoch(b, &s, 5, order, &visited, why, sizeof why);
    ref_length_grouped(&s, 5, 7, ep, ref);
    ok &= k == 5 && visited == 23 && first_diff(order, ref, 23, why, sizeof why) == 23;
  }
  check(ok, "batcher_length_grouped_small", "%s", why);
  textcls_batcher_free(b);

  TextClsSet big;
  make_set(&big, 1000, 37);
  /* Ties are many (37 lengths over 1000 rows), so stability is tested. */
  TextClsBatcherOptions ob = {4, 1, 1, 0, PAD, 99};
  b = textcls_batcher_new(&big, &ob, &e);
  ok = b != NULL;
  int props = 1;
  for (int ep = 0; ok && ep < 3; ep++) {
    textcls_batcher_seek(b, ep, 0);
    k = run_epoch(b, &big, 4, order, &visited, why, sizeof why);
    ref_length_grouped(&big, 4, 99, ep, ref);
    ok &= k == 250 && visited == 1000 && first_diff(order, ref, 1000, why, sizeof why) == 1000;
    /* Properties that hold whatever the reference: a permutation; the first row is a longest
    ** row of the set; inside each megabatch lengths do not rise, but for its first element. */
    unsigned char seen[1000] = {0};
    for (size_t i = 0; i < 1000; i++) { props &= !seen[order[i]]; seen[order[i]] = 1; }
    props &= len_of(&big, order[0]) == (size_t)big.max_len;
    for (size_t a = 0; a < 1000; a += 200)
      for (size_t i = a + 2; i < a + 200; i++) props &= len_of(&big, order[i]) <= len_of(&big, order[i - 1]);
    ref_perm(1000, 99, ep, order2);
    props &= memcmp(order, order2, 1000 * sizeof *order) != 0;
  }
  check(ok, "batcher_length_grouped_matches_hf", "%s", why);
  check(props, "batcher_length_grouped_properties", "not a permutation, longest row not first, or a megabatch not sorted");
  textcls_batcher_free(b);
  textcls_set_free(&big);

  /* HF's own code (Python): megabatches of 50 x 4 (mult capped at 50), of 39 x 32 (n // 128),
  ** of 1 x 8 (a tiny set), and one megabatch of everything past the cap's reach. */
  static const GroupedCase grouped[] = {
      {"batcher_length_grouped_equals_hf_python_mult50", 1000, 37, 4, 99, 0},
      {"batcher_length_grouped_equals_hf_python_mult39", 5000, 61, 32, 5, 3},
      {"batcher_length_grouped_equals_hf_python_tiny", 20, 6, 8, 1, 1},
  };
  grouped_against_python(grouped, 3);

  /* Refusals, and a set whose max_len is wrong (the caller's buffers would overflow). */
  struct { const char *name; TextClsBatcherOptions o; } bad[] = {
      {"batcher_refuses_batch_0", {0, 1, 0, 0, PAD, 1}},
      {"batcher_refuses_grouping_without_shuffle", {4, 0, 1, 0, PAD, 1}},
      {"batcher_refuses_no_full_batch", {24, 1, 0, 1, PAD, 1}},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    Err be = {0};
    b = textcls_batcher_new(&s, &bad[i].o, &be);
    check(!b && be.kind == ERR_INVALID, bad[i].name, "kind %s [%s]", err_kind_name(be.kind), be.msg);
    textcls_batcher_free(b);
  }
  s.max_len--;
  Err me = {0};
  b = textcls_batcher_new(&s, &o, &me);
  check(!b && me.kind == ERR_INVALID && strstr(me.msg, "more than the set's max_len"), "batcher_refuses_wrong_max_len", "[%s]", me.msg);
  textcls_batcher_free(b);
  s.max_len++;
  size_t keep = s.starts[5];
  s.starts[5] = s.starts[4];
  Err ee = {0};
  b = textcls_batcher_new(&s, &o, &ee);
  check(!b && ee.kind == ERR_INVALID && strstr(ee.msg, "example 4 is empty"), "batcher_refuses_empty_example", "[%s]", ee.msg);
  s.starts[5] = keep;
  textcls_set_free(&s);
  textcls_set_free(&s);
}

/* ---- random CSVs: against Python's csv module where maskd reads them, never a crash ---- */

/* A random CSV of well-formed records (fields quoted or not, quotes doubled, \n, \r\n or
** \r line ends, blank lines, a BOM sometimes), then with some chance a few bytes replaced
** by delimiters, quotes or line ends; returns its length. */
static size_t random_csv(Rng *r, char *out, size_t cap, int *text_first) {
  static const char *const pieces[] = {"a", "b", "z", " ", "\xC3\xA9", "\xE2\x82\xAC", "\"", ",", "\n", "\r\n", "\r", "x y"};
  static const char *const ends[] = {"\n", "\r\n", "\r"};
  size_t n = 0;
  *text_first = (int)rng_below(r, 2);
#define PUT(str) do { size_t l_ = strlen(str); if (n + l_ < cap) { memcpy(out + n, str, l_); n += l_; } } while (0)
  if (rng_below(r, 4) == 0) PUT("\xEF\xBB\xBF");
  PUT(*text_first ? "text,label,more" : "label,more,text");
  const char *end = ends[rng_below(r, 3)];
  PUT(end);
  int rows = 1 + (int)rng_below(r, 6);
  for (int row = 0; row < rows; row++) {
    if (rng_below(r, 6) == 0) PUT(end);  /* a blank line */
    for (int f = 0; f < 3; f++) {
      if (f) PUT(",");
      int quoted = (int)rng_below(r, 2), len = 1 + (int)rng_below(r, 5);
      if (quoted) PUT("\"");
      for (int k = 0; k < len; k++) {
        const char *p = pieces[rng_below(r, quoted ? 12 : 6)];
        if (!quoted && k == 0 && p[0] == '"') p = "q";  /* a leading quote would open a quoted field */
        if (quoted && p[0] == '"') PUT("\"\"");
        else PUT(p);
      }
      if (quoted) PUT("\"");
    }
    if (row + 1 < rows || rng_below(r, 2)) PUT(end);
  }
  if (rng_below(r, 3) == 0) {
    static const char corrupt[] = ",\"\n\ra";
    for (int k = 1 + (int)rng_below(r, 3); k > 0 && n > 0; k--) out[rng_below(r, (uint32_t)n)] = corrupt[rng_below(r, 5)];
  }
#undef PUT
  return n;
}

static const char py_many[] =
    "import csv, sys\n"
    "out = open(sys.argv[2], 'wb')\n"
    "for k, path in enumerate(open(sys.argv[1]).read().split()):\n"
    "    try:\n"
    "        with open(path, newline='', encoding='utf-8-sig') as f:\n"
    "            rows = [(r['text'], r['label']) for r in csv.DictReader(f)]\n"
    "        if any(t is None or l is None for t, l in rows): raise ValueError('short row')\n"
    "    except Exception:\n"
    "        out.write(b'%d ERR\\n' % k); continue\n"
    "    out.write(b'%d %d\\n' % (k, len(rows)))\n"
    "    for t, l in rows:\n"
    "        t, l = t.encode('utf-8'), l.encode('utf-8')\n"
    "        out.write(b'%d %d\\n' % (len(t), len(l)) + t + l)\n";

static void random_csvs_against_python(void) {
  enum { FILES = 400 };
  Rng r;
  rng_seed(&r, 2024);
  char list[700], dump[700], script[700], cmd[2400], name[64], buf[4096];
  snprintf(list, sizeof list, "%s/many.txt", root);
  snprintf(dump, sizeof dump, "%s/many.dump", root);
  snprintf(script, sizeof script, "%s/many.py", root);
  puts_("many.py", py_many);
  FILE *lf = fopen(list, "w");
  int read_ok[FILES];
  TextClsRaw raws[FILES];
  int refused = 0, crashes = 0;
  for (int k = 0; k < FILES; k++) {
    int text_first;
    size_t n = random_csv(&r, buf, sizeof buf, &text_first);
    snprintf(name, sizeof name, "rand%03d.csv", k);
    const char *path = put(name, buf, n);
    fprintf(lf, "%s\n", path);
    Err e = {0};
    read_ok[k] = textcls_read(path, "text", "label", &raws[k], &e) == 0;
    if (!read_ok[k]) {
      refused++;
      /* A refusal is one line, of the bad-input kind, naming the file. */
      if (e.kind != ERR_BAD_INPUT || !strstr(e.msg, name) || strchr(e.msg, '\n') != NULL) {
        if (!crashes) printf("# %s: kind %s [%s]\n", name, err_kind_name(e.kind), e.msg);
        crashes++;
      }
    }
  }
  fclose(lf);
  check(crashes == 0, "random_csv_refusals_are_bad_input", "%d refusals without the kind, the file name or on one line", crashes);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' '%s'", script, list, dump);
  int st = system(cmd);
  if (st != 0) { check(0, "random_csv_equals_python_csv", "'%s' failed (status %d)", cmd, st); }
  else {
    FILE *f = fopen(dump, "rb");
    int bad = -1, agreed = 0;
    char why[160] = "";
    for (int k = 0; f && k < FILES && bad < 0; k++) {
      int kk;
      char word[16];
      if (fscanf(f, "%d %15s", &kk, word) != 2 || kk != k || fgetc(f) != '\n') { bad = k; snprintf(why, sizeof why, "unreadable dump"); break; }
      if (strcmp(word, "ERR") == 0) {
        /* Python refuses: maskd must refuse too (maskd may refuse more: it is stricter). */
        if (read_ok[k]) { bad = k; snprintf(why, sizeof why, "maskd reads it, Python refuses it"); }
        continue;
      }
      size_t rows = strtoul(word, NULL, 10);
      int same = !read_ok[k] || raws[k].n == rows;
      for (size_t i = 0; i < rows; i++) {
        size_t tl, ll;
        if (fscanf(f, "%zu %zu", &tl, &ll) != 2 || fgetc(f) != '\n' || tl + ll >= sizeof buf) {
          bad = k;
          snprintf(why, sizeof why, "unreadable dump");
          break;
        }
        if (fread(buf, 1, tl + ll, f) != tl + ll) { bad = k; snprintf(why, sizeof why, "short dump"); break; }
        if (same && read_ok[k] && (strlen(raws[k].texts[i]) != tl || memcmp(raws[k].texts[i], buf, tl) ||
                                   strlen(raws[k].labels[i]) != ll || memcmp(raws[k].labels[i], buf + tl, ll))) {
          same = 0;
          snprintf(why, sizeof why, "row %zu differs", i + 1);
        }
      }
      if (bad < 0 && !same) { bad = k; if (!why[0]) snprintf(why, sizeof why, "maskd reads %zu rows, Python %zu", raws[k].n, rows); }
      agreed += read_ok[k] && same;
    }
    if (f) fclose(f);
    check(bad < 0 && agreed > FILES / 5, "random_csv_equals_python_csv", "rand%03d.csv: %s (%d files agreed, %d refused by maskd)", bad, why,
          agreed, refused);
    printf("# random CSVs: %d read as Python reads them, %d refused by maskd\n", agreed, refused);
  }
  for (int k = 0; k < FILES; k++) if (read_ok[k]) textcls_raw_free(&raws[k]);
}

/* Arbitrary bytes into both readers: a result or a one-line refusal, never a crash (ASan
** runs this too). */
static void random_bytes_never_crash(void) {
  Rng r;
  rng_seed(&r, 77);
  static const char alphabet[] = "ab ,\"\n\r{}:[]0\xff\xc3\xa9\\";
  char buf[512];
  int bad = 0;
  for (int k = 0; k < 600; k++) {
    size_t n = rng_below(&r, sizeof buf);
    int header = k % 2 == 0;
    size_t at = 0;
    if (header) {  /* a start that gets past the header or into an object, so the rows are reached */
      const char *start = k % 4 ? "text,label\n" : "{\"text\":\"";
      at = strlen(start);
      memcpy(buf, start, at);
    }
    for (size_t i = at; i < n; i++) buf[i] = rng_below(&r, 40) == 0 ? '\0' : alphabet[rng_below(&r, sizeof alphabet - 1)];
    const char *path = put(k % 3 ? "fz.csv" : "fz.jsonl", buf, n < at ? at : n);
    TextClsRaw raw;
    Err e = {0};
    if (textcls_read(path, "text", "label", &raw, &e) == 0) {
      for (size_t i = 0; i < raw.n; i++) bad += !raw.texts[i][0] || !raw.labels[i][0];
      textcls_raw_free(&raw);
    } else if (e.kind != ERR_BAD_INPUT || strchr(e.msg, '\n') != NULL || raw.n != 0) {
      if (!bad) printf("# random bytes %d: kind %s [%s]\n", k, err_kind_name(e.kind), e.msg);
      bad++;
    }
  }
  check(bad == 0, "random_bytes_never_crash", "%d inconsistent results", bad);
}

/* ---- BANKING77 against Python's csv module ---- */

static const char py_dump[] =
    "import csv, sys\n"
    "with open(sys.argv[1], newline='', encoding='utf-8') as f, open(sys.argv[2], 'wb') as out:\n"
    "    for row in csv.DictReader(f):\n"
    "        t, l = row['text'].encode('utf-8'), row['category'].encode('utf-8')\n"
    "        out.write(b'%d %d\\n' % (len(t), len(l)) + t + l)\n";

static void compare_with_python(const char *name, const char *csv_path, size_t want_rows) {
  char script[700], dump[700], cmd[2400];
  snprintf(script, sizeof script, "%s/dump.py", root);
  snprintf(dump, sizeof dump, "%s/%s.dump", root, name);
  puts_("dump.py", py_dump);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' '%s'", script, csv_path, dump);
  int st = system(cmd);
  if (st != 0) { check(0, name, "'%s' failed (status %d): /usr/bin/python3 is needed", cmd, st); return; }
  TextClsRaw r;
  Err e = {0};
  if (textcls_read(csv_path, "text", "category", &r, &e) != 0) { check(0, name, "%s", e.msg); return; }
  FILE *f = fopen(dump, "rb");
  size_t i = 0;
  int ok = f != NULL;
  char *why = "";
  while (ok) {
    size_t tl, ll;
    int c = fscanf(f, "%zu %zu", &tl, &ll);
    if (c == EOF) break;
    if (c != 2 || fgetc(f) != '\n') { ok = 0; why = "unreadable dump"; break; }
    char *t = malloc(tl + 1), *l = malloc(ll + 1);
    ok = fread(t, 1, tl, f) == tl && fread(l, 1, ll, f) == ll;
    t[tl] = l[ll] = '\0';
    if (!ok) why = "short dump";
    else if (i >= r.n) { ok = 0; why = "Python reads more rows"; }
    else if (strlen(r.texts[i]) != tl || memcmp(r.texts[i], t, tl) != 0) { ok = 0; why = "text differs"; }
    else if (strcmp(r.labels[i], l) != 0) { ok = 0; why = "label differs"; }
    free(t); free(l);
    if (ok) i++;
  }
  if (f) fclose(f);
  if (ok && i != r.n) { ok = 0; why = "Python reads fewer rows"; }
  check(ok && r.n == want_rows, name, "%s at row %zu; maskd %zu rows, want %zu", why, i + 1, r.n, want_rows);
  textcls_raw_free(&r);
}

static void test_banking77(void) {
  const char *data = getenv("MASKD_DATA");
  if (!data) data = "../shared/data";
  char train[600], test[600], cats[600];
  snprintf(train, sizeof train, "%s/banking77/train.csv", data);
  snprintf(test, sizeof test, "%s/banking77/test.csv", data);
  snprintf(cats, sizeof cats, "%s/banking77/categories.json", data);
  compare_with_python("banking77_train_equals_python_csv", train, 10003);
  compare_with_python("banking77_test_equals_python_csv", test, 3080);

  TextClsRaw r;
  TextClsLabels file_labels, sorted;
  Err e = {0};
  if (textcls_read(train, "text", "category", &r, &e) != 0) { check(0, "banking77_labels", "%s", e.msg); return; }
  int rc = textcls_labels_load(cats, &file_labels, &e);
  if (rc == 0) rc = textcls_labels_sorted(&r, &sorted, &e);
  if (rc) { check(0, "banking77_labels", "%s", e.msg); textcls_raw_free(&r); return; }
  int32_t *ids = malloc(r.n * sizeof *ids);
  rc = map_one(&r, &file_labels, TEXTCLS_IDS_AGREEING, ids, &e);
  int ok = rc == 0 && file_labels.n == 77 && sorted.n == 77 && !strcmp(file_labels.names[0], "card_arrival");
  for (int i = 0; ok && i < 77; i++) ok &= textcls_label_id(&file_labels, sorted.names[i]) >= 0;
  for (size_t i = 0; ok && i < r.n; i++) ok &= !strcmp(file_labels.names[ids[i]], r.labels[i]);
  check(ok, "banking77_labels", "rc %d, %d labels in the file, %d in the data: %s", rc, file_labels.n, sorted.n, e.msg);
  free(ids);
  textcls_labels_free(&file_labels);
  textcls_labels_free(&sorted);
  textcls_raw_free(&r);
}

int main(void) {
  if (fixture_tmpdir(root, sizeof root, "test_textcls")) { check(0, "mkdtemp", "%s: %s", root, strerror(errno)); return check_exit(); }
  test_csv();
  test_jsonl();
  test_labels();
  test_split();
  test_batcher();
  random_csvs_against_python();
  random_bytes_never_crash();
  test_banking77();
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  /* TEXTCLS_KEEP=1 keeps the files, for a look after a failure. */
  if (!getenv("TEXTCLS_KEEP") && system(cmd) != 0) printf("# could not remove %s\n", root);
  return check_exit();
}
