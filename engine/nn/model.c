/* The model (masked LM or sequence classifier): parameter layout and HF names, activation plan, and the
** forward/backward passes stitched from engine/nn/layers.c. */
#include "engine/nn/model.h"

#include <assert.h>
#include <float.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/bf16.h"
#include "engine/nn/layers.h"
#include "engine/core/platform.h"
#include "engine/core/rng.h"

/* Pointers to every parameter (or gradient) tensor inside one flat buffer.
** Q, K and V of a layer are one (3H, H) matrix and one 3H bias, so a single
** sgemm computes all three; the tensor table exposes them as three views. */
typedef struct LayerTensors {
  float *qkv_w, *qkv_b, *ao_w, *ao_b, *ln1_w, *ln1_b, *fi_w, *fi_b, *fo_w, *fo_b, *ln2_w, *ln2_b;
} LayerTensors;

typedef struct Tensors {
  float *wte, *wpe, *tte, *emb_ln_w, *emb_ln_b;
  LayerTensors *layer;   /* num_hidden_layers entries */
  float *hd_w, *hd_b, *hln_w, *hln_b, *hbias;   /* the MLM head (NULL in a classifier) */
  /* A classifier's head: RoBERTa's classifier.dense and .out_proj, or BERT's
  ** bert.pooler.dense and classifier (NULL in a masked LM). */
  float *cd_w, *cd_b, *co_w, *co_b;
} Tensors;

/* Activations of one encoder layer, saved for backward when training. */
typedef struct LayerActs {
  float *qkv, *ctx, *att, *res1, *m1, *r1, *h1, *ffpre, *ffact, *res2, *m2, *r2, *out;
} LayerActs;

enum { INIT_NORMAL, INIT_ZERO, INIT_ONE };

/* One buffer of the activation plan: its name (and encoder layer, or -1), the
** Model field that points at it (f for floats, i for int32s), and how many
** elements it holds (0: this plan does not need it, and the field is NULL). */
typedef struct PlanBuf {
  const char *name;
  int layer;
  float **f;
  int32_t **i;
  size_t count;
} PlanBuf;

struct Model {
  ModelConfig cfg;
  int V, H, L, A, I, P, TV;
  int C;                         /* a classifier's classes; 0 for a masked LM */
  size_t n_params;
  size_t head_off;               /* where the head's tensors start (the last gradient group's first float) */
  float *params, *grads;
  LayerPrecision prec;           /* the Linear layers' products: float, or autocast's bf16 */
  /* The weight matrices' bf16 copy (model_keep_bf16_weights), at the same offsets
  ** as params (whose pages under those matrices are then released); else NULL. */
  uint16_t *params16;
  int grads_zeroed;              /* model_zero_grad ran and no backward since: the next one overwrites */
  Tensors p, g;
  LayerTensors *layer_storage;   /* 2*L: params then grads */
  ModelTensor *tensors;
  unsigned char *tensor_init;
  int n_tensors;

  /* plan */
  int pB, pT, pM, training, planned;
  PlanBuf *plan;                 /* the plan's buffers, in allocation order (plan_table) */
  int n_plan;
  float *acts;                   /* one allocation for all float activations, act_floats long */
  int32_t *iacts;                /* ids, positions, types, head rows, head labels, act_ints long */
  size_t act_floats, act_ints;
  int32_t *ids, *pos, *types, *hrows, *hlabels;
  float *mask_add, *emb_sum, *emb_m, *emb_r, *x0, *proj;
  LayerActs *la;                 /* L slots when training, else 1 reused */
  float *hin, *hpre, *hact, *hm, *hr, *hln, *logits;
  /* A classifier's head: cls_in holds the first tokens after dropout (a training plan);
  ** cls_x and cls_t are the inputs of its two products (the dropped copies, or the
  ** undropped rows when no dropout applies). hpre, hact and hln serve as dense's
  ** output, its tanh and the tanh after dropout. */
  float *cls_in;
  const float *cls_x, *cls_t;
  int scores_valid;              /* a classifier's logits buffer holds the last forward's scores */
  const float *head_in;          /* the head's input rows: hin, or the pruned last layer's output */
  int32_t *qstart;               /* per batch row, the first of its head rows (pB + 1) */
  int pruned;                    /* the last forward computed the last layer at the head rows only */
  float *dX, *dY, *dqkv, *dI, *dh1, *dh2;
  float *att_scratch;
  int scratch_threads;

  /* state of the last forward, for backward */
  int fB, fT, fM, has_forward;

  int threads;
  int drop_on;
  uint64_t drop_seed;
  float smoothing;               /* label smoothing of the loss (model_set_label_smoothing) */
  int prof_on;
  double prof[MODEL_PHASE_COUNT];
  double prof_product[2][MODEL_PRODUCT_COUNT];   /* [backward][product]: the matmul phase, summed on reading */

  ModelGradReady grad_ready;     /* told when a gradient group is final (data-parallel overlap) */
  void *grad_ready_ctx;
};

/* ------------------------------------------------------------ profiling */

static inline double prof_begin(const Model *m) { return m->prof_on ? omp_get_wtime() : 0; }
static inline void prof_end(Model *m, int phase, double t0) {
  if (m->prof_on) m->prof[phase] += omp_get_wtime() - t0;
}
#define PROF(m, phase, stmt) do { double t0_ = prof_begin(m); stmt; prof_end(m, phase, t0_); } while (0)
/* A Linear layer's products, timed by product: the matmul phase is their sum. */
static inline void prof_product_end(Model *m, int product, int backward, double t0) {
  if (m->prof_on) m->prof_product[backward][product] += omp_get_wtime() - t0;
}
#define PROF_PRODUCT(m, product, backward, stmt)                                                                    \
  do { double t0_ = prof_begin(m); stmt; prof_product_end(m, product, backward, t0_); } while (0)

void model_profile_enable(Model *m, int on) {
  m->prof_on = on;
  memset(m->prof, 0, sizeof m->prof);
  memset(m->prof_product, 0, sizeof m->prof_product);
}

void model_profile_products(const Model *m, double forward[MODEL_PRODUCT_COUNT], double backward[MODEL_PRODUCT_COUNT]) {
  memcpy(forward, m->prof_product[0], sizeof m->prof_product[0]);
  memcpy(backward, m->prof_product[1], sizeof m->prof_product[1]);
}

const char *model_product_name(int product) {
  static const char *const names[] = {"QKV", "attn.out", "ffn.up", "ffn.down", "head"};
  return product >= 0 && product < MODEL_PRODUCT_COUNT ? names[product] : "?";
}

void model_profile_read(const Model *m, double seconds[MODEL_PHASE_COUNT]) {
  memcpy(seconds, m->prof, sizeof m->prof);
  for (int b = 0; b < 2; b++)
    for (int p = 0; p < MODEL_PRODUCT_COUNT; p++) seconds[MODEL_PHASE_MATMUL] += m->prof_product[b][p];
}

const char *model_phase_name(int phase) {
  static const char *const names[] = {"matmul", "attention", "loss", "elementwise"};
  return phase >= 0 && phase < MODEL_PHASE_COUNT ? names[phase] : "?";
}

/* ------------------------------------------------------------- layout */

