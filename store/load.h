/* Loading what a store revision holds into the engine: the store's bytes become a
** ready pipeline. The only store module that builds engine objects. */
#ifndef MASKD_STORE_LOAD_H
#define MASKD_STORE_LOAD_H

#include "engine/infer/fillmask.h"
#include "engine/infer/textclass.h"
#include "engine/nn/config.h"
#include "store/store.h"

/* Loads revision r's model.safetensors into m (ckpt_load_weights' checks), read from
** the store in place, tensor by tensor, straight into m's own storage (float, or
** bfloat16 after model_keep_bf16_weights): no copy of the file is held, and its
** sha256 is checked on the way. Errors: the blob missing or damaged, the file
** refused (m unchanged), ERR_IO (m may be part-written), ERR_NOMEM. */
int store_load_weights(Store *s, const StoreRevision *r, Model *m, Err *err);
/* The same for starting classifier m from revision r (ckpt_load_encoder: the encoder's
** tensors, a head only where its shape matches, counted in *head_loaded). */
int store_load_encoder(Store *s, const StoreRevision *r, Model *m, int *head_loaded, Err *err);
/* A fill-mask pipeline over a store revision ("NAME", "NAME@main", "NAME@N", "NAME@<commit>");
** NULL with err set when the revision is missing (ERR_NOT_FOUND) or a file in it does
** not load (ERR_INTERNAL: the store's own bytes are damaged; or ERR_NOMEM, ERR_IO).
** A classifier's revision is refused with ERR_BAD_INPUT ("... is a text-classification
** model ..."), a base model's (BertModel: no head) with ERR_INVALID ("... has no
** masked-LM head ..."), both read from its config before any weight is. */
FillMask *store_load_fillmask(Store *s, const char *spec, const FillMaskOptions *o, Err *err);
/* The same for a text-classification pipeline over a classifier's revision; a masked
** LM's is refused with ERR_BAD_INPUT ("... is a fill-mask model ..."). */
TextClass *store_load_textclass(Store *s, const char *spec, const TextClassOptions *o, Err *err);
/* Resolves spec into *r and parses its config.json into *c (no weights read): what
** task the revision is for. ERR_NOT_FOUND for no such revision, ERR_INTERNAL for a
** config that does not parse. */
int store_load_config(Store *s, const char *spec, StoreRevision *r, ModelConfig *c, Err *err);
/* 0 when revisions for task may be pushed to repository name: it has none yet, or its
** newest is of task's group too (sequence classifiers; masked LMs and base models);
** else -1, ERR_CONFLICT naming what it holds (one repository serves one pipeline: a
** fine-tuned classifier pushed over a masked LM's revisions would change what its name
** answers). Other errors as store_load_config's. */
int store_check_repo_task(Store *s, const char *name, ModelTask task, Err *err);
/* What a fine-tuning run of base revision base (its config base_cfg) into repository
** name, max_length tokens an example (0: not given), is refused for before it starts:
** the base's own repository as name (its revisions would interleave with the
** classifier's), a repository holding another pipeline (store_check_repo_task), a
** max_length past the base's positions. maskd finetune checks this, and POST /runs
** too, before it queues the job: -1 with *field the job field refused ("name",
** "max_length") and err the reason; *field NULL for a store error (err's kind). */
int store_finetune_check(Store *s, const StoreRevision *base, const ModelConfig *base_cfg, const char *name, int max_length,
                         const char **field, Err *err);

#endif
