#include "engine/core/json_text.h"
#include "engine/train/run_config.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/data/loader.h"
#include "engine/core/platform.h"
#include "engine/data/prepare.h"
#include "engine/tok/tokenizer.h"

typedef enum { F_STR, F_LONG, F_DBL, F_U64 } FieldType;
/* A run option: where it goes and, for a number, the values it may take on its own
** ([lo, hi], an end excluded where open says; note: what a special value means), which
** run_config_check and run_config_value_ok both read. */
typedef struct Field {
  const char *key;
  FieldType type;
  size_t off, cap;
  double lo, hi;
  int open;            /* 1: lo excluded, 2: hi excluded */
  const char *note;
} Field;

#define S(k) {#k, F_STR, offsetof(RunConfig, k), sizeof(((RunConfig *)0)->k), 0, 0, 0, NULL}
#define L(k, lo, hi, note) {#k, F_LONG, offsetof(RunConfig, k), 0, lo, hi, 0, note}
#define D(k, lo, hi, open, note) {#k, F_DBL, offsetof(RunConfig, k), 0, lo, hi, open, note}
#define U(k) {#k, F_U64, offsetof(RunConfig, k), 0, 0, (double)INT64_MAX, 0, NULL}
#define NO_END HUGE_VAL
static const Field fields[] = {
  S(name), S(tokenizer), S(train), S(validation), S(config), S(out),
  L(epochs, 1, 1000000, NULL),
  /* (a billion steps is years here; more would overflow the epochs a run shows) */
  L(max_steps, 0, 1000000000, "0: epochs x steps per epoch"),
  L(batch, 1, 65536, NULL), L(grad_accum, 1, 65535, NULL),
  D(lr, 0, NO_END, 0, NULL), D(weight_decay, 0, NO_END, 0, NULL),
  L(warmup_steps, -1, NO_END, "-1: total // 20"), D(clip_norm, 0, NO_END, 0, "0: no clipping"),
  D(min_lr_ratio, 0, 1, 0, NULL), D(adam_beta1, 0, 1, 2, NULL), D(adam_beta2, 0, 1, 2, NULL), D(adam_epsilon, 0, NO_END, 1, NULL),
  U(seed), U(eval_seed), L(threads, 0, 1024, "0: all CPUs"),
  L(eval_batches, 0, NO_END, "0: all"), L(checkpoint_steps, 0, NO_END, "0: none"), L(checkpoint_epochs, 1, NO_END, NULL),
  L(keep_last, 1, NO_END, NULL), D(mlm_probability, 0, 1, 1, NULL), D(label_smoothing, 0, 1, 2, NULL),
  L(ranks, 1, 4096, NULL), S(hosts), S(precision),
};
#undef S
#undef L
#undef D
#undef U
static const int n_fields = (int)(sizeof fields / sizeof fields[0]);

void run_config_defaults(RunConfig *rc) {
  memset(rc, 0, sizeof *rc);
  snprintf(rc->config, sizeof rc->config, "small");
  rc->epochs = 1; rc->batch = 8; rc->grad_accum = 1;
  rc->lr = 1e-4; rc->weight_decay = 1e-3; rc->warmup_steps = -1;
  rc->adam_beta1 = 0.9; rc->adam_beta2 = 0.999; rc->adam_epsilon = 1e-8;
  rc->seed = 42; rc->eval_seed = 1234; rc->threads = 0;
  rc->checkpoint_epochs = 1; rc->keep_last = 2; rc->mlm_probability = 0.15;
  rc->ranks = 1;
  snprintf(rc->precision, sizeof rc->precision, "fp32");
}

/* The field for "--grad-accum", "grad-accum" or "grad_accum". */
static const Field *find_field(const char *key) {
  char k[64];
  size_t n = 0;
  while (*key == '-') key++;
  for (; key[n] && n + 1 < sizeof k; n++) k[n] = key[n] == '-' ? '_' : key[n];
  k[n] = 0;
  for (int i = 0; i < n_fields; i++)
    if (!strcmp(fields[i].key, k)) return &fields[i];
  return NULL;
}

int run_config_has_key(const char *key) { return find_field(key) != NULL; }

int run_config_json_key(const char *key) {
  for (int i = 0; i < n_fields; i++)
    if (!strcmp(fields[i].key, key)) return 1;
  return 0;
}

