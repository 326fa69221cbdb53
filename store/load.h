/* Loading what a store revision holds into the engine: the store's bytes become a
** ready pipeline. The only store module that builds engine objects. */
#ifndef MASKD_STORE_LOAD_H
#define MASKD_STORE_LOAD_H

#include "engine/infer/fillmask.h"
#include "store/store.h"

/* Loads revision r's model.safetensors into m (ckpt_load_weights' checks), read from
** the store in place, tensor by tensor, straight into m's own storage (float, or
** bfloat16 after model_keep_bf16_weights): no copy of the file is held, and its
** sha256 is checked on the way. Errors: the blob missing or damaged, the file
** refused (m unchanged), ERR_IO (m may be part-written), ERR_NOMEM. */
int store_load_weights(Store *s, const StoreRevision *r, Model *m, Err *err);
/* A fill-mask pipeline over a store revision ("NAME", "NAME@main", "NAME@N", "NAME@<commit>");
** NULL with err set when the revision is missing (ERR_NOT_FOUND) or a file in it does
** not load (ERR_INTERNAL: the store's own bytes are damaged; or ERR_NOMEM, ERR_IO). */
FillMask *store_load_fillmask(Store *s, const char *spec, const FillMaskOptions *o, Err *err);

#endif
