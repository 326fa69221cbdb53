/* Layer: engine/infer/ (this folder: the fill-mask pipeline) uses engine/core, nn, tok and
** io; never engine/train. (ARCHITECTURE.md)
**
** The fill-mask pipeline: what Hugging Face transformers' pipeline("fill-mask")
** answers, number for number and string for string (../shared/reference/NOTES.md §3.1). Inputs are
** encoded with [CLS] ... [SEP], every mask position gets a softmax over the whole
** vocabulary, the top_k (optionally among targets) come back as
** {"score","token","token_str","sequence"} objects. Several inputs go through
** the model in one padded forward pass; the answer equals what HF computes for
** each input alone. Results are jansson values; fillmask_dumps() prints them with
** scores written as Python's json does (the float32 score widened to double,
** shortest repr), which jansson's own real formatting cannot do. */
#ifndef MASKD_FILLMASK_H
#define MASKD_FILLMASK_H
#include <jansson.h>
#include "engine/core/err.h"
#include "engine/nn/model.h"
#include "engine/tok/tokenizer.h"

#define FILLMASK_DEFAULT_TOP_K 5

/* What one request may ask for, so that no request can make the pipeline do
** unbounded work or write an unbounded answer; 0 = no limit. The defaults keep a
** request on the base preset (V32000 H768 L12) to about a third of a second of one
** core's forward pass and its answer to 4 MiB. */
typedef struct FillMaskLimits {
  int max_inputs;               /* texts in one request */
  int max_tokens;               /* tokens of all its texts together, [CLS]/[SEP] counted: the forward's work */
  int max_masks;                /* mask tokens of all its texts together: the softmaxes and answer rows */
  int max_top_k;                /* top_k as asked (before HF caps it at the targets and the vocabulary) */
  long long max_answer_bytes;   /* the answer's JSON text as fillmask_dumps(v, 0, 0) writes it */
} FillMaskLimits;

#define FILLMASK_DEFAULT_MAX_INPUTS 64
#define FILLMASK_DEFAULT_MAX_TOKENS 256
#define FILLMASK_DEFAULT_MAX_MASKS 32
#define FILLMASK_DEFAULT_MAX_TOP_K 100
#define FILLMASK_DEFAULT_MAX_ANSWER_BYTES (4LL << 20)

/* Why a request was refused: err.kind says how (server/http maps kinds to statuses in
** one table), err.msg says what, in one line.
**   ERR_INVALID    the request's fields: a wrong type or value, an unknown parameter
**   ERR_BAD_INPUT  a text the pipeline refuses: no mask, longer than the model, not UTF-8, no target left
**   ERR_TOO_LARGE  more than a FillMaskLimits field allows (limit, max and got say which)
**   ERR_NOMEM, ERR_INTERNAL  out of memory, the model failed
** A zeroed FillMaskError (err.kind ERR_NONE) is no refusal. */
typedef struct FillMaskError {
  const char *limit;            /* ERR_TOO_LARGE: the FillMaskLimits field's name, "max_masks", ... */
  long long max, got;           /* ERR_TOO_LARGE: its value and what the request asked (at least) */
  int truncation_helps;         /* a text longer than the model: truncation would have cut it (each
                                ** front end names its own way to ask: parameters or a flag) */
  Err err;                      /* the kind and the message; HF's exact wording where HF refuses too */
} FillMaskError;

typedef struct FillMask FillMask;
/* One request parsed, encoded and checked, waiting for the model. */
typedef struct FillMaskRequest FillMaskRequest;

/* What tokenizer_config.json / special_tokens_map.json say about the tokenizer,
** and the limits of each request. */
typedef struct FillMaskOptions {
  const char *mask_token;        /* NULL: the tokenizer's ([MASK] or <mask>, tokenizer_mask_token) */
  const char *pad_token;         /* NULL: "<pad>", else "[PAD]"; removed from sequences as HF does */
  int clean_up_spaces;           /* clean_up_tokenization_spaces: 1 (maskd writes true), 0 */
  int max_batch;                 /* inputs per forward pass; <= 0 = 32 */
  FillMaskLimits limits;         /* default: the FILLMASK_DEFAULT_MAX_* values */
  /* How the loaders (fillmask_load_dir, store_load_fillmask) keep the weights:
  ** MODEL_FP32 (the default), or MODEL_BF16, the matrices in bfloat16 only
  ** (model_keep_bf16_weights: half the memory; products read them as they are). */
  ModelPrecision weights;
  /* Receives HF's warnings (a target replaced or ignored); NULL = dropped. */
  void (*warn)(void *ctx, const char *msg);
  void *warn_ctx;
} FillMaskOptions;