static int set_text(RunConfig *rc, const Field *f, const char *v, Err *err) {
  char *p = (char *)rc + f->off;
  char *end;
  errno = 0;
  switch (f->type) {
  case F_STR:
    if (strlen(v) >= f->cap) return err_set(err, "%s: longer than %zu bytes", f->key, f->cap - 1);
    /* The description is kept as JSON (the store's runs, resume), which holds UTF-8 text only. */
    if (!tokenizer_utf8_valid(v, strlen(v), NULL)) return err_set(err, "%s: not valid UTF-8 text", f->key);
    memcpy(p, v, strlen(v) + 1);
    return 0;
  case F_LONG: {
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno) return err_set(err, "%s: \"%s\" is not a whole number", f->key, v);
    memcpy(p, &x, sizeof x);
    return 0;
  }
  case F_U64: {
    if (*v == '-') return err_set(err, "%s: \"%s\" must not be negative", f->key, v);
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno) return err_set(err, "%s: \"%s\" is not a whole number", f->key, v);
    /* JSON integers (jansson's, the store's) end at INT64_MAX. */
    if (x > INT64_MAX) return err_set(err, "%s: %s is larger than %lld", f->key, v, (long long)INT64_MAX);
    uint64_t u = x;
    memcpy(p, &u, sizeof u);
    return 0;
  }
  case F_DBL: {
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x)) return err_set(err, "%s: \"%s\" is not a finite number", f->key, v);
    memcpy(p, &x, sizeof x);
    return 0;
  }
  }
  return err_set(err, "%s: unknown field type", f->key);
}

/* What f's values must be, as "in [1, 65536]", ">= 0" or "in (0, 1]", and its note. */
static void range_text(const Field *f, char *buf, size_t cap) {
  if (f->hi == NO_END) snprintf(buf, cap, "%s %.10g", f->open & 1 ? ">" : ">=", f->lo);
  else snprintf(buf, cap, "in %c%.10g, %.10g%c", f->open & 1 ? '(' : '[', f->lo, f->hi, f->open & 2 ? ')' : ']');
  if (f->note) snprintf(buf + strlen(buf), cap - strlen(buf), " (%s)", f->note);
}

static int in_range(const Field *f, double x) {
  return (f->open & 1 ? x > f->lo : x >= f->lo) && (f->hi == NO_END || (f->open & 2 ? x < f->hi : x <= f->hi));
}

/* The field's own range, for a value set by any means: "batch: 0 must be in [1, 65536]". */
static int check_range(const RunConfig *rc, const Field *f, Err *err) {
  const char *p = (const char *)rc + f->off;
  double x;
  char shown[40], want[96];
  if (f->type == F_LONG) { long v; memcpy(&v, p, sizeof v); x = (double)v; snprintf(shown, sizeof shown, "%ld", v); }
  else if (f->type == F_DBL) { memcpy(&x, p, sizeof x); snprintf(shown, sizeof shown, "%g", x); }
  else return 0;
  if (in_range(f, x)) return 0;
  range_text(f, want, sizeof want);
  return err_set(err, "%s: %s must be %s", f->key, shown, want);
}

static int check_hosts(const char *hosts, Err *err);

int run_config_value_ok(const char *key, const char *value, char *want, size_t cap) {
  const Field *f = find_field(key);
  if (!f || !value) { snprintf(want, cap, "a run option's value"); return -1; }
  RunConfig scratch;
  run_config_defaults(&scratch);
  Err e = {0};
  int bad = set_text(&scratch, f, value, &e) != 0;
  char range[96];
  switch (f->type) {
  case F_STR:
    if (!strcmp(f->key, "precision")) {
      ModelPrecision mp;
      snprintf(want, cap, "fp32 or bf16");
      return bad || run_config_model_precision(&scratch, &mp, &e) ? -1 : 0;
    }
    if (!strcmp(f->key, "hosts")) {
      /* What is wrong with it, after what it must be ("hosts: " off check_hosts' message). */
      int wrong = bad || check_hosts(scratch.hosts, &e);
      const char *why = wrong && !strncmp(e.msg, "hosts: ", 7) ? e.msg + 7 : NULL;
      snprintf(want, cap, "a host list name:slots,name:slots (slots in [1, 4096], at most 4096 in all)%s%s", why ? "; " : "",
               why ? why : "");
      return wrong ? -1 : 0;
    }
    snprintf(want, cap, "UTF-8 text of at most %zu bytes", f->cap - 1);
    return bad ? -1 : 0;
  case F_U64:
    snprintf(want, cap, "an integer in [0, %lld]", (long long)INT64_MAX);
    return bad ? -1 : 0;
  default:
    range_text(f, range, sizeof range);
    snprintf(want, cap, "%s %s", f->type == F_LONG ? "an integer" : "a number", range);
    return bad || check_range(&scratch, f, &e) ? -1 : 0;
  }
}