/* Lays out the tensors (in a fixed order) over base; with table != NULL also
** records the HF-named views. Returns the number of floats used. */
static size_t layout(Model *m, float *base, Tensors *t, int with_table) {
  int V = m->V, H = m->H, I = m->I;
  size_t off = 0;
  const char *pre = m->cfg.model_type == MODEL_ROBERTA ? "roberta" : "bert";
#define TAKE(ptr, count) do { (ptr) = base ? base + off : NULL; off += (size_t)(count); } while (0)
#define NAME(view_off, r_, c_, init_, decay_, ...) do { \
    if (with_table) { \
      ModelTensor *mt = &m->tensors[m->n_tensors]; \
      snprintf(mt->name, sizeof mt->name, __VA_ARGS__); \
      mt->ndim = (c_) ? 2 : 1; mt->shape[0] = (r_); mt->shape[1] = (c_); \
      mt->offset = (view_off); mt->numel = (size_t)(r_) * ((c_) ? (size_t)(c_) : 1); mt->decay = (decay_); \
      m->tensor_init[m->n_tensors] = (init_); m->n_tensors++; } } while (0)
  size_t o;
  o = off; TAKE(t->wte, (size_t)V * H); NAME(o, V, H, INIT_NORMAL, 1, "%s.embeddings.word_embeddings.weight", pre);
  o = off; TAKE(t->wpe, (size_t)m->P * H); NAME(o, m->P, H, INIT_NORMAL, 1, "%s.embeddings.position_embeddings.weight", pre);
  o = off; TAKE(t->tte, (size_t)m->TV * H); NAME(o, m->TV, H, INIT_NORMAL, 1, "%s.embeddings.token_type_embeddings.weight", pre);
  o = off; TAKE(t->emb_ln_w, H); NAME(o, H, 0, INIT_ONE, 0, "%s.embeddings.LayerNorm.weight", pre);
  o = off; TAKE(t->emb_ln_b, H); NAME(o, H, 0, INIT_ZERO, 0, "%s.embeddings.LayerNorm.bias", pre);
  for (int l = 0; l < m->L; l++) {
    LayerTensors *lt = &t->layer[l];
    char lp[48];
    snprintf(lp, sizeof lp, "%s.encoder.layer.%d", pre, l);
    size_t ow = off; TAKE(lt->qkv_w, (size_t)3 * H * H);
    size_t ob = off; TAKE(lt->qkv_b, (size_t)3 * H);
    static const char *const qkv[3] = {"query", "key", "value"};
    for (int j = 0; j < 3; j++) {
      NAME(ow + (size_t)j * H * H, H, H, INIT_NORMAL, 1, "%s.attention.self.%s.weight", lp, qkv[j]);
      NAME(ob + (size_t)j * H, H, 0, INIT_ZERO, 0, "%s.attention.self.%s.bias", lp, qkv[j]);
    }
    o = off; TAKE(lt->ao_w, (size_t)H * H); NAME(o, H, H, INIT_NORMAL, 1, "%s.attention.output.dense.weight", lp);
    o = off; TAKE(lt->ao_b, H); NAME(o, H, 0, INIT_ZERO, 0, "%s.attention.output.dense.bias", lp);
    o = off; TAKE(lt->ln1_w, H); NAME(o, H, 0, INIT_ONE, 0, "%s.attention.output.LayerNorm.weight", lp);
    o = off; TAKE(lt->ln1_b, H); NAME(o, H, 0, INIT_ZERO, 0, "%s.attention.output.LayerNorm.bias", lp);
    o = off; TAKE(lt->fi_w, (size_t)I * H); NAME(o, I, H, INIT_NORMAL, 1, "%s.intermediate.dense.weight", lp);
    o = off; TAKE(lt->fi_b, I); NAME(o, I, 0, INIT_ZERO, 0, "%s.intermediate.dense.bias", lp);
    o = off; TAKE(lt->fo_w, (size_t)H * I); NAME(o, H, I, INIT_NORMAL, 1, "%s.output.dense.weight", lp);
    o = off; TAKE(lt->fo_b, H); NAME(o, H, 0, INIT_ZERO, 0, "%s.output.dense.bias", lp);
    o = off; TAKE(lt->ln2_w, H); NAME(o, H, 0, INIT_ONE, 0, "%s.output.LayerNorm.weight", lp);
    o = off; TAKE(lt->ln2_b, H); NAME(o, H, 0, INIT_ZERO, 0, "%s.output.LayerNorm.bias", lp);
  }
  int rob = m->cfg.model_type == MODEL_ROBERTA;
  m->head_off = off;
  if (m->C) {
    /* HF's _init_weights: Linear weights N(0, initializer_range), biases zero. */
    o = off; TAKE(t->cd_w, (size_t)H * H);
    NAME(o, H, H, INIT_NORMAL, 1, "%s", rob ? "classifier.dense.weight" : "bert.pooler.dense.weight");
    o = off; TAKE(t->cd_b, H);
    NAME(o, H, 0, INIT_ZERO, 0, "%s", rob ? "classifier.dense.bias" : "bert.pooler.dense.bias");
    o = off; TAKE(t->co_w, (size_t)m->C * H);
    NAME(o, m->C, H, INIT_NORMAL, 1, "%s", rob ? "classifier.out_proj.weight" : "classifier.weight");
    o = off; TAKE(t->co_b, m->C);
    NAME(o, m->C, 0, INIT_ZERO, 0, "%s", rob ? "classifier.out_proj.bias" : "classifier.bias");
    return off;
  }
  o = off; TAKE(t->hd_w, (size_t)H * H);
  NAME(o, H, H, INIT_NORMAL, 1, "%s", rob ? "lm_head.dense.weight" : "cls.predictions.transform.dense.weight");
  o = off; TAKE(t->hd_b, H);
  NAME(o, H, 0, INIT_ZERO, 0, "%s", rob ? "lm_head.dense.bias" : "cls.predictions.transform.dense.bias");
  o = off; TAKE(t->hln_w, H);
  NAME(o, H, 0, INIT_ONE, 0, "%s", rob ? "lm_head.layer_norm.weight" : "cls.predictions.transform.LayerNorm.weight");
  o = off; TAKE(t->hln_b, H);
  NAME(o, H, 0, INIT_ZERO, 0, "%s", rob ? "lm_head.layer_norm.bias" : "cls.predictions.transform.LayerNorm.bias");
  o = off; TAKE(t->hbias, V);
  NAME(o, V, 0, INIT_ZERO, 0, "%s", rob ? "lm_head.bias" : "cls.predictions.bias");
#undef TAKE
#undef NAME
  return off;
}

Model *model_new(const ModelConfig *cfg, Err *err) {
  /* The parser's own validator, so a config built in code meets the same limits
  ** (the 2^31-element caps the int arithmetic relies on among them). */
  if (config_validate(cfg, err)) return NULL;
  /* A bare encoder (BertModel) is kept in the store to start classifiers from; nothing computes it as is. */
  if (cfg->task == MODEL_TASK_ENCODER) {
    err_setk(err, ERR_INVALID, "config: %s has no head to compute (a base checkpoint: fine-tune it, or use a *ForMaskedLM model)",
             config_architecture(cfg));
    return NULL;
  }
  Model *m = calloc(1, sizeof *m);
  if (!m) { err_set(err, "out of memory"); return NULL; }
  m->cfg = *cfg;
  m->V = cfg->vocab_size; m->H = cfg->hidden_size; m->L = cfg->num_hidden_layers;
  m->A = cfg->num_attention_heads; m->I = cfg->intermediate_size;
  m->P = cfg->max_position_embeddings; m->TV = cfg->type_vocab_size;
  m->C = cfg->task == MODEL_TASK_SEQ_CLS ? cfg->num_labels : 0;
  m->threads = omp_get_max_threads();
  int max_tensors = 5 + 16 * m->L + 5;
  m->layer_storage = calloc((size_t)2 * m->L, sizeof(LayerTensors));
  m->tensors = calloc((size_t)max_tensors, sizeof(ModelTensor));
  m->tensor_init = calloc((size_t)max_tensors, 1);
  if (!m->layer_storage || !m->tensors || !m->tensor_init) goto oom;
  m->p.layer = m->layer_storage;
  m->g.layer = m->layer_storage + m->L;
  m->n_params = layout(m, NULL, &m->p, 0);
  m->params = platform_alloc_floats(m->n_params);
  if (!m->params) goto oom;
  layout(m, m->params, &m->p, 1);
  return m;
oom:
  err_set(err, "out of memory for a model of %zu parameters", m->n_params);
  model_free(m);
  return NULL;
}

