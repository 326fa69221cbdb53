/* The registry (server/app/registry.h): plans, checks and registers what tokenizer and
** prepare jobs make. Every message that reaches a job's error names files by the job's
** names or their file names: a resolved path is scrubbed out of an inner error. */
#include "server/app/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/core/rng.h"
#include "engine/data/loader.h"
#include "engine/data/prepare.h"
#include "engine/tok/tokenizer.h"
#include "store/sha256.h"

/* A manifest.json is at most PREPARE_MAX_MANIFEST; tokenizer.json TOKENIZER_MAX_FILE. */
#define HASH_BLOCK ((size_t)1 << 20)

/* Removes every occurrence of dir + "/" from msg, so an inner error names files only. */
static void scrub(char *msg, const char *dir) {
  size_t n = strlen(dir);
  if (!n) return;
  char *p;
  while ((p = strstr(msg, dir))) {
    size_t cut = n + (p[n] == '/');
    memmove(p, p + cut, strlen(p + cut) + 1);
  }
}

/* sha256 and size of a regular file, read a block at a time. */
static int hash_file(const char *path, const char *name, uint64_t *bytes, char hex[65], Err *err) {
  Err e = {0};
  int fd = files_open_regular(path, NULL, &e);
  if (fd < 0) return err_setk(err, ERR_NOT_FOUND, "%s cannot be read", name);
  unsigned char *buf = malloc(HASH_BLOCK);
  if (!buf) { close(fd); return err_setk(err, ERR_NOMEM, "out of memory hashing %s", name); }
  StoreSha256 c;
  store_sha256_init(&c);
  uint64_t total = 0;
  ssize_t got;
  while ((got = files_read_full(fd, buf, HASH_BLOCK)) > 0) {
    store_sha256_update(&c, buf, (size_t)got);
    total += (uint64_t)got;
    if ((size_t)got < HASH_BLOCK) break;
  }
  int rc = got < 0 ? err_setk(err, ERR_IO, "%s: read error: %s", name, strerror(errno)) : 0;
  free(buf);
  close(fd);
  if (rc) return rc;
  unsigned char digest[32];
  store_sha256_final(&c, digest, hex);
  *bytes = total;
  return 0;
}

static int plan_file(RegistryFile *f, const char *name, const char *path, Err *err) {
  snprintf(f->name, sizeof f->name, "%s", name);
  snprintf(f->path, sizeof f->path, "%s", path);
  return hash_file(path, name, &f->bytes, f->sha256, err);
}

int registry_plan(const Workspace *ws, const char *kind, const char *params_json, RegistryPlan *p, Err *err) {
  memset(p, 0, sizeof *p);
  int dataset = !strcmp(kind, "prepare");
  if (!dataset && strcmp(kind, "tokenizer")) return 1;
  p->dataset = dataset;
  json_t *params = json_loads(params_json, 0, NULL);
  const char *name = json_string_value(json_object_get(params, "name"));
  json_t *input = json_object_get(params, "input");
  json_t *list = json_is_string(input) ? json_pack("[O]", input) : json_incref(input);
  int rc = 0;
  if (!name || !json_is_array(list) || json_array_size(list) < 1 ||
      json_array_size(list) > sizeof p->corpora / sizeof p->corpora[0]) {
    rc = err_setk(err, ERR_INVALID, "the job's description has no name or inputs");
    goto done;
  }
  snprintf(p->name, sizeof p->name, "%s", name);
  size_t i;
  json_t *x;
  json_array_foreach(list, i, x) {
    char path[WORKSPACE_PATH_MAX];
    const char *cn = json_string_value(x);
    if (!cn || workspace_corpus(ws, "input", cn, path, sizeof path, err) ||
        plan_file(&p->corpora[p->n_corpora++], cn, path, err)) {
      if (!cn) err_setk(err, ERR_INVALID, "input: not a name");
      rc = -1;
      goto done;
    }
  }
  if (dataset) {
    const char *tn = json_string_value(json_object_get(params, "tokenizer"));
    char path[WORKSPACE_PATH_MAX];
    if (!tn || workspace_tokenizer(ws, "tokenizer", tn, path, sizeof path, err) || plan_file(&p->tokenizer, tn, path, err)) {
      if (!tn) err_setk(err, ERR_INVALID, "tokenizer: not a name");
      rc = -1;
    }
  }
done:
  json_decref(list);
  json_decref(params);
  return rc;
}