int run_config_set(RunConfig *rc, const char *key, const char *value, Err *err) {
  const Field *f = find_field(key);
  if (!f) return err_set(err, "unknown run option \"%s\"", key);
  if (!value) return err_set(err, "%s: needs a value", f->key);
  return set_text(rc, f, value, err);
}

int run_config_apply_json(RunConfig *rc, const char *text, Err *err) {
  json_error_t je;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
  if (!root) return err_set(err, "run description: invalid JSON at line %d: %s", je.line, json_error_message(&je));
  int rcode = run_config_apply_object(rc, root, err);
  json_decref(root);
  return rcode;
}

int run_config_apply_object(RunConfig *rc, const json_t *root, Err *err) {
  if (!json_is_object(root)) return err_set(err, "run description: not a JSON object");
  RunConfig tmp = *rc;
  const char *k;
  json_t *v;
  int rcode = 0;
  json_object_foreach((json_t *)root, k, v) {
    const Field *f = NULL;
    for (int i = 0; i < n_fields; i++)
      if (!strcmp(fields[i].key, k)) f = &fields[i];
    if (!f) { rcode = err_set(err, "run description: unknown key \"%s\"", k); break; }
    char buf[RUN_PATH_MAX + 8];
    if (f->type == F_STR) {
      if (json_is_null(v)) { buf[0] = 0; }
      else if (!json_is_string(v)) { rcode = err_set(err, "%s: must be a string", k); break; }
      else if (json_string_length(v) != strlen(json_string_value(v))) { rcode = err_set(err, "%s: cannot hold a NUL character", k); break; }
      else snprintf(buf, sizeof buf, "%s", json_string_value(v));
      if (json_is_string(v) && strlen(json_string_value(v)) >= f->cap) { rcode = err_set(err, "%s: too long", k); break; }
    } else if (f->type == F_DBL) {
      if (!json_is_number(v)) { rcode = err_set(err, "%s: must be a number", k); break; }
      snprintf(buf, sizeof buf, "%.17g", json_number_value(v));
    } else {
      if (!json_is_integer(v)) { rcode = err_set(err, "%s: must be a whole number", k); break; }
      snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    }
    if (set_text(&tmp, f, buf, err)) { rcode = -1; break; }
  }
  if (rcode == 0) *rc = tmp;
  return rcode;
}

int run_config_load(RunConfig *rc, const char *path, Err *err) {
  size_t n;
  char *buf = files_read_all(path, RUN_CONFIG_MAX_FILE, &n, err);
  if (!buf) return err_prefix(err, "run description");
  int r = strlen(buf) == n ? run_config_apply_json(rc, buf, err) : err_set(err, "run description: contains a NUL byte");
  free(buf);
  if (r) err_prefix(err, path);
  return r;
}

char *run_config_to_json(const RunConfig *rc) {
  json_t *o = run_config_to_object(rc);
  char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(o);
  return s;
}

json_t *run_config_to_object(const RunConfig *rc) {
  json_t *o = json_object();
  if (!o) return NULL;
  for (int i = 0; i < n_fields; i++) {
    const Field *f = &fields[i];
    const char *p = (const char *)rc + f->off;
    json_t *v = NULL;
    if (f->type == F_STR) v = json_string(p);
    else if (f->type == F_LONG) { long x; memcpy(&x, p, sizeof x); v = json_integer(x); }
    else if (f->type == F_U64) { uint64_t x; memcpy(&x, p, sizeof x); v = json_integer((json_int_t)x); }
    else { double x; memcpy(&x, p, sizeof x); v = json_real(x); }
    if (json_object_set_new(o, f->key, v)) { json_decref(o); return NULL; }
  }
  return o;
}

