/* Loading what a store revision holds into the engine: the store's bytes become a
** ready pipeline. The only store module that builds engine objects. */
#ifndef MASKD_STORE_LOAD_H
#define MASKD_STORE_LOAD_H

#include "engine/infer/fillmask.h"
#include "store/store.h"

/* A fill-mask pipeline over a store revision ("NAME", "NAME@main", "NAME@N", "NAME@<commit>");
** NULL with err set when the revision is missing (ERR_NOT_FOUND) or a file in it does
** not load (ERR_INTERNAL: the store's own bytes are damaged; or ERR_NOMEM, ERR_IO). */
FillMask *store_load_fillmask(Store *s, const char *spec, const FillMaskOptions *o, Err *err);

#endif
