#include "engine/data/textcls.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/core/files.h"
#include "engine/core/json_text.h"
#include "engine/core/rng.h"

/* A labels file is a list of names; 16 MiB is far beyond any real label set. */
#define TEXTCLS_MAX_LABELS_FILE ((size_t)16 << 20)

static int oom(Err *err) { return err_setk(err, ERR_NOMEM, "out of memory"); }

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF;
** NUL refused unless allow_nul (a text or a label is a C string and would end there).
** Returns the offset of the first bad byte, or (size_t)-1 when s[0 .. n) is valid. */
static size_t utf8_bad_offset_nul(const unsigned char *s, size_t n, int allow_nul) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c == 0 && !allow_nul) return i;
    if (c < 0x80) { i++; continue; }
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;  /* the allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) need = 2;
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) need = 2;
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else return i;
    if (n - i <= need) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k <= need; k++)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    i += need + 1;
  }
  return (size_t)-1;
}
static size_t utf8_bad_offset(const unsigned char *s, size_t n) { return utf8_bad_offset_nul(s, n, 0); }

/* s made fit for a one-line message (names and labels come from the file and may hold
** line ends): control bytes as \n, \r, \t or \xNN, cut after max bytes (then "..."),
** never inside a UTF-8 sequence; into buf[cap], returned. */
static const char *msg_text(const char *s, size_t max, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; s[i] && o + 8 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i >= max && (c & 0xC0) != 0x80) { memcpy(buf + o, "...", 3); o += 3; break; }
    if (c == '\n') { buf[o++] = '\\'; buf[o++] = 'n'; }
    else if (c == '\r') { buf[o++] = '\\'; buf[o++] = 'r'; }
    else if (c == '\t') { buf[o++] = '\\'; buf[o++] = 't'; }
    else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    else buf[o++] = (char)c;
  }
  buf[o] = '\0';
  return buf;
}

/* Growable arrays of the examples being read. */
typedef struct RawBuilder {
  TextClsRaw *r;
  size_t cap;
} RawBuilder;

static int raw_push(RawBuilder *b, long line, const char *text, size_t text_len, const char *label, size_t label_len,
                    Err *err) {
  TextClsRaw *r = b->r;
  if (r->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 1024;
    char **t = realloc(r->texts, cap * sizeof *t);
    if (!t) return oom(err);
    r->texts = t;
    char **l = realloc(r->labels, cap * sizeof *l);
    if (!l) return oom(err);
    r->labels = l;
    long *ln = realloc(r->lines, cap * sizeof *ln);
    if (!ln) return oom(err);
    r->lines = ln;
    b->cap = cap;
  }
  r->lines[r->n] = line;
  char *tc = malloc(text_len + 1), *lc = malloc(label_len + 1);
  if (!tc || !lc) { free(tc); free(lc); return oom(err); }
  memcpy(tc, text, text_len);
  tc[text_len] = '\0';
  memcpy(lc, label, label_len);
  lc[label_len] = '\0';
  r->texts[r->n] = tc;
  r->labels[r->n] = lc;
  r->n++;
  return 0;
}

/* Checks one example's fields: a non-empty UTF-8 text and a non-empty UTF-8 label. */
static int check_example(const char *path, long line, size_t row, const char *text, size_t text_len, const char *label,
                         size_t label_len, Err *err) {
  if (text_len == 0) return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): the text is empty", path, line, row);
  size_t bad = utf8_bad_offset((const unsigned char *)text, text_len);
  if (bad != (size_t)-1)
    return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): the text is not valid UTF-8 (%s at byte %zu of the text)", path,
                    line, row, text[bad] ? "bad byte" : "NUL", bad);
  if (label_len == 0) return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): the label is empty", path, line, row);
  bad = utf8_bad_offset((const unsigned char *)label, label_len);
  if (bad != (size_t)-1)
    return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): the label is not valid UTF-8 (%s at byte %zu of the label)", path,
                    line, row, label[bad] ? "bad byte" : "NUL", bad);
  return 0;
}

/* ---- CSV ---- */

typedef struct CsvField {
  char *s;       /* decoded in place in the file's buffer */
  size_t len;
} CsvField;

typedef struct CsvReader {
  const char *path;
  char *buf;
  size_t len, pos;
  long line;               /* physical line (1-based) at pos */
  CsvField *fields;
  size_t n_fields, cap_fields;
} CsvReader;

/* A line end at p: "\r\n", "\n" or a lone "\r" (as Python's csv reader takes them);
** returns its length, 0 when p is not at one. */
static size_t csv_eol(const CsvReader *c, size_t p) {
  if (p >= c->len) return 0;
  if (c->buf[p] == '\n') return 1;
  if (c->buf[p] == '\r') return p + 1 < c->len && c->buf[p + 1] == '\n' ? 2 : 1;
  return 0;
}