int run_config_is_preset(const char *s) { return !strcmp(s, "tiny") || !strcmp(s, "small") || !strcmp(s, "base"); }

/* Opens a shard set as the trainer will read it and checks it against the tokenizer;
** fills its sequence length, counts and the opened set (*out, closed on failure). */
static int check_shards(const char *field, const TrainerOptions *o, int vocab, const char *tok_hash, uint32_t *seq,
                        uint64_t *samples, uint64_t *batches, Loader **out, Err *err) {
  const char *path = strcmp(field, "train") ? o->valid_path : o->train_path;
  struct stat st;
  if (stat(path, &st)) return err_set(err, "%s: %s does not exist", field, path);
  Loader *l = trainer_open_loader(o, strcmp(field, "train") != 0, err);
  if (!l) return -1;
  int rc = 0;
  if ((int)loader_vocab_size(l) != vocab)
    rc = err_set(err, "%s: shards have vocabulary size %u but the tokenizer has %d", field, loader_vocab_size(l), vocab);
  else if (tok_hash && *loader_tokenizer_hash(l) && strcmp(loader_tokenizer_hash(l), tok_hash))
    rc = err_set(err, "%s: shards were made with another tokenizer (hash %s, the tokenizer's %s)", field,
                 loader_tokenizer_hash(l), tok_hash);
  *seq = loader_seq_len(l);
  *samples = loader_n_samples(l);
  *batches = loader_batches_per_epoch(l);
  if (rc) loader_close(l);
  else *out = l;
  return rc;
}

int run_config_model_precision(const RunConfig *rc, ModelPrecision *out, Err *err) {
  if (model_precision_parse(rc->precision, out))
    return err_set(err, "precision: \"%s\" must be fp32 or bf16", rc->precision);
  return 0;
}

int run_config_check(const RunConfig *rc, Err *err) {
  if (!rc->name[0]) return err_set(err, "name: a run needs a name");
  if (!rc->tokenizer[0]) return err_set(err, "tokenizer: missing (a tokenizer.json)");
  if (!rc->train[0]) return err_set(err, "train: missing (a shard directory)");
  if (!rc->config[0]) return err_set(err, "config: missing (a config.json or tiny/small/base)");
  for (int i = 0; i < n_fields; i++)
    if (check_range(rc, &fields[i], err)) return -1;
  if (check_hosts(rc->hosts, err)) return -1;
  ModelPrecision p;
  return run_config_model_precision(rc, &p, err);
}

/* A host list: name:slots entries, each name a host name (never an mpirun option),
** slots in [1, 4096] each and in all. */
static int check_hosts(const char *hosts, Err *err) {
  for (const char *h = hosts; *h; h++) {
    if (!(isalnum((unsigned char)*h) || strchr(".-_:,", *h)))
      return err_set(err, "hosts: '%c' is not part of a host list (name:slots,name:slots)", *h);
    /* A host name never starts with '-': such an entry could read as an mpirun option. */
    if (*h == '-' && (h == hosts || h[-1] == ','))
      return err_set(err, "hosts: an entry starts with '-': not a host name");
    if (((*h == ':' || *h == ',') && (h == hosts || h[-1] == ',')) || (*h == ',' && !h[1]))
      return err_set(err, "hosts: an entry names no host (name:slots,name:slots)");
  }
  /* Each host's slots are ranks: the same bounds as ranks, for each and for their sum
  ** (mpirun answered 0, "x" or a count past long with "all nodes are already filled"). */
  long slots = 0;
  for (const char *h = hosts; *h;) {
    const char *end = strchr(h, ','), *colon = strchr(h, ':');
    if (!end) end = h + strlen(h);
    int name = (int)((colon && colon < end ? colon : end) - h);
    long n = 1;
    if (colon && colon < end) {
      const char *c = colon + 1;
      int digits = (int)(end - c);
      if (digits == 0) return err_set(err, "hosts: %.*s: no slot count after ':' (name:slots, slots in [1, 4096])", name, h);
      n = 0;
      for (int i = 0; i < digits; i++) {
        if (!isdigit((unsigned char)c[i]))
          return err_set(err, "hosts: %.*s: slots \"%.*s\" is not a whole number in [1, 4096]", name, h, digits, c);
        if (n <= 4096) n = n * 10 + (c[i] - '0');
      }
      if (n < 1 || n > 4096) return err_set(err, "hosts: %.*s: slots %.*s must be in [1, 4096]", name, h, digits, c);
    }
    slots += n;
    h = *end ? end + 1 : end;
  }
  if (slots > 4096) return err_set(err, "hosts: %ld slots in all: at most 4096 ranks", slots);
  return 0;
}