/* A file read by the job is as it was hashed before the job ran. */
static int unchanged(const RegistryFile *f, const char *what, Err *err) {
  uint64_t bytes;
  char hex[65];
  if (hash_file(f->path, f->name, &bytes, hex, err) || bytes != f->bytes || strcmp(hex, f->sha256))
    return err_setk(err, ERR_CONFLICT, "%s %s changed while the job read it", what, f->name);
  return 0;
}

static json_t *corpora_json(const RegistryPlan *p) {
  json_t *a = json_array();
  for (int i = 0; i < p->n_corpora; i++)
    json_array_append_new(a, json_pack("{s:s, s:I, s:s}", "name", p->corpora[i].name, "bytes", (json_int_t)p->corpora[i].bytes,
                                       "sha256", p->corpora[i].sha256));
  return a;
}

/* tokenizer.json in dir: its text (malloc'd, NUL-terminated) and vocabulary size. */
static char *read_tokenizer(const char *dir, int *vocab, Err *err) {
  char path[WORKSPACE_PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  size_t len;
  Err e = {0};
  char *text = files_read_all(path, TOKENIZER_MAX_FILE, &len, &e);
  if (!text) {
    scrub(e.msg, dir);
    err_setk(err, e.kind == ERR_NONE ? ERR_IO : e.kind, "the job's tokenizer.json: %s", e.msg);
    return NULL;
  }
  if (strlen(text) != len) { free(text); err_setk(err, ERR_BAD_INPUT, "the job's tokenizer.json holds a NUL byte"); return NULL; }
  Tokenizer *t = tokenizer_from_json(text, len, &e);
  if (!t) { free(text); err_setk(err, ERR_BAD_INPUT, "the job's tokenizer.json: %s", e.msg); return NULL; }
  *vocab = tokenizer_vocab_size(t);
  tokenizer_free(t);
  return text;
}

/* The shard set in dir: its manifest (checked against the shards, which are read whole
** by the loader) as StoreShards (file names only) pointing into *manifest. */
static StoreShard *read_shards(const char *dir, json_t **manifest, int *n, int *seq_len, Err *err) {
  *manifest = NULL;
  char path[WORKSPACE_PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  Err e = {0};
  Rng seed;
  rng_seed(&seed, 1);
  LoaderOptions lo = loader_default_options(1);
  lo.shuffle = 0;
  lo.drop_last = 0;
  Loader *l = loader_open(dir, &lo, &seed, &e);
  if (!l) {
    scrub(e.msg, dir);
    err_setk(err, ERR_BAD_INPUT, "the job's shard set: %s", e.msg);
    return NULL;
  }
  uint64_t samples = loader_n_samples(l);
  loader_close(l);
  size_t len;
  char *text = files_read_all(path, PREPARE_MAX_MANIFEST, &len, &e);
  json_t *m = text ? json_loads(text, 0, NULL) : NULL;
  free(text);
  json_t *shards = json_object_get(m, "shards");
  const char *split = json_string_value(json_object_get(m, "split"));
  json_int_t L = json_integer_value(json_object_get(m, "seq_len"));
  size_t count = json_array_size(shards);
  StoreShard *out = count ? calloc(count, sizeof *out) : NULL;
  uint64_t sum = 0;
  size_t i;
  json_t *sh;
  int ok = out && split && L > 0 && L <= 1 << 20;
  json_array_foreach(shards, i, sh) {
    if (!ok) break;
    const char *file = json_string_value(json_object_get(sh, "file"));
    json_int_t k = json_integer_value(json_object_get(sh, "samples"));
    ok = file && !strchr(file, '/') && k >= 0;
    if (ok) out[i] = (StoreShard){split, file, k};
    sum += (uint64_t)k;
  }
  if (!ok || sum != samples) {
    free(out);
    json_decref(m);
    err_setk(err, ERR_BAD_INPUT, "the job's manifest.json %s", m ? "does not match its shards" : "cannot be read");
    return NULL;
  }
  *manifest = m;
  *n = (int)count;
  *seq_len = (int)L;
  return out;
}

/* The registered tokenizer name for a file of sha256 hex named name in the job: the
** store's tokenizer of that name when it is that same file, else NULL. */
static const char *registered_tokenizer(Store *s, const char *name, const char *hex) {
  Err e = {0};
  json_t *t = store_tokenizer_info(s, name, &e);
  int same = t && !strcmp(json_string_value(json_object_get(t, "sha256")) ?: "", hex);
  json_decref(t);
  return same ? name : NULL;
}

int registry_register(Store *s, const RegistryPlan *p, const char *out_dir, int64_t job, Err *err) {
  for (int i = 0; i < p->n_corpora; i++)
    if (unchanged(&p->corpora[i], "corpus", err)) return -1;
  if (p->dataset && unchanged(&p->tokenizer, "tokenizer", err)) return -1;
  json_t *source = json_pack("{s:o}", "corpora", corpora_json(p));
  int rc = -1;
  char *src = NULL;
  if (!p->dataset) {
    int vocab = 0;
    char *text = read_tokenizer(out_dir, &vocab, err);
    if (text && (src = json_dumps(source, JSON_COMPACT))) rc = store_tokenizer_add(s, p->name, text, vocab, src, job, err) > 0 ? 0 : -1;
    free(text);
  } else {
    json_t *manifest;
    int n = 0, seq_len = 0;
    StoreShard *shards = read_shards(out_dir, &manifest, &n, &seq_len, err);
    if (shards) {
      json_object_set_new(source, "tokenizer", json_pack("{s:s, s:s}", "name", p->tokenizer.name, "sha256", p->tokenizer.sha256));
      const char *tok = registered_tokenizer(s, p->tokenizer.name, p->tokenizer.sha256);
      if ((src = json_dumps(source, JSON_COMPACT)))
        rc = store_dataset_add(s, p->name, tok, seq_len, shards, n, src, job, err) > 0 ? 0 : -1;
    }
    free(shards);
    json_decref(manifest);
  }
  if (rc && !src && err && !err->msg[0]) err_setk(err, ERR_NOMEM, "out of memory");
  free(src);
  json_decref(source);
  return rc;
}

/* The registered tokenizer whose file has the manifest's tokenizer_hash (prepare's
** FNV-1a of the file), or NULL. name receives it. */
static const char *tokenizer_by_hash(Store *s, const char *want, char *name, size_t cap) {
  if (!want || !*want) return NULL;
  Err e = {0};
  json_t *list = store_tokenizers_list(s, &e);
  size_t i;
  json_t *t;
  const char *found = NULL;
  json_array_foreach(list, i, t) {
    const char *tn = json_string_value(json_object_get(t, "name"));
    char *text = NULL, hash[32];
    if (tn && !store_tokenizer_get(s, tn, &text, NULL, &e) && !prepare_bytes_hash(text, strlen(text), hash, sizeof hash, &e) &&
        !strcmp(hash, want)) {
      snprintf(name, cap, "%s", tn);
      found = name;
    }
    free(text);
    if (found) break;
  }
  json_decref(list);
  return found;
}

int registry_adopt(Store *s, const char *kind, const char *name, const char *dir, Err *err) {
  int dataset = !strcmp(kind, "datasets");
  Err e = {0};
  json_t *known = dataset ? store_dataset_get(s, name, &e) : store_tokenizer_info(s, name, &e);
  json_decref(known);
  if (known) return 0;
  if (e.kind != ERR_NOT_FOUND) return err_setk(err, e.kind, "%s", e.msg);
  if (!dataset) {
    int vocab = 0;
    char *text = read_tokenizer(dir, &vocab, err);
    int rc = text && store_tokenizer_add(s, name, text, vocab, NULL, 0, err) > 0 ? 0 : -1;
    free(text);
    return rc;
  }
  json_t *manifest;
  int n = 0, seq_len = 0;
  StoreShard *shards = read_shards(dir, &manifest, &n, &seq_len, err);
  if (!shards) return -1;
  char tn[160];
  const char *tok = tokenizer_by_hash(s, json_string_value(json_object_get(manifest, "tokenizer_hash")), tn, sizeof tn);
  int rc = store_dataset_add(s, name, tok, seq_len, shards, n, NULL, 0, err) > 0 ? 0 : -1;
  free(shards);
  json_decref(manifest);
  return rc;
}
