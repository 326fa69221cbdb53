/* A model folder's tokenizer files (engine/tok/tokenizer_files.h): the side files'
** roles, and folders without tokenizer.json converted as transformers converts the
** slow tokenizers. The expected encodings are worked out by hand from BERT's and
** RoBERTa's rules on tiny vocabularies; parity with HF on real vocabularies is
** tests/cli/test_tokenizer_families.sh's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/tok/tokenizer.h"
#include "engine/tok/tokenizer_files.h"
#include "tests/unit/check.h"

static char root[256];

static void put(const char *dir, const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  if (f) { fputs(text, f); fclose(f); }
}

static const char *folder(const char *name) {
  static char p[384];
  snprintf(p, sizeof p, "%s/%s", root, name);
  mkdir(p, 0777);
  return p;
}

static int ids_are(const Encoding *e, const int *want, int n) {
  if (e->n != n) return 0;
  for (int i = 0; i < n; i++) if (e->ids[i] != want[i]) return 0;
  return 1;
}

static const char *show(const Encoding *e) {
  static char buf[256];
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < e->n && at + 12 < sizeof buf; i++) at += (size_t)snprintf(buf + at, sizeof buf - at, "%d ", e->ids[i]);
  return buf;
}

static void side_files(void) {
  TokenizerSide s;
  Err e = {0};
  const char *cfg = "{\"mask_token\": \"<mask>\", \"pad_token\": {\"content\": \"<pad>\", \"lstrip\": false}, "
                    "\"clean_up_tokenization_spaces\": false, \"model_max_length\": 1e30}";
  const char *map = "{\"mask_token\": {\"content\": \"[MASK]\", \"lstrip\": true}}";
  int rc = tokenizer_side_parse(cfg, strlen(cfg), map, strlen(map), &s, &e);
  check(rc == 0 && !strcmp(s.mask_token, "[MASK]") && !strcmp(s.pad_token, "<pad>") && s.clean_up_spaces == 0,
        "side_map_wins_over_config", "rc %d mask %s pad %s clean %d (%s)", rc, s.mask_token, s.pad_token, s.clean_up_spaces, e.msg);
  rc = tokenizer_side_parse(NULL, 0, NULL, 0, &s, &e);
  check(rc == 0 && !s.mask_token[0] && s.clean_up_spaces == -1, "side_none_says_nothing", "rc %d clean %d", rc, s.clean_up_spaces);
  e = (Err){0};
  rc = tokenizer_side_parse("[1]", 3, NULL, 0, &s, &e);
  check(rc < 0 && e.kind == ERR_BAD_INPUT && strstr(e.msg, "tokenizer_config.json"), "side_not_an_object", "rc %d kind %d: %s", rc, e.kind, e.msg);
  e = (Err){0};
  rc = tokenizer_side_parse("{\"clean_up_tokenization_spaces\": \"yes\"}", 39, NULL, 0, &s, &e);
  check(rc < 0 && e.kind == ERR_BAD_INPUT, "side_clean_up_not_boolean", "rc %d: %s", rc, e.msg);
}

/* BERT: vocab.txt, lowercase unless tokenizer_config.json says otherwise. */
static void bert_folder(void) {
  const char *d = folder("bert");
  put(d, "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n,\n!\n##s\nhe\n");
  Err e = {0};
  Tokenizer *t = tokenizer_load_dir(d, &e);
  check(t && tokenizer_family(t) == TOKENIZER_WORDPIECE && !strcmp(tokenizer_class_name(t), "BertTokenizer"),
        "bert_vocab_txt_loads", "%s", e.msg);
  if (!t) return;
  check(tokenizer_mask_token(t) && !strcmp(tokenizer_mask_token(t), "[MASK]"), "bert_mask_token", "%s", tokenizer_mask_token(t) ? tokenizer_mask_token(t) : "none");
  check(tokenizer_pad_token(t) && !strcmp(tokenizer_pad_token(t), "[PAD]"), "bert_pad_token", "%s", tokenizer_pad_token(t) ? tokenizer_pad_token(t) : "none");
  /* A config's bos / eos taken from the tokenizer: BERT's [CLS] (2) and [SEP] (3). */
  const char *cls = tokenizer_cls_token(t), *sep = tokenizer_sep_token(t);
  check(cls && !strcmp(cls, "[CLS]") && sep && !strcmp(sep, "[SEP]") && tokenizer_token_to_id(t, cls) == 2 &&
            tokenizer_token_to_id(t, sep) == 3,
        "bert_cls_sep_tokens", "%s %s", cls ? cls : "none", sep ? sep : "none");
  Encoding en = {0};
  const char *text = "Hello, WORLDs! [MASK] h\xc3\xa9llo";
  int rc = tokenizer_encode(t, text, strlen(text), 1, &en, &e);
  /* [CLS] hello , world ##s ! [MASK] hello(accent stripped) [SEP] */
  int want[] = {2, 5, 7, 6, 9, 8, 4, 5, 3};
  check(rc == 0 && ids_are(&en, want, 9), "bert_encode_lowercase_strip_accents", "%s (%s)", show(&en), e.msg);
  char *dec = tokenizer_decode(t, en.ids, en.n, 1, &e);
  check(dec && !strcmp(dec, "hello, worlds! hello"), "bert_decode_wordpiece", "'%s'", dec ? dec : e.msg);
  /* Pairs: [CLS] A [SEP] B [SEP], type ids 0 then 1 (HF's BertProcessing and TemplateProcessing). */
  Encoding pr = {0};
  rc = tokenizer_encode_pair(t, "hello", 5, "world", 5, 1, &pr, &e);
  int want_pair[] = {2, 5, 3, 6, 3}, types_ok = pr.n == 5;
  for (int i = 0; types_ok && i < 5; i++) types_ok = pr.type_ids[i] == (i >= 3);
  check(rc == 0 && ids_are(&pr, want_pair, 5) && types_ok, "bert_pair", "%s (%s)", show(&pr), e.msg);
  encoding_free(&pr);
  free(dec);
  char *cfg = NULL, *map = NULL;
  rc = tokenizer_pretrained_json(t, 0, &cfg, &map, &e);
  check(rc == 0 && strstr(cfg, "\"tokenizer_class\": \"BertTokenizer\"") && strstr(cfg, "\"do_lower_case\": true") &&
        strstr(cfg, "\"strip_accents\": null") && strstr(map, "\"unk_token\": \"[UNK]\"") && strstr(map, "\"pad_token\": \"[PAD]\""),
        "bert_tokenizer_config", "%s\n%s", cfg ? cfg : e.msg, map ? map : "");
  free(cfg); free(map);
  /* Written back and read again: the same ids. */
  char *json = tokenizer_to_json(t, &e);
  Tokenizer *t2 = json ? tokenizer_from_json(json, strlen(json), &e) : NULL;
  Encoding en2 = {0};
  rc = t2 ? tokenizer_encode(t2, text, strlen(text), 1, &en2, &e) : -1;
  check(rc == 0 && ids_are(&en2, want, 9), "bert_json_round_trip", "%s (%s)", show(&en2), e.msg);
  free(json);
  tokenizer_free(t2);
  tokenizer_free(t);
  /* do_lower_case false: "Hello" is not in the vocabulary. */
  put(d, "tokenizer_config.json", "{\"do_lower_case\": false, \"tokenizer_class\": \"BertTokenizer\"}");
  t = tokenizer_load_dir(d, &e);
  rc = t ? tokenizer_encode(t, "Hello world", 11, 1, &en, &e) : -1;
  int want_cased[] = {2, 1, 6, 3};
  check(rc == 0 && ids_are(&en, want_cased, 4), "bert_do_lower_case_false", "%s (%s)", show(&en), e.msg);
  tokenizer_free(t);
  encoding_free(&en);
  encoding_free(&en2);
  /* A vocabulary without [CLS] cannot make BERT's template. */
  d = folder("bert_no_cls");
  put(d, "vocab.txt", "[PAD]\n[UNK]\n[SEP]\nhello\n");
  e = (Err){0};
  t = tokenizer_load_dir(d, &e);
  check(!t && e.kind == ERR_BAD_INPUT && strstr(e.msg, "[CLS]"), "bert_no_cls_refused", "%s", t ? "accepted" : e.msg);
  tokenizer_free(t);
}