long run_config_host_slots(const char *hosts) {
  long n = 0;
  for (const char *h = hosts; *h;) {
    const char *end = strchr(h, ','), *colon = strchr(h, ':');
    if (!end) end = h + strlen(h);
    n += colon && colon < end ? strtol(colon + 1, NULL, 10) : 1;
    h = *end ? end + 1 : end;
  }
  return n;
}

/* A host name that is this machine: localhost, a 127.x.y.z address, or its own name. */
static int host_is_local(const char *h, size_t n) {
  char me[256] = "";
  if (gethostname(me, sizeof me - 1) != 0) me[0] = '\0';
  return (n == 9 && !strncasecmp(h, "localhost", 9)) || (n > 4 && !strncmp(h, "127.", 4)) ||
         (me[0] && strlen(me) == n && !strncasecmp(h, me, n));
}

int run_config_check_local_ranks(const RunConfig *rc, Err *err) {
  long local = rc->hosts[0] ? 0 : rc->ranks, most = 2L * platform_cpu_count();
  for (const char *h = rc->hosts; *h;) {
    const char *end = strchr(h, ','), *colon = strchr(h, ':');
    if (!end) end = h + strlen(h);
    size_t name = (size_t)((colon && colon < end ? colon : end) - h);
    if (host_is_local(h, name)) local += colon && colon < end ? strtol(colon + 1, NULL, 10) : 1;
    h = *end ? end + 1 : end;
  }
  if (local <= most) return 0;
  if (rc->hosts[0])
    return err_set(err, "hosts: %ld slots on this machine's %d CPUs: at most %ld", local, platform_cpu_count(), most);
  return err_set(err, "ranks: %ld on this machine's %d CPUs: at most %ld (give hosts for more)", local, platform_cpu_count(),
                 most);
}

void run_plan_close(RunPlan *plan) {
  free(plan->tokenizer_json);
  tokenizer_free(plan->tokenizer);
  loader_close(plan->train_loader);
  loader_close(plan->valid_loader);
  plan->tokenizer_json = NULL;
  plan->tokenizer_json_len = 0;
  plan->tokenizer = NULL;
  plan->train_loader = plan->valid_loader = NULL;
}

int run_config_validate(const RunConfig *rc, RunPlan *plan, Err *err) {
  int r = run_config_open(rc, plan, err);
  run_plan_close(plan);
  return r;
}

/* The trainer's options from the description and what the tokenizer gave. */
static void trainer_options(const RunConfig *rc, RunPlan *plan, int mask, int pad) {
  TrainerOptions *o = &plan->train;
  *o = trainer_default_options();
  o->train_path = rc->train;
  o->valid_path = rc->validation[0] ? rc->validation : NULL;
  o->batch = (int)rc->batch;
  o->grad_accum = (int)rc->grad_accum;
  o->epochs = (int)rc->epochs;
  o->max_steps = rc->max_steps;
  o->lr = rc->lr; o->weight_decay = rc->weight_decay;
  o->beta1 = rc->adam_beta1; o->beta2 = rc->adam_beta2; o->eps = rc->adam_epsilon;
  o->clip_norm = rc->clip_norm; o->min_lr_ratio = rc->min_lr_ratio;
  o->warmup_steps = rc->warmup_steps;
  o->seed = rc->seed; o->eval_seed = rc->eval_seed;
  o->threads = rc->threads > 0 ? (int)rc->threads : platform_cpu_count();
  o->eval_batches = rc->eval_batches;
  o->checkpoint_steps = rc->checkpoint_steps;
  o->checkpoint_epochs = (int)rc->checkpoint_epochs;
  o->mlm_prob = rc->mlm_probability;
  o->label_smoothing = rc->label_smoothing;
  o->mask_id = mask;
  o->pad_id = pad;
  o->special_ids = plan->special_ids;
  o->n_special = plan->n_special;
  run_config_model_precision(rc, &o->precision, NULL);   /* checked by run_config_check */
}