void model_free(Model *m) {
  if (!m) return;
  free(m->params); free(m->grads); free(m->params16); free(m->acts); free(m->iacts); free(m->la); free(m->att_scratch); free(m->plan);
  free(m->layer_storage); free(m->tensors); free(m->tensor_init);
  free(m);
}

void model_init_weights(Model *m, uint64_t seed) {
  assert(!m->params16);   /* it would write float matrices that model_keep_bf16_weights released */
  Rng r;
  rng_seed(&r, seed);
  float std = (float)m->cfg.initializer_range;
  for (int i = 0; i < m->n_tensors; i++) {
    const ModelTensor *t = &m->tensors[i];
    float *x = m->params + t->offset;
    switch (m->tensor_init[i]) {
      case INIT_NORMAL: for (size_t j = 0; j < t->numel; j++) x[j] = (float)rng_normal(&r) * std; break;
      case INIT_ZERO: memset(x, 0, t->numel * sizeof(float)); break;
      default: for (size_t j = 0; j < t->numel; j++) x[j] = 1.0f; break;
    }
  }
  /* nn.Embedding(padding_idx) rows start at zero: the word table's, and RoBERTa's position table's. */
  int pad = m->cfg.pad_token_id;
  memset(m->p.wte + (size_t)pad * m->H, 0, (size_t)m->H * sizeof(float));
  if (m->cfg.model_type == MODEL_ROBERTA) memset(m->p.wpe + (size_t)pad * m->H, 0, (size_t)m->H * sizeof(float));
}

const ModelConfig *model_config(const Model *m) { return &m->cfg; }
size_t model_num_params(const Model *m) { return m->n_params; }
float *model_params(Model *m) { return m->params; }
const ModelTensor *model_nonfinite_tensor(Model *m) {
  for (int i = 0; i < model_tensor_count(m); i++) {
    const ModelTensor *t = model_tensor(m, i);
    float *p;
    uint16_t *half;
    model_tensor_storage(m, i, &p, &half);
    /* NaN and the infinities are the values whose exponent bits are all ones: an integer
    ** test the compiler vectorises, without a branch per element. */
    uint32_t bad = 0;
    if (p) {
      for (size_t j = 0; j < t->numel; j++) {
        uint32_t bits;
        memcpy(&bits, p + j, sizeof bits);
        bad |= (bits & 0x7f800000u) == 0x7f800000u;
      }
    } else {
      for (size_t j = 0; j < t->numel; j++) bad |= (half[j] & 0x7f80u) == 0x7f80u;
    }
    if (bad) return t;
  }
  return NULL;
}
float *model_grads(Model *m) {
  /* Zeroed but not written since: make the zeros real for the reader. */
  if (m->grads && m->grads_zeroed) {
    memset(m->grads, 0, m->n_params * sizeof(float));
    m->grads_zeroed = 0;
  }
  return m->grads;
}
int model_tensor_count(const Model *m) { return m->n_tensors; }
const ModelTensor *model_tensor(const Model *m, int i) {
  return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}
const ModelTensor *model_tensor_by_name(const Model *m, const char *name) {
  for (int i = 0; i < m->n_tensors; i++)
    if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
  return NULL;
}

/* ---------------------------------------------------------- precision */

void model_set_precision(Model *m, ModelPrecision p) {
  m->prec = p == MODEL_BF16 || m->params16 ? LAYER_BF16 : LAYER_FP32;
}

const char *model_precision_name(ModelPrecision p) { return p == MODEL_BF16 ? "bf16" : "fp32"; }

int model_precision_parse(const char *name, ModelPrecision *out) {
  if (name && !strcmp(name, "fp32")) *out = MODEL_FP32;
  else if (name && !strcmp(name, "bf16")) *out = MODEL_BF16;
  else return -1;
  return 0;
}

ModelPrecision model_precision(const Model *m) { return m->prec == LAYER_BF16 ? MODEL_BF16 : MODEL_FP32; }

int model_weights_bf16(const Model *m) { return m->params16 != NULL; }

int model_keep_bf16_weights(Model *m, int convert, Err *err) {
  if (m->params16) return 0;
  if (m->grads) return err_setk(err, ERR_INVALID, "a model planned for training keeps float weights");
  /* Floats give the 64-byte (and, when large, huge-page) alignment; a uint16 copy takes half as many. */
  m->params16 = (uint16_t *)platform_alloc_floats(m->n_params / 2 + 1);
  if (!m->params16) return err_setk(err, ERR_NOMEM, "out of memory for the bf16 weights (%zu MB)", m->n_params >> 19);
  size_t page = (size_t)platform_page_size();
  /* Only the 1-D tensors, scattered between the matrices, stay in the float buffer: on
  ** huge pages each one written would bring in 2 MiB (about 110 MB for the base model,
  ** half the bf16 matrices again). A large buffer is page-aligned (platform_alloc_floats);
  ** a small one's advice fails, harmlessly. */
  platform_small_pages(m->params, (m->n_params * sizeof(float) + page - 1) & ~(page - 1));
  for (int i = 0; i < m->n_tensors; i++) {
    const ModelTensor *t = &m->tensors[i];
    if (t->ndim != 2) continue;
    float *x = m->params + t->offset;
    uint16_t *y = m->params16 + t->offset;
    if (convert)
      for (size_t j = 0; j < t->numel; j++) y[j] = bf16_from_f32(x[j]);
    else
      memset(y, 0, t->numel * sizeof *y);
    /* The float pages wholly inside the matrix go back to the system (and read as
    ** zeros if touched again, which nothing does: every reader takes the copy). */
    uintptr_t lo = ((uintptr_t)x + page - 1) & ~(uintptr_t)(page - 1), hi = ((uintptr_t)(x + t->numel)) & ~(uintptr_t)(page - 1);
    if (hi > lo) platform_release_pages((void *)lo, hi - lo);
  }
  m->prec = LAYER_BF16;
  return 0;
}

void model_tensor_storage(Model *m, int i, float **f32, uint16_t **bf16) {
  const ModelTensor *t = &m->tensors[i];
  int half = m->params16 && t->ndim == 2;
  *f32 = half ? NULL : m->params + t->offset;
  *bf16 = half ? m->params16 + t->offset : NULL;
}

/* A forward Linear product, out = in w^T + b (act = GELU(out) when act): from
** the bf16 copy of w when the model keeps one, else at the model's precision. */
static void linear(Model *m, float *out, float *act, const float *in, const float *w, const float *b, int n, int k,
                   int o) {
  if (m->params16) {
    const uint16_t *w16 = m->params16 + (w - m->params);
    if (act) matmul_gelu_forward_bf16w(out, act, in, w16, b, n, k, o, m->threads);
    else matmul_forward_bf16w(out, in, w16, b, n, k, o, m->threads);
  } else if (act) {
    matmul_gelu_forward(m->prec, out, act, in, w, b, n, k, o, m->threads);
  } else {
    matmul_forward(m->prec, out, in, w, b, n, k, o, m->threads);
  }
}

/* --------------------------------------------------------------- plan */

/* llm.c's habit: one table lists every activation buffer with its size, and
** the same table both sizes the allocations and carves them up, so the two
** cannot drift apart. Float buffers each start on a 64-byte line (the product
** kernel's stores of C rows run about 10% slower when they straddle lines). */

/* Entries plan_table may write for this many layer slots. */
static int plan_capacity(int slots) { return 6 + 13 * slots + 8 + 6 + 6; }

/* Floats a float buffer of count takes: up to the next 64-byte line. */
static size_t plan_floats(size_t count) { return (count + 15) & ~(size_t)15; }