/* Reads one record into c->fields (decoding quoted fields in place: the decoded text is
** never longer than the raw one). Returns 1 with *start_line set, 0 at the end of the
** file, -1 with err. An empty line is skipped (Python's DictReader skips it too). */
static int csv_record(CsvReader *c, long *start_line, Err *err) {
  while (c->pos < c->len) {
    size_t e = csv_eol(c, c->pos);
    if (!e) break;
    c->pos += e;
    c->line++;
  }
  if (c->pos >= c->len) return 0;
  *start_line = c->line;
  c->n_fields = 0;
  for (;;) {
    if (c->n_fields == c->cap_fields) {
      size_t cap = c->cap_fields ? c->cap_fields * 2 : 16;
      CsvField *f = realloc(c->fields, cap * sizeof *f);
      if (!f) return oom(err);
      c->fields = f;
      c->cap_fields = cap;
    }
    CsvField *f = &c->fields[c->n_fields++];
    char *w = c->buf + c->pos;
    f->s = w;
    if (c->pos < c->len && c->buf[c->pos] == '"') {
      long quote_line = c->line;
      c->pos++;
      for (;;) {
        if (c->pos >= c->len)
          return err_setk(err, ERR_BAD_INPUT, "%s: line %ld: the quoted field opened on line %ld is not closed before the end of the file",
                          c->path, *start_line, quote_line);
        char ch = c->buf[c->pos];
        if (ch == '"') {
          if (c->pos + 1 < c->len && c->buf[c->pos + 1] == '"') { *w++ = '"'; c->pos += 2; continue; }
          c->pos++;
          break;
        }
        /* Line ends inside quotes are kept as they are (Python's newline='' reading). */
        size_t e = csv_eol(c, c->pos);
        if (e) c->line++;
        else e = 1;
        memmove(w, c->buf + c->pos, e);
        w += e;
        c->pos += e;
      }
      /* After the closing quote only a delimiter or a line end may follow: `"a"b` is
      ** ambiguous (RFC 4180 forbids it), so it is refused rather than guessed. */
      if (c->pos < c->len && c->buf[c->pos] != ',' && !csv_eol(c, c->pos))
        return err_setk(err, ERR_BAD_INPUT,
                        "%s: line %ld: text after the closing quote of field %zu (a quote inside a quoted field is written \"\")",
                        c->path, *start_line, c->n_fields);
    } else {
      /* An unquoted field runs to the next comma or line end; a quote inside it is
      ** taken as a character, as Python's csv and pandas take it. */
      while (c->pos < c->len && c->buf[c->pos] != ',' && !csv_eol(c, c->pos)) *w++ = c->buf[c->pos++];
    }
    f->len = (size_t)(w - f->s);
    if (c->pos < c->len && c->buf[c->pos] == ',') { c->pos++; continue; }
    size_t e = csv_eol(c, c->pos);
    c->pos += e;
    if (e) c->line++;
    /* Terminate every field: its end lies at or before the delimiter just consumed. */
    for (size_t i = 0; i < c->n_fields; i++) c->fields[i].s[c->fields[i].len] = '\0';
    return 1;
  }
}

static int read_csv(const char *path, char *buf, size_t len, const char *text_column, const char *label_column,
                    RawBuilder *b, Err *err) {
  CsvReader c = {path, buf, len, 0, 1, NULL, 0, 0};
  /* A UTF-8 byte-order mark (Excel writes one) is not part of the first column's name. */
  if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) c.pos = 3;
  long line;
  int rc = csv_record(&c, &line, err);
  if (rc == 0) rc = err_setk(err, ERR_BAD_INPUT, "%s: empty file (no header row)", path);
  size_t n_cols = 0, text_i = 0, label_i = 0;
  if (rc > 0) {
    n_cols = c.n_fields;
    int have_text = 0, have_label = 0;
    for (size_t i = 0; rc > 0 && i < n_cols; i++) {
      const char *name = c.fields[i].s;
      if (utf8_bad_offset((const unsigned char *)name, c.fields[i].len) != (size_t)-1) {
        rc = err_setk(err, ERR_BAD_INPUT, "%s: line %ld: column %zu's name is not valid UTF-8 (or holds a NUL)", path, line, i + 1);
        break;
      }
      for (int k = 0; k < 2; k++) {
        const char *want = k ? label_column : text_column;
        int *have = k ? &have_label : &have_text;
        size_t *at = k ? &label_i : &text_i;
        if (strcmp(name, want) != 0) continue;
        char m[128];
        if (*have)
          rc = err_setk(err, ERR_BAD_INPUT, "%s: line %ld: the header names column '%s' twice", path, line, msg_text(want, 60, m, sizeof m));
        *have = 1;
        *at = i;
      }
    }
    if (rc > 0 && (!have_text || !have_label)) {
      char cols[320], m[128], want[128];
      size_t used = 0;
      cols[0] = '\0';
      for (size_t i = 0; i < n_cols && used + 1 < sizeof cols; i++) {
        int k = snprintf(cols + used, sizeof cols - used, "%s'%s'", i ? ", " : "", msg_text(c.fields[i].s, 40, m, sizeof m));
        if (k < 0) break;
        used += (size_t)k;
      }
      if (used >= sizeof cols) strcpy(cols + sizeof cols - 4, "...");
      rc = err_setk(err, ERR_BAD_INPUT, "%s: no column '%s' in the header (columns: %s)", path,
                    msg_text(!have_text ? text_column : label_column, 60, want, sizeof want), cols);
    }
  }
  while (rc > 0) {
    rc = csv_record(&c, &line, err);
    if (rc <= 0) break;
    size_t row = b->r->n + 1;
    if (c.n_fields != n_cols) {
      rc = err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): %zu field%s, the header has %zu", path, line, row, c.n_fields,
                    c.n_fields == 1 ? "" : "s", n_cols);
      break;
    }
    const CsvField *t = &c.fields[text_i], *l = &c.fields[label_i];
    rc = check_example(path, line, row, t->s, t->len, l->s, l->len, err);
    /* The other columns are not kept, but a file that is not UTF-8 anywhere is refused,
    ** as Python's csv and HF datasets refuse it. */
    for (size_t i = 0; rc == 0 && i < n_cols; i++)
      if (i != text_i && i != label_i && utf8_bad_offset_nul((const unsigned char *)c.fields[i].s, c.fields[i].len, 1) != (size_t)-1)
        rc = err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): column %zu is not valid UTF-8", path, line, row, i + 1);
    if (rc == 0) rc = raw_push(b, line, t->s, t->len, l->s, l->len, err);
    if (rc == 0) rc = 1;
  }
  if (rc == 0 && b->r->n == 0) rc = err_setk(err, ERR_BAD_INPUT, "%s: a header and no rows", path);
  free(c.fields);
  return rc < 0 ? -1 : 0;
}