/* The model config's vocab_size, pad_token_id, bos_token_id and eos_token_id from the
** tokenizer: its size, its padding token, and its family's sequence-start and separator
** tokens ([CLS] / [SEP], <s> / </s>), as transformers' configs hold them. A field that
** is in stated (CONFIG_STATED_*: the file has it) must agree, and is refused naming both
** values; one that is not (none is, for a preset) takes the tokenizer's. An
** explicit null bos / eos ("no such token") is kept, and so is a stated id where the
** tokenizer has no such token; a tokenizer without it leaves an omitted one absent (-1). */
static int tokenizer_ids(const Tokenizer *tok, const char *config, unsigned stated, ModelConfig *mc, Err *err) {
  int vocab = tokenizer_vocab_size(tok);
  if (!(stated & CONFIG_STATED_VOCAB)) mc->vocab_size = vocab;
  else if (mc->vocab_size != vocab)
    return err_set(err, "config: vocab_size %d in %s differs from the tokenizer's %d", mc->vocab_size, config, vocab);
  const char *pad_tok = tokenizer_pad_token(tok);   /* run_config_open checked it is there */
  int pad = tokenizer_token_to_id(tok, pad_tok);
  if (!(stated & CONFIG_STATED_PAD)) mc->pad_token_id = pad;
  else if (mc->pad_token_id != pad)
    return err_set(err, "config: pad_token_id %d in %s is not the tokenizer's pad id %d (%s)", mc->pad_token_id, config, pad,
                   pad_tok);
  const char *names[2] = {tokenizer_cls_token(tok), tokenizer_sep_token(tok)};
  const char *keys[2] = {"bos_token_id", "eos_token_id"};
  const unsigned bits[2] = {CONFIG_STATED_BOS, CONFIG_STATED_EOS};
  int *ids[2] = {&mc->bos_token_id, &mc->eos_token_id};
  for (int i = 0; i < 2; i++) {
    int id = names[i] ? tokenizer_token_to_id(tok, names[i]) : -1;
    if (!(stated & bits[i])) *ids[i] = id;
    else if (*ids[i] >= 0 && id >= 0 && *ids[i] != id)
      return err_set(err, "config: %s %d in %s is not the tokenizer's %s id %d", keys[i], *ids[i], config, names[i], id);
  }
  return 0;
}