/* Fills t with the buffers of a (batch, seq) plan with M head rows, in
** allocation order; returns how many. Inference keeps neither the attention
** probabilities nor the residual sums (backward's inputs), applies GELU in
** place and has no gradients: those entries have count 0. */
static int plan_table(Model *m, PlanBuf *t, int batch, int seq, size_t M, int training) {
  size_t N = (size_t)batch * seq, H = m->H, I = m->I, V = m->V, tr = training != 0;
  size_t att = (size_t)batch * m->A * seq * seq;
  int n = 0, slots = training ? m->L : 1;
#define F(name, layer, field, count) (t[n++] = (PlanBuf){name, layer, &(field), NULL, (count)})
#define IDS(name, field, count) (t[n++] = (PlanBuf){name, -1, NULL, &(field), (count)})
  F("mask_add", -1, m->mask_add, N);
  F("emb_sum", -1, m->emb_sum, N * H);
  F("emb_mean", -1, m->emb_m, N);
  F("emb_rstd", -1, m->emb_r, N);
  F("x0", -1, m->x0, N * H);
  F("proj", -1, m->proj, N * H);
  for (int s = 0; s < slots; s++) {
    LayerActs *l = &m->la[s];
    F("qkv", s, l->qkv, N * 3 * H);
    F("ctx", s, l->ctx, N * H);
    F("ln1_mean", s, l->m1, N);
    F("ln1_rstd", s, l->r1, N);
    F("h1", s, l->h1, N * H);
    F("ffpre", s, l->ffpre, N * I);
    F("ln2_mean", s, l->m2, N);
    F("ln2_rstd", s, l->r2, N);
    F("out", s, l->out, N * H);
    F("att", s, l->att, tr * att);
    F("res1", s, l->res1, tr * N * H);
    F("res2", s, l->res2, tr * N * H);
    F("ffact", s, l->ffact, tr * N * I);
  }
  F("head_in", -1, m->hin, M * H);
  F("head_pre", -1, m->hpre, M * H);
  F("head_act", -1, m->hact, M * H);
  /* A classifier's head has no LayerNorm, a product to C classes, and (training) a dropped copy of its input. */
  size_t C = (size_t)m->C, mlm = C == 0;
  F("head_mean", -1, m->hm, mlm * M);
  F("head_rstd", -1, m->hr, mlm * M);
  F("head_ln", -1, m->hln, M * H);
  F("cls_in", -1, m->cls_in, (1 - mlm) * tr * M * H);
  F("logits", -1, m->logits, M * (mlm ? V : C));
  F("dX", -1, m->dX, tr * N * H);
  F("dY", -1, m->dY, tr * N * H);
  F("dqkv", -1, m->dqkv, tr * N * 3 * H);
  F("dI", -1, m->dI, tr * N * I);
  F("dh1", -1, m->dh1, tr * M * H);
  F("dh2", -1, m->dh2, tr * M * H);
  IDS("ids", m->ids, N);
  IDS("positions", m->pos, N);
  IDS("types", m->types, N);
  IDS("head_rows", m->hrows, M);
  IDS("head_labels", m->hlabels, M);
  IDS("qstart", m->qstart, (size_t)batch + 1);
#undef F
#undef IDS
  assert(n <= plan_capacity(slots));
  return n;
}

/* Points every field of the table into m->acts and m->iacts, in table order. */
static void plan_carve(Model *m) {
  size_t fo = 0, io = 0;
  for (int k = 0; k < m->n_plan; k++) {
    const PlanBuf *b = &m->plan[k];
    if (b->f) {
      *b->f = b->count ? m->acts + fo : NULL;
      fo += plan_floats(b->count);
      assert(fo <= m->act_floats);
    } else {
      *b->i = b->count ? m->iacts + io : NULL;
      io += b->count;
      assert(io <= m->act_ints);
    }
  }
  /* The carve-up used exactly what was allocated from the same table. */
  assert(fo == m->act_floats && io == m->act_ints);
}

int model_activation_count(const Model *m) { return m->planned ? m->n_plan : 0; }

int model_activation(const Model *m, int i, ModelActivation *out) {
  if (!m->planned || i < 0 || i >= m->n_plan) return -1;
  const PlanBuf *b = &m->plan[i];
  out->name = b->name;
  out->layer = b->layer;
  out->is_int = b->i != NULL;
  /* A buffer the plan does not need may alias another (inference's GELU in place): not its own. */
  out->data = !b->count ? NULL : b->f ? (const void *)*b->f : (const void *)*b->i;
  out->bytes = b->count * (b->f ? sizeof(float) : sizeof(int32_t));
  return 0;
}

void model_activation_arenas(const Model *m, const void **floats, size_t *float_bytes, const void **ints,
                             size_t *int_bytes) {
  int p = m->planned;
  *floats = p ? m->acts : NULL;
  *float_bytes = p ? m->act_floats * sizeof(float) : 0;
  *ints = p ? m->iacts : NULL;
  *int_bytes = p ? m->act_ints * sizeof(int32_t) : 0;
}


static int ensure_scratch(Model *m, int threads) {
  if (!m->planned || threads <= m->scratch_threads) return 0;
  float *s = platform_alloc_floats((size_t)threads * 2 * m->pT * m->pT);
  if (!s) return -1;
  free(m->att_scratch);
  m->att_scratch = s;
  m->scratch_threads = threads;
  return 0;
}

int model_plan(Model *m, int batch, int seq, int head_rows, int training, Err *err) {
  int nt = m->threads;
  if (batch <= 0 || seq <= 0 || head_rows < 0)
    return err_set(err, "plan: batch %d, seq %d and head_rows %d must be positive", batch, seq, head_rows);
  if (training && m->params16)
    return err_setk(err, ERR_INVALID, "plan: a model serving from bf16 weights cannot train (no float weights)");
  if (m->C) head_rows = batch;   /* a classifier's head reads each row's first token */
  if (head_rows == 0) head_rows = 1;
  int maxpos = config_max_tokens(&m->cfg);
  if (seq > maxpos)
    return err_set(err, "plan: seq %d exceeds the %d positions of max_position_embeddings %d", seq, maxpos, m->P);
  free(m->acts); free(m->iacts); free(m->la); free(m->att_scratch); free(m->grads); free(m->plan);
  m->acts = NULL; m->iacts = NULL; m->la = NULL; m->att_scratch = NULL; m->grads = NULL; m->plan = NULL;
  m->n_plan = 0; m->planned = 0; m->scratch_threads = 0; m->has_forward = 0;

  int slots = training ? m->L : 1;
  m->la = calloc((size_t)slots, sizeof(LayerActs));
  m->plan = m->la ? calloc((size_t)plan_capacity(slots), sizeof(PlanBuf)) : NULL;
  m->n_plan = m->plan ? plan_table(m, m->plan, batch, seq, (size_t)head_rows, training) : 0;
  size_t floats = 0, ints = 0;
  for (int i = 0; i < m->n_plan; i++) {
    if (m->plan[i].f) floats += plan_floats(m->plan[i].count);
    else ints += m->plan[i].count;
  }
  m->acts = m->plan ? platform_alloc_floats(floats) : NULL;
  m->iacts = m->plan ? malloc(ints * sizeof(int32_t)) : NULL;
  if (training && (m->grads = platform_alloc_floats(m->n_params))) memset(m->grads, 0, m->n_params * sizeof(float));
  m->grads_zeroed = 0;
  if (m->grads) layout(m, m->grads, &m->g, 0);   /* gradient views: the parameters' layout */
  if (!m->acts || !m->iacts || !m->la || !m->plan || (training && !m->grads)) {
    free(m->acts); free(m->iacts); free(m->la); free(m->grads); free(m->plan);
    m->acts = NULL; m->iacts = NULL; m->la = NULL; m->grads = NULL; m->plan = NULL; m->n_plan = 0;
    return err_set(err, "plan: out of memory for batch %d x seq %d (%zu MB of activations)", batch, seq,
                   floats * sizeof(float) >> 20);
  }
  m->act_floats = floats;
  m->act_ints = ints;
  plan_carve(m);
  /* Inference applies GELU in place: the FFN's activation is its input's buffer. */
  if (!training) m->la[0].ffact = m->la[0].ffpre;
  m->pB = batch; m->pT = seq; m->pM = head_rows; m->training = training; m->planned = 1;
  /* Every parallel region of a pass has at most m->threads threads. */
  if (ensure_scratch(m, nt)) {
    m->planned = 0;
    return err_set(err, "plan: out of memory for attention scratch");
  }
  return 0;
}