/* ---- JSON Lines, JSON arrays ---- */

/* One example's object (a JSON Lines line, an array's element), checked and kept. */
static int json_example(const char *path, long line, size_t row, const json_t *o, const char *text_column,
                        const char *label_column, RawBuilder *b, Err *err) {
  char m[200], m2[128];
  if (!json_is_object(o)) return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): not a JSON object", path, line, row);
  json_t *t = json_object_get(o, text_column), *l = json_object_get(o, label_column);
  char num[32];
  const char *label = NULL;
  size_t label_len = 0;
  if (!t || !l) {
    char keys[320];
    size_t used = 0;
    keys[0] = '\0';
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
      if (used + 1 >= sizeof keys) break;
      int w = snprintf(keys + used, sizeof keys - used, "%s'%s'", used ? ", " : "", msg_text(key, 40, m2, sizeof m2));
      if (w < 0) break;
      used += (size_t)w;
    }
    if (used >= sizeof keys) strcpy(keys + sizeof keys - 4, "...");
    return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): no field '%s' (fields: %s)", path, line, row,
                    msg_text(!t ? text_column : label_column, 60, m, sizeof m), used ? keys : "none");
  }
  if (!json_is_string(t))
    return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): field '%s' is not a string", path, line, row,
                    msg_text(text_column, 60, m, sizeof m));
  if (json_is_string(l)) {
    label = json_string_value(l);
    label_len = json_string_length(l);
  } else if (json_is_integer(l)) {
    snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(l));
    label = num;
    label_len = strlen(num);
  } else
    return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): field '%s' is neither a string nor an integer", path, line,
                    row, msg_text(label_column, 60, m, sizeof m));
  if (check_example(path, line, row, json_string_value(t), json_string_length(t), label, label_len, err)) return -1;
  return raw_push(b, line, json_string_value(t), json_string_length(t), label, label_len, err);
}

static int read_jsonl(const char *path, char *buf, size_t len, const char *text_column, const char *label_column,
                      RawBuilder *b, Err *err) {
  size_t pos = 0;
  long line = 0;
  if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) pos = 3;
  while (pos < len) {
    line++;
    char *s = buf + pos;
    char *nl = memchr(s, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - s) : len - pos;
    pos += n + (nl != NULL);
    size_t k = 0;
    while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
    if (k == n) continue;  /* a blank line */
    size_t row = b->r->n + 1;
    json_error_t je;
    json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
    char m[200];
    if (!o)
      return err_setk(err, ERR_BAD_INPUT, "%s: line %ld (row %zu): not valid JSON: %s", path, line, row,
                      msg_text(json_error_message(&je), 150, m, sizeof m));
    int rc = json_example(path, line, row, o, text_column, label_column, b, err);
    json_decref(o);
    if (rc) return -1;
  }
  if (b->r->n == 0) return err_setk(err, ERR_BAD_INPUT, "%s: empty file (no JSON lines)", path);
  return 0;
}

/* The line each element of a JSON text's array starts on, into lines[0 .. n): the
** top-level array's (names_key NULL), or that of the top-level object's key names_key
** (written without escapes); 0 where none is found. s is JSON jansson has read, so
** the walk only needs its strings, brackets, colons and commas. */
static void json_element_lines(const char *s, size_t len, const char *names_key, long *lines, size_t n) {
  memset(lines, 0, n * sizeof *lines);
  size_t idx = 0, key_len = names_key ? strlen(names_key) : 0;
  long line = 1;
  int depth = 0, target = 0, want = 0, key_match = 0, value_of_key = 0;
  char root = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (ch == '\n') { line++; continue; }
    if (ch == ' ' || ch == '\t' || ch == '\r') continue;
    if (want) {   /* the first byte after the array's '[' or one of its commas */
      want = 0;
      if (ch != ']' && idx < n) lines[idx++] = line;
    }
    if (ch == '"') {
      size_t st = ++i;
      while (i < len && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
      key_match = names_key && root == '{' && depth == 1 && i - st == key_len && !memcmp(s + st, names_key, key_len);
      value_of_key = 0;
      continue;
    }
    if (ch == ':') { value_of_key = key_match; key_match = 0; continue; }
    if (ch == '[' || ch == '{') {
      if (depth == 0) root = ch;
      depth++;
      if (!target && ch == '[' && (names_key ? value_of_key : depth == 1)) { target = depth; want = 1; }
    } else if (ch == ']' || ch == '}') {
      if (depth == target) target = -1;   /* only the first such array */
      depth--;
    } else if (ch == ',' && depth == target) want = 1;
    value_of_key = key_match = 0;
  }
}

