/* The model: a Hugging Face RobertaForMaskedLM / BertForMaskedLM, or (a config
** whose task is MODEL_TASK_SEQ_CLS) RobertaForSequenceClassification /
** BertForSequenceClassification, number for number. Parameters, gradients and Adam moments are flat buffers of
** model_num_params() floats; a table of named tensors (HF state-dict names)
** gives each tensor's place in them. Activations are planned once for a
** (batch, seq) shape; forward/backward allocate nothing. */
#ifndef MASKD_MODEL_H
#define MASKD_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "engine/nn/config.h"
#include "engine/core/err.h"

#define MODEL_IGNORE_LABEL (-100)

typedef struct Model Model;

/* One named parameter tensor: a view into the flat parameter buffer. */
typedef struct ModelTensor {
  char name[96];        /* HF state-dict name, e.g. "roberta.encoder.layer.0.attention.self.query.weight" */
  int ndim;             /* 1 or 2 */
  int shape[2];         /* PyTorch shape: Linear weights are (out, in) */
  size_t offset;        /* in floats, from the start of the parameter buffer */
  size_t numel;
  int decay;            /* 1 when AdamW weight decay applies (not LayerNorm, not bias) */
} ModelTensor;

/* A batch of shape (batch, seq) (at most the plan's); arrays are row-major (batch, seq). */
typedef struct ModelBatch {
  int batch, seq;
  const int32_t *input_ids;
  const int32_t *attention_mask;   /* 1 = real token, 0 = padding; NULL = all real */
  const int32_t *token_type_ids;   /* NULL = all zero */
  /* NULL = no loss. A masked LM: (batch, seq) target ids or MODEL_IGNORE_LABEL. A
  ** classifier (MODEL_TASK_SEQ_CLS): (batch) class ids, or MODEL_IGNORE_LABEL for a row
  ** that takes no part in the loss. */
  const int32_t *labels;
} ModelBatch;

/* What a forward pass with labels reports. */
typedef struct ModelLoss {
  double loss_sum;      /* sum of cross-entropy over labelled positions (a classifier: rows) */
  int n_labels;         /* labelled positions (labels != -100) */
  int n_correct;        /* labelled positions whose argmax equals the label */
} ModelLoss;

/* Allocates a model (parameters uninitialised); refuses, with its message, what config_validate() refuses. */
Model *model_new(const ModelConfig *cfg, Err *err);
/* Frees everything the model owns; NULL is allowed. */
void model_free(Model *m);
/* HF initialisation from a seed: N(0, initializer_range) weights, zero biases, LayerNorm 1/0, padding row 0.
** Not for a model that keeps bf16 weights (initialise first, then model_keep_bf16_weights). */
void model_init_weights(Model *m, uint64_t seed);
/* The model's configuration. */
const ModelConfig *model_config(const Model *m);

/* The arithmetic of the Linear layers' products (the attention's per-head
** products, LayerNorm, softmax, GELU, the loss and the optimizer stay float):
** MODEL_FP32, or MODEL_BF16, PyTorch autocast's (weights, activations and
** gradients rounded to bfloat16 as they enter a product, float sums; the
** parameters stay float, the master weights). */
typedef enum ModelPrecision { MODEL_FP32 = 0, MODEL_BF16 } ModelPrecision;
/* "fp32" or "bf16": a precision's one spelling (CLI, run descriptions, JSON). */
const char *model_precision_name(ModelPrecision p);
/* 0 and *out for "fp32" or "bf16"; -1 for anything else. */
int model_precision_parse(const char *name, ModelPrecision *out);
/* Sets the products' precision (a model with bf16 weights stays MODEL_BF16). */
void model_set_precision(Model *m, ModelPrecision p);
/* The products' precision. */
ModelPrecision model_precision(const Model *m);
/* Keeps the weight matrices (every 2-D tensor) in bfloat16 only, from now on,
** for serving: half their memory, and half the bytes a short forward streams.
** convert: their float values are rounded into the copy; 0: the copy starts
** zero (for a loader about to fill it: ckpt_load_weights writes it directly, so
** no float copy of the matrices is ever made). The float pages under the matrices
** are released; the precision becomes MODEL_BF16; model_params() then holds only
** the 1-D tensors. ERR_INVALID for a model planned for training. */
int model_keep_bf16_weights(Model *m, int convert, Err *err);
/* 1 when the weight matrices are kept in bfloat16 (model_keep_bf16_weights). */
int model_weights_bf16(const Model *m);
/* Where tensor i (0 <= i < model_tensor_count()) is kept: *f32 in the parameter
** buffer, or *bf16 in the bf16 copy; the other NULL. */
void model_tensor_storage(Model *m, int i, float **f32, uint16_t **bf16);

