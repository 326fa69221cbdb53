/* Pipelines built from a store revision's files (store/load.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/io/checkpoint.h"
#include "engine/nn/config.h"
#include "engine/tok/tokenizer_files.h"
#include "store/load.h"

/* An StSource over a store blob (ctx: its reader). */
static int blob_source_read(void *ctx, uint64_t offset, void *dst, size_t n, Err *err) {
  return store_blob_read(ctx, offset, dst, n, err);
}

/* Revision r's model.safetensors read in place into m: the whole file (head_loaded
** NULL), or a classifier's encoder (ckpt_load_encoder). */
static int load_weights(Store *s, const StoreRevision *r, Model *m, int *head_loaded, Err *err) {
  uint64_t len = 0;
  StoreBlobReader *w = store_blob_open(s, r->weights, &len, err);
  if (!w) return -1;
  StSource src = {blob_source_read, w, len};
  /* The bytes are checked against their sha256 as store_blob_get would: read front
  ** to back by the load, hashed on the way. */
  int loaded = head_loaded ? ckpt_load_encoder_source(m, &src, head_loaded, err) : ckpt_load_weights_source(m, &src, err);
  int rc = loaded || store_blob_verify(w, err) ? -1 : 0;
  store_blob_close(w);
  return rc;
}

int store_load_weights(Store *s, const StoreRevision *r, Model *m, Err *err) { return load_weights(s, r, m, NULL, err); }

int store_load_encoder(Store *s, const StoreRevision *r, Model *m, int *head_loaded, Err *err) {
  int n = 0;
  return load_weights(s, r, m, head_loaded ? head_loaded : &n, err);
}

int store_load_config(Store *s, const char *spec, StoreRevision *r, ModelConfig *c, Err *err) {
  void *cfg = NULL;
  size_t cfg_len = 0;
  if (store_resolve(s, spec, r, err)) return -1;
  if (store_revision_file(s, r, "config.json", &cfg, &cfg_len, err)) {
    if (err && err->kind != ERR_NOMEM && err->kind != ERR_IO && err->kind != ERR_BUSY) err->kind = ERR_INTERNAL;
    return -1;
  }
  char *cs = malloc(cfg_len + 1);
  if (!cs) { free(cfg); return err_setk(err, ERR_NOMEM, "out of memory"); }
  memcpy(cs, cfg, cfg_len);
  cs[cfg_len] = 0;
  free(cfg);
  int rc = config_parse(cs, c, err);
  free(cs);
  if (rc) {
    err_prefix(err, "config.json");
    if (err && err->kind != ERR_NOMEM) err->kind = ERR_INTERNAL;   /* the store's own bytes */
    return -1;
  }
  return 0;
}

int store_check_repo_task(Store *s, const char *name, ModelTask task, Err *err) {
  StoreRevision r;
  ModelConfig c;
  Err e = {0};
  if (store_load_config(s, name, &r, &c, &e)) {
    if (e.kind == ERR_NOT_FOUND) return 0;
    if (err) *err = e;
    return -1;
  }
  /* Classifiers apart from the rest: a base model (no head, so no pipeline) is the
  ** masked LM's encoder, and may share its repository either way. */
  if ((c.task == MODEL_TASK_SEQ_CLS) == (task == MODEL_TASK_SEQ_CLS)) return 0;
  return err_setk(err, ERR_CONFLICT, "model repository \"%s\" holds a %s (%s@%lld); name another", name,
                  config_architecture(&c), name, (long long)r.seq);
}

/* The model and tokenizer of a store revision ("NAME", "NAME@main", "NAME@N",
** "NAME@<commit>"): its config.json, model.safetensors and tokenizer.json, for a
** pipeline of the task want. A base model's revision (no head) is refused with
** ERR_INVALID, a revision of another task with ERR_BAD_INPUT, both from its config
** (ERR_BAD_INPUT, before any weight is read); the store's own bytes refused (a
** config, weights or tokenizer that does not parse, a blob gone) mean a damaged
** store (ERR_INTERNAL), not a bad request. The weights come through
** store_load_weights, into float or (weights MODEL_BF16) bfloat16 storage. */
static int load_revision(Store *s, const char *spec, ModelTask want, ModelPrecision weights, Model **mp, Tokenizer **tp,
                         Err *err) {
  StoreRevision r;
  void *tj = NULL;
  size_t tj_len = 0;
  Model *m = NULL;
  Tokenizer *t = NULL;
  ModelConfig c;
  int rc = -1;
  *mp = NULL;
  *tp = NULL;
  Err e = {0};
  if (store_load_config(s, spec, &r, &c, &e)) goto done;
  /* An imported base checkpoint (BertModel) has no head for either pipeline. */
  if (c.task == MODEL_TASK_ENCODER) {
    if (want == MODEL_TASK_MLM)
      err_setk(&e, ERR_INVALID, "%s@%lld has no masked-LM head (a %s checkpoint): fine-tune it with maskd finetune; fill-mask needs a *ForMaskedLM model",
               r.model, (long long)r.seq, config_architecture(&c));
    else
      err_setk(&e, ERR_INVALID, "%s@%lld has no classification head (a %s checkpoint): fine-tune it with maskd finetune",
               r.model, (long long)r.seq, config_architecture(&c));
    goto done;
  }
  if (c.task != want) {
    err_setk(&e, ERR_BAD_INPUT, "%s@%s is a %s model (%s), not a %s model", r.model, r.commit,
             c.task == MODEL_TASK_SEQ_CLS ? "text-classification" : "fill-mask", config_architecture(&c),
             want == MODEL_TASK_SEQ_CLS ? "text-classification" : "fill-mask");
    goto done;
  }
  if (!r.tokenizer[0]) { err_setk(&e, ERR_INTERNAL, "%s: revision %s has no tokenizer", r.model, r.commit); goto done; }
  if (store_revision_file(s, &r, "tokenizer.json", &tj, &tj_len, &e)) goto damaged;
  if (!(t = tokenizer_from_json(tj, tj_len, &e))) { err_prefix(&e, "tokenizer.json"); goto damaged; }
  if (!(m = model_new(&c, &e))) goto damaged;
  /* Before the load, so the matrices go straight into their bf16 copy. */
  if (weights == MODEL_BF16 && model_keep_bf16_weights(m, 0, &e)) goto damaged;
  if (store_load_weights(s, &r, m, &e)) {
    err_prefix(&e, "model.safetensors");
    /* Each piece of the weights is read in a transaction of its own: a revision pruned
    ** (keep-last) while they were read is gone, a 404 as if it had gone a moment before,
    ** not a damaged store. A blob missing under a revision that is still there is damage. */
    char by_commit[300];
    StoreRevision again;
    Err gone = {0};
    snprintf(by_commit, sizeof by_commit, "%s@%s", r.model, r.commit);
    if (e.kind == ERR_NOT_FOUND && store_resolve(s, by_commit, &again, &gone) != 0 && gone.kind == ERR_NOT_FOUND) goto done;
    goto damaged;
  }
  *mp = m;
  *tp = t;
  m = NULL;
  t = NULL;
  rc = 0;
  goto done;
damaged:
  if (e.kind != ERR_NOMEM && e.kind != ERR_IO && e.kind != ERR_BUSY) e.kind = ERR_INTERNAL;
done:
  if (rc && err) *err = e;
  model_free(m);
  tokenizer_free(t);
  free(tj);
  return rc;
}