/* A JSON array of example objects: the whole file is one JSON text. */
static int read_json_array(const char *path, char *buf, size_t len, const char *text_column, const char *label_column,
                           RawBuilder *b, Err *err) {
  size_t pos = len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
  json_error_t je;
  json_t *a = json_loadb(buf + pos, len - pos, JSON_REJECT_DUPLICATES, &je);
  char m[200];
  if (!a)
    return err_setk(err, ERR_BAD_INPUT, "%s: line %d: not valid JSON: %s", path, je.line,
                    msg_text(json_error_message(&je), 150, m, sizeof m));
  size_t n = json_array_size(a);
  long *lines = malloc((n ? n : 1) * sizeof *lines);
  if (!lines) { json_decref(a); return oom(err); }
  json_element_lines(buf + pos, len - pos, NULL, lines, n);
  int rc = n == 0 ? err_setk(err, ERR_BAD_INPUT, "%s: an empty JSON array (no records)", path) : 0;
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = json_example(path, lines[i], i + 1, json_array_get(a, i), text_column, label_column, b, err);
  free(lines);
  json_decref(a);
  return rc ? -1 : 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

int textcls_read(const char *path, const char *text_column, const char *label_column, TextClsRaw *out, Err *err) {
  memset(out, 0, sizeof *out);
  if (!text_column || !*text_column || !label_column || !*label_column)
    return err_setk(err, ERR_INVALID, "%s: the text and label column names must be given", path);
  size_t len;
  char *buf = files_read_all(path, TEXTCLS_MAX_FILE, &len, err);
  if (!buf) return -1;
  RawBuilder b = {out, 0};
  int rc = (out->path = strdup(path)) ? 0 : oom(err);
  /* A .json file is JSON Lines or, starting with '[', an array of records: both are
  ** what tools write under that name (pandas' to_json(orient="records", lines=...),
  ** HF datasets' to_json(lines=...)), and a JSON Lines line cannot start with '['
  ** and be an example. */
  size_t first = len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
  while (first < len && (buf[first] == ' ' || buf[first] == '\t' || buf[first] == '\r' || buf[first] == '\n')) first++;
  int json = ends_with(path, ".json"), jsonl = ends_with(path, ".jsonl") || json;
  if (rc == 0)
    rc = json && first < len && buf[first] == '[' ? read_json_array(path, buf, len, text_column, label_column, &b, err)
         : jsonl ? read_jsonl(path, buf, len, text_column, label_column, &b, err)
                 : read_csv(path, buf, len, text_column, label_column, &b, err);
  free(buf);
  if (rc) textcls_raw_free(out);
  return rc;
}

void textcls_raw_free(TextClsRaw *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) {
    if (r->texts) free(r->texts[i]);
    if (r->labels) free(r->labels[i]);
  }
  free(r->texts);
  free(r->labels);
  free(r->lines);
  free(r->path);
  memset(r, 0, sizeof *r);
}

/* ---- labels ---- */