/* Default options: the tokenizer's mask token, <pad> (else [PAD]), clean-up on, batches of 32, the default limits, no warnings. */
void fillmask_options_default(FillMaskOptions *o);
/* A pipeline over a model and a tokenizer; with own != 0 it frees them (also on
** failure). Refuses a tokenizer without the mask token ("The tokenizer does not
** define a `mask_token`.") and a vocabulary larger than the model's. */
FillMask *fillmask_new(Model *m, Tokenizer *t, const FillMaskOptions *o, int own, Err *err);
/* A pipeline from an HF folder: config.json, model.safetensors, the tokenizer
** (tokenizer_load_dir: tokenizer.json or the slow tokenizers' files), and when present
** tokenizer_config.json (clean_up_tokenization_spaces, mask and pad tokens) and
** special_tokens_map.json (engine/tok/tokenizer_files.h). o may be NULL (defaults). */
FillMask *fillmask_load_dir(const char *dir, const FillMaskOptions *o, Err *err);
/* Frees the pipeline (and the model and tokenizer when it owns them); NULL allowed. */
void fillmask_free(FillMask *fm);
/* The model and tokenizer the pipeline uses. */
Model *fillmask_model(FillMask *fm);
const Tokenizer *fillmask_tokenizer(const FillMask *fm);
/* The limits the pipeline enforces on each request. */
const FillMaskLimits *fillmask_limits(const FillMask *fm);
/* The pipeline plans the model for its batches and keeps that plan between
** calls; code that plans the same model itself must call this afterwards. */
void fillmask_forget_plan(FillMask *fm);
/* Largest number of tokens (with [CLS]/[SEP]) an input may have: the model's positions. */
int fillmask_max_tokens(const FillMask *fm);

/* ---- two steps: prepare (any thread), answer (one thread at a time) ---- */

/* The HTTP/Inference-API form: inputs is a string or a list of strings;
** parameters (may be NULL) is an object with optional top_k (integer >= 1; its
** only cap is the max_top_k limit, checked with the C form's) and targets (string
** or list of strings); unknown parameters are refused by name. This is the one
** parser of the HTTP `parameters`: the route hands them over unread.
** Parses, encodes and checks everything but the forward pass: every refusal
** (shape, text, limit) is decided here, before any model work. Reads the pipeline
** only, so any number of threads may prepare while one answers. The request keeps
** no pointer into inputs or parameters. NULL with fe filled on refusal. */
FillMaskRequest *fillmask_prepare(const FillMask *fm, const json_t *inputs, const json_t *parameters, FillMaskError *fe);
/* The same from C values: texts[0..n), is_list (see fillmask_run), top_k, targets (may be NULL). */
FillMaskRequest *fillmask_prepare_texts(const FillMask *fm, const char *const *texts, int n, int is_list, long long top_k,
                                        const char *const *targets, int n_targets, FillMaskError *fe);
/* Its tokens (all texts, [CLS]/[SEP] counted): what its forward pass costs. */
int fillmask_request_tokens(const FillMaskRequest *r);
/* Frees a request; NULL allowed. */
void fillmask_request_free(FillMaskRequest *r);
/* Answers reqs[0..n) together: their inputs share padded forward passes (the
** answer for each input does not depend on its batch). For each i, results[i] gets
** the answer (a new reference), or NULL with errors[i] filled: an answer growing
** past max_answer_bytes is refused alone, a failed forward fails the requests it
** carried. One thread at a time per pipeline (it holds the model's buffers). */
void fillmask_answer(FillMask *fm, FillMaskRequest *const *reqs, int n, json_t **results, FillMaskError *errors);

/* ---- one call: prepare and answer ---- */

/* Runs texts[0..n): is_list says the caller passed a list (results are then a
** list, a 1-element list unwrapped as HF does; an empty list gives []); top_k >= 1,
** capped at the number of targets as HF does and at the vocabulary (where torch's
** topk would fail); targets may be NULL. One mask gives a list of objects, several
** masks a list per mask. Inputs longer than fillmask_max_tokens() are refused. */
json_t *fillmask_run(FillMask *fm, const char *const *texts, int n, int is_list, int top_k,
                     const char *const *targets, int n_targets, FillMaskError *fe);
/* fillmask_prepare() and fillmask_answer() of one request. */
json_t *fillmask_call(FillMask *fm, const json_t *inputs, const json_t *parameters, FillMaskError *fe);

/* Python repr() of a double (shortest round-trip digits, "1e-05" style exponents,
** "1.0" for integers) into buf (>= 32 bytes); returns buf. */
char *fillmask_repr_double(double x, char *buf);
/* JSON text of v (malloc'd): reals as Python repr()s, strings and the rest as
** jansson writes them; indent 0 = Python's json.dumps separators (", " and ": "),
** indent > 0 = that many spaces per level. ensure_ascii escapes non-ASCII as \uXXXX
** (Python's default). NULL on failure (non-finite reals, out of memory). */
char *fillmask_dumps(const json_t *v, int indent, int ensure_ascii);

#endif
