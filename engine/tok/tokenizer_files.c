/* Model folders' tokenizer files (see tokenizer_files.h).
**
** A folder without tokenizer.json is converted the way transformers' fast tokenizers
** convert the slow ones, so that what maskd builds is the tokenizer.json that
** transformers would build (and save) for the folder:
**   vocab.txt (BertConverter): BertNormalizer(clean_text, handle_chinese_chars =
**     tokenize_chinese_chars, strip_accents, lowercase = do_lower_case), BertPreTokenizer,
**     WordPiece(vocab, unk_token, "##", 100), TemplateProcessing "CLS $A SEP" /
**     "CLS $A SEP $B:1 SEP:1", WordPiece decoder ("##", cleanup);
**   vocab.json + merges.txt (RobertaConverter): ByteLevel(add_prefix_space) pre-tokenizer,
**     BPE(vocab, merges, no dropout, no prefix/suffix, no unk), RobertaProcessing(sep, cls,
**     add_prefix_space, trim_offsets true), ByteLevel decoder.
** The special tokens become added tokens in id order, special and not normalized;
** RoBERTa's mask token strips the space on its left (RobertaTokenizer's AddedToken). */
#include "engine/core/json_text.h"
#include "engine/tok/tokenizer_files.h"
#include "engine/core/files.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* An optional file: *text stays NULL when path does not exist. */
static int read_optional(const char *path, size_t cap, char **text, size_t *len, Err *err) {
  struct stat st;
  *text = NULL;
  *len = 0;
  if (lstat(path, &st) != 0 && errno == ENOENT) return 0;
  *text = files_read_all(path, cap, len, err);
  return *text ? 0 : -1;
}

/* A JSON object; side files read integers as reals (model_max_length is 1e30), vocab.json as integers. */
static json_t *parse_object_flags(const char *text, size_t len, const char *name, size_t flags, Err *err) {
  json_error_t je;
  json_t *o = json_loadb(text, len, flags, &je);
  if (!json_is_object(o)) {
    err_setk(err, ERR_BAD_INPUT, "%s: not a JSON object (%s)", name, o ? "wrong type" : json_error_message(&je));
    json_decref(o);
    return NULL;
  }
  return o;
}

static json_t *parse_object(const char *text, size_t len, const char *name, Err *err) {
  return parse_object_flags(text, len, name, JSON_DECODE_INT_AS_REAL, err);
}

/* A token role: a string, or an AddedToken object {"content": ...}. */
static const char *role(const json_t *o, const char *key) {
  const json_t *v = o ? json_object_get(o, key) : NULL;
  if (json_is_object(v)) v = json_object_get(v, "content");
  return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The role's name: special_tokens_map.json's, else tokenizer_config.json's, else dflt. */
static const char *role_of(const json_t *cfg, const json_t *map, const char *key, const char *dflt) {
  const char *v = role(map, key);
  return v ? v : (v = role(cfg, key)) ? v : dflt;
}

int tokenizer_side_parse(const char *config, size_t clen, const char *map, size_t mlen, TokenizerSide *side, Err *err) {
  memset(side, 0, sizeof *side);
  side->clean_up_spaces = -1;
  json_t *c = NULL, *m = NULL;
  int rc = -1;
  if (config && !(c = parse_object(config, clen, "tokenizer_config.json", err))) goto done;
  if (map && !(m = parse_object(map, mlen, "special_tokens_map.json", err))) goto done;
  const char *v;
  if ((v = role_of(c, m, "mask_token", NULL))) snprintf(side->mask_token, sizeof side->mask_token, "%s", v);
  if ((v = role_of(c, m, "pad_token", NULL))) snprintf(side->pad_token, sizeof side->pad_token, "%s", v);
  const json_t *cu = c ? json_object_get(c, "clean_up_tokenization_spaces") : NULL;
  if (json_is_boolean(cu)) side->clean_up_spaces = json_is_true(cu);
  else if (cu && !json_is_null(cu)) { err_setk(err, ERR_BAD_INPUT, "tokenizer_config.json: clean_up_tokenization_spaces is not a boolean"); goto done; }
  rc = 0;
done:
  json_decref(c);
  json_decref(m);
  return rc;
}

int tokenizer_side_read(const char *dir, char **config, size_t *clen, char **map, size_t *mlen, Err *err) {
  *config = *map = NULL;
  char *cp = files_join(dir, "tokenizer_config.json"), *mp = files_join(dir, "special_tokens_map.json");
  int rc = -1;
  if (!cp || !mp) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  if (read_optional(cp, TOKENIZER_MAX_SIDE_FILE, config, clen, err) || read_optional(mp, TOKENIZER_MAX_SIDE_FILE, map, mlen, err)) {
    free(*config);
    *config = NULL;
    goto done;
  }
  rc = 0;
done:
  free(cp);
  free(mp);
  return rc;
}

/* ---- building tokenizer.json as the converters do ---- */

static json_t *added_token(int id, const char *content, int lstrip) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_integer(id));
  json_object_set_new(o, "content", json_string(content));
  json_object_set_new(o, "single_word", json_false());
  json_object_set_new(o, "lstrip", json_boolean(lstrip));
  json_object_set_new(o, "rstrip", json_false());
  json_object_set_new(o, "normalized", json_false());
  json_object_set_new(o, "special", json_true());
  return o;
}