void model_set_dropout(Model *m, int enabled, uint64_t seed) {
  m->drop_on = enabled;
  m->drop_seed = seed;
}

void model_set_label_smoothing(Model *m, float s) { m->smoothing = s > 0 && s < 1 ? s : 0; }

/* The count is the model's alone: its passes give it to every parallel region
** (num_threads) and product (gemm_f32) they run, so setting it changes nothing
** for another model, whatever thread that one runs on, nor for the caller. */
void model_set_threads(Model *m, int threads) {
  if (threads < 1) threads = 1;
  m->threads = threads;
  if (ensure_scratch(m, threads)) {
    /* Without scratch for more threads, stay at what the scratch covers. */
    m->threads = m->scratch_threads;
  }
}

int model_threads(const Model *m) { return m->threads; }

/* ------------------------------------------------------------ forward */

static LayerDropout dropout_site(const Model *m, int site, double p) {
  LayerDropout d = {0.0f, m->drop_seed, (uint64_t)site, NULL, 0};
  if (m->drop_on && m->training) d.p = (float)p;
  return d;
}

static LayerActs *slot(Model *m, int l) { return &m->la[m->training ? l : 0]; }

/* Checks the batch, fills ids/positions/types/mask and runs the embeddings
** into m->x0; -1 on bad input. */
static int batch_forward(Model *m, const ModelBatch *b, Err *err) {
  int nt = m->threads;
  if (!m->planned) return err_set(err, "forward: the model has no plan (call model_plan first)");
  if (!b || !b->input_ids || b->batch <= 0 || b->seq <= 0 || b->batch > m->pB || b->seq > m->pT) {
    return err_set(err, "forward: batch %d x seq %d does not fit the plan %d x %d", b ? b->batch : 0,
                   b ? b->seq : 0, m->pB, m->pT);
  }
  int B = b->batch, T = b->seq, N = B * T, H = m->H, pad = m->cfg.pad_token_id;
  for (int i = 0; i < N; i++) {
    int32_t id = b->input_ids[i];
    if (id < 0 || id >= m->V) return err_set(err, "forward: input id %d at %d is outside the vocabulary of %d", id, i, m->V);
    int32_t ty = b->token_type_ids ? b->token_type_ids[i] : 0;
    if (ty < 0 || ty >= m->TV) return err_set(err, "forward: token type %d at %d is outside 0..%d", ty, i, m->TV - 1);
    m->ids[i] = id;
    m->types[i] = ty;
    m->mask_add[i] = (!b->attention_mask || b->attention_mask[i]) ? 0.0f : -FLT_MAX;
  }
  for (int r = 0; r < B; r++) {
    int c = 0;
    for (int t = 0; t < T; t++) {
      int i = r * T + t;
      if (m->cfg.model_type == MODEL_ROBERTA) {
        /* RoBERTa counts non-pad ids (not the attention mask): real tokens start at pad+1. */
        int real = m->ids[i] != pad;
        c += real;
        m->pos[i] = real ? c + pad : pad;
      } else {
        m->pos[i] = t;
      }
    }
  }
  LayerDropout d;
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    if (m->params16)
      embeddings_forward_bf16w(m->emb_sum, m->ids, m->pos, m->types, m->params16 + (m->p.wte - m->params),
                               m->params16 + (m->p.wpe - m->params), m->params16 + (m->p.tte - m->params), N, H, nt);
    else
      embeddings_forward(m->emb_sum, m->ids, m->pos, m->types, m->p.wte, m->p.wpe, m->p.tte, N, H, nt);
    layernorm_forward(m->x0, m->emb_m, m->emb_r, m->emb_sum, m->p.emb_ln_w, m->p.emb_ln_b, N, H,
                      (float)m->cfg.layer_norm_eps, nt);
    d = dropout_site(m, 0, m->cfg.hidden_dropout_prob);
    dropout_forward_inplace(m->x0, (size_t)N * H, &d, nt);
  });
  m->fB = B; m->fT = T;
  return 0;
}

/* The last encoder layer computed only at the M head rows (m->hrows, sorted):
** keys and values need every position, but queries, the attention output, the
** FFN and both LayerNorms act per row, and no other row reaches the loss.
** Returns the layer's output at those rows, (M, H). */
static const float *last_layer_rows_forward(Model *m, const float *x, int M) {
  int nt = m->threads;
  int l = m->L - 1, B = m->fB, T = m->fT, N = B * T, H = m->H, I = m->I;
  LayerTensors *w = &m->p.layer[l];
  LayerActs *a = slot(m, l);
  float eps = (float)m->cfg.layer_norm_eps;
  LayerDropout datt = dropout_site(m, 1 + 3 * l, m->cfg.attention_probs_dropout_prob);
  LayerDropout dao = dropout_site(m, 2 + 3 * l, m->cfg.hidden_dropout_prob);
  LayerDropout dfo = dropout_site(m, 3 + 3 * l, m->cfg.hidden_dropout_prob);
  dao.rows = dfo.rows = m->hrows;
  dao.cols = dfo.cols = H;
  float *kv = a->qkv, *q = a->qkv + (size_t)N * 2 * H;
  PROF_PRODUCT(m, MODEL_PRODUCT_QKV, 0, linear(m, kv, NULL, x, w->qkv_w + (size_t)H * H, w->qkv_b + H, N, H, 2 * H));
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    for (int i = 0; i < M; i++) memcpy(m->hin + (size_t)i * H, x + (size_t)m->hrows[i] * H, (size_t)H * sizeof(float));
  });
  PROF_PRODUCT(m, MODEL_PRODUCT_QKV, 0, linear(m, q, NULL, m->hin, w->qkv_w, w->qkv_b, M, H, H));
  PROF(m, MODEL_PHASE_ATTENTION, attention_rows_forward(m->prec, a->ctx, a->att, q, kv, m->hrows, m->qstart,
                                                        m->mask_add, B, T, H, m->A, M, &datt, m->att_scratch, nt));
  PROF_PRODUCT(m, MODEL_PRODUCT_ATTN_OUT, 0, linear(m, m->proj, NULL, a->ctx, w->ao_w, w->ao_b, M, H, H));
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    residual_layernorm_forward(a->res1, a->h1, a->m1, a->r1, m->hin, m->proj, w->ln1_w, w->ln1_b, M, H, eps, &dao, nt);
  });
  PROF_PRODUCT(m, MODEL_PRODUCT_FFN_UP, 0, linear(m, a->ffpre, a->ffact, a->h1, w->fi_w, w->fi_b, M, H, I));
  PROF_PRODUCT(m, MODEL_PRODUCT_FFN_DOWN, 0, linear(m, m->proj, NULL, a->ffact, w->fo_w, w->fo_b, M, I, H));
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    residual_layernorm_forward(a->res2, a->out, a->m2, a->r2, a->h1, m->proj, w->ln2_w, w->ln2_b, M, H, eps, &dfo, nt);
  });
  return a->out;
}

