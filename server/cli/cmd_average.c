/* maskd average: the uniform average of two or more revisions' weights (a "model soup",
** Wortsman et al. 2022), pushed as the first revision of a new repository.
**
** What it averages must be one model: the same config.json (architecture, labels,
** dropout), the same tokenizer and side files, the same tensors with the same shapes;
** fine-tuning runs of one plan that differ only in their dropout masks
** (maskd finetune --dropout-seed) stay in one basin of the loss, so their average is a
** model, often better than each (BENCHMARKS.md, issue 16). Every element is summed in
** double precision in the order the revisions are given, divided by their count and
** rounded to float32: numpy's float64 mean of the float32 tensors, bit for bit
** (scripts/average-weights, the test's reference).
**
** Memory: the weights stream from the store a piece at a time (a second connection
** reads, pinned against a training run's collection of dropped blobs) into the new
** blob as it is written, so averaging base models holds no model in memory. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/io/safetensors.h"
#include "engine/nn/config.h"
#include "server/cli/commands.h"
#include "store/store.h"

/* The most revisions one average takes (each is an open reader and a pin). */
#define AVG_MAX_INPUTS 64
/* The longest revision message the store keeps (StoreRevision.message). */
#define AVG_MESSAGE_MAX ((int)sizeof(((StoreRevision *)0)->message) - 1)
/* Elements averaged at a time: what one read of each source and the write carry. */
#define AVG_CHUNK (1 << 16)

typedef struct AvgArgs {
  const char *db, *name, *message;
  int json, quiet;
} AvgArgs;

static void avg_defaults(void *p) { memset(p, 0, sizeof(AvgArgs)); }

static const CliOpt avg_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = offsetof(AvgArgs, db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--name", .kind = CLI_STRING, .off = offsetof(AvgArgs, name), .arg = "NEW",
   .help = "the new model repository (a name no repository has yet)"},
  {.name = "--message", .kind = CLI_STRING, .off = offsetof(AvgArgs, message), .arg = "TEXT",
   .def = "Average of NAME@REV, ...", .help = "the revision's message"},
  {.name = "--json", .kind = CLI_FLAG, .off = offsetof(AvgArgs, json), .help = "print a JSON summary on stdout"},
  {.name = "--quiet", .kind = CLI_FLAG, .off = offsetof(AvgArgs, quiet), .help = "print nothing on success"},
};

const CliSpec cli_spec_average = {
  .name = "average",
  .usage =
    "usage: maskd average [--db PATH] --name NEW [--message TEXT] [--json] NAME@REV NAME@REV [NAME@REV...]\n"
    "Averages the weights of two or more revisions tensor by tensor (a uniform \"model soup\") and\n"
    "pushes the average as the first revision of the new repository NEW (also NEW@best). The\n"
    "revisions must be one model: the same config.json (labels and dropout included), the same\n"
    "tokenizer files and tensors; for instance the best revisions of fine-tuning runs of one plan\n"
    "that differ only in --dropout-seed, or a run's last epochs. Each element is summed in double\n"
    "precision in the order given, divided by the count and rounded to float32 (numpy's float64\n"
    "mean). REV: main, best, a revision number or a commit. The weights stream from the store;\n"
    "no model is held in memory whole.\n",
  .opts = avg_opts,
  .n_opts = (int)(sizeof avg_opts / sizeof avg_opts[0]),
  .positional = -1,
  .args_size = sizeof(AvgArgs),
  .defaults = avg_defaults,
  .col = 17,
};

/* One input: its revision, its weights read in place through a pinned blob reader. */
typedef struct AvgInput {
  const char *spec;
  StoreRevision rev;
  char pin[65];
  StoreBlobReader *reader;
  StFile *weights;
} AvgInput;

typedef struct Avg {
  AvgInput in[AVG_MAX_INPUTS];
  int n;
  Store *rd;                     /* the reading connection (the push writes through another) */
  StWriteTensor *out;            /* the new file's tensors: input 0's names and shapes, F32 */
  int n_out;
  const char **meta;             /* input 0's __metadata__ pairs */
  int n_meta;
  double *acc;                   /* AVG_CHUNK sums */
  float *piece, *mean;           /* one source's AVG_CHUNK floats; the rounded means */
} Avg;

