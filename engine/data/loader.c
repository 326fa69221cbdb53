#include "engine/core/json_text.h"
#include "engine/data/loader.h"
#include "engine/core/files.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/prepare.h"
#include "engine/data/shards.h"

struct Loader {
  LoaderOptions opt;
  Shard **shards;
  int n_shards;
  uint64_t *start;       /* start[i] = first global sample index of shard i; start[n] = N */
  uint64_t n_samples;
  uint32_t seq_len, vocab_size;
  uint64_t per_epoch;
  char tokenizer_hash[128];
  uint32_t *perm;        /* this epoch's order (NULL when not shuffling) */
  uint64_t perm_epoch;   /* the epoch perm was built for */
  int perm_valid;
  LoaderState st;
};

LoaderOptions loader_default_options(int batch) {
  LoaderOptions o = {batch, 1, 1, 0, 0, 1, 0, 0};
  return o;
}

void loader_close(Loader *l) {
  if (!l) return;
  for (int i = 0; i < l->n_shards; i++) shard_close(l->shards[i]);
  free(l->shards);
  free(l->start);
  free(l->perm);
  free(l);
}

static int add_shard(Loader *l, const char *path, Err *err) {
  Shard *s = shard_open(path, err);
  if (!s) return -1;
  Shard **ns = realloc(l->shards, (size_t)(l->n_shards + 1) * sizeof *ns);
  if (!ns) { shard_close(s); return err_set(err, "out of memory"); }
  l->shards = ns;
  l->shards[l->n_shards++] = s;
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every *.shard in dir, sorted by name, as one split numbered 0..n-1. */
static int open_dir_glob(Loader *l, const char *dir, Err *err) {
  DIR *d = opendir(dir);
  if (!d) return err_set(err, "%s: cannot open directory: %s", dir, strerror(errno));
  char **names = NULL;
  int n = 0, rc = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 6, ".shard") != 0) continue;
    char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
    char *copy = strdup(e->d_name);
    if (!nn || !copy) { free(copy); if (nn) names = nn; rc = err_set(err, "out of memory"); break; }
    names = nn;
    names[n++] = copy;
  }
  closedir(d);
  if (rc == 0 && n == 0) rc = err_set(err, "%s: no manifest.json and no .shard files", dir);
  if (rc == 0) qsort(names, (size_t)n, sizeof *names, cmp_str);
  size_t split0 = 0;
  for (int i = 0; rc == 0 && i < n; i++) {
    size_t split_len;
    int index;
    if (shard_parse_name(names[i], &split_len, &index, NULL) != 0) {
      rc = err_set(err, "%s/%s: shard file name must end in -<index>-samples-<count>.shard", dir, names[i]);
      break;
    }
    if (i == 0) split0 = split_len;
    if (split_len != split0 || strncmp(names[i], names[0], split0) != 0) {
      rc = err_set(err, "%s: holds shards of two splits (%.*s, %.*s); give a manifest or one split per directory",
                   dir, (int)split0, names[0], (int)split_len, names[i]);
      break;
    }
    if (index != i) {
      rc = err_set(err, "%s: shard index %d of split '%.*s' is missing (found %s)", dir, i, (int)split0, names[0], names[i]);
      break;
    }
    char *p = files_join(dir, names[i]);
    if (!p) { rc = err_set(err, "out of memory"); break; }
    rc = add_shard(l, p, err);
    free(p);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}