/* The special tokens (names[0..n), each looked up in vocab) as added tokens in id order;
** a name the vocabulary lacks gets the next id after it, as HF's AddedVocabulary gives. */
static void add_specials(json_t *root, json_t *vocab, const char *const *names, int n, const char *lstrip_name) {
  int ids[8], next = 0;
  const char *key;
  json_t *v;
  json_object_foreach(vocab, key, v)
    if (json_integer_value(v) >= next) next = (int)json_integer_value(v) + 1;
  for (int i = 0; i < n; i++) {
    ids[i] = -1;
    for (int j = 0; j < i; j++) if (!strcmp(names[i], names[j])) ids[i] = -2;   /* a role repeated (cls = bos) */
    if (ids[i] == -2) continue;
    json_t *id = json_object_get(vocab, names[i]);
    ids[i] = id ? (int)json_integer_value(id) : next++;
  }
  json_t *list = json_array();
  for (;;) {   /* in id order */
    int best = -1;
    for (int i = 0; i < n; i++) if (ids[i] >= 0 && (best < 0 || ids[i] < ids[best])) best = i;
    if (best < 0) break;
    json_array_append_new(list, added_token(ids[best], names[best], lstrip_name && !strcmp(names[best], lstrip_name)));
    ids[best] = -2;
  }
  json_object_set_new(root, "added_tokens", list);
}

static json_t *root_start(void) {
  json_t *root = json_object();
  json_object_set_new(root, "version", json_string("1.0"));
  json_object_set_new(root, "truncation", json_null());
  json_object_set_new(root, "padding", json_null());
  return root;
}

