/* The tokenizer pipeline on small hand-made vocabularies: the normaliser, Metaspace,
** special-token matching with lstrip, offsets, the post-processor, decoding,
** tokenizer.json round trips and refusals, UTF-8 validation, threads. The rules
** asserted here are HF tokenizers' (observed with tokenizers@0.23.2; the full
** comparison is tests/cli/test_tokenizer_hf.sh). */
#include <string.h>

#include "engine/core/rng.h"
#include "engine/tok/tokenizer.h"
#include "tests/unit/check.h"

#define MS "\xE2\x96\x81"  /* ▁ */

static const char *pieces[] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]", MS, "a", "b", MS "a", MS "ab", "\"", "c", MS "b", "ab"};
static const double scores[] = {0, 0, 0, 0, 0, -2, -3, -3, -2.5, -3.5, -4, -4, -3, -4.5};
#define NP ((int)(sizeof pieces / sizeof *pieces))

static int ids_are(const Encoding *e, const int *want, int n) {
  if (e->n != n) return 0;
  for (int i = 0; i < n; i++) if (e->ids[i] != want[i]) return 0;
  return 1;
}

static int offs_are(const Encoding *e, const int *want, int n) {
  if (e->n != n) return 0;
  for (int i = 0; i < 2 * n; i++) if (e->offsets[i] != want[i]) return 0;
  return 1;
}

static void show(const Encoding *e, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < e->n && k + 32 < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%d(%d,%d) ", e->ids[i], e->offsets[2 * i], e->offsets[2 * i + 1]);
}

static void cb(void *ctx, const char *w, size_t n);

static Tokenizer *must_load(const char *json, Err *err) {
  Tokenizer *t = tokenizer_from_json(json, strlen(json), err);
  return t;
}