/* RoBERTa: vocab.json + merges.txt (first and last lines dropped, as RobertaTokenizer reads it). */
static void roberta_folder(void) {
  const char *d = folder("roberta");
  put(d, "vocab.json", "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3, \"h\": 4, \"i\": 5, \"\xc4\xa0\": 6, \"hi\": 7, "
                       "\"\xc4\xa0hi\": 8, \"<mask>\": 9}");
  put(d, "merges.txt", "#version: 0.2\nh i\n\xc4\xa0 hi\n");
  Err e = {0};
  Tokenizer *t = tokenizer_load_dir(d, &e);
  check(t && tokenizer_family(t) == TOKENIZER_BPE && !strcmp(tokenizer_class_name(t), "RobertaTokenizer"), "roberta_files_load", "%s", e.msg);
  if (!t) return;
  check(tokenizer_mask_token(t) && !strcmp(tokenizer_mask_token(t), "<mask>"), "roberta_mask_token", "%s", tokenizer_mask_token(t) ? tokenizer_mask_token(t) : "none");
  check(tokenizer_pad_token(t) && !strcmp(tokenizer_pad_token(t), "<pad>"), "roberta_pad_token", "%s", tokenizer_pad_token(t) ? tokenizer_pad_token(t) : "none");
  /* RoBERTa's <s> (0) and </s> (2): roberta-base's bos_token_id and eos_token_id. */
  const char *cls = tokenizer_cls_token(t), *sep = tokenizer_sep_token(t);
  check(cls && !strcmp(cls, "<s>") && sep && !strcmp(sep, "</s>") && tokenizer_token_to_id(t, cls) == 0 &&
            tokenizer_token_to_id(t, sep) == 2,
        "roberta_cls_sep_tokens", "%s %s", cls ? cls : "none", sep ? sep : "none");
  Encoding en = {0};
  int rc = tokenizer_encode(t, "hi hi <mask>", 12, 1, &en, &e);
  int want[] = {0, 7, 8, 9, 2};   /* the mask token takes the space before it */
  check(rc == 0 && ids_are(&en, want, 5), "roberta_encode_merges_and_mask", "%s (%s)", show(&en), e.msg);
  char *dec = tokenizer_decode(t, en.ids, en.n, 0, &e);
  check(dec && !strcmp(dec, "<s>hi hi<mask></s>"), "roberta_decode_bytelevel", "'%s'", dec ? dec : e.msg);
  /* Pairs: <s> A </s></s> B </s>, every type id 0 (HF's RobertaProcessing); offsets trimmed per sequence. */
  Encoding pr = {0};
  rc = tokenizer_encode_pair(t, "hi", 2, " hi", 3, 1, &pr, &e);
  int want_pair[] = {0, 7, 2, 2, 8, 2}, pair_ok = pr.n == 6;
  for (int i = 0; pair_ok && i < 6; i++) pair_ok = pr.type_ids[i] == 0;
  pair_ok = pair_ok && pr.offsets[8] == 1 && pr.offsets[9] == 3;   /* " hi" in B: the space trimmed off */
  check(rc == 0 && ids_are(&pr, want_pair, 6) && pair_ok, "roberta_pair", "%s (%s)", show(&pr), e.msg);
  encoding_free(&pr);
  free(dec);
  int one = 8;
  dec = tokenizer_decode(t, &one, 1, 0, &e);
  check(dec && !strcmp(dec, " hi"), "roberta_decode_leading_space", "'%s'", dec ? dec : e.msg);
  free(dec);
  char *cfg = NULL, *map = NULL;
  rc = tokenizer_pretrained_json(t, 0, &cfg, &map, &e);
  check(rc == 0 && strstr(cfg, "\"tokenizer_class\": \"RobertaTokenizer\"") && strstr(cfg, "\"add_prefix_space\": false") &&
        strstr(cfg, "\"trim_offsets\": true") && strstr(map, "\"lstrip\": true"), "roberta_tokenizer_config", "%s\n%s", cfg ? cfg : e.msg, map ? map : "");
  /* Alone, "no limit" as transformers writes it; with a model, its input size (roberta-base: 512). */
  int unbounded = cfg && strstr(cfg, "\"model_max_length\": 1000000000000000019884624838656,") != NULL;
  free(cfg); free(map);
  cfg = map = NULL;
  rc = tokenizer_pretrained_json(t, 512, &cfg, &map, &e);
  check(unbounded && rc == 0 && strstr(cfg, "\"model_max_length\": 512,"), "tokenizer_config_model_max_length", "%s", cfg ? cfg : e.msg);
  free(cfg); free(map);
  tokenizer_free(t);
  /* Without the final newline, the last merge is dropped (split("\n")[1:-1]). */
  put(d, "merges.txt", "#version: 0.2\nh i\n\xc4\xa0 hi");
  t = tokenizer_load_dir(d, &e);
  rc = t ? tokenizer_encode(t, "hi hi", 5, 1, &en, &e) : -1;
  int want_short[] = {0, 7, 6, 7, 2};
  check(rc == 0 && ids_are(&en, want_short, 5), "roberta_merges_last_line_dropped", "%s (%s)", show(&en), e.msg);
  tokenizer_free(t);
  put(d, "merges.txt", "#version: 0.2\nh i x\n\n");
  e = (Err){0};
  t = tokenizer_load_dir(d, &e);
  check(!t && e.kind == ERR_BAD_INPUT && strstr(e.msg, "line 2"), "roberta_bad_merge_line", "%s", t ? "accepted" : e.msg);
  tokenizer_free(t);
  encoding_free(&en);
}

static void missing(void) {
  const char *d = folder("empty");
  Err e = {0};
  Tokenizer *t = tokenizer_load_dir(d, &e);
  check(!t && e.kind == ERR_NOT_FOUND && strstr(e.msg, "vocab.txt"), "folder_without_tokenizer", "%s", t ? "accepted" : e.msg);
  tokenizer_free(t);
  /* A side file that is not JSON is refused with its name. */
  d = folder("bad_side");
  put(d, "vocab.txt", "[CLS]\n[SEP]\n[UNK]\n");
  put(d, "tokenizer_config.json", "{not json");
  e = (Err){0};
  t = tokenizer_load_dir(d, &e);
  check(!t && strstr(e.msg, "tokenizer_config.json"), "folder_bad_side_file", "%s", t ? "accepted" : e.msg);
  tokenizer_free(t);
}

int main(void) {
  const char *tmp = getenv("MASKD_TMP");
  snprintf(root, sizeof root, "%s/tokfiles.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(root)) { printf("FAIL tokenizer_files_setup: mkdtemp %s\n", root); return 1; }
  side_files();
  bert_folder();
  roberta_folder();
  missing();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("note: could not remove %s\n", root);
  return check_exit();
}