static int bool_field(const json_t *cfg, const char *key, int dflt) {
  const json_t *v = cfg ? json_object_get(cfg, key) : NULL;
  return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* The id of a special token name in vocab, or -1. */
static int vocab_id(json_t *vocab, const char *name) {
  json_t *v = json_object_get(vocab, name);
  return v ? (int)json_integer_value(v) : -1;
}

/* BertConverter over vocab.txt: one token per line, the id is the line number (a
** repeated token keeps its last line, as transformers' dict does). Lines end in \n,
** \r\n or \r (Python's universal newlines). */
static json_t *bert_root(const char *text, size_t len, const json_t *cfg, const json_t *map, const char *path, Err *err) {
  if (!tokenizer_utf8_valid(text, len, NULL)) { err_setk(err, ERR_BAD_INPUT, "%s: not UTF-8", path); return NULL; }
  json_t *vocab = json_object();
  size_t i = 0;
  int line = 0;
  while (i < len) {
    size_t e = i;
    while (e < len && text[e] != '\n' && text[e] != '\r') e++;
    char *tok = strndup(text + i, e - i);
    if (!tok) { json_decref(vocab); err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
    json_object_set_new(vocab, tok, json_integer(line++));
    free(tok);
    if (e < len && text[e] == '\r' && e + 1 < len && text[e + 1] == '\n') e++;
    i = e + 1;
  }
  if (line == 0) { json_decref(vocab); err_setk(err, ERR_BAD_INPUT, "%s: empty vocabulary", path); return NULL; }
  const char *unk = role_of(cfg, map, "unk_token", "[UNK]"), *sep = role_of(cfg, map, "sep_token", "[SEP]"),
             *pad = role_of(cfg, map, "pad_token", "[PAD]"), *cls = role_of(cfg, map, "cls_token", "[CLS]"),
             *mask = role_of(cfg, map, "mask_token", "[MASK]");
  if (vocab_id(vocab, cls) < 0 || vocab_id(vocab, sep) < 0) {
    json_decref(vocab);
    err_setk(err, ERR_BAD_INPUT, "%s: the vocabulary has no %s or no %s (BERT's template needs both)", path, cls, sep);
    return NULL;
  }
  json_t *root = root_start();
  const char *names[] = {pad, unk, cls, sep, mask};
  add_specials(root, vocab, names, 5, NULL);
  json_t *norm = json_object();
  json_object_set_new(norm, "type", json_string("BertNormalizer"));
  json_object_set_new(norm, "clean_text", json_true());
  json_object_set_new(norm, "handle_chinese_chars", json_boolean(bool_field(cfg, "tokenize_chinese_chars", 1)));
  const json_t *sa = cfg ? json_object_get(cfg, "strip_accents") : NULL;
  json_object_set_new(norm, "strip_accents", json_is_boolean(sa) ? json_boolean(json_is_true(sa)) : json_null());
  json_object_set_new(norm, "lowercase", json_boolean(bool_field(cfg, "do_lower_case", 1)));
  json_object_set_new(root, "normalizer", norm);
  json_t *pre = json_object();
  json_object_set_new(pre, "type", json_string("BertPreTokenizer"));
  json_object_set_new(root, "pre_tokenizer", pre);
  json_t *post = json_object(), *single = json_array(), *pair = json_array(), *sp = json_object();
  struct { const char *id; int type; int seq; } items[] = {{cls, 0, 0}, {"A", 0, 1}, {sep, 0, 0}, {"B", 1, 1}, {sep, 1, 0}};
  for (int k = 0; k < 5; k++) {
    json_t *inner = json_object(), *item = json_object();
    json_object_set_new(inner, "id", json_string(items[k].id));
    json_object_set_new(inner, "type_id", json_integer(items[k].type));
    json_object_set_new(item, items[k].seq ? "Sequence" : "SpecialToken", inner);
    if (k < 3) json_array_append(single, item);
    json_array_append_new(pair, item);
  }
  const char *tspec[2] = {cls, sep};
  for (int k = 0; k < 2; k++) {
    json_t *e = json_object(), *ids = json_array(), *toks = json_array();
    json_array_append_new(ids, json_integer(vocab_id(vocab, tspec[k])));
    json_array_append_new(toks, json_string(tspec[k]));
    json_object_set_new(e, "id", json_string(tspec[k]));
    json_object_set_new(e, "ids", ids);
    json_object_set_new(e, "tokens", toks);
    json_object_set_new(sp, tspec[k], e);
  }
  json_object_set_new(post, "type", json_string("TemplateProcessing"));
  json_object_set_new(post, "single", single);
  json_object_set_new(post, "pair", pair);
  json_object_set_new(post, "special_tokens", sp);
  json_object_set_new(root, "post_processor", post);
  json_t *dec = json_object();
  json_object_set_new(dec, "type", json_string("WordPiece"));
  json_object_set_new(dec, "prefix", json_string("##"));
  json_object_set_new(dec, "cleanup", json_true());
  json_object_set_new(root, "decoder", dec);
  json_t *model = json_object();
  json_object_set_new(model, "type", json_string("WordPiece"));
  json_object_set_new(model, "unk_token", json_string(unk));
  json_object_set_new(model, "continuing_subword_prefix", json_string("##"));
  json_object_set_new(model, "max_input_chars_per_word", json_integer(100));
  json_object_set_new(model, "vocab", vocab);
  json_object_set_new(root, "model", model);
  return root;
}

/* RobertaConverter over vocab.json + merges.txt. merges.txt: its first line (the
** "#version" line) and its last line are dropped, as RobertaTokenizer reads
** split("\n")[1:-1]; each other line is two tokens separated by whitespace. */
static json_t *roberta_root(const char *vtext, size_t vlen, const char *mtext, size_t mlen, const json_t *cfg,
                            const json_t *map, const char *vpath, const char *mpath, Err *err) {
  json_t *vocab = parse_object_flags(vtext, vlen, vpath, 0, err);
  if (!vocab) return NULL;
  const char *key;
  json_t *v;
  json_object_foreach(vocab, key, v)
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
      err_setk(err, ERR_BAD_INPUT, "%s: \"%.64s\" has no valid id", vpath, key);
      json_decref(vocab);
      return NULL;
    }
  if (!tokenizer_utf8_valid(mtext, mlen, NULL)) { json_decref(vocab); err_setk(err, ERR_BAD_INPUT, "%s: not UTF-8", mpath); return NULL; }
  json_t *merges = json_array();
  size_t i = 0;
  int line = 0;
  /* Lines split on \n only (Python's split("\n")); a trailing \r is whitespace to split(). */
  size_t n_lines = 1;
  for (size_t k = 0; k < mlen; k++) n_lines += mtext[k] == '\n';
  while (i <= mlen && (size_t)line < n_lines) {
    size_t e = i;
    while (e < mlen && mtext[e] != '\n') e++;
    if (line > 0 && (size_t)line < n_lines - 1) {
      const char *parts[3];
      size_t plen[3];
      int np = 0;
      size_t p = i;
      while (p < e) {
        while (p < e && (mtext[p] == ' ' || mtext[p] == '\t' || mtext[p] == '\r' || mtext[p] == '\f' || mtext[p] == '\v')) p++;
        if (p >= e) break;
        size_t q = p;
        while (q < e && !(mtext[q] == ' ' || mtext[q] == '\t' || mtext[q] == '\r' || mtext[q] == '\f' || mtext[q] == '\v')) q++;
        if (np < 3) { parts[np] = mtext + p; plen[np] = q - p; }
        np++;
        p = q;
      }
      if (np != 2) {
        json_decref(vocab); json_decref(merges);
        err_setk(err, ERR_BAD_INPUT, "%s: line %d is not two tokens", mpath, line + 1);
        return NULL;
      }
      json_t *m = json_array();
      json_array_append_new(m, json_stringn(parts[0], plen[0]));
      json_array_append_new(m, json_stringn(parts[1], plen[1]));
      json_array_append_new(merges, m);
    }
    line++;
    i = e + 1;
  }
  const char *bos = role_of(cfg, map, "bos_token", "<s>"), *eos = role_of(cfg, map, "eos_token", "</s>"),
             *unk = role_of(cfg, map, "unk_token", "<unk>"), *pad = role_of(cfg, map, "pad_token", "<pad>"),
             *mask = role_of(cfg, map, "mask_token", "<mask>"), *sep = role_of(cfg, map, "sep_token", "</s>"),
             *cls = role_of(cfg, map, "cls_token", "<s>");
  if (vocab_id(vocab, cls) < 0 || vocab_id(vocab, sep) < 0) {
    json_decref(vocab); json_decref(merges);
    err_setk(err, ERR_BAD_INPUT, "%s: the vocabulary has no %s or no %s (RoBERTa's template needs both)", vpath, cls, sep);
    return NULL;
  }
  int aps = bool_field(cfg, "add_prefix_space", 0);
  json_t *root = root_start();
  const char *names[] = {bos, pad, eos, unk, mask, sep, cls};
  add_specials(root, vocab, names, 7, mask);
  json_object_set_new(root, "normalizer", json_null());
  json_t *pre = json_object();
  json_object_set_new(pre, "type", json_string("ByteLevel"));
  json_object_set_new(pre, "add_prefix_space", json_boolean(aps));
  json_object_set_new(pre, "trim_offsets", json_true());
  json_object_set_new(pre, "use_regex", json_true());
  json_object_set_new(root, "pre_tokenizer", pre);
  json_t *post = json_object(), *s = json_array(), *c = json_array();
  json_array_append_new(s, json_string(sep));
  json_array_append_new(s, json_integer(vocab_id(vocab, sep)));
  json_array_append_new(c, json_string(cls));
  json_array_append_new(c, json_integer(vocab_id(vocab, cls)));
  json_object_set_new(post, "type", json_string("RobertaProcessing"));
  json_object_set_new(post, "sep", s);
  json_object_set_new(post, "cls", c);
  json_object_set_new(post, "trim_offsets", json_true());
  json_object_set_new(post, "add_prefix_space", json_boolean(aps));
  json_object_set_new(root, "post_processor", post);
  json_t *dec = json_object();
  json_object_set_new(dec, "type", json_string("ByteLevel"));
  json_object_set_new(dec, "add_prefix_space", json_true());
  json_object_set_new(dec, "trim_offsets", json_true());
  json_object_set_new(dec, "use_regex", json_true());
  json_object_set_new(root, "decoder", dec);
  json_t *model = json_object();
  json_object_set_new(model, "type", json_string("BPE"));
  json_object_set_new(model, "dropout", json_null());
  json_object_set_new(model, "unk_token", json_null());
  json_object_set_new(model, "continuing_subword_prefix", json_string(""));
  json_object_set_new(model, "end_of_word_suffix", json_string(""));
  json_object_set_new(model, "fuse_unk", json_false());
  json_object_set_new(model, "byte_fallback", json_false());
  json_object_set_new(model, "ignore_merges", json_false());
  json_object_set_new(model, "vocab", vocab);
  json_object_set_new(model, "merges", merges);
  json_object_set_new(root, "model", model);
  return root;
}

/* ---- what the fast tokenizer classes change in the tokenizer.json they load ---- */

enum { FAST_OTHER, FAST_BERT, FAST_ROBERTA };

/* The class transformers' AutoTokenizer builds for the folder: tokenizer_config.json's
** tokenizer_class, else the one config.json's model_type maps to. */
static int fast_class(const json_t *cfg, const char *dir) {
  const json_t *c = cfg ? json_object_get(cfg, "tokenizer_class") : NULL;
  if (json_is_string(c)) {
    const char *v = json_string_value(c);
    if (!strcmp(v, "BertTokenizer") || !strcmp(v, "BertTokenizerFast")) return FAST_BERT;
    if (!strcmp(v, "RobertaTokenizer") || !strcmp(v, "RobertaTokenizerFast")) return FAST_ROBERTA;
    return FAST_OTHER;
  }
  char *p = files_join(dir, "config.json"), *text = NULL;
  size_t len = 0;
  Err e = {0};
  int kind = FAST_OTHER;
  if (p && read_optional(p, TOKENIZER_MAX_SIDE_FILE, &text, &len, &e) == 0 && text) {
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &je);
    const json_t *mt = json_is_object(o) ? json_object_get(o, "model_type") : NULL;
    if (json_is_string(mt)) kind = !strcmp(json_string_value(mt), "bert") ? FAST_BERT
                                 : !strcmp(json_string_value(mt), "roberta") ? FAST_ROBERTA : FAST_OTHER;
    json_decref(o);
  }
  free(p);
  free(text);
  return kind;
}

