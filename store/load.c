/* Pipelines built from a store revision's files (store/load.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/io/checkpoint.h"
#include "engine/nn/config.h"
#include "store/load.h"

/* An StSource over a store blob (ctx: its reader). */
static int blob_source_read(void *ctx, uint64_t offset, void *dst, size_t n, Err *err) {
  return store_blob_read(ctx, offset, dst, n, err);
}

int store_load_weights(Store *s, const StoreRevision *r, Model *m, Err *err) {
  uint64_t len = 0;
  StoreBlobReader *w = store_blob_open(s, r->weights, &len, err);
  if (!w) return -1;
  StSource src = {blob_source_read, w, len};
  /* The bytes are checked against their sha256 as store_blob_get would: read front
  ** to back by the load, hashed on the way. */
  int rc = ckpt_load_weights_source(m, &src, err) || store_blob_verify(w, err) ? -1 : 0;
  store_blob_close(w);
  return rc;
}

/* A pipeline over a store revision ("NAME", "NAME@main", "NAME@N", "NAME@<commit>"):
** its config.json, model.safetensors and tokenizer.json. The store keeps no
** tokenizer_config.json: revisions are maskd's own, whose tokenizer config says
** [MASK], <pad> and clean_up_tokenization_spaces true (import refuses others).
** The weights come through store_load_weights, into float or (o->weights
** MODEL_BF16) bfloat16 storage. */
FillMask *store_load_fillmask(Store *s, const char *spec, const FillMaskOptions *o, Err *err) {
  StoreRevision r;
  void *cfg = NULL, *tj = NULL;
  size_t cfg_len = 0, tj_len = 0;
  Model *m = NULL;
  Tokenizer *t = NULL;
  FillMask *fm = NULL;
  ModelConfig c;
  FillMaskOptions def;
  if (!o) { fillmask_options_default(&def); o = &def; }
  if (store_resolve(s, spec, &r, err)) return NULL;
  if (!r.tokenizer[0]) { err_set(err, "%s: revision %s has no tokenizer", r.model, r.commit); return NULL; }
  if (store_revision_file(s, &r, "config.json", &cfg, &cfg_len, err)) goto done;
  if (store_revision_file(s, &r, "tokenizer.json", &tj, &tj_len, err)) goto done;
  char *cs = malloc(cfg_len + 1);
  if (!cs) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  memcpy(cs, cfg, cfg_len);
  cs[cfg_len] = 0;
  int rc = config_parse(cs, &c, err);
  free(cs);
  if (rc) { err_prefix(err, "config.json"); goto done; }
  if (!(t = tokenizer_from_json(tj, tj_len, err))) { err_prefix(err, "tokenizer.json"); goto done; }
  if (!(m = model_new(&c, err))) goto done;
  /* Before the load, so the matrices go straight into their bf16 copy. */
  if (o->weights == MODEL_BF16 && model_keep_bf16_weights(m, 0, err)) goto done;
  if (store_load_weights(s, &r, m, err)) { err_prefix(err, "model.safetensors"); goto done; }
  fm = fillmask_new(m, t, o, 1, err);
  m = NULL;
  t = NULL;
done:
  /* The store's own bytes refused (a config, weights or tokenizer that does not
  ** parse, a blob gone) mean a damaged store, not a bad request. */
  if (!fm && err && err->kind != ERR_NOMEM && err->kind != ERR_IO) err->kind = ERR_INTERNAL;
  model_free(m);
  tokenizer_free(t);
  free(cfg); free(tj);
  return fm;
}
