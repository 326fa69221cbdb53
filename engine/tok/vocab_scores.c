/* serde_json's number reading and a scan of tokenizer.json for the Unigram scores'
** text (see vocab_scores.h). The scan relies on jansson having accepted the text, but
** checks every bound anyway: a text it does not understand is a -1, never a read
** past the end. */
#include "engine/tok/vocab_scores.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 10^e as a Rust literal 1eE is: the correctly rounded double (glibc's strtod is). */
static double pow10_of(int e) {
  char s[16];
  snprintf(s, sizeof s, "1e%d", e);
  return strtod(s, NULL);
}

/* serde_json's overflow! check: whether sig * 10 + d would pass u64's maximum. */
static int u64_overflows(uint64_t sig, unsigned d) {
  return sig >= UINT64_MAX / 10 && (sig > UINT64_MAX / 10 || d > UINT64_MAX % 10);
}

/* f64_from_parts: the significand rounded to a double, then one product or quotient
** by a power of ten from the table 1e0..1e308 (steps of 1e308 below it). */
static double from_parts(int positive, uint64_t sig, int64_t exponent, const double *pow10, int *out_of_range) {
  double f = (double)sig;
  for (;;) {
    int64_t a = exponent < 0 ? -exponent : exponent;
    if (a <= 308) {
      double p = pow10 ? pow10[a] : pow10_of((int)a);
      if (exponent >= 0) {
        f *= p;
        if (f > 1.7976931348623157e308) { *out_of_range = 1; f = 0; }
      } else {
        f /= p;
      }
      break;
    }
    if (f == 0) break;
    if (exponent >= 0) { *out_of_range = 1; f = 0; break; }
    f /= 1e308;
    exponent += 308;
  }
  return positive ? f : -f;
}

static double serde_f64(const char *s, size_t n, const double *pow10, int *out_of_range) {
  size_t i = 0;
  int positive = 1;
  *out_of_range = 0;
  if (i < n && s[i] == '-') { positive = 0; i++; }
  uint64_t sig = 0;
  int64_t exponent = 0;
  int is_integer = 1;
  /* The integer part; past u64, further digits only raise the exponent. */
  while (i < n && s[i] >= '0' && s[i] <= '9') {
    unsigned d = (unsigned)(s[i] - '0');
    if (u64_overflows(sig, d)) {
      is_integer = 0;   /* parse_long_integer: an f64 from here on */
      while (i < n && s[i] >= '0' && s[i] <= '9') { exponent++; i++; }
      break;
    }
    sig = sig * 10 + d;
    i++;
  }
  if (i < n && s[i] == '.') {
    is_integer = 0;
    i++;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      unsigned d = (unsigned)(s[i] - '0');
      if (u64_overflows(sig, d)) {   /* parse_decimal_overflow: the rest is dropped */
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        break;
      }
      sig = sig * 10 + d;
      exponent--;
      i++;
    }
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    is_integer = 0;
    i++;
    int positive_exp = 1;
    if (i < n && (s[i] == '+' || s[i] == '-')) positive_exp = s[i++] == '+';
    int32_t e = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      int d = s[i] - '0';
      if (e >= INT32_MAX / 10 && (e > INT32_MAX / 10 || d > INT32_MAX % 10)) {
        /* parse_exponent_overflow: zero, unless a non-zero value grows past any double */
        if (positive_exp && sig != 0) { *out_of_range = 1; return 0; }
        return positive ? 0.0 : -0.0;
      }
      e = e * 10 + d;
      i++;
    }
    /* Rust's i32 saturating_add / saturating_sub of the exponent so far. */
    int64_t x = positive_exp ? exponent + e : exponent - e;
    exponent = x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : x;
  }
  if (is_integer) {
    /* A u64 (or, negative, an i64) that visit_u64 / visit_i64 turn into an f64. */
    if (positive) return (double)sig;
    int64_t neg = (int64_t)(0 - sig);
    return neg >= 0 ? -(double)sig : (double)neg;   /* -0 and underflow go through f64 */
  }
  return from_parts(positive, sig, exponent, pow10, out_of_range);
}

double vocab_scores_serde_f64(const char *num, size_t len, int *out_of_range) {
  return serde_f64(num, len, NULL, out_of_range);
}

/* ---- the scan ---- */

typedef struct Scan {
  const char *p, *end;
  int depth;
} Scan;

enum { MAX_DEPTH = 4096 };   /* jansson's own limit is lower; this only bounds the recursion */

