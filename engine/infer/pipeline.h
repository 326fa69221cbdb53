/* Layer: engine/infer/ uses engine/core, nn, tok and io. (ARCHITECTURE.md)
**
** What the fill-mask and text-classification pipelines share: the one wording of a
** refusal (a FillMaskError filled in one call), and the HTTP form of "inputs" (a string or a list of strings) read once. */
#ifndef MASKD_PIPELINE_H
#define MASKD_PIPELINE_H
#include <jansson.h>
#include "engine/infer/fillmask.h"
#include "engine/nn/config.h"

/* Fills fe with kind and the formatted message (no limit named); returns NULL, for the caller to return. */
void *pipeline_fail(FillMaskError *fe, ErrKind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* After pipeline_fail(..., ERR_TOO_LARGE, ...): the limit's name, its value and what was asked; NULL. */
void *pipeline_limit_hit(FillMaskError *fe, const char *limit, long long max, long long got);
/* Inputs sorted by length, shortest first, share padded forward passes: of the
** `remaining` next ones (len(ctx, i) is the i-th's length), how many the next pass
** takes: at least one, at most max_batch, and one more only while padding stays under
** half of the pass's work. */
int pipeline_pass_size(int remaining, int max_batch, int (*len)(const void *ctx, int i), const void *ctx);
/* Reads inputs (a string, or a list of strings) into *texts (pointers into inputs;
** free() *texts when *texts != one), *n and *is_list; one is room for the single
** string's pointer. 0, or -1 with fe filled (ERR_INVALID, naming the element). */
int pipeline_inputs(const json_t *inputs, const char ***texts, const char **one, int *n, int *is_list, FillMaskError *fe);

#endif