/* The manifest prepare writes (engine/data/prepare.h): the listed shards, checked against it. */
static int open_manifest(Loader *l, const char *path, Err *err) {
  json_error_t je;
  size_t len;
  char *text = files_read_all(path, PREPARE_MAX_MANIFEST, &len, err);
  if (!text) return -1;
  json_t *m = json_loadb(text, len, 0, &je);
  free(text);
  if (!m) return err_set(err, "%s: not valid JSON: %s (line %d)", path, json_error_message(&je), je.line);
  int rc = 0;
  const char *format = json_string_value(json_object_get(m, "format"));
  json_t *shards = json_object_get(m, "shards");
  json_t *jseq = json_object_get(m, "seq_len"), *jvocab = json_object_get(m, "vocab_size");
  json_t *jtotal = json_object_get(m, "total_samples"), *jver = json_object_get(m, "version");
  if (!format || strcmp(format, "maskd-shards") != 0) rc = err_set(err, "%s: not a maskd shard manifest (format)", path);
  else if (!json_is_integer(jver) || json_integer_value(jver) != 1) rc = err_set(err, "%s: manifest version is not 1", path);
  else if (!json_is_array(shards)) rc = err_set(err, "%s: manifest has no \"shards\" list", path);
  else if (!json_is_integer(jseq) || !json_is_integer(jvocab) || !json_is_integer(jtotal))
    rc = err_set(err, "%s: manifest lacks seq_len, vocab_size or total_samples", path);
  if (rc == 0 && json_array_size(shards) == 0) rc = err_set(err, "%s: manifest lists no shards", path);
  const char *hash = json_string_value(json_object_get(m, "tokenizer_hash"));
  if (rc == 0 && hash) snprintf(l->tokenizer_hash, sizeof l->tokenizer_hash, "%s", hash);

  char *dir = strdup(path);
  if (!dir) rc = err_set(err, "out of memory");
  else { char *slash = strrchr(dir, '/'); if (slash) *slash = '\0'; else strcpy(dir, "."); }
  uint64_t sum = 0;
  for (size_t i = 0; rc == 0 && i < json_array_size(shards); i++) {
    json_t *s = json_array_get(shards, i);
    const char *file = json_string_value(json_object_get(s, "file"));
    json_t *js = json_object_get(s, "samples");
    /* Each entry's checksum (FNV-1a 64 of the tokens, 16 hex digits: prepare has always
    ** written it) is the shard's own: a shard of the same size from another set, copied
    ** in under this name, is refused rather than trained on. */
    const char *sum_hex = json_string_value(json_object_get(s, "checksum"));
    char *end = NULL;
    uint64_t want = 0;
    if (sum_hex && strlen(sum_hex) == 16 && isxdigit((unsigned char)sum_hex[0])) want = strtoull(sum_hex, &end, 16);
    if (!file || !json_is_integer(js) || strchr(file, '/')) { rc = err_set(err, "%s: shard entry %zu lacks a plain file name or samples", path, i); break; }
    if (!end || *end) { rc = err_set(err, "%s: shard entry %zu (%s) lacks its checksum (16 hex digits)", path, i, file); break; }
    char *p = files_join(dir, file);
    if (!p) { rc = err_set(err, "out of memory"); break; }
    rc = add_shard(l, p, err);
    if (rc == 0 && shard_info(l->shards[l->n_shards - 1])->n_samples != (uint64_t)json_integer_value(js))
      rc = err_set(err, "%s: manifest says %" JSON_INTEGER_FORMAT " samples, the shard holds %" PRIu64, p,
                   json_integer_value(js), shard_info(l->shards[l->n_shards - 1])->n_samples);
    if (rc == 0 && shard_info(l->shards[l->n_shards - 1])->checksum != want)
      rc = err_set(err, "%s: differs from the manifest (checksum %016" PRIx64 ", the manifest's %s): a shard of another set?", p,
                   shard_info(l->shards[l->n_shards - 1])->checksum, sum_hex);
    free(p);
    if (rc == 0) sum += (uint64_t)json_integer_value(js);
  }
  if (rc == 0 && sum != (uint64_t)json_integer_value(jtotal))
    rc = err_set(err, "%s: total_samples %" JSON_INTEGER_FORMAT " != %" PRIu64 " summed over the shards", path, json_integer_value(jtotal), sum);
  if (rc == 0) {
    const ShardInfo *h = shard_info(l->shards[0]);
    if ((uint64_t)json_integer_value(jseq) != h->seq_len || (uint64_t)json_integer_value(jvocab) != h->vocab_size)
      rc = err_set(err, "%s: manifest seq_len/vocab_size %" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " differ from the shards' %" PRIu32 "/%" PRIu32,
                   path, json_integer_value(jseq), json_integer_value(jvocab), h->seq_len, h->vocab_size);
  }
  free(dir);
  json_decref(m);
  return rc;
}