/* run_config_open's checks, in the order their refusals are reported; what is opened
** goes into plan as soon as it is, so the caller closes it whatever happens. */
static int open_checked(const RunConfig *rc, Dist *dist, RunPlan *plan, Err *err) {
  /* Ranges first: they cost nothing and name the field. */
  if (run_config_check(rc, err)) return -1;

  /* The tokenizer gives the vocabulary, the special ids and [MASK]. Its file is read
  ** once: the same bytes are parsed, hashed and pushed with every checkpoint. */
  plan->tokenizer_json = files_read_all(rc->tokenizer, TOKENIZER_MAX_FILE, &plan->tokenizer_json_len, err);
  if (!plan->tokenizer_json) return err_prefix(err, "tokenizer");
  Tokenizer *tok = plan->tokenizer = tokenizer_from_json(plan->tokenizer_json, plan->tokenizer_json_len, err);
  if (!tok) { err_prefix(err, rc->tokenizer); return err_prefix(err, "tokenizer"); }
  int vocab = tokenizer_vocab_size(tok);
  /* The family's roles: [MASK] or <mask>, <pad> or [PAD]. */
  const char *mask_tok = tokenizer_mask_token(tok), *pad_tok = tokenizer_pad_token(tok);
  int mask = mask_tok ? tokenizer_token_to_id(tok, mask_tok) : -1;
  int pad = pad_tok ? tokenizer_token_to_id(tok, pad_tok) : -1;
  for (int id = 0; id < vocab; id++)
    if (tokenizer_is_special(tok, id)) {
      if (plan->n_special == RUN_MAX_SPECIAL) return err_set(err, "tokenizer: more than %d special tokens", RUN_MAX_SPECIAL);
      plan->special_ids[plan->n_special++] = id;
    }
  if (mask < 0) return err_set(err, "tokenizer: %s has no mask token ([MASK] or <mask>)", rc->tokenizer);
  if (pad < 0) return err_set(err, "tokenizer: %s has no <pad> token", rc->tokenizer);
  char hash[64];
  if (prepare_bytes_hash(plan->tokenizer_json, plan->tokenizer_json_len, hash, sizeof hash, err))
    return err_prefix(err, "tokenizer");

  /* The model config: a preset takes the tokenizer's vocabulary and special ids; a
  ** file takes those it leaves out and must agree on those it states (tokenizer_ids). */
  ModelConfig mc;
  unsigned stated = CONFIG_STATED_MAX_POS;   /* a preset's 514 positions; its ids are the tokenizer's */
  if (run_config_is_preset(rc->config)) {
    if (config_preset(rc->config, &mc, err)) return err_prefix(err, "config");
    if (tokenizer_ids(tok, rc->config, stated, &mc, err)) return -1;
    if (config_validate(&mc, err)) return err_prefix(err, "config");
  } else {
    if (config_load_stated(rc->config, &mc, &stated, err)) return err_prefix(err, "config");
    if (tokenizer_ids(tok, rc->config, stated, &mc, err)) return -1;
    /* Positions wait for the shards' sequence length: until then, the fewest that hold one token. */
    if (!(stated & CONFIG_STATED_MAX_POS)) mc.max_position_embeddings = config_position_offset(&mc) + 1;
    if (config_validate(&mc, err)) { err_prefix(err, rc->config); return err_prefix(err, "config"); }
  }

  /* The shard sets are opened once, as the trainer reads them, and handed to it. */
  trainer_options(rc, plan, mask, pad);
  plan->train.dist = dist;
  uint32_t seq = 0, vseq = 0;
  uint64_t batches = 0, vbatches = 0;
  if (check_shards("train", &plan->train, vocab, hash, &seq, &plan->train_samples, &batches, &plan->train_loader, err))
    return -1;
  plan->train_id = loader_set_id(plan->train_loader);
  if ((long)(batches / (uint64_t)rc->grad_accum) < 1) {
    long ranks = dist ? dist_world(dist) : 1;   /* a step is every rank's batch x grad_accum */
    char of[48] = "";
    if (ranks > 1) snprintf(of, sizeof of, "%ld ranks x ", ranks);
    return err_set(err, "train: %llu samples make no step of %sbatch %ld x grad_accum %ld = %ld sequences",
                   (unsigned long long)plan->train_samples, of, rc->batch, rc->grad_accum, ranks * rc->batch * rc->grad_accum);
  }
  if (rc->validation[0]) {
    if (check_shards("validation", &plan->train, vocab, hash, &vseq, &plan->valid_samples, &vbatches, &plan->valid_loader,
                     err))
      return -1;
    plan->valid_id = loader_set_id(plan->valid_loader);
    if (vseq != seq)
      return err_set(err, "validation: sequence length %u differs from the train shards' %u", vseq, seq);
  }
  /* Left out, the positions are the shards' length (the tokenizer.json states no
  ** maximum: maskd reads only "truncation": null), past RoBERTa's padding index. */
  if (!(stated & CONFIG_STATED_MAX_POS)) {
    mc.max_position_embeddings = config_position_offset(&mc) + (int)seq;
    if (config_validate(&mc, err)) { err_prefix(err, rc->config); return err_prefix(err, "config"); }
  }
  int maxpos = config_max_tokens(&mc);
  if ((int)seq > maxpos)
    return err_set(err, "config: max_position_embeddings %d holds %d tokens, the shards have %u", mc.max_position_embeddings,
                   maxpos, seq);

  plan->model = mc;
  plan->vocab_size = vocab;
  plan->seq_len = (int)seq;
  return 0;
}

int run_config_open(const RunConfig *rc, RunPlan *plan, Err *err) { return run_config_open_ranks(rc, NULL, plan, err); }

int run_config_open_ranks(const RunConfig *rc, Dist *dist, RunPlan *plan, Err *err) {
  memset(plan, 0, sizeof *plan);
  int r = open_checked(rc, dist, plan, err);
  if (r) run_plan_close(plan);
  return r;
}
