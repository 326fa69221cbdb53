/* Layer: engine/infer/ uses engine/core, nn, tok and io. (ARCHITECTURE.md)
**
** What the fill-mask and text-classification pipelines share: the one wording of a
** refusal (a FillMaskError filled in one call), the HTTP form of "inputs" (a string or
** a list of strings) read once, and how the inputs of concurrent requests are sorted
** and cut into padded forward passes. */
#ifndef MASKD_PIPELINE_H
#define MASKD_PIPELINE_H
#include <jansson.h>
#include <stdint.h>
#include "engine/infer/fillmask.h"
#include "engine/nn/config.h"

/* Fills fe with kind and the formatted message (no limit named); returns NULL, for the caller to return. */
void *pipeline_fail(FillMaskError *fe, ErrKind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* After pipeline_fail(..., ERR_TOO_LARGE, ...): the limit's name, its value and what was asked; NULL. */
void *pipeline_limit_hit(FillMaskError *fe, const char *limit, long long max, long long got);
/* One input of the requests answered together: its tokens (ids[n]), the request it
** came from and its index there, and the pipeline's own record of it. */
typedef struct PipelineSlot { const int32_t *ids; int n, req, index; const void *item; } PipelineSlot;
/* Sorts slots shortest first, equal lengths in arrival order (request, then index). */
void pipeline_sort(PipelineSlot *s, int n);
/* Inputs sorted by length share padded forward passes: of the `remaining` next slots
** from s, how many the next pass takes: at least one, at most max_batch, and one more
** only while padding stays under half of the pass's work. */
int pipeline_pass_size(const PipelineSlot *s, int remaining, int max_batch);
/* The pass's input_ids and attention_mask [b, T] (T at least every slot's n): each
** slot's ids with mask 1, then pad_id with mask 0. */
void pipeline_pad(const PipelineSlot *s, int b, int T, int32_t pad_id, int32_t *ids, int32_t *att);
/* A JSON value's kind as refusals name it, Python's way: "a string", "a list", "a number", ... */
const char *pipeline_json_kind(const json_t *x);
/* Reads inputs (a string, or a list of strings) into *texts (pointers into inputs;
** free() *texts when *texts != one), *n and *is_list; one is room for the single
** string's pointer. 0, or -1 with fe filled (ERR_INVALID, naming the element). */
int pipeline_inputs(const json_t *inputs, const char ***texts, const char **one, int *n, int *is_list, FillMaskError *fe);

#endif
