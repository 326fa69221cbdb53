/* A Hugging Face model folder's weights as transformers would load them into a
** BertForMaskedLM / RobertaForMaskedLM (or their base model): the one place the
** Hub's layouts and name rules live.
**
** Layouts read: model.safetensors; sharded safetensors (model.safetensors.index.json
** naming shard files inside the folder); pytorch_model.bin (torch.save's zip, read by
** engine/io/torch_pickle.h without Python) and its sharded form
** (pytorch_model.bin.index.json). model.safetensors wins when both exist,
** as in transformers. Tensors may be F32, F16, BF16 or F64; all become float32.
** Every file may be a symlink, followed wherever it leads, as config.json and the
** tokenizer's files are (a Hugging Face cache snapshot links each file to
** ../../blobs/<hash>); a shard's name in an index must be a plain file name (no '/',
** not . or ..), so that an index cannot name a file outside the folder.
**
** Name rules (transformers' modeling_utils): LayerNorm's legacy gamma/beta become
** weight/bias; a base-model checkpoint without the "bert."/"roberta." prefix gets it;
** the tied decoder weight (cls.predictions.decoder.weight / lm_head.decoder.weight)
** is ignored, the word embeddings win; the decoder bias duplicate
** (cls.predictions.decoder.bias / lm_head.decoder.bias) is the head's bias;
** *.position_ids / *.token_type_ids buffers are ignored.
**
** Invariants of a read set: every name is canonical and appears once; every tensor the
** config's model needs is there with its shape; every number is finite (a NaN or an
** infinity anywhere is refused, naming the tensor and the element); what the model
** does not use but a Hub checkpoint carries (the pooler, BERT's NSP head, a base
** model's MLM head) is kept and listed; any other name is refused. */
#ifndef MASKD_HF_WEIGHTS_H
#define MASKD_HF_WEIGHTS_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/io/safetensors.h"
#include "engine/io/torch_pickle.h"
#include "engine/nn/config.h"

/* The largest index.json read (bert-large's is 30 KB). */
#define HFW_MAX_INDEX ((size_t)16 << 20)
/* The most shards a sharded folder's index may name (the largest Hub checkpoints have a few hundred). */
#define HFW_MAX_SHARDS 4096

typedef struct HfTensor {
  char *name;                     /* canonical HF state-dict name */
  int ndim;
  int64_t shape[ST_MAX_DIMS];
  int64_t numel;
  float *data;                    /* numel floats, owned */
} HfTensor;

typedef struct HfWeights HfWeights;

/* Reads dir's weights (layouts and rules above) against config c. When c is a masked
** LM but no MLM-head tensor is there (a BertModel checkpoint under BertForPreTraining,
** say), c->task becomes MODEL_TASK_ENCODER. NULL with err naming the file and the
** tensor refused (missing tensors listed, a non-finite element named; ERR_BAD_INPUT,
** ERR_NOT_FOUND for no weights). */
HfWeights *hfw_read_dir(const char *dir, ModelConfig *c, Err *err);
/* Frees w; NULL allowed. */
void hfw_free(HfWeights *w);
/* Number of tensors, and the i-th (sorted by name). */
int hfw_count(const HfWeights *w);
const HfTensor *hfw_tensor(const HfWeights *w, int i);
/* Where the weights came from ("model.safetensors (F16)", "2 shards of ...", ...). */
const char *hfw_source(const HfWeights *w);
/* The kept tensors the model does not use, comma-separated ("" when none). */
const char *hfw_unused(const HfWeights *w);
/* The file's tensors dropped by the name rules, each with why ("" when none). */
const char *hfw_ignored(const HfWeights *w);
/* Every tensor of w as one F32 safetensors file (HF writer's order, {"format": "pt"});
** caller frees *out. */
int hfw_serialize(const HfWeights *w, unsigned char **out, size_t *len, Err *err);

/* Frees every tensor's numbers (data becomes NULL), keeping names, shapes, source and
** lists: once hfw_serialize has copied them, an import needs no second copy. */
void hfw_drop_data(HfWeights *w);

/* 1 for a tensor a Hub checkpoint of c's family carries that no masked LM uses:
** the pooler ("bert.pooler.*", "roberta.pooler.*") and BERT's NSP head ("cls.seq_relationship.*"). */
int hfw_is_unused_name(const ModelConfig *c, const char *name);

/* An empty set, for the readers of a layout (and tests); NULL when out of memory. */
HfWeights *hfw_new(void);
/* 1 for a buffer transformers registers (*.position_ids, *.token_type_ids): never loaded. */
int hfw_is_buffer_name(const char *name);
/* Adds a raw tensor (its name as the file has it) to w, taking data (numel floats,
** malloc'd) in every case; for the readers of a layout. */
int hfw_add_raw(HfWeights *w, const char *name, int ndim, const int64_t *shape, float *data, Err *err);
/* Lists a raw name as ignored with why (a buffer, say); for the readers of a layout. */
void hfw_note_ignored(HfWeights *w, const char *name, const char *why);
/* The sink that reads a pytorch_model.bin's state dict into w (tp_read_state_dict): its
** float tensors added raw, its int64 ones listed as ignored buffers when their names are
** (hfw_is_buffer_name) and refused otherwise (ERR_BAD_INPUT). */
TpSink hfw_torch_sink(HfWeights *w);

#endif