void textcls_labels_free(TextClsLabels *l) {
  if (!l) return;
  for (int i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Refuses a set of names with fewer than 2 or with a repeated name (sorted copies of
** the pointers, so the check is n log n). lines[i]: name i's line in the file what,
** root_line the list's (the messages say "what:LINE: ..."). */
static int labels_check(const char *what, char **names, int n, const long *lines, long root_line, Err *err) {
  if (n < 2)
    return err_setk(err, ERR_BAD_INPUT, "%s:%ld: %d label%s; classification needs at least 2", what, root_line, n, n == 1 ? "" : "s");
  char **sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) return oom(err);
  memcpy(sorted, names, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
  int rc = 0;
  for (int i = 1; i < n; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) {
      int first = -1, second = -1;
      for (int k = 0; k < n; k++)
        if (strcmp(names[k], sorted[i]) == 0) { if (first < 0) first = k; else if (second < 0) second = k; }
      char m[160];
      rc = err_setk(err, ERR_BAD_INPUT, "%s:%ld: label '%s' appears twice (ids %d and %d; the first on line %ld)", what,
                    lines[second], msg_text(sorted[i], 100, m, sizeof m), first, second, lines[first]);
      break;
    }
  free(sorted);
  return rc;
}

int textcls_labels_load(const char *path, TextClsLabels *out, Err *err) {
  memset(out, 0, sizeof *out);
  size_t len;
  char *text = files_read_all(path, TEXTCLS_MAX_LABELS_FILE, &len, err);
  if (!text) return -1;
  json_error_t je;
  json_t *root = json_loadb(text, len, 0, &je);
  char m[200];
  if (!root) {
    free(text);
    return err_setk(err, ERR_BAD_INPUT, "%s:%d: not valid JSON: %s", path, je.line, msg_text(json_error_message(&je), 150, m, sizeof m));
  }
  /* Every message names the line: of the list (or object), or of the name it is about. */
  long root_line = 1;
  for (size_t i = 0; i < len && strchr(" \t\r\n", text[i]); i++) root_line += text[i] == '\n';
  json_t *list = root;
  int rc = 0;
  if (json_is_object(root)) {
    list = json_object_get(root, "names");
    if (!json_is_array(list)) rc = err_setk(err, ERR_BAD_INPUT, "%s:%ld: an object without a \"names\" list", path, root_line);
  } else if (!json_is_array(root))
    rc = err_setk(err, ERR_BAD_INPUT, "%s:%ld: neither a list of label names nor an object with \"names\"", path, root_line);
  size_t n = rc == 0 ? json_array_size(list) : 0;
  long *lines = NULL;
  if (rc == 0 && n > (size_t)INT32_MAX) rc = err_setk(err, ERR_TOO_LARGE, "%s:%ld: %zu labels", path, root_line, n);
  if (rc == 0 && !(lines = malloc((n ? n : 1) * sizeof *lines))) rc = oom(err);
  if (rc == 0) json_element_lines(text, len, json_is_object(root) ? "names" : NULL, lines, n);
  if (rc == 0 && n > 0 && !(out->names = calloc(n, sizeof *out->names))) rc = oom(err);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    json_t *v = json_array_get(list, i);
    if (!json_is_string(v)) { rc = err_setk(err, ERR_BAD_INPUT, "%s:%ld: label %zu is not a string", path, lines[i], i); break; }
    if (json_string_length(v) == 0) { rc = err_setk(err, ERR_BAD_INPUT, "%s:%ld: label %zu is empty", path, lines[i], i); break; }
    if (!(out->names[i] = strdup(json_string_value(v)))) { rc = oom(err); break; }
    out->n = (int)i + 1;
  }
  json_decref(root);
  free(text);
  if (rc == 0) rc = labels_check(path, out->names, (int)n, lines, root_line, err);
  free(lines);
  if (rc) textcls_labels_free(out);
  return rc;
}

/* 1 when s is an integer as a data set's integer column writes it ("0", "12", "-3": no
** sign but '-', no leading zero, at most 18 digits), its value in *v. */
static int int_label(const char *s, long long *v) {
  const char *d = s + (*s == '-');
  size_t n = strlen(d);
  if (n == 0 || n > 18 || (d[0] == '0' && n > 1) || (*s == '-' && !strcmp(d, "0"))) return 0;
  for (size_t i = 0; i < n; i++)
    if (d[i] < '0' || d[i] > '9') return 0;
  *v = strtoll(s, NULL, 10);
  return 1;
}

static int cmp_int_str(const void *a, const void *b) {
  long long x = 0, y = 0;
  int_label(*(const char *const *)a, &x);
  int_label(*(const char *const *)b, &y);
  return (x > y) - (x < y);
}

int textcls_labels_sorted(const TextClsRaw *r, TextClsLabels *out, Err *err) {
  memset(out, 0, sizeof *out);
  if (r->n == 0) return err_setk(err, ERR_BAD_INPUT, "no examples, so no labels");
  char **sorted = malloc(r->n * sizeof *sorted);
  if (!sorted) return oom(err);
  memcpy(sorted, r->labels, r->n * sizeof *sorted);
  /* Integer labels in numeric order, as datasets' class_encode_column orders an integer
  ** column (labels 0..n-1 keep their values as ids); names bytewise, as it orders strings. */
  int integers = 1;
  long long v;
  for (size_t i = 0; i < r->n && integers; i++) integers = int_label(r->labels[i], &v);
  qsort(sorted, r->n, sizeof *sorted, integers ? cmp_int_str : cmp_str);
  size_t distinct = 1;
  for (size_t i = 1; i < r->n; i++) distinct += strcmp(sorted[i - 1], sorted[i]) != 0;
  int rc = 0;
  char m[160];
  if (distinct < 2)
    rc = err_setk(err, ERR_BAD_INPUT, "the examples hold 1 label ('%s'); classification needs at least 2",
                  msg_text(sorted[0], 100, m, sizeof m));
  else if (distinct > (size_t)INT32_MAX) rc = err_setk(err, ERR_TOO_LARGE, "%zu distinct labels", distinct);
  else if (!(out->names = calloc(distinct, sizeof *out->names))) rc = oom(err);
  for (size_t i = 0; rc == 0 && i < r->n; i++) {
    if (i > 0 && strcmp(sorted[i - 1], sorted[i]) == 0) continue;
    if (!(out->names[out->n] = strdup(sorted[i]))) { rc = oom(err); break; }
    out->n++;
  }
  free(sorted);
  if (rc) textcls_labels_free(out);
  return rc;
}

int textcls_label_id(const TextClsLabels *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0) return i;
  return -1;
}

typedef struct NameId { const char *name; int id; } NameId;

static int cmp_name_id(const void *a, const void *b) { return strcmp(((const NameId *)a)->name, ((const NameId *)b)->name); }

/* l's names sorted, for lookups in n log L rather than n x L. */
static NameId *name_index(const TextClsLabels *l) {
  NameId *index = malloc((size_t)l->n * sizeof *index);
  if (!index) return NULL;
  for (int i = 0; i < l->n; i++) index[i] = (NameId){l->names[i], i};
  qsort(index, (size_t)l->n, sizeof *index, cmp_name_id);
  return index;
}

static const NameId *find_name(const NameId *index, const TextClsLabels *l, const char *name) {
  NameId key = {name, 0};
  return bsearch(&key, index, (size_t)l->n, sizeof *index, cmp_name_id);
}