/* Runs encoder layers [0, n_layers) on the prepared batch; returns the last
** output (B*T, H). */
static const float *encoder_layers_forward(Model *m, int n_layers) {
  int nt = m->threads;
  int B = m->fB, T = m->fT, N = B * T, H = m->H;
  const float *x = m->x0;
  float eps = (float)m->cfg.layer_norm_eps;
  for (int l = 0; l < n_layers; l++) {
    LayerTensors *w = &m->p.layer[l];
    LayerActs *a = slot(m, l);
    LayerDropout datt = dropout_site(m, 1 + 3 * l, m->cfg.attention_probs_dropout_prob);
    LayerDropout dao = dropout_site(m, 2 + 3 * l, m->cfg.hidden_dropout_prob);
    LayerDropout dfo = dropout_site(m, 3 + 3 * l, m->cfg.hidden_dropout_prob);
    PROF_PRODUCT(m, MODEL_PRODUCT_QKV, 0, linear(m, a->qkv, NULL, x, w->qkv_w, w->qkv_b, N, H, 3 * H));
    PROF(m, MODEL_PHASE_ATTENTION,
         attention_forward(m->prec, a->ctx, a->att, a->qkv, m->mask_add, B, T, H, m->A, &datt, m->att_scratch, nt));
    PROF_PRODUCT(m, MODEL_PRODUCT_ATTN_OUT, 0, linear(m, m->proj, NULL, a->ctx, w->ao_w, w->ao_b, N, H, H));
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      residual_layernorm_forward(a->res1, a->h1, a->m1, a->r1, x, m->proj, w->ln1_w, w->ln1_b, N, H, eps, &dao, nt);
    });
    PROF_PRODUCT(m, MODEL_PRODUCT_FFN_UP, 0, linear(m, a->ffpre, a->ffact, a->h1, w->fi_w, w->fi_b, N, H, m->I));
    PROF_PRODUCT(m, MODEL_PRODUCT_FFN_DOWN, 0, linear(m, m->proj, NULL, a->ffact, w->fo_w, w->fo_b, N, m->I, H));
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      residual_layernorm_forward(a->res2, a->out, a->m2, a->r2, a->h1, m->proj, w->ln2_w, w->ln2_b, N, H, eps, &dfo,
                                 nt);
    });
    x = a->out;
  }
  return x;
}

/* The MLM head on M rows: x holds them already gathered (M, H) when gathered,
** else x is (B*T, H) and the rows are m->hrows. Leaves logits (M, V) in out. */
static void head_forward(Model *m, const float *x, int M, int gathered, float *out) {
  int nt = m->threads;
  int H = m->H;
  if (gathered) {
    m->head_in = x;
  } else {
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      for (int i = 0; i < M; i++) memcpy(m->hin + (size_t)i * H, x + (size_t)m->hrows[i] * H, (size_t)H * sizeof(float));
    });
    m->head_in = m->hin;
  }
  PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 0, linear(m, m->hpre, m->hact, m->head_in, m->p.hd_w, m->p.hd_b, M, H, H));
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    layernorm_forward(m->hln, m->hm, m->hr, m->hact, m->p.hln_w, m->p.hln_b, M, H, (float)m->cfg.layer_norm_eps, nt);
  });
  PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 0, linear(m, out, NULL, m->hln, m->p.wte, m->p.hbias, M, H, m->V));
}

/* The classifier's dropout probability: classifier_dropout, or hidden_dropout_prob when null (HF). */
static double cls_dropout_p(const Model *m) {
  return m->cfg.classifier_dropout >= 0 ? m->cfg.classifier_dropout : m->cfg.hidden_dropout_prob;
}

/* Dropout sites of the classifier head, after the encoder's 0 .. 3L. */
static LayerDropout cls_dropout_site(const Model *m, int which) {
  return dropout_site(m, 3 * m->L + 1 + which, cls_dropout_p(m));
}

/* The classifier head on the M first-token rows x (M, H), already gathered:
** RoBERTa: dropout, dense, tanh, dropout, out_proj; BERT: pooler dense, tanh,
** dropout, classifier. Leaves logits (M, C) in out. */
static void cls_head_forward(Model *m, const float *x, int M, float *out) {
  int nt = m->threads, H = m->H;
  size_t MH = (size_t)M * H;
  LayerDropout d_in = cls_dropout_site(m, 0), d_out = cls_dropout_site(m, 1);
  m->cls_x = x;
  if (m->cfg.model_type == MODEL_ROBERTA && d_in.p > 0) {
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      memcpy(m->cls_in, x, MH * sizeof(float));
      dropout_forward_inplace(m->cls_in, MH, &d_in, nt);
    });
    m->cls_x = m->cls_in;
  }
  PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 0, linear(m, m->hpre, NULL, m->cls_x, m->p.cd_w, m->p.cd_b, M, H, H));
  PROF(m, MODEL_PHASE_ELEMENTWISE, tanh_forward(m->hact, m->hpre, MH, nt));
  m->cls_t = m->hact;
  if (d_out.p > 0) {
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      memcpy(m->hln, m->hact, MH * sizeof(float));
      dropout_forward_inplace(m->hln, MH, &d_out, nt);
    });
    m->cls_t = m->hln;
  }
  PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 0, linear(m, out, NULL, m->cls_t, m->p.co_w, m->p.co_b, M, H, m->C));
}

/* Head rows in flat order, so each batch row's are one run: qstart[r] is row r's first. */
static void head_row_starts(Model *m, int batch, int seq, int M) {
  for (int r = 0, i = 0; r <= batch; r++) {
    while (i < M && m->hrows[i] < r * seq) i++;
    m->qstart[r] = i;
  }
}

/* model_forward of a classifier: the head at the first token of each labelled row. */
static int cls_forward(Model *m, const ModelBatch *b, ModelLoss *res, Err *err) {
  int M = 0;
  if (b->labels) {
    for (int r = 0; r < b->batch; r++) {
      int32_t lab = b->labels[r];
      if (lab == MODEL_IGNORE_LABEL) continue;
      if (lab < 0 || lab >= m->C) return err_set(err, "forward: label %d of row %d is outside the %d classes", lab, r, m->C);
      m->hrows[M] = r * b->seq;
      m->hlabels[M] = lab;
      M++;
    }
  }
  head_row_starts(m, b->batch, b->seq, M);
  m->pruned = M > 0;
  if (M > 0) {
    const float *x = encoder_layers_forward(m, m->L - 1);
    const float *hx = last_layer_rows_forward(m, x, M);
    cls_head_forward(m, hx, M, m->logits);
    PROF(m, MODEL_PHASE_LOSS, crossentropy_forward(m->training ? m->logits : NULL, m->logits, m->hlabels, M, m->C,
                                                   m->smoothing, &res->loss_sum, &res->n_correct, m->threads));
    m->scores_valid = 1;
  }
  res->n_labels = M;
  m->fM = M;
  m->has_forward = m->training;
  return 0;
}

int model_forward(Model *m, const ModelBatch *b, ModelLoss *out, Err *err) {
  int nt = m->threads;
  m->has_forward = 0;
  m->scores_valid = 0;
  ModelLoss res = {0, 0, 0};
  if (out) *out = res;
  if (batch_forward(m, b, err)) return -1;
  if (m->C) {
    int rc = cls_forward(m, b, &res, err);
    if (out) *out = res;
    return rc;
  }
  int N = b->batch * b->seq, M = 0;
  if (b->labels) {
    for (int i = 0; i < N; i++) {
      int32_t lab = b->labels[i];
      if (lab == MODEL_IGNORE_LABEL) continue;
      if (lab < 0 || lab >= m->V) return err_set(err, "forward: label %d at %d is outside the vocabulary of %d", lab, i, m->V);
      if (M == m->pM) return err_set(err, "forward: more than the planned %d labelled positions", m->pM);
      m->hrows[M] = i;
      m->hlabels[M] = lab;
      M++;
    }
  }
  head_row_starts(m, b->batch, b->seq, M);
  m->pruned = M > 0;
  if (M > 0) {
    const float *x = encoder_layers_forward(m, m->L - 1);
    const float *hx = last_layer_rows_forward(m, x, M);
    head_forward(m, hx, M, 1, m->logits);
    /* Training keeps the softmax in the logits buffer for backward. */
    PROF(m, MODEL_PHASE_LOSS, crossentropy_forward(m->training ? m->logits : NULL, m->logits, m->hlabels, M, m->V,
                                                   m->smoothing, &res.loss_sum, &res.n_correct, nt));
  }
  res.n_labels = M;
  m->fM = M;
  m->has_forward = m->training;
  if (out) *out = res;
  return 0;
}

const float *model_class_scores(const Model *m) { return m->C && m->scores_valid ? m->logits : NULL; }