int main(void) {
  Err err;
  Encoding e = {0};
  char buf[1024];
  Tokenizer *t = tokenizer_new_seed(NP, pieces, scores, 2, 5, &err);
  check(t != NULL, "tokenizer_new_seed", "%s", err.msg);
  if (!t) return check_exit();

  /* Metaspace: a space becomes ▁ and starts a word; one ▁ is prepended. */
  {
    int rc = tokenizer_encode(t, "a  b", 4, 0, &e, &err);
    int want[] = {8, 5, 12};               /* ▁a ▁ ▁b */
    int off[] = {0, 1, 1, 2, 2, 4};        /* ▁ takes the span of the space it replaces */
    show(&e, buf, sizeof buf);
    check(rc == 0 && ids_are(&e, want, 3) && offs_are(&e, off, 3), "tokenizer_metaspace_words_offsets", "%s", buf);
  }
  /* The template adds [CLS] ... [SEP] with (0,0) offsets and special marks. */
  {
    int rc = tokenizer_encode(t, "ab", 2, 1, &e, &err);
    int want[] = {0, 9, 1};
    int off[] = {0, 0, 0, 2, 0, 0};
    check(rc == 0 && ids_are(&e, want, 3) && offs_are(&e, off, 3) && e.special[0] && !e.special[1] && e.special[2],
          "tokenizer_template_single", "n %d", e.n);
    rc = tokenizer_encode_pair(t, "a", 1, "b", 1, 1, &e, &err);
    int wp[] = {0, 8, 1, 12, 1}, wt[] = {0, 0, 0, 1, 1};
    int ok = rc == 0 && ids_are(&e, wp, 5);
    for (int i = 0; ok && i < 5; i++) ok = e.type_ids[i] == wt[i];
    check(ok, "tokenizer_template_pair_type_ids", "n %d", e.n);
    /* The template's tokens are what a model config takes as bos / eos (AlbertTokenizer's roles). */
    const char *cls = tokenizer_cls_token(t), *sep = tokenizer_sep_token(t);
    check(cls && !strcmp(cls, "[CLS]") && sep && !strcmp(sep, "[SEP]") && tokenizer_token_to_id(t, cls) == 0 &&
              tokenizer_token_to_id(t, sep) == 1,
          "tokenizer_cls_sep_tokens", "%s %s", cls ? cls : "none", sep ? sep : "none");
  }
  /* The seed normaliser: `` and '' become ", which takes the span of the last
  ** character it replaces. */
  {
    int rc = tokenizer_encode(t, "``a''", 5, 0, &e, &err);
    int want[] = {5, 10, 6, 10};           /* ▁ " a " */
    int off[] = {1, 2, 1, 2, 2, 3, 4, 5};  /* the prepended ▁ takes the span of the first normalised byte */
    show(&e, buf, sizeof buf);
    check(rc == 0 && ids_are(&e, want, 4) && offs_are(&e, off, 4), "tokenizer_replace_normalizer", "%s", buf);
  }
  /* [MASK] (lstrip) is matched in the raw text and takes the spaces before it;
  ** the text after it is a new segment that gets its own ▁. */
  {
    const char *s = "a  [MASK]b";
    int rc = tokenizer_encode(t, s, strlen(s), 0, &e, &err);
    int want[] = {8, 4, 12};
    int off[] = {0, 1, 1, 9, 9, 10};
    show(&e, buf, sizeof buf);
    check(rc == 0 && ids_are(&e, want, 3) && offs_are(&e, off, 3), "tokenizer_mask_lstrip", "%s", buf);
    /* Unicode whitespace counts (U+3000), and a match never reaches back past a
    ** previous special token. */
    s = "[CLS]\xE3\x80\x80[MASK]";
    rc = tokenizer_encode(t, s, strlen(s), 0, &e, &err);
    int w2[] = {0, 4};
    int o2[] = {0, 5, 5, 14};
    show(&e, buf, sizeof buf);
    check(rc == 0 && ids_are(&e, w2, 2) && offs_are(&e, o2, 2), "tokenizer_mask_lstrip_unicode_space", "%s", buf);
    /* Longest match wins; partial special tokens are plain text. */
    s = "[MASK";
    rc = tokenizer_encode(t, s, strlen(s), 0, &e, &err);
    int has_mask = 0;
    for (int i = 0; i < e.n; i++) has_mask |= e.ids[i] == 4;
    check(rc == 0 && !has_mask, "tokenizer_partial_special_is_text", "n %d", e.n);
  }
  /* Unknown characters: one <unk> per run, spanning whole characters. */
  {
    const char *s = "a\xE4\xB8\xAD\xF0\x9F\x98\x80" "b";
    int rc = tokenizer_encode(t, s, strlen(s), 0, &e, &err);
    int want[] = {8, 2, 7};
    int off[] = {0, 1, 1, 8, 8, 9};
    show(&e, buf, sizeof buf);
    check(rc == 0 && ids_are(&e, want, 3) && offs_are(&e, off, 3), "tokenizer_unknown_fused", "%s", buf);
  }
  /* Invalid UTF-8 is an error naming the byte. */
  {
    const char *bad[] = {"ab\xC0\x80", "ab\xED\xA0\x80", "ab\xF4\x90\x80\x80", "ab\xE2\x82", "ab\x80", "ab\xFF"};
    int ok = 1;
    for (int i = 0; i < 6; i++) {
      int rc = tokenizer_encode(t, bad[i], strlen(bad[i]), 1, &e, &err);
      ok &= rc == -1 && strstr(err.msg, "invalid UTF-8 at byte 2") != NULL;
    }
    const char *good = "\xF0\x9F\x98\x80\xC3\xA9\xE2\x82\xAC\xF4\x8F\xBF\xBF";
    ok &= tokenizer_utf8_valid(good, strlen(good), NULL);
    check(ok, "tokenizer_invalid_utf8", "%s", err.msg);
  }
  /* Decoding: ▁ becomes a space, dropped in the first token kept; specials skipped. */
  {
    int32_t ids[] = {0, 8, 5, 12, 4, 1};
    char *s1 = tokenizer_decode(t, ids, 6, 0, &err), *s2 = tokenizer_decode(t, ids, 6, 1, &err);
    int32_t odd[] = {9999, -1, 9};
    char *s3 = tokenizer_decode(t, odd, 3, 0, &err);
    check(s1 && s2 && s3 && !strcmp(s1, "[CLS] a  b[MASK][SEP]") && !strcmp(s2, "a  b") && !strcmp(s3, "ab"),
          "tokenizer_decode", "'%s' '%s' '%s'", s1 ? s1 : "", s2 ? s2 : "", s3 ? s3 : "");
    free(s1); free(s2); free(s3);
  }
  /* transformers' clean-up, against Python's replace chain (outputs taken from it). */
  {
    const char *in[] = {"Hello , world . Is it ?", "I do n't know , it 's ok", "a ' b ' c", " . . ..", "we 've they 're I 'm", "x  ,y", ""};
    const char *want[] = {"Hello, world. Is it?", "I don't know, it's ok", "a'b'c", "....", "we've they're I'm", "x ,y", ""};
    int ok = 1;
    for (int i = 0; i < 7; i++) {
      char tmp[64];
      strcpy(tmp, in[i]);
      size_t n = tokenizer_clean_up_spaces(tmp, strlen(tmp));
      if (strcmp(tmp, want[i]) || n != strlen(want[i])) { ok = 0; snprintf(buf, sizeof buf, "'%s' -> '%s'", in[i], tmp); }
    }
    check(ok, "tokenizer_clean_up_spaces", "%s", buf);
    /* A NUL byte (a byte-level token's) is text: what follows it is cleaned and kept. */
    char nul[] = "a\0b , c .";
    size_t n = tokenizer_clean_up_spaces(nul, sizeof nul - 1);
    check(n == 7 && !memcmp(nul, "a\0b, c.", 8), "tokenizer_clean_up_spaces_nul", "length %zu", n);
  }
  /* What the trainer sees: normalised, Metaspace words, no special matching. */
  {
    char got[256] = "";
    int rc = tokenizer_pretokenize(t, "x ``y [MASK]", 12, cb, got, &err);
    check(rc == 0 && !strcmp(got, "[" MS "x][" MS "\"y][" MS "[MASK]]"), "tokenizer_pretokenize", "%s", got);
  }
  /* JSON round trip: written, read back, written again identically, same ids. */
  {
    char *j1 = tokenizer_to_json(t, &err);
    Tokenizer *t2 = j1 ? tokenizer_from_json(j1, strlen(j1), &err) : NULL;
    char *j2 = t2 ? tokenizer_to_json(t2, &err) : NULL;
    Encoding e2 = {0};
    const char *s = "``ab a'' [MASK] b\xE4\xB8\xAD";
    int ok = j1 && j2 && !strcmp(j1, j2);
    ok = ok && tokenizer_encode(t, s, strlen(s), 1, &e, &err) == 0 && tokenizer_encode(t2, s, strlen(s), 1, &e2, &err) == 0 && e.n == e2.n;
    for (int i = 0; ok && i < e.n; i++) ok = e.ids[i] == e2.ids[i] && e.offsets[2 * i] == e2.offsets[2 * i];
    ok = ok && strstr(j1, "\"type\": \"Unigram\",\n    \"unk_id\": 2,\n    \"vocab\": [\n      [\n        \"[CLS]\",\n        0.0\n      ],");
    ok = ok && strstr(j1, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [");
    check(ok, "tokenizer_json_round_trip", "%s", err.msg);
    encoding_free(&e2);
    tokenizer_free(t2);
    free(j1); free(j2);
  }
  /* Threads: encode_many on 2 threads equals one-at-a-time encoding. */
  {
    Rng r;
    rng_seed(&r, 5);
    enum { N = 3000 };
    static char store[N][40];
    const char *texts[N];
    size_t lens[N];
    const char *bits[] = {"a", "b", " ", "ab", "[MASK]", "``", "''", "c", "\xC3\xA9", "  "};
    for (int i = 0; i < N; i++) {
      store[i][0] = 0;
      int k = (int)rng_below(&r, 8);
      for (int j = 0; j < k; j++) strcat(store[i], bits[rng_below(&r, 10)]);
      texts[i] = store[i];
      lens[i] = strlen(store[i]);
    }
    int32_t *ids;
    size_t *starts;
    int ok = tokenizer_encode_many(t, texts, lens, N, 1, 2, &ids, &starts, &err) == 0;
    for (int i = 0; ok && i < N; i++) {
      ok = tokenizer_encode(t, texts[i], lens[i], 1, &e, &err) == 0 && starts[i + 1] - starts[i] == (size_t)e.n;
      for (int j = 0; ok && j < e.n; j++) ok = ids[starts[i] + (size_t)j] == e.ids[j];
      /* offsets stay inside the text and never go backwards */
      for (int j = 1; ok && j + 1 < e.n; j++) ok = e.offsets[2 * j] >= e.offsets[2 * (j - 1)] && e.offsets[2 * j + 1] <= (int)lens[i];
    }
    check(ok, "tokenizer_encode_many_threads", "%s", err.msg);
    if (ok) { free(ids); free(starts); }
    /* a bad text is reported by index */
    texts[17] = "\xFF";
    lens[17] = 1;
    int rc = tokenizer_encode_many(t, texts, lens, N, 1, 2, &ids, &starts, &err);
    check(rc == -1 && strstr(err.msg, "text 17:"), "tokenizer_encode_many_error_index", "%s", err.msg);
  }
  /* Corrupted files: truncations and flipped bytes of a valid tokenizer.json are
  ** refused with a message or load into something that still encodes safely. */
  {
    char *good = tokenizer_to_json(t, &err);
    size_t n = good ? strlen(good) : 0;
    char *bad = malloc(n + 1);
    Rng r;
    rng_seed(&r, 11);
    int trials = getenv("MASKD_ASAN") ? 150 : 600, loaded = 0, refused = 0, silent = 0;
    const char *flips = "{}[]\",:0-9.eE ntfx\\\xC3\xFF";
    for (int i = 0; good && bad && i < trials; i++) {
      memcpy(bad, good, n + 1);
      size_t len = n;
      if (i % 3 == 0) len = rng_below(&r, (uint32_t)n);
      else for (int k = 0; k < 1 + (int)rng_below(&r, 4); k++) bad[rng_below(&r, (uint32_t)n)] = flips[rng_below(&r, (uint32_t)strlen(flips))];
      err.msg[0] = 0;
      Tokenizer *x = tokenizer_from_json(bad, len, &err);
      if (!x) { refused++; silent += err.msg[0] == 0; continue; }
      loaded++;
      const char *s = "a ``b'' [MASK] \xE4\xB8\xAD ab";
      if (tokenizer_encode(x, s, strlen(s), 1, &e, &err) == 0) {
        char *d = tokenizer_decode(x, e.ids, e.n, 1, &err);
        free(d);
      }
      tokenizer_free(x);
    }
    check(good && bad && silent == 0 && refused > 0, "tokenizer_corrupt_json_fuzz", "loaded %d refused %d without message %d", loaded, refused, silent);
    free(good); free(bad);
  }
  tokenizer_free(t);

  /* Refusals: anything not implemented is named, never approximated. */
  {
    const char *head = "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],";
    const char *model = "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0.0],[\"a\",-1.5]],\"byte_fallback\":false}}";
    struct { const char *mid; const char *model; const char *want; } cases[] = {
      {"\"normalizer\":{\"type\":\"NFKC\"},", NULL, "normalizer NFKC"},
      {"\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Lowercase\"}]},", NULL, "normalizer Lowercase"},
      {"\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" {2,}\"},\"content\":\" \"},", NULL, "Regex"},
      {"\"pre_tokenizer\":{\"type\":\"ByteLevel\"},", NULL, "pre_tokenizer ByteLevel"},
      {"\"decoder\":{\"type\":\"BPEDecoder\"},", NULL, "decoder BPEDecoder"},
      {"\"post_processor\":{\"type\":\"Sequence\",\"processors\":[]},", NULL, "post_processor Sequence"},
      {"\"post_processor\":{\"type\":\"RobertaProcessing\"},", NULL, "\"cls\" must be [token, id]"},
      {"", "\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "model BPE"},
      {"", "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0.0]],\"byte_fallback\":true}}", "byte_fallback"},
      {"", "\"model\":{\"type\":\"Unigram\",\"unk_id\":5,\"vocab\":[[\"<unk>\",0.0]]}}", "unk_id 5"},
      {"", "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\"]]}}", "vocab entry 0"},
      {"\"extra\":1,", NULL, "unknown top-level key \"extra\""},
      /* Caught by tests/fuzz/fuzz_tokenizer (tests/fuzz/regress/tokenizer): a single template with B (HF panics on it; the
      ** ids-only path encoded the text twice), an entry whose key and id differ (two
      ** entries with one id overflowed the template's buffer), an id past int32. */
      {"\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
       "{\"Sequence\":{\"id\":\"B\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{}},", NULL, "single template uses sequence B"},
      {"\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"X\",\"type_id\":0}}],"
       "\"pair\":[],\"special_tokens\":{\"[CLS]\":{\"id\":\"X\",\"ids\":[0,0,0],\"tokens\":[\"a\",\"a\",\"a\"]},"
       "\"[SEP]\":{\"id\":\"X\",\"ids\":[0],\"tokens\":[\"a\"]}}},", NULL, "entry [CLS] has the id X"},
      {"\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[],\"pair\":[],"
       "\"special_tokens\":{\"X\":{\"id\":\"X\",\"ids\":[4294967296],\"tokens\":[\"a\"]}}},", NULL, "bad special_tokens entry X"},
    };
    int ok = 1;
    char json[1024], failed[600] = "";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      snprintf(json, sizeof json, "%s%s%s", head, cases[i].mid, cases[i].model ? cases[i].model : model);
      Tokenizer *x = must_load(json, &err);
      if (x || !strstr(err.msg, cases[i].want)) { ok = 0; snprintf(failed, sizeof failed, "case %zu: %s", i, x ? "accepted" : err.msg); }
      tokenizer_free(x);
    }
    check(ok, "tokenizer_refuses_unsupported", "%s", failed);
    /* truncation / padding that HF would not read either, corrupt JSON */
    const char *more[][2] = {
      {"{\"truncation\":\"longest_first\",\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "truncation: expected null or an object"},
      {"{\"padding\":[128],\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "padding: expected null or an object"},
      {"{\"truncation\":{\"max_length\":\"8\"},\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "truncation: \"max_length\" is not"},
      {"{\"truncation\":{\"max_length\":-1},\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "truncation: \"max_length\" is not"},
      {"{\"padding\":{\"strategy\":{\"Fixed\":\"8\"}},\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "padding: \"strategy\""},
      {"{\"padding\":{\"pad_token\":0},\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "padding: \"pad_token\" is not a string"},
      {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",-1", "invalid JSON"},
      {"[1,2]", "not a JSON object"},
      {"{}", "model: missing"},
    };
    ok = 1;
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
      Tokenizer *x = must_load(more[i][0], &err);
      if (x || !strstr(err.msg, more[i][1])) { ok = 0; snprintf(failed, sizeof failed, "more %zu: %s", i, x ? "accepted" : err.msg); }
      tokenizer_free(x);
    }
    check(ok, "tokenizer_refuses_bad_files", "%s", failed);
    /* truncation and padding as Hub files set them (sentence-transformers' BERT folders:
    ** a max_length, padding to a fixed length) load and are ignored: the same ids as with
    ** both null, for a text longer than max_length too. They were refused ("truncation is
    ** not supported (must be null)"). */
    {
      const char *set = "\"truncation\":{\"direction\":\"Right\",\"max_length\":2,\"strategy\":\"LongestFirst\",\"stride\":0},"
                        "\"padding\":{\"strategy\":{\"Fixed\":6},\"direction\":\"Right\",\"pad_to_multiple_of\":null,\"pad_id\":0,"
                        "\"pad_type_id\":0,\"pad_token\":\"<unk>\"},";
      const char *batch = "\"truncation\":null,\"padding\":{\"strategy\":\"BatchLongest\",\"direction\":\"Left\",\"pad_to_multiple_of\":8,"
                          "\"pad_id\":0,\"pad_type_id\":0,\"pad_token\":\"<unk>\"},";
      const char *body = "\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":null,%s";
      char fmt[512], plain_json[1024], set_json[1024], batch_json[1024];
      snprintf(fmt, sizeof fmt, "{\"version\":\"1.0\",%%s%s", body);   /* model closes the object */
      snprintf(plain_json, sizeof plain_json, fmt, "\"truncation\":null,\"padding\":null,", model);
      snprintf(set_json, sizeof set_json, fmt, set, model);
      snprintf(batch_json, sizeof batch_json, fmt, batch, model);
      Tokenizer *plain = must_load(plain_json, &err), *with = must_load(set_json, &err), *with_batch = must_load(batch_json, &err);
      Encoding ep = {0}, es = {0}, eb = {0};
      const char *text = "aaaaa";   /* 5 pieces: longer than max_length 2 */
      int same = plain && with && with_batch && tokenizer_encode(plain, text, 5, 1, &ep, &err) == 0 &&
                 tokenizer_encode(with, text, 5, 1, &es, &err) == 0 && tokenizer_encode(with_batch, text, 5, 1, &eb, &err) == 0 &&
                 ep.n == 5 && es.n == ep.n && eb.n == ep.n && !memcmp(ep.ids, es.ids, sizeof *ep.ids * (size_t)ep.n) &&
                 !memcmp(ep.ids, eb.ids, sizeof *ep.ids * (size_t)ep.n);
      check(same, "tokenizer_truncation_padding_ignored", "%s (ids %d %d %d)", err.msg, ep.n, es.n, eb.n);
      encoding_free(&ep); encoding_free(&es); encoding_free(&eb);
      tokenizer_free(plain); tokenizer_free(with); tokenizer_free(with_batch);
    }
    /* Legacy Metaspace keys load; an unknown prepend scheme does not. */
    snprintf(json, sizeof json, "%s\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"" MS "\",\"add_prefix_space\":false},%s", head, model);
    Tokenizer *x = must_load(json, &err);
    int legacy_ok = x && tokenizer_encode(x, "a", 1, 0, &e, &err) == 0 && e.n == 1 && e.ids[0] == 1;
    tokenizer_free(x);
    snprintf(json, sizeof json, "%s\"pre_tokenizer\":{\"type\":\"Metaspace\",\"prepend_scheme\":\"sometimes\"},%s", head, model);
    x = must_load(json, &err);
    check(legacy_ok && !x && strstr(err.msg, "sometimes"), "tokenizer_metaspace_legacy_and_bad_scheme", "%s", err.msg);
    tokenizer_free(x);
    /* No unk id: an uncovered character is an error, not a crash. */
    snprintf(json, sizeof json, "%s\"model\":{\"type\":\"Unigram\",\"unk_id\":null,\"vocab\":[[\"a\",-1.0]]}}", head);
    x = must_load(json, &err);
    int rc = x ? tokenizer_encode(x, "ab", 2, 0, &e, &err) : 0;
    check(x && rc == -1 && strstr(err.msg, "no unk_id"), "tokenizer_no_unk_error", "%s", err.msg);
    tokenizer_free(x);
    /* A single template without A ([SEP] alone) still encodes the text first, as HF does:
    ** the ids-only batch path refuses what tokenizer_encode refuses and otherwise gives
    ** the same ids (it skipped the text, found by tests/fuzz/fuzz_tokenizer). */
    snprintf(json, sizeof json,
             "%s\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"S\",\"type_id\":0}}],"
             "\"pair\":[],\"special_tokens\":{\"S\":{\"id\":\"S\",\"ids\":[0],\"tokens\":[\"a\"]}}},"
             "\"model\":{\"type\":\"Unigram\",\"unk_id\":null,\"vocab\":[[\"a\",-1.0]]}}", head);
    x = must_load(json, &err);
    int32_t *ids = NULL;
    size_t *starts = NULL;
    const char *texts[2] = {"ab", "a"};
    size_t lens[2] = {2, 1};
    int r_one = x ? tokenizer_encode(x, "ab", 2, 1, &e, &err) : 0;
    int r_many = x ? tokenizer_encode_many(x, texts, lens, 1, 1, 1, &ids, &starts, &err) : 0;
    free(ids); free(starts);
    ids = NULL; starts = NULL;
    int r_good = x ? tokenizer_encode_many(x, texts + 1, lens + 1, 1, 1, 1, &ids, &starts, &err) : -1;
    check(x && r_one == -1 && r_many == -1 && r_good == 0 && starts[1] == 1 && ids[0] == 0,
          "tokenizer_template_without_a_encodes_text", "%d %d %d: %s", r_one, r_many, r_good, err.msg);
    free(ids); free(starts);
    tokenizer_free(x);
  }
  encoding_free(&e);
  return check_exit();
}

/* Collects pre-tokens as [w1][w2]... */
static void cb(void *ctx, const char *w, size_t n) {
  char *got = ctx;
  size_t k = strlen(got);
  if (k + n + 3 >= 256) return;
  got[k] = '[';
  memcpy(got + k + 1, w, n);
  got[k + 1 + n] = ']';
  got[k + 2 + n] = 0;
}
