/* Layer: engine/io/ (this folder: safetensors, checkpoints, the Hub's weight layouts) uses engine/core and
** engine/nn. (ARCHITECTURE.md)
**
** Checkpoints. Weights are a Hugging Face model folder (config.json +
** model.safetensors with HF state-dict names, the tied decoder weight left out as
** save_pretrained does), so transformers loads what we save and we load what it
** saves. Training state for exact resume is a second safetensors blob: AdamW's
** moments under "exp_avg.<name>" / "exp_avg_sq.<name>", and small I64 tensors
** for the step, the RNG state and the data position. */
#ifndef MASKD_CHECKPOINT_H
#define MASKD_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/core/files.h"
#include "engine/nn/model.h"
#include "engine/nn/optim.h"
#include "engine/core/rng.h"
#include "engine/io/safetensors.h"

#define CKPT_CONFIG_FILE "config.json"
#define CKPT_WEIGHTS_FILE "model.safetensors"
#define CKPT_EXTRA_WORDS 16
/* The streaming writers' chunk: moments are asked for, and BF16 weights converted,
** at most this many floats at a time, through one scratch buffer. */
#define CKPT_STREAM_FLOATS ((size_t)1 << 20)

/* What a training run needs besides weights and moments to continue exactly. */
typedef struct CkptState {
  int64_t step;                       /* optimizer updates done (AdamW.step) */
  int64_t epoch;                      /* epochs completed */
  int64_t position;                   /* batches consumed in the current epoch */
  Rng rng;                            /* the run's generator, all four words */
  int n_extra;                        /* 0..CKPT_EXTRA_WORDS words in extra */
  uint64_t extra[CKPT_EXTRA_WORDS];   /* the caller's words, bit for bit (e.g. loader_state_pack's six) */
} CkptState;

/* model.safetensors bytes for m (F32, or BF16 when bf16 != 0); caller frees *out. */
int ckpt_weights_bytes(Model *m, int bf16, unsigned char **out, size_t *len, Err *err);
/* Where the streaming writers put a file's bytes: write() receives them in order,
** first to last; 0, or -1 with err set (which stops the writer). */
typedef struct CkptSink {
  int (*write)(void *ctx, const void *data, size_t n, Err *err);
  void *ctx;
} CkptSink;
/* A buffer of cap bytes that a stream fills from p + len on; a write past cap is an
** ERR_INTERNAL failure with the caller's message overflow (the stream's size was wrong). */
typedef struct CkptMemorySink {
  unsigned char *p;
  size_t len, cap;
  const char *overflow;
} CkptMemorySink;
/* A sink appending to m (which must outlive it). */
CkptSink ckpt_memory_sink(CkptMemorySink *m);
/* A sink appending to an open atomic file (files_atomic_write; f must outlive it). */
CkptSink ckpt_atomic_sink(FilesAtomic *f);

