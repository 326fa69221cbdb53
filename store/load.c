/* Pipelines built from a store revision's files (store/load.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/io/checkpoint.h"
#include "engine/nn/config.h"
#include "store/load.h"

/* A pipeline over a store revision ("NAME", "NAME@main", "NAME@N", "NAME@<commit>"):
** its config.json, model.safetensors and tokenizer.json. The store keeps no
** tokenizer_config.json: revisions are maskd's own, whose tokenizer config says
** [MASK], <pad> and clean_up_tokenization_spaces true (import refuses others). */
FillMask *store_load_fillmask(Store *s, const char *spec, const FillMaskOptions *o, Err *err) {
  StoreRevision r;
  void *cfg = NULL, *w = NULL, *tj = NULL;
  size_t cfg_len = 0, w_len = 0, tj_len = 0;
  Model *m = NULL;
  Tokenizer *t = NULL;
  FillMask *fm = NULL;
  ModelConfig c;
  if (store_resolve(s, spec, &r, err)) return NULL;
  if (!r.tokenizer[0]) { err_set(err, "%s: revision %s has no tokenizer", r.model, r.commit); return NULL; }
  if (store_revision_file(s, &r, "config.json", &cfg, &cfg_len, err)) goto done;
  if (store_revision_file(s, &r, "model.safetensors", &w, &w_len, err)) goto done;
  if (store_revision_file(s, &r, "tokenizer.json", &tj, &tj_len, err)) goto done;
  char *cs = malloc(cfg_len + 1);
  if (!cs) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  memcpy(cs, cfg, cfg_len);
  cs[cfg_len] = 0;
  int rc = config_parse(cs, &c, err);
  free(cs);
  if (rc) { err_prefix(err, "config.json"); goto done; }
  if (!(m = model_new(&c, err))) goto done;
  if (ckpt_load_weights_memory(m, w, w_len, err)) { err_prefix(err, "model.safetensors"); goto done; }
  if (!(t = tokenizer_from_json(tj, tj_len, err))) { err_prefix(err, "tokenizer.json"); goto done; }
  fm = fillmask_new(m, t, o, 1, err);
  m = NULL;
  t = NULL;
done:
  /* The store's own bytes refused (a config, weights or tokenizer that does not
  ** parse, a blob gone) mean a damaged store, not a bad request. */
  if (!fm && err && err->kind != ERR_NOMEM && err->kind != ERR_IO) err->kind = ERR_INTERNAL;
  model_free(m);
  tokenizer_free(t);
  free(cfg); free(w); free(tj);
  return fm;
}