static int blob_source_read(void *ctx, uint64_t offset, void *dst, size_t n, Err *err) {
  return store_blob_read(ctx, offset, dst, n, err);
}

/* "the config.json of a@3 and b@5 differ in \"num_labels\"" (the first key, in a's order, or one only b has). */
static void config_difference(json_t *a, json_t *b, const char **key) {
  const char *k;
  json_t *v;
  *key = NULL;
  json_object_foreach(a, k, v) {
    if (!json_equal(v, json_object_get(b, k))) { *key = k; return; }
  }
  json_object_foreach(b, k, v) {
    if (!json_object_get(a, k)) { *key = k; return; }
  }
}

/* A revision's file as text (store_revision_file's bytes end in a NUL); *absent = 1 (and 0
** returned) for a side file the revision was pushed without, when absent is given. */
static int revision_text(Store *s, const StoreRevision *r, const char *file, char **text, size_t *len, int *absent,
                         Err *err) {
  Err e = {0};
  void *data = NULL;
  if (absent) *absent = 0;
  int rc = store_revision_file(s, r, file, &data, len, &e);
  *text = data;
  if (rc && absent && e.kind == ERR_NOT_FOUND) { *absent = 1; return 0; }
  if (rc) *err = e;
  return rc;
}

/* The input's config.json, side files and tokenizer against input 0's: the same, or an
** error naming the two revisions and what differs. */
static int same_model(Store *s, const AvgInput *a, const AvgInput *b, json_t *a_cfg, Err *err) {
  char *text = NULL;
  size_t len;
  if (revision_text(s, &b->rev, "config.json", &text, &len, NULL, err)) return err_prefix(err, b->spec);
  json_error_t je;
  json_t *b_cfg = json_loadb(text, len, 0, &je);
  free(text);
  if (!b_cfg) return err_setk(err, ERR_INTERNAL, "%s: stored config.json: %s", b->spec, je.text);
  const char *key = NULL;
  config_difference(a_cfg, b_cfg, &key);
  int rc = 0;
  if (key)
    rc = err_setk(err, ERR_INVALID, "%s and %s are not one model: their config.json differ in \"%s\"", a->spec, b->spec, key);
  json_decref(b_cfg);
  if (rc) return rc;
  if (strcmp(a->rev.tokenizer, b->rev.tokenizer))
    return err_setk(err, ERR_INVALID, "%s and %s are not one model: their tokenizer.json differ", a->spec, b->spec);
  static const char *const side[] = {"tokenizer_config.json", "special_tokens_map.json"};
  for (int i = 0; i < 2; i++) {
    char *ta = NULL, *tb = NULL;
    size_t la, lb;
    int na, nb;
    if (revision_text(s, &a->rev, side[i], &ta, &la, &na, err)) return err_prefix(err, a->spec);
    if (revision_text(s, &b->rev, side[i], &tb, &lb, &nb, err)) { free(ta); return err_prefix(err, b->spec); }
    int differ = na != nb || la != lb || (ta && tb && memcmp(ta, tb, la));
    free(ta); free(tb);
    if (differ) return err_setk(err, ERR_INVALID, "%s and %s are not one model: their %s differ", a->spec, b->spec, side[i]);
  }
  return 0;
}

/* Opens input x's weights in place (pinned first: a revision dropped meanwhile keeps its blob
** until the average is written). */
static int open_weights(Store *rd, AvgInput *x, Err *err) {
  if (store_blob_pin(rd, x->rev.weights, x->pin, err)) return err_prefix(err, x->spec);
  uint64_t len = 0;
  if (!(x->reader = store_blob_open(rd, x->rev.weights, &len, err))) return err_prefix(err, x->spec);
  StSource src = {blob_source_read, x->reader, len};
  if (!(x->weights = st_open_source(&src, err))) return err_prefix(err, x->spec);
  return 0;
}

/* Every tensor of input x is F32, as the store keeps weights (the average is taken of those numbers). */
static int all_f32(const AvgInput *x, Err *err) {
  for (int i = 0; i < st_count(x->weights); i++) {
    const StTensor *t = st_tensor(x->weights, i);
    if (t->dtype != ST_F32)
      return err_setk(err, ERR_INVALID, "%s: tensor %s is %s; only F32 weights are averaged", x->spec, t->name,
                      st_dtype_name(t->dtype));
  }
  return 0;
}