/* Sets o[key] to v where o has the key with another value (Python's
** state.get(key, v) != v); 1 when it did. Takes v's reference. */
static int set_if_differs(json_t *o, const char *key, json_t *v) {
  const json_t *old = json_object_get(o, key);
  int differs = old && !json_equal(old, v);
  if (differs) json_object_set(o, key, v);
  json_decref(v);
  return differs;
}

/* What BertTokenizerFast's and RobertaTokenizerFast's __init__ do to the tokenizer they
** load (transformers 4.x), from tokenizer_config.json's arguments and their defaults:
**   Bert: a BertNormalizer whose lowercase, strip_accents or handle_chinese_chars differ
**     from do_lower_case (True), strip_accents (None), tokenize_chinese_chars (True) is
**     rebuilt with them;
**   Roberta: the pre-tokenizer's and the post-processor's add_prefix_space (False) and
**     the post-processor's trim_offsets (True) are set where they differ.
** So a cased tokenizer.json beside "do_lower_case": true, or with no tokenizer_config.json
** at all, lowercases in transformers, and in maskd. Returns 1 when root changed. */
static int fast_class_init(json_t *root, const json_t *cfg, int kind) {
  int changed = 0;
  if (kind == FAST_BERT) {
    json_t *n = json_object_get(root, "normalizer");
    const char *ty = json_is_object(n) ? json_string_value(json_object_get(n, "type")) : NULL;
    if (!ty || strcmp(ty, "BertNormalizer")) return 0;
    const json_t *sa = cfg ? json_object_get(cfg, "strip_accents") : NULL;
    json_t *want_l = json_boolean(bool_field(cfg, "do_lower_case", 1)), *want_s = json_is_boolean(sa) ? json_deep_copy(sa) : json_null(),
           *want_c = json_boolean(bool_field(cfg, "tokenize_chinese_chars", 1));
    const json_t *l = json_object_get(n, "lowercase"), *s = json_object_get(n, "strip_accents"), *c = json_object_get(n, "handle_chinese_chars");
    if ((l && !json_equal(l, want_l)) || (s && !json_equal(s, want_s)) || (c && !json_equal(c, want_c))) {
      json_object_set(n, "lowercase", want_l);
      json_object_set(n, "strip_accents", want_s);
      json_object_set(n, "handle_chinese_chars", want_c);
      changed = 1;
    }
    json_decref(want_l);
    json_decref(want_s);
    json_decref(want_c);
  } else if (kind == FAST_ROBERTA) {
    int aps = bool_field(cfg, "add_prefix_space", 0), trim = bool_field(cfg, "trim_offsets", 1);
    json_t *pre = json_object_get(root, "pre_tokenizer"), *post = json_object_get(root, "post_processor");
    if (json_is_object(pre)) changed |= set_if_differs(pre, "add_prefix_space", json_boolean(aps));
    if (json_is_object(post)) {
      changed |= set_if_differs(post, "add_prefix_space", json_boolean(aps));
      changed |= set_if_differs(post, "trim_offsets", json_boolean(trim));
    }
  }
  return changed;
}