/* The exact byte length of ckpt_weights_bytes(m, bf16); 0 when out of memory. */
size_t ckpt_weights_size(Model *m, int bf16);
/* ckpt_weights_bytes()'s bytes, byte for byte, into sink without a copy of the
** parameters (F32 is written from them; BF16 converted through a scratch of
** CKPT_STREAM_FLOATS elements). */
int ckpt_weights_stream(Model *m, int bf16, const CkptSink *sink, Err *err);
/* Every tensor of f (float dtypes only) re-written as an F32 (bf16 0) or BF16
** (torch's rounding, bf16_from_f32_torch; a BF16 tensor copied) safetensors file into sink: same names and shapes,
** the HF writer's order, {"format": "pt"}; f is read by ranges through one scratch
** of CKPT_STREAM_FLOATS elements. How a stored revision that holds more than the
** model's tensors (an import's pooler) is exported whole. */
int ckpt_file_stream(const StFile *f, int bf16, const CkptSink *sink, Err *err);
/* Writes dir/config.json and dir/model.safetensors (creating dir and its parents). */
int ckpt_save_model(Model *m, const char *dir, int bf16, Err *err);
/* Copies the weights of f into m: every tensor present with m's shape (F32, BF16,
** F16 or F64); tied decoder copies accepted only when equal to what they tie to;
** buffers (*.position_ids, *.token_type_ids) and unused HF heads (pooler,
** seq_relationship: hfw_is_unused_name) ignored; anything else refused by name. All of that is checked
** before a number is written, so m is unchanged on a refused file; then the tensors
** are copied in the file's order (a streamed file is read front to back), and only
** a source failing during that copy (ERR_IO, its kind kept) leaves m part-written. */
int ckpt_load_weights(Model *m, const StFile *f, Err *err);
/* Starts a classifier (MODEL_TASK_SEQ_CLS) from a masked LM's or a classifier's file,
** as from_pretrained(...ForSequenceClassification) does: every encoder tensor must be
** there (ckpt_load_weights' checks); the file's MLM head is skipped; head tensors
** (classifier.*, bert.pooler.*) present with the model's shape are loaded and
** counted in *head_loaded, the others keep what the caller initialised. */
int ckpt_load_encoder(Model *m, const StFile *f, int *head_loaded, Err *err);
/* ckpt_load_encoder() through a source (a stored blob, read in place). */
int ckpt_load_encoder_source(Model *m, const StSource *src, int *head_loaded, Err *err);
/* ckpt_load_weights() from a .safetensors file (read with pread, never mapped),
** from bytes in memory (read in place, not copied), or through a source; none of
** them holds a second copy of the weights. */
int ckpt_load_weights_file(Model *m, const char *path, Err *err);
int ckpt_load_weights_memory(Model *m, const void *buf, size_t len, Err *err);
int ckpt_load_weights_source(Model *m, const StSource *src, Err *err);
/* Reads dir/config.json, builds the model and loads dir/model.safetensors. */
Model *ckpt_load_model(const char *dir, Err *err);
/* ckpt_load_model() with the weight matrices kept in bfloat16 (MODEL_BF16:
** model_keep_bf16_weights before the load, so no float copy of them is made) or float. */
Model *ckpt_load_model_as(const char *dir, ModelPrecision weights, Err *err);

/* Optimizer-state bytes: o's moments for each of m's tensors, and s (s->step is
** what gets saved; callers keep it equal to o->step). Caller frees *out. */
int ckpt_state_bytes(Model *m, const AdamW *o, const CkptState *s, unsigned char **out, size_t *len, Err *err);
/* Where ckpt_state_stream() gets the Adam moments: read() copies count floats of
** moment which (0 = exp_avg, m; 1 = exp_avg_sq, v) starting at flat parameter index
** offset (the model's parameter layout, ModelTensor.offset) into dst; 0, or -1 with
** err set. */
typedef struct CkptMoments {
  int (*read)(void *ctx, int which, size_t offset, size_t count, float *dst, Err *err);
  void *ctx;
} CkptMoments;

/* The exact byte length of ckpt_state_bytes() for m and s; 0 when s is refused
** (n_extra out of range) or out of memory. */
size_t ckpt_state_size(Model *m, const CkptState *s);
/* ckpt_state_bytes()'s bytes, byte for byte, into sink, with the moments read from
** src through one scratch buffer of CKPT_STREAM_FLOATS floats. The reads come in
** the file's order, which depends only on m: first which = 0 for every tensor of m
** in the byte order of its name (strcmp), then which = 1 for every tensor in that
** same order; within a tensor, consecutive ranges from its offset, each of
** CKPT_STREAM_FLOATS floats except a shorter last one. Each range is asked for once. */
int ckpt_state_stream(Model *m, const CkptMoments *src, const CkptState *s, const CkptSink *sink, Err *err);
/* A moments source over a local optimizer's m and v (o->n floats each); o must
** outlive it. Ranges outside o are errors. */
CkptMoments ckpt_moments_of(const AdamW *o);
/* ckpt_state_bytes() written atomically to path. */
int ckpt_save_state(Model *m, const AdamW *o, const CkptState *s, const char *path, Err *err);
/* Restores moments into o (o->step = saved step) and fills s; o must have been made
** for m (o->n == model_num_params(m)). o and s are unchanged on error. */
int ckpt_load_state(Model *m, AdamW *o, CkptState *s, const StFile *f, Err *err);
int ckpt_load_state_file(Model *m, AdamW *o, CkptState *s, const char *path, Err *err);
int ckpt_load_state_memory(Model *m, AdamW *o, CkptState *s, const void *buf, size_t len, Err *err);

#endif