/* Input x holds input 0's tensors, by name, with the same shapes, and no other. */
static int same_tensors(const AvgInput *a, const AvgInput *x, Err *err) {
  if (st_count(x->weights) != st_count(a->weights))
    return err_setk(err, ERR_INVALID, "%s and %s are not one model: %d tensors against %d", a->spec, x->spec,
                    st_count(a->weights), st_count(x->weights));
  for (int i = 0; i < st_count(a->weights); i++) {
    const StTensor *t = st_tensor(a->weights, i), *u = st_find(x->weights, t->name);
    if (!u) return err_setk(err, ERR_INVALID, "%s has no tensor %s, which %s has", x->spec, t->name, a->spec);
    int same = u->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = u->shape[d] == t->shape[d];
    if (!same) return err_setk(err, ERR_INVALID, "%s and %s are not one model: %s has other shapes", a->spec, x->spec, t->name);
  }
  return 0;
}

/* st_serialize_stream's fill: tensor t's mean, AVG_CHUNK elements at a time. */
static int fill_mean(void *ctx, const StWriteTensor *t, StWriteFn write, void *write_ctx, Err *err) {
  Avg *g = ctx;
  const StTensor *src[AVG_MAX_INPUTS];
  for (int i = 0; i < g->n; i++)
    if (!(src[i] = st_find(g->in[i].weights, t->name))) return err_setk(err, ERR_INTERNAL, "tensor %s vanished", t->name);
  int64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
  for (int64_t first = 0; first < numel; first += AVG_CHUNK) {
    int64_t count = numel - first < AVG_CHUNK ? numel - first : AVG_CHUNK;
    for (int64_t j = 0; j < count; j++) g->acc[j] = 0.0;
    for (int i = 0; i < g->n; i++) {
      if (st_read_f32_range(g->in[i].weights, src[i], first, count, g->piece, err)) return err_prefix(err, g->in[i].spec);
      for (int64_t j = 0; j < count; j++) g->acc[j] += (double)g->piece[j];
    }
    for (int64_t j = 0; j < count; j++) g->mean[j] = (float)(g->acc[j] / (double)g->n);
    if (write(write_ctx, g->mean, (size_t)count * sizeof(float), err)) return -1;
  }
  return 0;
}

/* The push's stream: the new model.safetensors, then every source checked against its
** sha256 (a damaged chunk fails the push, which then stores nothing). */
static int produce_mean(void *ctx, StoreBlobWriter *w, Err *err) {
  Avg *g = ctx;
  if (st_serialize_stream(g->out, g->n_out, g->meta, g->n_meta, fill_mean, g, store_blob_sink, w, err)) return -1;
  for (int i = 0; i < g->n; i++)
    if (store_blob_verify(g->in[i].reader, err)) return err_prefix(err, g->in[i].spec);
  return 0;
}

static void avg_free(Avg *g) {
  for (int i = 0; i < g->n; i++) {
    st_close(g->in[i].weights);
    store_blob_close(g->in[i].reader);
    if (g->in[i].pin[0]) store_blob_unpin(g->rd, g->in[i].pin);
  }
  free(g->out); free(g->meta); free(g->acc); free(g->piece); free(g->mean);
}