int model_classify(Model *m, const ModelBatch *b, float *logits_out, Err *err) {
  m->has_forward = 0;
  m->scores_valid = 0;
  if (!m->C) return err_setk(err, ERR_INVALID, "classify: the model is a masked LM, not a sequence classifier");
  if (batch_forward(m, b, err)) return -1;
  int B = b->batch;
  for (int r = 0; r < B; r++) m->hrows[r] = r * b->seq;
  head_row_starts(m, B, b->seq, B);
  m->pruned = 1;
  /* The last layer at the first tokens only: no other row reaches the head. */
  const float *x = encoder_layers_forward(m, m->L - 1);
  const float *hx = last_layer_rows_forward(m, x, B);
  m->fM = B;
  cls_head_forward(m, hx, B, logits_out);
  return 0;
}

int model_logits_at(Model *m, const ModelBatch *b, const int32_t *positions, int n_positions, float *logits_out,
                    Err *err) {
  m->has_forward = 0;
  if (m->C) return err_setk(err, ERR_INVALID, "logits: the model is a sequence classifier, it has no masked-LM head");
  if (n_positions < 0 || n_positions > m->pM)
    return err_set(err, "logits: %d positions, the plan has room for %d", n_positions, m->pM);
  if (batch_forward(m, b, err)) return -1;
  int N = b->batch * b->seq, increasing = 1;
  for (int i = 0; i < n_positions; i++) {
    if (positions[i] < 0 || positions[i] >= N) return err_set(err, "logits: position %d outside 0..%d", positions[i], N - 1);
    m->hrows[i] = positions[i];
    increasing &= i == 0 || positions[i] > positions[i - 1];
  }
  /* No other row reaches the head: with the positions in increasing order (the
  ** order the rows path groups them by batch row), the last layer is computed at
  ** them only, with the same bits at those rows as the whole layer gives. */
  m->pruned = increasing && n_positions > 0 && n_positions < N;
  if (m->pruned) {
    head_row_starts(m, b->batch, b->seq, n_positions);
    const float *x = encoder_layers_forward(m, m->L - 1);
    const float *hx = last_layer_rows_forward(m, x, n_positions);
    head_forward(m, hx, n_positions, 1, logits_out);
    return 0;
  }
  const float *x = encoder_layers_forward(m, m->L);
  if (n_positions > 0) head_forward(m, x, n_positions, 0, logits_out);
  return 0;
}

/* ----------------------------------------------------------- backward */

/* No pass over the buffer: the next backward overwrites every gradient where it
** would have added to zero (its first write of each tensor), and model_grads
** writes the zeros if no backward comes first. */
void model_zero_grad(Model *m) { m->grads_zeroed = m->grads != NULL; }

/* Backward of last_layer_rows_forward: dout (M, H) is the gradient at the head
** rows; leaves the gradient of the layer's input, (B*T, H), in dfull. dA and
** dB are (M, H) scratch (they may be the two halves of nothing else in use). */
static void last_layer_rows_backward(Model *m, const float *x, const float *dout, float *dfull, float *dA, float *dB,
                                     int acc) {
  int nt = m->threads;
  int l = m->L - 1, B = m->fB, T = m->fT, N = B * T, H = m->H, I = m->I, M = m->fM;
  LayerTensors *w = &m->p.layer[l], *gw = &m->g.layer[l];
  LayerActs *a = slot(m, l);
  LayerDropout datt = dropout_site(m, 1 + 3 * l, m->cfg.attention_probs_dropout_prob);
  LayerDropout dao = dropout_site(m, 2 + 3 * l, m->cfg.hidden_dropout_prob);
  LayerDropout dfo = dropout_site(m, 3 + 3 * l, m->cfg.hidden_dropout_prob);
  dao.rows = dfo.rows = m->hrows;
  dao.cols = dfo.cols = H;
  size_t MH = (size_t)M * H;
  const float *kv = a->qkv, *q = a->qkv + (size_t)N * 2 * H;
  float *dkv = m->dqkv, *dq = m->dqkv + (size_t)N * 2 * H;
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    layernorm_backward(dA, gw->ln2_w, gw->ln2_b, dout, a->res2, a->m2, a->r2, w->ln2_w, M, H, 0, acc, nt);
    dropout_backward(dB, dA, MH, &dfo, nt);
  });
  PROF_PRODUCT(m, MODEL_PRODUCT_FFN_DOWN, 1,
       gelu_matmul_backward(m->prec, m->dI, gw->fo_w, gw->fo_b, dB, a->ffact, a->ffpre, w->fo_w, M, I, H, acc, nt));
  PROF_PRODUCT(m, MODEL_PRODUCT_FFN_UP, 1,
               matmul_backward(m->prec, dA, gw->fi_w, gw->fi_b, m->dI, a->h1, w->fi_w, M, H, I, 1, acc, nt));
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    layernorm_backward(dB, gw->ln1_w, gw->ln1_b, dA, a->res1, a->m1, a->r1, w->ln1_w, M, H, 0, acc, nt);
    dropout_backward(dA, dB, MH, &dao, nt);
  });
  /* dB now holds the residual's share of d(input rows); dA the attention output's gradient. */
  PROF_PRODUCT(m, MODEL_PRODUCT_ATTN_OUT, 1,
               matmul_backward(m->prec, m->proj, gw->ao_w, gw->ao_b, dA, a->ctx, w->ao_w, M, H, H, 0, acc, nt));
  PROF(m, MODEL_PHASE_ATTENTION, attention_rows_backward(m->prec, dq, dkv, m->proj, q, kv, a->att, m->hrows,
                                                         m->qstart, B, T, H, m->A, M, &datt, m->att_scratch, nt));
  PROF_PRODUCT(m, MODEL_PRODUCT_QKV, 1, {
    matmul_backward(m->prec, dB, gw->qkv_w, gw->qkv_b, dq, m->hin, w->qkv_w, M, H, H, 1, acc, nt);
    matmul_backward(m->prec, dfull, gw->qkv_w + (size_t)H * H, gw->qkv_b + H, dkv, x, w->qkv_w + (size_t)H * H, N, H, 2 * H, 0,
                    acc, nt);
  });
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    for (int i = 0; i < M; i++) {
      float *dst = dfull + (size_t)m->hrows[i] * H;
      const float *src = dB + (size_t)i * H;
      for (int j2 = 0; j2 < H; j2++) dst[j2] += src[j2];
    }
  });
}

/* Backward of cls_head_forward from the loss: leaves d(last layer output at the
** head rows) (M, H) in m->dh1. */
static void cls_head_backward(Model *m, float loss_scale, int acc) {
  int nt = m->threads, M = m->fM, H = m->H, C = m->C;
  size_t MH = (size_t)M * H;
  Tensors *p = &m->p, *g = &m->g;
  LayerDropout d_in = cls_dropout_site(m, 0), d_out = cls_dropout_site(m, 1);
  PROF(m, MODEL_PHASE_LOSS,
       crossentropy_backward(m->logits, m->logits, m->hlabels, M, C, m->smoothing, loss_scale, nt));
  PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 1,
       matmul_backward(m->prec, m->dh1, g->co_w, g->co_b, m->logits, m->cls_t, p->co_w, M, H, C, 0, acc, nt));
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    if (d_out.p > 0) dropout_backward(m->dh1, m->dh1, MH, &d_out, nt);
    tanh_backward(m->dh2, m->dh1, m->hact, MH, nt);
  });
  PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 1,
       matmul_backward(m->prec, m->dh1, g->cd_w, g->cd_b, m->dh2, m->cls_x, p->cd_w, M, H, H, 0, acc, nt));
  if (m->cfg.model_type == MODEL_ROBERTA && d_in.p > 0)
    PROF(m, MODEL_PHASE_ELEMENTWISE, dropout_backward(m->dh1, m->dh1, MH, &d_in, nt));
}

static void grad_ready(Model *m, int group) {
  if (m->grad_ready) m->grad_ready(m->grad_ready_ctx, group);
}