static uint64_t div_up(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

Loader *loader_open(const char *path, const LoaderOptions *opt, const Rng *seed, Err *err) {
  if (opt->batch <= 0) { err_set(err, "batch size %d must be > 0", opt->batch); return NULL; }
  if (opt->world <= 0 || opt->rank < 0 || opt->rank >= opt->world) { err_set(err, "rank %d of %d is invalid", opt->rank, opt->world); return NULL; }
  Loader *l = calloc(1, sizeof *l);
  if (!l) { err_set(err, "out of memory"); return NULL; }
  l->opt = *opt;
  l->st.rng = *seed;

  struct stat st;
  int rc;
  if (stat(path, &st) != 0) rc = err_set(err, "%s: cannot open shard set: %s", path, strerror(errno));
  else if (S_ISDIR(st.st_mode)) {
    char *m = files_join(path, "manifest.json");
    struct stat ms;
    if (!m) rc = err_set(err, "out of memory");
    else if (stat(m, &ms) == 0) rc = open_manifest(l, m, err);
    else rc = open_dir_glob(l, path, err);
    free(m);
  } else {
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".json") == 0) rc = open_manifest(l, path, err);
    else rc = add_shard(l, path, err);
  }
  if (rc == 0) {
    const ShardInfo *h0 = shard_info(l->shards[0]);
    l->seq_len = h0->seq_len;
    l->vocab_size = h0->vocab_size;
    for (int i = 1; rc == 0 && i < l->n_shards; i++) {
      const ShardInfo *h = shard_info(l->shards[i]);
      if (h->seq_len != l->seq_len || h->vocab_size != l->vocab_size)
        rc = err_set(err, "%s: sequence length/vocabulary %" PRIu32 "/%" PRIu32 " differ from %s's %" PRIu32 "/%" PRIu32,
                     shard_path(l->shards[i]), h->seq_len, h->vocab_size, shard_path(l->shards[0]), l->seq_len, l->vocab_size);
    }
  }
  if (rc == 0 && opt->seq_len && opt->seq_len != l->seq_len)
    rc = err_set(err, "%s: shards have sequence length %" PRIu32 ", expected %" PRIu32, path, l->seq_len, opt->seq_len);
  if (rc == 0 && opt->vocab_size && opt->vocab_size != l->vocab_size)
    rc = err_set(err, "%s: shards have vocabulary size %" PRIu32 ", the tokenizer %" PRIu32, path, l->vocab_size, opt->vocab_size);
  if (rc == 0 && !opt->drop_last && (opt->pad_id < 0 || (uint32_t)opt->pad_id >= l->vocab_size))
    rc = err_set(err, "pad id %d is outside the vocabulary [0, %" PRIu32 ")", (int)opt->pad_id, l->vocab_size);
  if (rc == 0) {
    l->start = malloc((size_t)(l->n_shards + 1) * sizeof *l->start);
    if (!l->start) rc = err_set(err, "out of memory");
  }
  if (rc == 0) {
    for (int i = 0; i < l->n_shards; i++) { l->start[i] = l->n_samples; l->n_samples += shard_info(l->shards[i])->n_samples; }
    l->start[l->n_shards] = l->n_samples;
    uint64_t global = (uint64_t)opt->batch * (uint64_t)opt->world;
    l->per_epoch = opt->drop_last ? l->n_samples / global : div_up(l->n_samples, global);
    if (l->n_samples > UINT32_MAX) rc = err_set(err, "%s: %" PRIu64 " samples is more than this loader indexes", path, l->n_samples);
    else if (l->per_epoch == 0)
      rc = err_set(err, "%s: %" PRIu64 " samples make no full batch of %d x %d ranks", path, l->n_samples, opt->batch, opt->world);
  }
  if (rc == 0 && opt->shuffle) {
    l->perm = malloc((size_t)l->n_samples * sizeof *l->perm);
    if (!l->perm) rc = err_set(err, "out of memory");
  }
  if (rc != 0) { loader_close(l); return NULL; }
  return l;
}

uint32_t loader_seq_len(const Loader *l) { return l->seq_len; }
uint32_t loader_vocab_size(const Loader *l) { return l->vocab_size; }
uint64_t loader_n_samples(const Loader *l) { return l->n_samples; }
int loader_n_shards(const Loader *l) { return l->n_shards; }