static int do_average(const AvgArgs *a, const char **specs, int n, StoreRevision *made, Err *err) {
  Avg g;
  memset(&g, 0, sizeof g);
  Store *s = NULL;
  json_t *cfg0 = NULL;
  char *cfg_text = NULL, *tok_text = NULL, *side[2] = {NULL, NULL}, *msg = NULL;
  int rc = -1;
  if (!(s = cli_store_open_existing(a->db, err)) || !(g.rd = store_open(cli_db_path(a->db), err))) goto done;
  /* A new repository (the push refuses one that exists: StorePush.new_repo), and no run's
  ** name, whose pushes would land beside the average. A name of digits only is no run's. */
  {
    Err e = {0};
    int64_t run = a->name[strspn(a->name, "0123456789")] ? store_run_find(s, a->name, &e) : -1;
    if (run < 0 && e.kind != ERR_NOT_FOUND && e.kind != ERR_NONE) { *err = e; goto done; }
    if (run > 0) {
      err_setk(err, ERR_CONFLICT, "--name: %s is a training run's name, and its repository's; the average goes to a new one",
               a->name);
      goto done;
    }
  }
  for (int i = 0; i < n; i++) {
    AvgInput *x = &g.in[i];
    x->spec = specs[i];
    if (store_resolve(s, specs[i], &x->rev, err)) { err_prefix(err, specs[i]); goto done; }
    g.n = i + 1;
    if (!x->rev.weights[0]) { err_setk(err, ERR_INVALID, "%s has no weights", specs[i]); goto done; }
    if (!x->rev.tokenizer[0]) { err_setk(err, ERR_INVALID, "%s has no tokenizer; a model to average needs one", specs[i]); goto done; }
    /* One revision given twice, or the same weights under two names (imports of one folder), would count twice. */
    for (int j = 0; j < i; j++) {
      if (g.in[j].rev.id == x->rev.id)
        err_setk(err, ERR_INVALID, "%s and %s are one revision (%s@%lld); give each once", g.in[j].spec, specs[i],
                 x->rev.model, (long long)x->rev.seq);
      else if (!strcmp(g.in[j].rev.weights, x->rev.weights))
        err_setk(err, ERR_INVALID, "%s and %s hold the same weights; give each once", g.in[j].spec, specs[i]);
      else continue;
      goto done;
    }
  }
  size_t len;
  if (revision_text(s, &g.in[0].rev, "config.json", &cfg_text, &len, NULL, err)) { err_prefix(err, specs[0]); goto done; }
  json_error_t je;
  if (!(cfg0 = json_loadb(cfg_text, len, 0, &je))) { err_setk(err, ERR_INTERNAL, "%s: stored config.json: %s", specs[0], je.text); goto done; }
  for (int i = 1; i < n; i++)
    if (same_model(s, &g.in[0], &g.in[i], cfg0, err)) goto done;
  for (int i = 0; i < n; i++)
    if (open_weights(g.rd, &g.in[i], err) || all_f32(&g.in[i], err) || (i && same_tensors(&g.in[0], &g.in[i], err))) goto done;

  /* The new file: input 0's tensors (F32), its metadata; sizes known before a byte is read. */
  const StFile *f0 = g.in[0].weights;
  g.n_out = st_count(f0);
  g.n_meta = st_metadata_count(f0);
  if (!(g.out = calloc((size_t)g.n_out + 1, sizeof *g.out)) || !(g.meta = calloc(2 * (size_t)g.n_meta + 1, sizeof *g.meta)) ||
      !(g.acc = malloc(AVG_CHUNK * sizeof *g.acc)) || !(g.piece = malloc(AVG_CHUNK * sizeof *g.piece)) ||
      !(g.mean = malloc(AVG_CHUNK * sizeof *g.mean))) {
    err_setk(err, ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < g.n_out; i++) {
    const StTensor *t = st_tensor(f0, i);
    g.out[i].name = t->name;
    g.out[i].dtype = ST_F32;
    g.out[i].ndim = t->ndim;
    memcpy(g.out[i].shape, t->shape, sizeof t->shape);
  }
  for (int i = 0; i < g.n_meta; i++) st_metadata_at(f0, i, &g.meta[2 * i], &g.meta[2 * i + 1]);
  size_t bytes;
  if (st_serialized_size(g.out, g.n_out, g.meta, g.n_meta, &bytes, err)) goto done;

  size_t tok_len, side_len[2];
  int absent[2];
  if (revision_text(s, &g.in[0].rev, "tokenizer.json", &tok_text, &tok_len, NULL, err) ||
      revision_text(s, &g.in[0].rev, "tokenizer_config.json", &side[0], &side_len[0], &absent[0], err) ||
      revision_text(s, &g.in[0].rev, "special_tokens_map.json", &side[1], &side_len[1], &absent[1], err)) {
    err_prefix(err, specs[0]);
    goto done;
  }
  /* "Average of a@best (1f2e3d4c), b@best (...)": what went in, by the names given and
  ** commits, as many as a revision's message holds (AVG_MESSAGE_MAX), then "and N more". */
  if (!(msg = malloc(AVG_MESSAGE_MAX + 1))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  if (a->message) snprintf(msg, (size_t)AVG_MESSAGE_MAX + 1, "%s", a->message);
  else {
    size_t at = (size_t)snprintf(msg, AVG_MESSAGE_MAX + 1, "Average of");
    for (int i = 0; i < n; i++) {
      char item[AVG_MESSAGE_MAX + 1], more[32];
      int n_item = snprintf(item, sizeof item, "%s %s (%.8s)", i ? "," : "", specs[i], g.in[i].rev.commit);
      int rest = i + 1 < n ? snprintf(more, sizeof more, " and %d more", n - i - 1) : 0;
      if (n_item < 0 || at + (size_t)n_item + (size_t)rest > AVG_MESSAGE_MAX) {
        snprintf(msg + at, AVG_MESSAGE_MAX + 1 - at, i ? " and %d more" : " %d revisions", n - i);
        break;
      }
      memcpy(msg + at, item, (size_t)n_item + 1);
      at += (size_t)n_item;
    }
  }
  StoreStream stream = {bytes, produce_mean, &g};
  /* A new repository (checked again under the push's lock: another push may have made it
  ** meanwhile), whose best (NAME@best, as a fine-tuning run's) is this revision. */
  StorePush p = {.message = msg, .config_json = cfg_text, .weights_stream = &stream, .tokenizer_json = tok_text,
                 .tokenizer_config_json = side[0], .special_tokens_map_json = side[1], .new_repo = 1, .best = 1};
  if (store_push(s, a->name, &p, made, err)) {
    if (err->kind == ERR_CONFLICT) err_setk(err, ERR_CONFLICT, "--name: a repository named %s exists; the average goes to a new one", a->name);
    goto done;
  }
  rc = 0;
done:
  avg_free(&g);
  json_decref(cfg0);
  free(cfg_text); free(tok_text); free(side[0]); free(side[1]); free(msg);
  store_close(g.rd);
  store_close(s);
  return rc;
}

int cmd_average(int argc, char **argv) {
  AvgArgs a;
  avg_defaults(&a);
  const char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (!pos) { fprintf(stderr, "maskd average: out of memory\n"); return 1; }
  int np = 0;
  int parsed = cli_parse(&cli_spec_average, "average", -1, argc, argv, 1, &a, pos, &np);
  if (parsed) { free(pos); return parsed > 0 ? 0 : 2; }
  int status = 2;
  Err err = {0};
  if (!a.name) fprintf(stderr, "maskd average: --name is required (the new model repository)\n");
  else if (np < 2) fprintf(stderr, "maskd average: expected two or more revisions, NAME@REV NAME@REV ... (maskd average --help)\n");
  else if (np > AVG_MAX_INPUTS) fprintf(stderr, "maskd average: at most %d revisions, got %d\n", AVG_MAX_INPUTS, np);
  else if (store_check_new_repo_name("--name", a.name, &err)) fprintf(stderr, "maskd average: %s\n", err.msg);
  else if (a.message && (!*a.message || strlen(a.message) > AVG_MESSAGE_MAX))
    fprintf(stderr, "maskd average: --message: 1 to %d bytes, got %zu\n", AVG_MESSAGE_MAX, strlen(a.message));
  else {
    StoreRevision made;
    status = 1;
    if (do_average(&a, pos, np, &made, &err)) fprintf(stderr, "maskd average: %s\n", err.msg);
    else {
      status = 0;
      if (a.json) {
        json_t *from = json_array();
        for (int i = 0; i < np; i++) json_array_append_new(from, json_string(pos[i]));
        json_t *o = json_pack("{s:s, s:s, s:I, s:o}", "model", made.model, "commit", made.commit, "revision",
                              (json_int_t)made.seq, "averaged", from);
        char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
        if (text) printf("%s\n", text);
        free(text);
        json_decref(o);
      } else if (!a.quiet) {
        printf("averaged %d revisions into %s@%s (revision %lld, also %s@best)\n", np, made.model, made.commit,
               (long long)made.seq, made.model);
      }
    }
  }
  free(pos);
  return status;
}