static void skip_ws(Scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int eat(Scan *s, char c) {
  skip_ws(s);
  if (s->p >= s->end || *s->p != c) return -1;
  s->p++;
  return 0;
}

/* A string at s->p: its raw bytes (escapes undecoded) in [*a, *b). */
static int scan_string(Scan *s, const char **a, const char **b) {
  if (eat(s, '"')) return -1;
  *a = s->p;
  while (s->p < s->end) {
    char c = *s->p++;
    if (c == '\\') {
      if (s->p >= s->end) return -1;
      s->p++;
    } else if (c == '"') {
      *b = s->p - 1;
      return 0;
    }
  }
  return -1;
}

/* Whether the raw key bytes [a, b) decode to name (escapes such as \u0076 included). */
static int key_is(const char *a, const char *b, const char *name) {
  size_t k = 0, want = strlen(name);
  while (a < b) {
    unsigned c = (unsigned char)*a++;
    if (c == '\\') {
      if (a >= b) return 0;
      char e = *a++;
      if (e == 'u') {
        if (b - a < 4) return 0;
        char hex[5] = {a[0], a[1], a[2], a[3], 0};
        char *stop;
        c = (unsigned)strtoul(hex, &stop, 16);
        if (*stop) return 0;
        a += 4;
      } else {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *f = strchr(from, e);
        if (!f || !e) return 0;
        c = (unsigned char)to[f - from];
      }
    }
    if (k >= want || c != (unsigned char)name[k]) return 0;
    k++;
  }
  return k == want;
}

static int skip_value(Scan *s);

/* An object or an array at s->p, whole. */
static int skip_container(Scan *s, char open, char close) {
  if (eat(s, open) || ++s->depth > MAX_DEPTH) return -1;
  skip_ws(s);
  if (s->p < s->end && *s->p == close) { s->p++; s->depth--; return 0; }
  for (;;) {
    const char *a, *b;
    if (open == '{' && (scan_string(s, &a, &b) || eat(s, ':'))) return -1;
    if (skip_value(s)) return -1;
    skip_ws(s);
    if (s->p >= s->end) return -1;
    char c = *s->p++;
    if (c == close) break;
    if (c != ',') return -1;
  }
  s->depth--;
  return 0;
}

static int skip_value(Scan *s) {
  skip_ws(s);
  if (s->p >= s->end) return -1;
  const char *a, *b;
  switch (*s->p) {
    case '"': return scan_string(s, &a, &b);
    case '{': return skip_container(s, '{', '}');
    case '[': return skip_container(s, '[', ']');
    default: {   /* a number, true, false or null */
      const char *start = s->p;
      while (s->p < s->end && strchr("+-.0123456789eEaflnrstu", *s->p) && *s->p) s->p++;
      return s->p > start ? 0 : -1;
    }
  }
}

/* In the object at s->p, the value of the last member named name: *at is where it
** starts (s->p is left past the object). 0 when found, 1 when absent, -1 on a bad text. */
static int find_member(Scan *s, const char *name, const char **at) {
  int found = 0;
  if (eat(s, '{')) return -1;
  skip_ws(s);
  if (s->p < s->end && *s->p == '}') { s->p++; return 1; }
  for (;;) {
    const char *a, *b;
    if (scan_string(s, &a, &b) || eat(s, ':')) return -1;
    skip_ws(s);
    if (key_is(a, b, name)) { *at = s->p; found = 1; }
    if (skip_value(s)) return -1;
    skip_ws(s);
    if (s->p >= s->end) return -1;
    char c = *s->p++;
    if (c == '}') break;
    if (c != ',') return -1;
  }
  return found ? 0 : 1;
}

int vocab_scores_read(const char *json, size_t len, double *scores, size_t *spans, size_t n) {
  Scan s = {json, json + len, 0};
  const char *model, *vocab;
  if (find_member(&s, "model", &model)) return -1;
  s.p = model;
  if (find_member(&s, "vocab", &vocab)) return -1;
  s.p = vocab;
  double pow10[309];
  for (int e = 0; e <= 308; e++) pow10[e] = pow10_of(e);
  if (eat(&s, '[')) return -1;
  skip_ws(&s);
  size_t i = 0;
  if (s.p < s.end && *s.p == ']') return n == 0 ? 0 : -1;
  for (;;) {
    const char *a, *b;
    if (i >= n || eat(&s, '[') || scan_string(&s, &a, &b) || eat(&s, ',')) return -1;
    skip_ws(&s);
    const char *num = s.p;
    while (s.p < s.end && strchr("+-.0123456789eE", *s.p) && *s.p) s.p++;
    if (s.p == num) return -1;
    int out_of_range;
    if (spans) { spans[2 * i] = (size_t)(num - json); spans[2 * i + 1] = (size_t)(s.p - num); }
    scores[i++] = serde_f64(num, (size_t)(s.p - num), pow10, &out_of_range);
    if (out_of_range || eat(&s, ']')) return -1;
    skip_ws(&s);
    if (s.p >= s.end) return -1;
    char c = *s.p++;
    if (c == ']') break;
    if (c != ',') return -1;
  }
  return i == n ? 0 : -1;
}