/* What a revision's side files say (an imported model's tokenizer_config.json and
** special_tokens_map.json); maskd's own revisions have none, and their tokenizers'
** family defaults apply ([MASK] or <mask>, clean_up_tokenization_spaces true). */
static int revision_side(Store *s, const StoreRevision *r, TokenizerSide *side, Err *err) {
  void *c = NULL, *m = NULL;
  size_t cl = 0, ml = 0;
  Err e = {0};
  if (store_revision_file(s, r, "tokenizer_config.json", &c, &cl, &e) && e.kind != ERR_NOT_FOUND) goto fail;
  e.kind = ERR_NONE;
  if (store_revision_file(s, r, "special_tokens_map.json", &m, &ml, &e) && e.kind != ERR_NOT_FOUND) goto fail;
  int rc = tokenizer_side_parse(c, cl, m, ml, side, &e);
  free(c);
  free(m);
  if (rc) goto fail2;
  return 0;
fail:
  free(c);
  free(m);
fail2:
  if (e.kind != ERR_NOMEM && e.kind != ERR_IO && e.kind != ERR_BUSY) e.kind = ERR_INTERNAL;   /* the store's own bytes */
  if (err) *err = e;
  return -1;
}

FillMask *store_load_fillmask(Store *s, const char *spec, const FillMaskOptions *o, Err *err) {
  FillMaskOptions opt;
  if (o) opt = *o; else fillmask_options_default(&opt);
  TokenizerSide side;
  StoreRevision r;
  Model *m;
  Tokenizer *t;
  /* One revision for all its files, even while new ones are pushed under "NAME". */
  if (store_resolve(s, spec, &r, err)) return NULL;
  char pinned[sizeof r.model + sizeof r.commit + 1];
  snprintf(pinned, sizeof pinned, "%s@%s", r.model, r.commit);
  if (load_revision(s, pinned, MODEL_TASK_MLM, opt.weights, &m, &t, err)) return NULL;
  if (revision_side(s, &r, &side, err)) { model_free(m); tokenizer_free(t); return NULL; }
  if (side.clean_up_spaces >= 0) opt.clean_up_spaces = side.clean_up_spaces;
  if (!opt.mask_token && side.mask_token[0]) opt.mask_token = side.mask_token;
  if (!opt.pad_token && side.pad_token[0]) opt.pad_token = side.pad_token;
  FillMask *fm = fillmask_new(m, t, &opt, 1, err);
  if (!fm && err && err->kind != ERR_NOMEM) err->kind = ERR_INTERNAL;
  return fm;
}

TextClass *store_load_textclass(Store *s, const char *spec, const TextClassOptions *o, Err *err) {
  TextClassOptions def;
  if (!o) { textclass_options_default(&def); o = &def; }
  Model *m;
  Tokenizer *t;
  if (load_revision(s, spec, MODEL_TASK_SEQ_CLS, o->weights, &m, &t, err)) return NULL;
  TextClass *tc = textclass_new(m, t, o, 1, err);
  if (!tc && err && err->kind != ERR_NOMEM) err->kind = ERR_INTERNAL;
  return tc;
}

int store_finetune_check(Store *s, const StoreRevision *base, const ModelConfig *base_cfg, const char *name, int max_length,
                         const char **field, Err *err) {
  *field = NULL;
  if (name && !strcmp(name, base->model)) {
    *field = "name";
    return err_setk(err, ERR_INVALID, "%s is the repository of the base model; name the classifier's own", name);
  }
  if (name && store_check_repo_task(s, name, MODEL_TASK_SEQ_CLS, err)) {
    if (err->kind == ERR_CONFLICT) *field = "name";
    return -1;
  }
  int positions = config_max_tokens(base_cfg);
  if (max_length > positions) {
    *field = "max_length";
    return err_setk(err, ERR_INVALID, "%d is more than the %d positions of %s@%lld", max_length, positions, base->model,
                    (long long)base->seq);
  }
  return 0;
}