/* Number of floats in the parameter buffer (and in the gradient buffer). */
size_t model_num_params(const Model *m);
/* The flat parameter buffer. */
float *model_params(Model *m);
/* The flat gradient buffer (allocated by a training plan; NULL before). */
float *model_grads(Model *m);
/* Number of named tensors; the tied MLM decoder weight is not listed (it is the word embeddings). */
int model_tensor_count(const Model *m);
/* The i-th named tensor, 0 <= i < model_tensor_count(). */
const ModelTensor *model_tensor(const Model *m, int i);
/* The named tensor with this HF name, or NULL. */
const ModelTensor *model_tensor_by_name(const Model *m, const char *name);
/* The first named tensor holding a NaN or an infinity (in whichever storage holds it), or
** NULL when every value is finite: what a trainer checks before it saves weights. */
const ModelTensor *model_nonfinite_tensor(Model *m);

/* Plans activations for batches of (batch, seq) with the MLM head computed at up
** to head_rows positions (a classifier ignores head_rows: its head takes each row's
** first token); training != 0 also plans gradients and saved activations. */
int model_plan(Model *m, int batch, int seq, int head_rows, int training, Err *err);
/* One buffer of the activation plan (model.c's plan table), for checks and tools. */
typedef struct ModelActivation {
  const char *name;     /* e.g. "qkv", "logits", "ids" */
  int layer;            /* encoder layer slot, or -1 */
  int is_int;           /* int32 elements (ids, positions, rows), else floats */
  const void *data;     /* NULL when this plan does not need it (inference: no "att", no gradients) */
  size_t bytes;
} ModelActivation;
/* Buffers in the current plan (0 before model_plan), in allocation order. */
int model_activation_count(const Model *m);
/* The i-th buffer of the plan into *out; -1 when i is out of range. */
int model_activation(const Model *m, int i, ModelActivation *out);
/* The plan's two allocations (floats, int32s) that every buffer lies in; NULL and 0 before a plan. */
void model_activation_arenas(const Model *m, const void **floats, size_t *float_bytes, const void **ints,
                             size_t *int_bytes);
/* Dropout: enabled only when training and the config's probabilities are > 0; seeded per step. */
void model_set_dropout(Model *m, int enabled, uint64_t seed);
/* Label smoothing s in [0, 1) of model_forward's loss and its gradient, as torch's
** CrossEntropyLoss(label_smoothing=s) and HF Trainer's label_smoothing_factor
** (0 at model_new: the plain cross-entropy). Values outside are clamped to 0. */
void model_set_label_smoothing(Model *m, float s);
/* Threads this model's passes use (at least 1; default omp_get_max_threads() at
** model_new): a property of this model alone, no process-wide setting changes. */
void model_set_threads(Model *m, int threads);

/* Forward pass with labels: loss at labelled positions (sum, count, correct). The
** last layer is computed at the labelled rows only (the loss is identical). */
int model_forward(Model *m, const ModelBatch *b, ModelLoss *out, Err *err);
/* Sets the gradient buffer to zero (lazily: the next backward overwrites instead
** of adding, or model_grads writes the zeros). */
void model_zero_grad(Model *m);
/* Backward pass of the last forward, accumulating d(loss_sum * loss_scale) into the gradients. */
void model_backward(Model *m, float loss_scale);