/* What Python's str.strip() strips, of ASCII. */
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* The label a cell names: the name it is, else the name it is with the whitespace around
** it stripped, as HF datasets' ClassLabel.str2int tries (a CSV written "text, label"
** has cells " label"). NULL when neither; *nomem set when the copy failed. */
static const NameId *cell_name(const NameId *index, const TextClsLabels *l, const char *cell, int *nomem) {
  const NameId *hit = find_name(index, l, cell);
  size_t n = strlen(cell), a = 0;
  if (hit || n == 0 || (!is_space(cell[0]) && !is_space(cell[n - 1]))) return hit;
  while (a < n && is_space(cell[a])) a++;
  while (n > a && is_space(cell[n - 1])) n--;
  char *s = strndup(cell + a, n - a);
  if (!s) { *nomem = 1; return NULL; }
  hit = find_name(index, l, s);
  free(s);
  return hit;
}

/* int_label of the cell with the whitespace around it stripped (Python's int() takes " 3 "). */
static int cell_int(const char *cell, long long *v) {
  size_t n = strlen(cell), a = 0;
  while (a < n && is_space(cell[a])) a++;
  while (n > a && is_space(cell[n - 1])) n--;
  char buf[24];
  if (n - a >= sizeof buf) return 0;
  memcpy(buf, cell + a, n - a);
  buf[n - a] = '\0';
  return int_label(buf, v);
}

/* Where row i's cell is, in buf: its file and line when read from one, else its row alone. */
static const char *cell_where(const TextClsRaw *r, size_t i, char *buf, size_t n) {
  if (r->path && r->lines) snprintf(buf, n, "%s: line %ld (row %zu)", r->path, r->lines[i], i + 1);
  else snprintf(buf, n, "row %zu", i + 1);
  return buf;
}

int textcls_label_reading(const TextClsRaw *const *files, int n, const TextClsLabels *l, TextClsIds ids,
                          TextClsReading *out, int *bad_file, Err *err) {
  *out = TEXTCLS_BY_NAME;
  *bad_file = -1;
  if (l->n <= 0) return err_setk(err, ERR_INVALID, "an empty label set");
  if (ids == TEXTCLS_NAMES_ONLY) return 0;
  NameId *index = name_index(l);
  if (!index) return oom(err);
  /* Decided over every file at once: read per file, a test file whose integers all
  ** happened to be names was read by name while train, holding an integer that is no
  ** name, was read by id, and one cell meant two labels. */
  int all_names = 1, all_ints = 1, rc = 0, nomem = 0;
  long long v;
  for (int f = 0; f < n; f++)
    for (size_t i = 0; i < files[f]->n; i++) {
      if (all_names && !cell_name(index, l, files[f]->labels[i], &nomem)) all_names = 0;
      if (all_ints && !cell_int(files[f]->labels[i], &v)) all_ints = 0;
    }
  if (nomem) { free(index); return oom(err); }
  if (all_ints && !all_names) *out = TEXTCLS_BY_ID;
  /* Both readings possible: beside a labels file they must agree; against a model's
  ** labels the names win, as the fine-tuning run that made them read its cells (a run
  ** without a labels file names its labels after the cells, "1".."5" as ids 0..4). */
  for (int f = 0; ids == TEXTCLS_IDS_AGREEING && all_ints && all_names && f < n && !rc; f++)
    for (size_t i = 0; i < files[f]->n; i++) {
      cell_int(files[f]->labels[i], &v);
      const NameId *hit = cell_name(index, l, files[f]->labels[i], &nomem);
      if (!hit) { rc = oom(err); break; }
      int named = hit->id;
      if (v == named) continue;
      char m[80], where[sizeof err->msg / 2];
      *bad_file = f;
      rc = err_setk(err, ERR_BAD_INPUT,
                    "%s: label %s is both a name in the labels file (id %d) and an id into it (the label '%s'); "
                    "every label is one or the other: give names, or ids 0..%d throughout",
                    cell_where(files[f], i, where, sizeof where), files[f]->labels[i], named,
                    v < l->n && v >= 0 ? msg_text(l->names[v], 60, m, sizeof m) : "none", l->n - 1);
      break;
    }
  free(index);
  return rc;
}

int textcls_map_labels(const TextClsRaw *r, const TextClsLabels *l, TextClsReading how, int32_t *ids, Err *err) {
  if (l->n <= 0) return err_setk(err, ERR_INVALID, "an empty label set");
  NameId *index = how == TEXTCLS_BY_NAME ? name_index(l) : NULL;
  if (how == TEXTCLS_BY_NAME && !index) return oom(err);
  int rc = 0, nomem = 0;
  for (size_t i = 0; i < r->n && !rc; i++) {
    long long v;
    char where[sizeof err->msg / 2];
    cell_where(r, i, where, sizeof where);
    if (how == TEXTCLS_BY_ID) {
      if (!cell_int(r->labels[i], &v) || v < 0 || v >= l->n) {
        char m[160];
        rc = err_setk(err, ERR_BAD_INPUT, "%s: label %s is no id of the %d labels (integer labels are ids 0..%d)",
                      where, msg_text(r->labels[i], 100, m, sizeof m), l->n, l->n - 1);
        break;
      }
      ids[i] = (int32_t)v;
      continue;
    }
    const NameId *hit = cell_name(index, l, r->labels[i], &nomem);
    if (nomem) { rc = oom(err); break; }
    if (!hit) {
      char m[160], m2[100];
      rc = err_setk(err, ERR_BAD_INPUT, "%s: label '%s' is not one of the %d labels (the first is '%s')", where,
                    msg_text(r->labels[i], 100, m, sizeof m), l->n, msg_text(l->names[0], 60, m2, sizeof m2));
      break;
    }
    ids[i] = hit->id;
  }
  free(index);
  return rc;
}