void model_backward(Model *m, float loss_scale) {
  int nt = m->threads;
  if (!m->has_forward || !m->grads || m->fM == 0) return;
  /* The first backward after model_zero_grad writes each gradient tensor where
  ** later ones add: no pass to zero the buffer, and no read of what it held. */
  int acc = !m->grads_zeroed;
  m->grads_zeroed = 0;
  int B = m->fB, T = m->fT, N = B * T, H = m->H, I = m->I, M = m->fM, V = m->V;
  size_t NH = (size_t)N * H;
  Tensors *p = &m->p, *g = &m->g;
  float *dX = m->dX, *dY = m->dY;

  if (m->C) {
    cls_head_backward(m, loss_scale, acc);
  } else {
    PROF(m, MODEL_PHASE_LOSS,
         crossentropy_backward(m->logits, m->logits, m->hlabels, M, V, m->smoothing, loss_scale, nt));
    /* The decoder is tied: its weight gradient lands in the word embeddings' gradient. */
    PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 1,
         matmul_backward(m->prec, m->dh1, g->wte, g->hbias, m->logits, m->hln, p->wte, M, H, V, 0, acc, nt));
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      layernorm_backward(m->dh2, g->hln_w, g->hln_b, m->dh1, m->hact, m->hm, m->hr, p->hln_w, M, H, 0, acc, nt);
      gelu_backward(m->dh2, m->dh2, m->hpre, (size_t)M * H, nt);
    });
    PROF_PRODUCT(m, MODEL_PRODUCT_HEAD, 1,
         matmul_backward(m->prec, m->dh1, g->hd_w, g->hd_b, m->dh2, m->head_in, p->hd_w, M, H, H, 0, acc, nt));
  }
  grad_ready(m, 0);
  /* m->dh1 is d(last layer output at the head rows). */
  const float *xl = m->L >= 2 ? slot(m, m->L - 2)->out : m->x0;
  last_layer_rows_backward(m, xl, m->dh1, dX, dY, dY + (size_t)M * H, acc);
  grad_ready(m, 1);
  for (int l = m->L - 2; l >= 0; l--) {
    LayerTensors *w = &p->layer[l], *gw = &g->layer[l];
    LayerActs *a = slot(m, l);
    const float *x = l == 0 ? m->x0 : slot(m, l - 1)->out;
    LayerDropout datt = dropout_site(m, 1 + 3 * l, m->cfg.attention_probs_dropout_prob);
    LayerDropout dao = dropout_site(m, 2 + 3 * l, m->cfg.hidden_dropout_prob);
    LayerDropout dfo = dropout_site(m, 3 + 3 * l, m->cfg.hidden_dropout_prob);
    /* Without dropout its backward is the identity: the next product reads the
    ** residual's gradient buffer directly (it is read before being added to). */
    const float *dffn = dX, *dattn = dY;
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      layernorm_backward(dY, gw->ln2_w, gw->ln2_b, dX, a->res2, a->m2, a->r2, w->ln2_w, N, H, 0, acc, nt);
      if (dfo.p > 0) dropout_backward(dX, dY, NH, &dfo, nt); else dffn = dY;
    });
    PROF_PRODUCT(m, MODEL_PRODUCT_FFN_DOWN, 1,
         gelu_matmul_backward(m->prec, m->dI, gw->fo_w, gw->fo_b, dffn, a->ffact, a->ffpre, w->fo_w, N, I, H, acc, nt));
    PROF_PRODUCT(m, MODEL_PRODUCT_FFN_UP, 1,
                 matmul_backward(m->prec, dY, gw->fi_w, gw->fi_b, m->dI, a->h1, w->fi_w, N, H, I, 1, acc, nt));
    PROF(m, MODEL_PHASE_ELEMENTWISE, {
      layernorm_backward(dX, gw->ln1_w, gw->ln1_b, dY, a->res1, a->m1, a->r1, w->ln1_w, N, H, 0, acc, nt);
      if (dao.p > 0) dropout_backward(dY, dX, NH, &dao, nt); else dattn = dX;
    });
    PROF_PRODUCT(m, MODEL_PRODUCT_ATTN_OUT, 1,
         matmul_backward(m->prec, m->proj, gw->ao_w, gw->ao_b, dattn, a->ctx, w->ao_w, N, H, H, 0, acc, nt));
    PROF(m, MODEL_PHASE_ATTENTION,
         attention_backward(m->prec, m->dqkv, m->proj, a->qkv, a->att, B, T, H, m->A, &datt, m->att_scratch, nt));
    PROF_PRODUCT(m, MODEL_PRODUCT_QKV, 1,
         matmul_backward(m->prec, dX, gw->qkv_w, gw->qkv_b, m->dqkv, x, w->qkv_w, N, H, 3 * H, 1, acc, nt));
    grad_ready(m, m->L - l);
  }
  LayerDropout demb = dropout_site(m, 0, m->cfg.hidden_dropout_prob);
  int pad = m->cfg.pad_token_id;
  PROF(m, MODEL_PHASE_ELEMENTWISE, {
    dropout_backward(dX, dX, NH, &demb, nt);
    layernorm_backward(dY, g->emb_ln_w, g->emb_ln_b, dX, m->emb_sum, m->emb_m, m->emb_r, p->emb_ln_w, N, H, 0, acc, nt);
    /* A masked LM's tied decoder above wrote all of wte's gradient; positions and
    ** types (and a classifier's word embeddings) only get the scatter. */
    if (!acc) {
      if (m->C) memset(g->wte, 0, (size_t)m->V * H * sizeof(float));
      memset(g->wpe, 0, (size_t)m->P * H * sizeof(float));
      memset(g->tte, 0, (size_t)m->TV * H * sizeof(float));
    }
    embeddings_backward(g->wte, g->wpe, g->tte, dY, m->ids, m->pos, m->types, N, H, pad,
                        m->cfg.model_type == MODEL_ROBERTA ? pad : -1, nt);
  });
  grad_ready(m, m->L + 1);
}

/* ------------------------------------------------------------- gradient groups */

int model_grad_group_count(const Model *m) { return m->L + 2; }

void model_grad_group(const Model *m, int i, size_t *offset, size_t *count) {
  /* Backward order: the head, layers L-1 .. 0, the embeddings (whose word embeddings
  ** also take the tied decoder's gradient, so they are final last). */
  const Tensors *p = &m->p;
  size_t lo, hi;
  if (i == 0) { lo = m->head_off; hi = m->n_params; }
  else if (i <= m->L) {
    const LayerTensors *lt = &p->layer[m->L - i];
    lo = (size_t)(lt->qkv_w - m->params);
    hi = (size_t)(lt->ln2_b - m->params) + (size_t)m->H;
  } else { lo = 0; hi = (size_t)(p->emb_ln_b - m->params) + (size_t)m->H; }
  *offset = lo;
  *count = hi - lo;
}

void model_set_grad_ready(Model *m, ModelGradReady fn, void *ctx) {
  m->grad_ready = fn;
  m->grad_ready_ctx = ctx;
}

/* ------------------------------------------------------------- flops */

double model_flops(const ModelConfig *c, int batch, int seq, int head_rows, int training) {
  double N = (double)batch * seq, H = c->hidden_size, I = c->intermediate_size, L = c->num_hidden_layers;
  double M = head_rows, T = seq;
  double layer = 2 * N * H * 3 * H + 2 * N * H * H + 2 * 2 * N * H * I   /* QKV, output, FFN */
               + 2 * 2 * N * T * H;                                     /* scores and context */
  /* model_forward computes the last layer's queries, attention output and FFN at the head rows only. */
  double last = M > 0 ? 2 * N * H * 2 * H + 2 * M * H * H + 2 * 2 * M * T * H + 2 * M * H * H + 2 * 2 * M * H * I
                      : layer;
  double head = 2 * M * H * H + 2 * M * H * (c->task == MODEL_TASK_SEQ_CLS ? c->num_labels : c->vocab_size);
  double fwd = (L - 1) * layer + last + head;
  return training ? 3 * fwd : fwd;
}