/* Gradient groups: contiguous parameter ranges whose gradients become final together
** during model_backward, numbered in the order they do (0: the head, MLM or classifier; 1..L: encoder
** layers L-1 down to 0; L+1: the embeddings, last because the tied decoder's gradient
** lands in the word embeddings). They cover the parameter buffer exactly once. */
int model_grad_group_count(const Model *m);
/* Group i's range: [*offset, *offset + *count) of the parameter (and gradient) buffer. */
void model_grad_group(const Model *m, int i, size_t *offset, size_t *count);
/* Called by model_backward, on its calling thread between the passes, with each group
** as it becomes final; lets a data-parallel trainer start sending it while backward goes on. */
typedef void (*ModelGradReady)(void *ctx, int group);
/* Sets (or, with fn NULL, clears) the callback. */
void model_set_grad_ready(Model *m, ModelGradReady fn, void *ctx);

/* A classifier's scores after model_forward with labels: (labelled rows, in batch
** order) x num_labels, whose argmax per row is the prediction: the logits in an
** inference plan, their softmax in a training plan (backward's input). NULL for a
** masked LM or before a forward. */
const float *model_class_scores(const Model *m);
/* Inference on a classifier: logits (batch x num_labels) of every row into logits_out. */
int model_classify(Model *m, const ModelBatch *b, float *logits_out, Err *err);

/* Inference: logits (n_positions x vocab) at the given flat positions (b*seq+t) of the batch.
** Positions in increasing order (fill-mask's) have the last layer computed at them only:
** the same bits as the whole layer gives there, for less work. */
int model_logits_at(Model *m, const ModelBatch *b, const int32_t *positions, int n_positions,
                    float *logits_out, Err *err);

/* Per-phase wall time of forward/backward, for benchmarks. Off by default; when
** on, each phase costs two clock reads. Matmul = the large Linear sgemms,
** attention = per-head products and their softmax, loss = the cross-entropy,
** elementwise = embeddings, LayerNorm, GELU, dropout, residuals, gathers. */
typedef enum {
  MODEL_PHASE_MATMUL, MODEL_PHASE_ATTENTION, MODEL_PHASE_LOSS, MODEL_PHASE_ELEMENTWISE, MODEL_PHASE_COUNT
} ModelPhase;
/* Turns the profile on or off and resets the accumulated times to zero. */
void model_profile_enable(Model *m, int on);
/* Seconds accumulated per phase since the last model_profile_enable(). */
void model_profile_read(const Model *m, double seconds[MODEL_PHASE_COUNT]);
/* "matmul", "attention", "loss", "elementwise". */
const char *model_phase_name(int phase);
/* The matmul phase by the Linear layer it serves, summed over the layers: the
** forward's product, and the backward's two (dx, dW) with the bias's gradient
** (and GELU' for the FFN's down projection). Head = the MLM head's dense and
** decoder, or the classifier's two. Set beside the phases, at no extra clock read. */
typedef enum {
  MODEL_PRODUCT_QKV, MODEL_PRODUCT_ATTN_OUT, MODEL_PRODUCT_FFN_UP, MODEL_PRODUCT_FFN_DOWN, MODEL_PRODUCT_HEAD,
  MODEL_PRODUCT_COUNT
} ModelProduct;
/* Seconds accumulated per product, forward and backward, since the last model_profile_enable(). */
void model_profile_products(const Model *m, double forward[MODEL_PRODUCT_COUNT], double backward[MODEL_PRODUCT_COUNT]);
/* "QKV", "attn.out", "ffn.up", "ffn.down", "head": bench sgemm --config's names. */
const char *model_product_name(int product);
/* Floating-point operations of the matrix products of one model_forward (training
** = 0) or model_forward + model_backward (training = 1) over batch x seq tokens
** with head_rows labelled positions (multiply-add = 2). model_forward computes the
** last layer's queries, attention output and FFN at the labelled rows only (no
** other row reaches the loss), and so does this count. */
double model_flops(const ModelConfig *cfg, int batch, int seq, int head_rows, int training);
/* Threads the model currently uses. */
int model_threads(const Model *m);

#endif