/* ---- split ---- */

/* Fisher-Yates from the identity, i from n-1 down to 1 swapping with rng_below(i+1):
** the one shuffle of this file, for the split and for every epoch's order. */
static void shuffle_identity(Rng *r, size_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = i;
  for (size_t i = n; i-- > 1;) {
    size_t j = rng_below(r, (uint32_t)(i + 1));
    size_t t = p[i]; p[i] = p[j]; p[j] = t;
  }
}

int textcls_split(size_t n, double fraction, uint64_t seed, size_t **train_idx, size_t *n_train, size_t **valid_idx,
                  size_t *n_valid, Err *err) {
  *train_idx = *valid_idx = NULL;
  *n_train = *n_valid = 0;
  if (!(fraction > 0 && fraction < 1)) return err_setk(err, ERR_INVALID, "validation fraction %g is not in (0, 1)", fraction);
  if (n < 2) return err_setk(err, ERR_INVALID, "%zu example%s cannot be split in two", n, n == 1 ? "" : "s");
  if (n > UINT32_MAX) return err_setk(err, ERR_INVALID, "%zu examples are more than a split indexes", n);
  double want = round((double)n * fraction);
  size_t nv = want < 1 ? 1 : want > (double)(n - 1) ? n - 1 : (size_t)want;
  size_t *perm = malloc(n * sizeof *perm);
  unsigned char *is_valid = calloc(n, 1);
  size_t *tr = malloc((n - nv) * sizeof *tr), *va = malloc(nv * sizeof *va);
  if (!perm || !is_valid || !tr || !va) { free(perm); free(is_valid); free(tr); free(va); return oom(err); }
  Rng base;
  rng_seed(&base, seed);
  Rng r = rng_split(&base, TEXTCLS_SPLIT_STREAM);
  shuffle_identity(&r, perm, n);
  for (size_t i = 0; i < nv; i++) is_valid[perm[i]] = 1;
  size_t a = 0, v = 0;
  for (size_t i = 0; i < n; i++) {
    if (is_valid[i]) va[v++] = i;
    else tr[a++] = i;
  }
  free(perm);
  free(is_valid);
  *train_idx = tr;
  *n_train = a;
  *valid_idx = va;
  *n_valid = v;
  return 0;
}

void textcls_set_free(TextClsSet *s) {
  if (!s) return;
  free(s->ids);
  free(s->starts);
  free(s->labels);
  memset(s, 0, sizeof *s);
}

/* ---- batcher ---- */

struct TextClsBatcher {
  const TextClsSet *s;
  TextClsBatcherOptions o;
  long per_epoch;        /* batches per epoch */
  size_t visit;          /* rows the epoch visits: per_epoch x batch with drop_last, else n */
  size_t mega;           /* the length-grouped megabatch size */
  size_t *order;         /* the current epoch's order (n) */
  size_t *scratch;       /* n: the counting sort's output (written through a const batcher by _order) */
  size_t *counts;        /* max_len + 2: the counting sort's buckets */
  int epoch;
  long position;         /* the next batch */
};

/* The megabatch size of HF's get_length_grouped_indices: mega_batch_mult =
** min(n // (4 x batch), 50), at least 1, so a small set still has about 4 megabatches. */
static size_t megabatch_size(size_t n, int batch) {
  size_t mult = n / ((size_t)batch * 4);
  if (mult > 50) mult = 50;
  if (mult == 0) mult = 1;
  return mult * (size_t)batch;
}

static size_t example_len(const TextClsSet *s, size_t i) { return s->starts[i + 1] - s->starts[i]; }

/* Epoch e's order into order[0 .. n) with b's scratch: the permutation, then (length_grouped)
** each megabatch sorted by length, longest first, ties in permutation order (Python's
** sorted(reverse=True) is stable); then, as HF does, the first element of the megabatch
** whose first (longest) element is longest (the first such megabatch) swaps places with
** the first element of the first megabatch, so the first batch holds the longest row
** and an out-of-memory shows at once. */
static void build_order(const TextClsBatcher *b, int epoch, size_t *order) {
  const TextClsSet *s = b->s;
  size_t n = s->n;
  if (!b->o.shuffle) {
    for (size_t i = 0; i < n; i++) order[i] = i;
    return;
  }
  Rng base;
  rng_seed(&base, b->o.seed);
  Rng r = rng_split(&base, (uint64_t)(int64_t)epoch);
  shuffle_identity(&r, order, n);
  if (!b->o.length_grouped) return;
  size_t L = (size_t)s->max_len, m = b->mega;
  size_t best_mb = 0, best_len = 0;
  for (size_t start = 0; start < n; start += m) {
    size_t end = start + m < n ? start + m : n;
    /* A counting sort by (max_len - length): stable, and O(m + max_len) per megabatch. */
    memset(b->counts, 0, (L + 2) * sizeof *b->counts);
    for (size_t i = start; i < end; i++) b->counts[L - example_len(s, order[i]) + 1]++;
    for (size_t k = 1; k <= L + 1; k++) b->counts[k] += b->counts[k - 1];
    for (size_t i = start; i < end; i++) b->scratch[b->counts[L - example_len(s, order[i])]++] = order[i];
    memcpy(order + start, b->scratch, (end - start) * sizeof *order);
    size_t first_len = example_len(s, order[start]);
    if (start == 0 || first_len > best_len) { best_len = first_len; best_mb = start; }
  }
  size_t t = order[0]; order[0] = order[best_mb]; order[best_mb] = t;
}