uint64_t loader_set_id(const Loader *l) {
  uint64_t h = SHARD_FNV_INIT;
  for (int i = 0; i < l->n_shards; i++) {
    const ShardInfo *info = shard_info(l->shards[i]);
    h = shard_fnv1a64(h, &info->checksum, sizeof info->checksum);
    h = shard_fnv1a64(h, &info->n_samples, sizeof info->n_samples);
  }
  return h;
}
uint64_t loader_batches_per_epoch(const Loader *l) { return l->per_epoch; }
const char *loader_tokenizer_hash(const Loader *l) { return l->tokenizer_hash; }

/* Builds epoch e's permutation: Fisher-Yates from the identity, driven by its own stream. */
static void build_perm(Loader *l, uint64_t epoch) {
  Rng r = rng_split(&l->st.rng, epoch);
  uint32_t n = (uint32_t)l->n_samples;
  for (uint32_t i = 0; i < n; i++) l->perm[i] = i;
  for (uint32_t i = n - 1; i > 0; i--) {
    uint32_t j = rng_below(&r, i + 1);
    uint32_t t = l->perm[i]; l->perm[i] = l->perm[j]; l->perm[j] = t;
  }
  l->perm_epoch = epoch;
  l->perm_valid = 1;
}

static void copy_sample(const Loader *l, uint64_t g, int32_t *out) {
  int lo = 0, hi = l->n_shards - 1;  /* the shard with start[i] <= g < start[i+1] */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (l->start[mid] <= g) lo = mid; else hi = mid - 1;
  }
  shard_sample(l->shards[lo], g - l->start[lo], out);
}

int loader_next(Loader *l, int32_t *ids, int32_t *attn) { return loader_next_samples(l, ids, attn, NULL); }

int loader_next_samples(Loader *l, int32_t *ids, int32_t *attn, int64_t *samples) {
  if (l->st.batch >= l->per_epoch) { l->st.epoch++; l->st.batch = 0; }
  if (l->opt.shuffle && (!l->perm_valid || l->perm_epoch != l->st.epoch)) build_perm(l, l->st.epoch);
  uint64_t B = (uint64_t)l->opt.batch, L = l->seq_len;
  uint64_t first = (l->st.batch * (uint64_t)l->opt.world + (uint64_t)l->opt.rank) * B;
  int real = 0;
  for (uint64_t r = 0; r < B; r++) {
    uint64_t k = first + r;
    int32_t *row = ids + r * L;
    if (k < l->n_samples) {
      uint64_t g = l->opt.shuffle ? l->perm[k] : k;
      copy_sample(l, g, row);
      if (samples) samples[r] = (int64_t)g;
      if (attn) for (uint64_t t = 0; t < L; t++) attn[r * L + t] = 1;
      real++;
    } else {
      if (samples) samples[r] = -1;
      for (uint64_t t = 0; t < L; t++) row[t] = l->opt.pad_id;
      if (attn) for (uint64_t t = 0; t < L; t++) attn[r * L + t] = 0;
    }
  }
  l->st.batch++;
  return real;
}

void loader_get_state(const Loader *l, LoaderState *st) { *st = l->st; }

int loader_set_state(Loader *l, const LoaderState *st, Err *err) {
  if (st->batch > l->per_epoch)
    return err_set(err, "loader state: batch %" PRIu64 " is past the %" PRIu64 " batches of an epoch", st->batch, l->per_epoch);
  l->st = *st;
  l->perm_valid = 0;
  return 0;
}

void loader_state_pack(const LoaderState *st, uint64_t out[LOADER_STATE_WORDS]) {
  out[0] = st->epoch;
  out[1] = st->batch;
  for (int i = 0; i < 4; i++) out[2 + i] = st->rng.s[i];
}

void loader_state_unpack(const uint64_t in[LOADER_STATE_WORDS], LoaderState *st) {
  st->epoch = in[0];
  st->batch = in[1];
  for (int i = 0; i < 4; i++) st->rng.s[i] = in[2 + i];
}