/* DIR/tokenizer.json, with what the folder's fast tokenizer class changes applied. A
** Unigram model is never a BERT or RoBERTa class's, and its scores must be read from
** their own digits (vocab_scores.h), so its text is loaded as it is. */
static Tokenizer *load_tokenizer_json(const char *dir, Err *err) {
  char *p = files_join(dir, "tokenizer.json"), *text = NULL, *cfg_text = NULL, *map_text = NULL, *dump = NULL;
  size_t len = 0, cfg_len = 0, map_len = 0;
  json_t *cfg = NULL, *root = NULL;
  Tokenizer *t = NULL;
  if (!p) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  if (!(text = files_read_all(p, TOKENIZER_MAX_FILE, &len, err))) goto done;
  if (tokenizer_side_read(dir, &cfg_text, &cfg_len, &map_text, &map_len, err)) goto done;
  if (cfg_text && !(cfg = parse_object(cfg_text, cfg_len, "tokenizer_config.json", err))) { err_prefix(err, dir); goto done; }
  int kind = fast_class(cfg, dir);
  if (kind != FAST_OTHER) {
    json_error_t je;
    root = json_loadb(text, len, 0, &je);
    const json_t *model = json_is_object(root) ? json_object_get(root, "model") : NULL;
    const char *ty = json_is_object(model) ? json_string_value(json_object_get(model, "type")) : NULL;
    if (ty && strcmp(ty, "Unigram") && fast_class_init(root, cfg, kind)) {
      if (!(dump = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
      if (!(t = tokenizer_from_json(dump, strlen(dump), err))) err_prefix(err, p);
      goto done;
    }
  }
  if (!(t = tokenizer_from_json(text, len, err))) err_prefix(err, p);
done:
  json_decref(cfg);
  json_decref(root);
  free(p);
  free(text);
  free(cfg_text);
  free(map_text);
  free(dump);
  return t;
}

static int is_file(const char *dir, const char *name) {
  char *p = files_join(dir, name);
  struct stat st;
  int ok = p && lstat(p, &st) == 0;
  free(p);
  return ok;
}

Tokenizer *tokenizer_load_dir(const char *dir, Err *err) {
  if (is_file(dir, "tokenizer.json")) return load_tokenizer_json(dir, err);
  int bert = is_file(dir, "vocab.txt"), roberta = !bert && is_file(dir, "vocab.json") && is_file(dir, "merges.txt");
  if (!bert && !roberta) {
    err_setk(err, ERR_NOT_FOUND, "%s: no tokenizer.json, vocab.txt, or vocab.json with merges.txt", dir);
    return NULL;
  }
  char *cfg_text = NULL, *map_text = NULL, *a_text = NULL, *b_text = NULL, *a_path = NULL, *b_path = NULL, *json = NULL;
  size_t cfg_len, map_len, a_len = 0, b_len = 0;
  json_t *cfg = NULL, *map = NULL, *root = NULL;
  Tokenizer *t = NULL;
  if (tokenizer_side_read(dir, &cfg_text, &cfg_len, &map_text, &map_len, err)) goto done;
  if (cfg_text && !(cfg = parse_object(cfg_text, cfg_len, "tokenizer_config.json", err))) goto done;
  if (map_text && !(map = parse_object(map_text, map_len, "special_tokens_map.json", err))) goto done;
  a_path = files_join(dir, bert ? "vocab.txt" : "vocab.json");
  b_path = roberta ? files_join(dir, "merges.txt") : NULL;
  if (!a_path || (roberta && !b_path)) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  if (!(a_text = files_read_all(a_path, TOKENIZER_MAX_VOCAB_FILE, &a_len, err))) goto done;
  if (roberta && !(b_text = files_read_all(b_path, TOKENIZER_MAX_VOCAB_FILE, &b_len, err))) goto done;
  root = bert ? bert_root(a_text, a_len, cfg, map, a_path, err) : roberta_root(a_text, a_len, b_text, b_len, cfg, map, a_path, b_path, err);
  if (!root) goto done;
  fast_class_init(root, cfg, bert ? FAST_BERT : FAST_ROBERTA);   /* the converter fixed trim_offsets; the class sets it */
  if (!(json = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  if (!(t = tokenizer_from_json(json, strlen(json), err))) err_prefix(err, bert ? a_path : b_path);
done:
  json_decref(cfg); json_decref(map); json_decref(root);
  free(cfg_text); free(map_text); free(a_text); free(b_text); free(a_path); free(b_path); free(json);
  return t;
}

Tokenizer *tokenizer_load_path(const char *path, Err *err) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return tokenizer_load_dir(path, err);
  return tokenizer_load(path, err);
}