TextClsBatcher *textcls_batcher_new(const TextClsSet *s, const TextClsBatcherOptions *o, Err *err) {
  if (o->batch < 1) { err_setk(err, ERR_INVALID, "batch size %d must be >= 1", o->batch); return NULL; }
  if (o->length_grouped && !o->shuffle) {
    err_setk(err, ERR_INVALID, "length-grouped batches need shuffle (they group a random permutation)");
    return NULL;
  }
  if (s->n == 0 || !s->starts || !s->ids || !s->labels) { err_setk(err, ERR_INVALID, "an empty example set"); return NULL; }
  if (s->n > UINT32_MAX) { err_setk(err, ERR_INVALID, "%zu examples are more than a batcher indexes", s->n); return NULL; }
  if (s->max_len < 1) { err_setk(err, ERR_INVALID, "example set max_len %d must be >= 1", s->max_len); return NULL; }
  /* The caller's buffers are sized from max_len, so a set that breaks it is refused here
  ** rather than overrunning them in _next. */
  if (s->starts[0] != 0) { err_setk(err, ERR_INVALID, "example set starts[0] is %zu, not 0", s->starts[0]); return NULL; }
  size_t longest = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (s->starts[i + 1] <= s->starts[i]) { err_setk(err, ERR_INVALID, "example %zu is empty (or its start goes back)", i); return NULL; }
    size_t len = example_len(s, i);
    if (len > (size_t)s->max_len) {
      err_setk(err, ERR_INVALID, "example %zu has %zu ids, more than the set's max_len %d", i, len, s->max_len);
      return NULL;
    }
    if (len > longest) longest = len;
  }
  long per_epoch = (long)(o->drop_last ? s->n / (size_t)o->batch : (s->n + (size_t)o->batch - 1) / (size_t)o->batch);
  if (per_epoch == 0) {
    err_setk(err, ERR_INVALID, "%zu examples make no full batch of %d (drop_last)", s->n, o->batch);
    return NULL;
  }
  TextClsBatcher *b = calloc(1, sizeof *b);
  if (!b) { oom(err); return NULL; }
  b->s = s;
  b->o = *o;
  b->per_epoch = per_epoch;
  b->visit = o->drop_last ? (size_t)per_epoch * (size_t)o->batch : s->n;
  b->mega = megabatch_size(s->n, o->batch);
  b->order = malloc(s->n * sizeof *b->order);
  if (o->length_grouped) {
    b->scratch = malloc(s->n * sizeof *b->scratch);
    b->counts = malloc(((size_t)s->max_len + 2) * sizeof *b->counts);
  }
  if (!b->order || (o->length_grouped && (!b->scratch || !b->counts))) {
    textcls_batcher_free(b);
    oom(err);
    return NULL;
  }
  textcls_batcher_seek(b, 0, 0);
  return b;
}

void textcls_batcher_free(TextClsBatcher *b) {
  if (!b) return;
  free(b->order);
  free(b->scratch);
  free(b->counts);
  free(b);
}

long textcls_batches_per_epoch(const TextClsBatcher *b) { return b->per_epoch; }

void textcls_batcher_seek(TextClsBatcher *b, int epoch, long position) {
  build_order(b, epoch, b->order);
  b->epoch = epoch;
  b->position = position < 0 ? 0 : position > b->per_epoch ? b->per_epoch : position;
}

int textcls_batcher_next(TextClsBatcher *b, int *rows, int *seq, int32_t *ids, int32_t *attention_mask, int32_t *labels,
                         size_t *examples) {
  if (b->position >= b->per_epoch) { *rows = 0; *seq = 0; return 0; }
  const TextClsSet *s = b->s;
  size_t first = (size_t)b->position * (size_t)b->o.batch;
  size_t count = b->visit - first < (size_t)b->o.batch ? b->visit - first : (size_t)b->o.batch;
  size_t longest = 0;
  for (size_t r = 0; r < count; r++) {
    size_t len = example_len(s, b->order[first + r]);
    if (len > longest) longest = len;
  }
  for (size_t r = 0; r < count; r++) {
    size_t e = b->order[first + r], len = example_len(s, e);
    const int32_t *src = s->ids + s->starts[e];
    int32_t *row = ids + r * longest;
    memcpy(row, src, len * sizeof *row);
    for (size_t t = len; t < longest; t++) row[t] = b->o.pad_id;
    if (attention_mask)
      for (size_t t = 0; t < longest; t++) attention_mask[r * longest + t] = t < len;
    if (labels) labels[r] = s->labels[e];
    if (examples) examples[r] = e;
  }
  *rows = (int)count;
  *seq = (int)longest;
  b->position++;
  return 1;
}

size_t textcls_batcher_order(const TextClsBatcher *b, int epoch, size_t *order) {
  build_order(b, epoch, order);
  return b->visit;
}
