/* Checkpoints: HF folders round-trip bit for bit (F32) or to BF16 rounding, an
** independent loader (PyTorch modules, scripts/torch_mlm.py) reads our folder and
** computes the same logits, files with missing, mis-shaped, mistyped, foreign or
** untied tensors are refused by name and leave the model untouched, and a run
** resumed from weights + optimizer state continues bit-identically. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/bf16.h"
#include "engine/io/checkpoint.h"
#include "store/store.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char tmpdir[200];

/* The tiny test model as RoBERTa or BERT, without dropout. */
static ModelConfig tiny(ModelType type) {
  ModelConfig c = fixture_tiny(40);
  c.model_type = type;
  c.type_vocab_size = type == MODEL_ROBERTA ? 1 : 2;
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0;
  return c;
}

/* The model's tensors as writer entries (F32 views of the parameter buffer). */
static int model_entries(Model *m, StWriteTensor *ts) {
  int n = model_tensor_count(m);
  for (int i = 0; i < n; i++) {
    const ModelTensor *t = model_tensor(m, i);
    ts[i] = (StWriteTensor){t->name, ST_F32, t->ndim, {t->shape[0], t->shape[1]}, model_params(m) + t->offset};
  }
  return n;
}

/* Loads crafted tensors into m and checks the outcome: ok = 1 must load; else the
** message must contain needle and the parameters must be unchanged. */
static void try_load(const char *name, Model *m, const StWriteTensor *ts, int n, int ok, const char *needle) {
  unsigned char *bytes;
  size_t len;
  Err e = {0};
  if (st_serialize(ts, n, NULL, 0, &bytes, &len, &e)) { check(0, name, "serialize: %s", e.msg); return; }
  size_t np = model_num_params(m);
  float *before = malloc(np * sizeof(float));
  memcpy(before, model_params(m), np * sizeof(float));
  int rc = ckpt_load_weights_memory(m, bytes, len, &e);
  if (ok) check(rc == 0, name, "refused: %s", e.msg);
  else
    check(rc == -1 && strstr(e.msg, needle) && memcmp(before, model_params(m), np * sizeof(float)) == 0, name,
          "rc %d, message \"%s\" (wanted \"%s\")", rc, e.msg, needle);
  free(before);
  free(bytes);
}

/* One training step on a batch drawn from the run's generator (so the RNG state matters). */
static double train_step(Model *m, AdamW *o, Rng *r, int B, int T) {
  const ModelConfig *c = model_config(m);
  int32_t ids[64], mask[64], labels[64];
  for (int i = 0; i < B * T; i++) {
    ids[i] = 4 + (int32_t)rng_below(r, (uint32_t)c->vocab_size - 4);
    mask[i] = 1;
    labels[i] = rng_below(r, 3) == 0 ? ids[i] : MODEL_IGNORE_LABEL;
    if (rng_below(r, 3) == 0 && labels[i] != MODEL_IGNORE_LABEL) ids[i] = 2;  /* a [MASK]-like id */
  }
  labels[0] = ids[0];
  ModelBatch b = {B, T, ids, mask, NULL, labels};
  ModelLoss l;
  Err e;
  if (model_forward(m, &b, &l, &e)) { fprintf(stderr, "%s\n", e.msg); exit(2); }
  model_zero_grad(m);
  model_backward(m, 1.0f / (float)l.n_labels);
  adamw_step(o, model_params(m), model_grads(m));
  return l.loss_sum / l.n_labels;
}

static AdamW *make_optim(Model *m) {
  AdamWConfig ac = adamw_defaults();
  ac.lr = 3e-3; ac.weight_decay = 0.01; ac.clip_norm = 1.0; ac.warmup_steps = 2; ac.total_steps = 10;
  int n = model_tensor_count(m);
  AdamWSegment *segs = malloc((size_t)n * sizeof *segs);
  for (int i = 0; i < n; i++) {
    const ModelTensor *t = model_tensor(m, i);
    segs[i] = (AdamWSegment){t->offset, t->numel, t->decay};
  }
  Err e;
  AdamW *o = adamw_new(&ac, model_num_params(m), segs, n, &e);
  free(segs);
  return o;
}

static void resume_test(ModelType type, const char *tag) {
  enum { B = 2, T = 8, K = 3 };
  char name[96], path[300], spath[300];
  ModelConfig c = tiny(type);
  Err e = {0};
  Model *a = model_new(&c, &e);
  model_init_weights(a, 5);
  model_set_threads(a, 2);
  model_plan(a, B, T, B * T, 1, &e);
  AdamW *oa = make_optim(a);
  Rng r;
  rng_seed(&r, 99);
  for (int k = 0; k < K; k++) train_step(a, oa, &r, B, T);
  CkptState s = {.step = oa->step, .epoch = 1, .position = 7, .rng = r, .n_extra = 2, .extra = {42, UINT64_MAX - 4}};
  snprintf(path, sizeof path, "%s/resume_%s", tmpdir, tag);
  snprintf(spath, sizeof spath, "%s/resume_%s/optimizer.safetensors", tmpdir, tag);
  int rc = ckpt_save_model(a, path, 0, &e);
  rc |= ckpt_save_state(a, oa, &s, spath, &e);
  unsigned char *sbytes;
  size_t slen;
  rc |= ckpt_state_bytes(a, oa, &s, &sbytes, &slen, &e);
  double la[K];
  for (int k = 0; k < K; k++) la[k] = train_step(a, oa, &r, B, T);

  /* Resume from the files into a fresh model and optimizer. */
  Model *b = ckpt_load_model(path, &e);
  int ok = rc == 0 && b != NULL;
  AdamW *ob = NULL;
  CkptState sb;
  if (ok) {
    model_set_threads(b, 2);
    model_plan(b, B, T, B * T, 1, &e);
    ob = make_optim(b);
    ok = ckpt_load_state_file(b, ob, &sb, spath, &e) == 0;
  }
  double lb[K];
  int same_losses = 1;
  if (ok) {
    ok = sb.step == K && ob->step == K && sb.epoch == 1 && sb.position == 7 && sb.n_extra == 2 && sb.extra[0] == 42 &&
         sb.extra[1] == UINT64_MAX - 4 && memcmp(&sb.rng, &s.rng, sizeof s.rng) == 0;
    for (int k = 0; k < K; k++) { lb[k] = train_step(b, ob, &sb.rng, B, T); same_losses &= lb[k] == la[k]; }
    ok &= same_losses && memcmp(model_params(a), model_params(b), model_num_params(a) * sizeof(float)) == 0 &&
          memcmp(oa->m, ob->m, oa->n * sizeof(float)) == 0 && memcmp(oa->v, ob->v, oa->n * sizeof(float)) == 0;
  }
  snprintf(name, sizeof name, "ckpt_resume_bit_identical_%s", tag);
  check(ok, name, "rc %d, losses same %d (%s)", rc, same_losses, e.msg);

  /* Negative control: the same resume with zeroed moments diverges, so the test can see them. */
  Model *c2 = ckpt_load_model(path, &e);
  model_set_threads(c2, 2);
  model_plan(c2, B, T, B * T, 1, &e);
  AdamW *oc = make_optim(c2);
  CkptState sc;
  ckpt_load_state_memory(c2, oc, &sc, sbytes, slen, &e);
  memset(oc->m, 0, oc->n * sizeof(float));
  for (int k = 0; k < K; k++) train_step(c2, oc, &sc.rng, B, T);
  snprintf(name, sizeof name, "ckpt_resume_needs_moments_%s", tag);
  check(memcmp(model_params(a), model_params(c2), model_num_params(a) * sizeof(float)) != 0, name, "moments had no effect");

  /* State refusals: weights file, truncated file, another model's state; o untouched. */
  float m0 = oc->m[0];
  long st0 = oc->step;
  char wpath[320];
  snprintf(wpath, sizeof wpath, "%s/%s", path, CKPT_WEIGHTS_FILE);
  rc = ckpt_load_state_file(c2, oc, &sc, wpath, &e);
  snprintf(name, sizeof name, "ckpt_state_refuses_weights_file_%s", tag);
  check(rc == -1 && strstr(e.msg, "kind") && oc->m[0] == m0 && oc->step == st0, name, "%s", e.msg);
  rc = ckpt_load_state_memory(c2, oc, &sc, sbytes, slen - 1, &e);
  snprintf(name, sizeof name, "ckpt_state_refuses_truncated_%s", tag);
  check(rc == -1 && e.msg[0] && oc->step == st0, name, "%s", e.msg);
  ModelConfig other = c;
  other.intermediate_size = 48;
  Model *d = model_new(&other, &e);
  AdamW *od = make_optim(d);
  rc = ckpt_load_state_memory(d, od, &sc, sbytes, slen, &e);
  snprintf(name, sizeof name, "ckpt_state_refuses_other_model_%s", tag);
  check(rc == -1 && strstr(e.msg, "exp_avg.") && strstr(e.msg, "intermediate.dense.weight") && od->step == 0, name, "%s", e.msg);
  adamw_free(od);
  model_free(d);

  free(sbytes);
  adamw_free(oa); adamw_free(ob); adamw_free(oc);
  model_free(a); model_free(b); model_free(c2);
}

/* Our folder loaded by scripts/torch_mlm.py (torch modules, HF names): same logits. */
static void torch_logits_test(Model *m, const char *dir, const char *tag) {
  enum { B = 2, T = 7 };
  const ModelConfig *c = model_config(m);
  int32_t ids[B * T], mask[B * T], pos[B * T];
  for (int i = 0; i < B * T; i++) { ids[i] = 4 + (i * 7) % (c->vocab_size - 4); mask[i] = 1; pos[i] = i; }
  /* Padding at the end of the second row, as a batch of unequal lines has it. */
  for (int t = 5; t < T; t++) { ids[T + t] = c->pad_token_id; mask[T + t] = 0; }
  char ipath[300], opath[300], cmd[2400];
  snprintf(ipath, sizeof ipath, "%s/ids_%s.bin", tmpdir, tag);
  snprintf(opath, sizeof opath, "%s/logits_%s.bin", tmpdir, tag);
  FILE *f = fopen(ipath, "wb");
  fwrite(ids, 4, B * T, f);
  fwrite(mask, 4, B * T, f);
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c '\n"
           "import sys, json, numpy as np, torch\n"
           "sys.path.insert(0, \"scripts\")\n"
           "from torch_mlm import TorchMLM, MLMConfig\n"
           "from torch_reference import read_safetensors\n"
           "d, B, T = sys.argv[1], %d, %d\n"
           "meta, sd = read_safetensors(d + \"/model.safetensors\")\n"
           "assert meta == {\"format\": \"pt\"}, meta\n"
           "m = TorchMLM(MLMConfig(json.load(open(d + \"/config.json\"))))\n"
           "m.load_hf_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()})\n"
           "m.eval()\n"
           "x = np.fromfile(sys.argv[2], np.int32)\n"
           "ids, mask = [torch.tensor(a.reshape(B, T), dtype=torch.long) for a in (x[:B*T], x[B*T:])]\n"
           "with torch.no_grad():\n"
           "    _, logits = m(ids, attention_mask=mask)\n"
           "logits.numpy().astype(np.float32).tofile(sys.argv[3])\n"
           "' %s %s %s",
           B, T, dir, ipath, opath);
  int rc = system(cmd);
  int V = c->vocab_size;
  float *ours = malloc((size_t)B * T * V * sizeof(float)), *theirs = malloc((size_t)B * T * V * sizeof(float));
  Err e = {0};
  model_plan(m, B, T, B * T, 0, &e);
  ModelBatch b = {B, T, ids, mask, NULL, NULL};
  int rc2 = model_logits_at(m, &b, pos, B * T, ours, &e);
  f = fopen(opath, "rb");
  size_t got = f ? fread(theirs, sizeof(float), (size_t)B * T * V, f) : 0;
  if (f) fclose(f);
  double diff = got == (size_t)B * T * V ? check_max_abs_diff(ours, theirs, got) : 1e9;
  char name[96];
  snprintf(name, sizeof name, "ckpt_torch_loads_folder_same_logits_%s", tag);
  check(rc == 0 && rc2 == 0 && diff < 1e-4, name, "python %d, C %d (%s), max |diff| %g", rc, rc2, e.msg, diff);
  free(ours);
  free(theirs);
}

static void folder_tests(ModelType type, const char *tag) {
  char name[96], dir[300], path[320];
  ModelConfig c = tiny(type);
  Err e = {0};
  Model *m = model_new(&c, &e);
  model_init_weights(m, 17);
  snprintf(dir, sizeof dir, "%s/model_%s/nested", tmpdir, tag);
  int rc = ckpt_save_model(m, dir, 0, &e);
  Model *b = rc == 0 ? ckpt_load_model(dir, &e) : NULL;
  snprintf(name, sizeof name, "ckpt_round_trip_f32_%s", tag);
  check(b && model_num_params(b) == model_num_params(m) &&
            memcmp(model_params(m), model_params(b), model_num_params(m) * sizeof(float)) == 0 &&
            model_config(b)->model_type == type && model_config(b)->pad_token_id == c.pad_token_id,
        name, "%s", e.msg);

  /* The file holds exactly the model's tensors, HF names, decoder weight left out. */
  snprintf(path, sizeof path, "%s/%s", dir, CKPT_WEIGHTS_FILE);
  StFile *f = st_open(path, &e);
  int ok = f && st_count(f) == model_tensor_count(m) && st_metadata_count(f) == 1 &&
           strcmp(st_metadata(f, "format"), "pt") == 0 && !st_find(f, "lm_head.decoder.weight") &&
           !st_find(f, "cls.predictions.decoder.weight");
  for (int i = 0; ok && i < model_tensor_count(m); i++) {
    const StTensor *t = st_find(f, model_tensor(m, i)->name);
    ok &= t && t->dtype == ST_F32;
  }
  ok &= f && st_find(f, type == MODEL_ROBERTA ? "roberta.encoder.layer.1.attention.self.query.weight"
                                               : "bert.encoder.layer.1.attention.self.query.weight") != NULL;
  ok &= f && st_find(f, type == MODEL_ROBERTA ? "lm_head.bias" : "cls.predictions.bias") != NULL;
  snprintf(name, sizeof name, "ckpt_file_has_hf_names_%s", tag);
  check(ok, name, "%d tensors (%s)", f ? st_count(f) : -1, e.msg);
  st_close(f);

  torch_logits_test(b ? b : m, dir, tag);
  model_free(b);

  /* BF16: each value rounded to nearest even, nothing else changed. */
  char dir16[320];
  snprintf(dir16, sizeof dir16, "%s/model16_%s", tmpdir, tag);
  rc = ckpt_save_model(m, dir16, 1, &e);
  b = rc == 0 ? ckpt_load_model(dir16, &e) : NULL;
  ok = b != NULL;
  int changed = 0;
  for (size_t i = 0; ok && i < model_num_params(m); i++) {
    float want = bf16_to_f32(bf16_from_f32(model_params(m)[i]));
    ok &= memcmp(&want, &model_params(b)[i], 4) == 0;
    changed |= want != model_params(m)[i];
  }
  snprintf(name, sizeof name, "ckpt_round_trip_bf16_%s", tag);
  check(ok && changed, name, "ok %d changed %d (%s)", ok, changed, e.msg);
  model_free(b);

  /* A model that keeps its matrices in bf16 only (serving) writes them from that copy:
  ** its BF16 file is the float model's, byte for byte, and its F32 file holds the
  ** matrices widened from bf16 beside the exact 1-D tensors; ckpt_load_model_as loads
  ** a folder straight into bf16 weights. */
  {
    unsigned char *w16 = NULL, *h16 = NULL, *h32 = NULL;
    size_t l16 = 0, lh16 = 0, lh32 = 0;
    Model *h = model_new(&c, &e);
    int okh = h && ckpt_weights_bytes(m, 1, &w16, &l16, &e) == 0 && ckpt_weights_bytes(m, 0, &h32, &lh32, &e) == 0 &&
              ckpt_load_weights_memory(h, h32, lh32, &e) == 0 && model_keep_bf16_weights(h, 1, &e) == 0;
    free(h32);
    h32 = NULL;
    okh = okh && ckpt_weights_bytes(h, 1, &h16, &lh16, &e) == 0 && lh16 == l16 && !memcmp(h16, w16, l16) &&
          ckpt_weights_bytes(h, 0, &h32, &lh32, &e) == 0;
    Model *back = okh ? model_new(&c, &e) : NULL;
    okh = okh && back && ckpt_load_weights_memory(back, h32, lh32, &e) == 0;
    for (int i = 0; okh && i < model_tensor_count(m); i++) {
      const ModelTensor *mt = model_tensor(m, i);
      for (size_t j = 0; okh && j < mt->numel; j++) {
        float x = model_params(m)[mt->offset + j], want = mt->ndim == 2 ? bf16_to_f32(bf16_from_f32(x)) : x;
        okh &= memcmp(&want, &model_params(back)[mt->offset + j], 4) == 0;
      }
    }
    snprintf(name, sizeof name, "ckpt_bf16_weights_model_writes_its_copy_%s", tag);
    check(okh, name, "%s", e.msg);
    Model *as = ckpt_load_model_as(dir, MODEL_BF16, &e);
    unsigned char *a16 = NULL;
    size_t la16 = 0;
    int oka = as && model_weights_bf16(as) && ckpt_weights_bytes(as, 1, &a16, &la16, &e) == 0 && la16 == l16 &&
              !memcmp(a16, w16, l16);
    snprintf(name, sizeof name, "ckpt_load_model_as_bf16_%s", tag);
    check(oka, name, "%s", e.msg);
    free(a16);
    model_free(as);
    model_free(back);
    model_free(h);
    free(w16);
    free(h16);
    free(h32);
  }

  /* Crafted files. */
  int n = model_tensor_count(m);
  StWriteTensor *ts = calloc((size_t)n + 8, sizeof *ts);
  Model *t = model_new(&c, &e);
  model_init_weights(t, 3);
  const char *word = type == MODEL_ROBERTA ? "roberta.embeddings.word_embeddings.weight" : "bert.embeddings.word_embeddings.weight";
  const char *hbias = type == MODEL_ROBERTA ? "lm_head.bias" : "cls.predictions.bias";
  const char *decw = type == MODEL_ROBERTA ? "lm_head.decoder.weight" : "cls.predictions.decoder.weight";
  const char *decb = type == MODEL_ROBERTA ? "lm_head.decoder.bias" : "cls.predictions.decoder.bias";
  const char *pre = type == MODEL_ROBERTA ? "roberta" : "bert";
  const ModelTensor *wt = model_tensor_by_name(m, word), *bt = model_tensor_by_name(m, hbias);
  float *wcopy = malloc(wt->numel * sizeof(float)), *bcopy = malloc(bt->numel * sizeof(float));
  memcpy(wcopy, model_params(m) + wt->offset, wt->numel * sizeof(float));
  memcpy(bcopy, model_params(m) + bt->offset, bt->numel * sizeof(float));
  char victim[128];
  snprintf(victim, sizeof victim, "%s.encoder.layer.1.output.dense.bias", pre);

  model_entries(m, ts);
  ts[n] = (StWriteTensor){decw, ST_F32, 2, {c.vocab_size, c.hidden_size}, wcopy};
  ts[n + 1] = (StWriteTensor){decb, ST_F32, 1, {c.vocab_size}, bcopy};
  int64_t posids[24];
  for (int i = 0; i < 24; i++) posids[i] = i;
  char pname[96], pooler[96];
  snprintf(pname, sizeof pname, "%s.embeddings.position_ids", pre);
  snprintf(pooler, sizeof pooler, "%s.pooler.dense.bias", pre);
  ts[n + 2] = (StWriteTensor){pname, ST_I64, 2, {1, 24}, posids};
  ts[n + 3] = (StWriteTensor){pooler, ST_F32, 1, {c.hidden_size}, bcopy};
  snprintf(name, sizeof name, "ckpt_accepts_tied_copies_and_buffers_%s", tag);
  try_load(name, t, ts, n + 4, 1, NULL);
  snprintf(name, sizeof name, "ckpt_tied_copies_load_equal_%s", tag);
  check(memcmp(model_params(t), model_params(m), model_num_params(m) * sizeof(float)) == 0, name, "params differ");
  model_init_weights(t, 3);

  wcopy[5] += 1.0f;
  snprintf(name, sizeof name, "ckpt_refuses_untied_decoder_%s", tag);
  try_load(name, t, ts, n + 1, 0, decw);
  wcopy[5] -= 1.0f;
  bcopy[2] = 9.0f;
  ts[n] = ts[n + 1];
  snprintf(name, sizeof name, "ckpt_refuses_differing_decoder_bias_%s", tag);
  try_load(name, t, ts, n + 1, 0, decb);

  model_entries(m, ts);
  for (int i = 0; i < n; i++)
    if (!strcmp(ts[i].name, victim)) { ts[i] = ts[n - 1]; break; }
  snprintf(name, sizeof name, "ckpt_refuses_missing_tensor_%s", tag);
  try_load(name, t, ts, n - 1, 0, victim);

  model_entries(m, ts);
  float *bigger = calloc((size_t)(c.vocab_size + 1) * c.hidden_size, sizeof(float));
  for (int i = 0; i < n; i++)
    if (!strcmp(ts[i].name, word)) { ts[i].shape[0] = c.vocab_size + 1; ts[i].data = bigger; }
  snprintf(name, sizeof name, "ckpt_refuses_misshaped_tensor_%s", tag);
  try_load(name, t, ts, n, 0, "shape [41, 16], the config needs [40, 16]");

  model_entries(m, ts);
  for (int i = 0; i < n; i++)
    if (!strcmp(ts[i].name, victim)) ts[i].dtype = ST_I32;
  snprintf(name, sizeof name, "ckpt_refuses_integer_tensor_%s", tag);
  try_load(name, t, ts, n, 0, "dtype I32");

  model_entries(m, ts);
  char foreign[128];
  snprintf(foreign, sizeof foreign, "%s.encoder.layer.2.output.dense.bias", pre);
  ts[n] = (StWriteTensor){foreign, ST_F32, 1, {c.hidden_size}, bcopy};
  snprintf(name, sizeof name, "ckpt_refuses_foreign_tensor_%s", tag);
  try_load(name, t, ts, n + 1, 0, foreign);

  /* Old BERT names (LayerNorm gamma/beta) load as weight/bias. */
  model_entries(m, ts);
  char (*renamed)[128] = calloc((size_t)n, sizeof *renamed);
  for (int i = 0; i < n; i++) {
    size_t l = strlen(ts[i].name);
    if (l > 16 && !strcmp(ts[i].name + l - 16, "LayerNorm.weight")) {
      snprintf(renamed[i], sizeof renamed[i], "%.*sgamma", (int)(l - 6), ts[i].name);
      ts[i].name = renamed[i];
    } else if (l > 14 && !strcmp(ts[i].name + l - 14, "LayerNorm.bias")) {
      snprintf(renamed[i], sizeof renamed[i], "%.*sbeta", (int)(l - 4), ts[i].name);
      ts[i].name = renamed[i];
    }
  }
  snprintf(name, sizeof name, "ckpt_accepts_gamma_beta_names_%s", tag);
  try_load(name, t, ts, n, 1, NULL);
  check(memcmp(model_params(t), model_params(m), model_num_params(m) * sizeof(float)) == 0, name, "params differ");
  free(renamed);

  /* A config that disagrees with the weights; a truncated weights file; no config. */
  ModelConfig wide = c;
  wide.intermediate_size = 64;
  snprintf(path, sizeof path, "%s/%s", dir, CKPT_CONFIG_FILE);
  config_save(&wide, path, &e);
  b = ckpt_load_model(dir, &e);
  snprintf(name, sizeof name, "ckpt_refuses_config_weight_mismatch_%s", tag);
  check(!b && strstr(e.msg, "intermediate.dense.weight") && strstr(e.msg, "model.safetensors"), name, "%s", e.msg);
  model_free(b);
  config_save(&c, path, &e);
  snprintf(path, sizeof path, "%s/%s", dir, CKPT_WEIGHTS_FILE);
  struct stat sb;
  stat(path, &sb);
  if (truncate(path, sb.st_size - 10) != 0) check(0, "truncate", "failed");
  b = ckpt_load_model(dir, &e);
  snprintf(name, sizeof name, "ckpt_refuses_truncated_weights_%s", tag);
  check(!b && strstr(e.msg, "model.safetensors") && strstr(e.msg, "truncated"), name, "%s", e.msg);
  model_free(b);
  snprintf(path, sizeof path, "%s/%s", dir, CKPT_CONFIG_FILE);
  remove(path);
  b = ckpt_load_model(dir, &e);
  snprintf(name, sizeof name, "ckpt_refuses_missing_config_%s", tag);
  check(!b && strstr(e.msg, "config.json"), name, "%s", e.msg);
  model_free(b);

  free(bigger);
  free(wcopy);
  free(bcopy);
  free(ts);
  model_free(t);
  model_free(m);
}

/* The trainer's path through the store: push weights + optimizer state as a
** revision, resolve it as resume does, load both back: bit-identical. */
static void store_round_trip(void) {
  Err e = {0};
  char db[300];
  snprintf(db, sizeof db, "%s/hub.db", tmpdir);
  Store *s = store_open(db, &e);
  ModelConfig c = tiny(MODEL_ROBERTA);
  Model *m = model_new(&c, &e);
  model_init_weights(m, 21);
  AdamW *o = make_optim(m);
  for (size_t i = 0; i < o->n; i++) { o->m[i] = (float)i * 1e-6f; o->v[i] = (float)i * 1e-9f; }
  o->step = 12;
  CkptState st = {.step = 12, .epoch = 2, .position = 0, .n_extra = 0};
  rng_seed(&st.rng, 77);
  unsigned char *w = NULL, *opt = NULL;
  size_t wl = 0, ol = 0;
  char *cfg = config_to_json(&c);
  int64_t run = s ? store_run_create(s, "ckpt-run", "{}", &e) : -1;
  int rc = ckpt_weights_bytes(m, 0, &w, &wl, &e) | ckpt_state_bytes(m, o, &st, &opt, &ol, &e);
  StorePush p = {.message = "Training in progress epoch 2", .config_json = cfg, .weights = w, .weights_len = wl,
                 .optimizer = opt, .optimizer_len = ol, .run = run, .step = 12, .epoch = 2,
                 .metrics_json = "{\"eval_loss\": 3.5}"};
  rc |= s ? store_push(s, "ckpt-model", &p, NULL, &e) : -1;
  StoreRevision rv;
  void *wb = NULL, *ob = NULL, *cb = NULL;
  size_t wbl, obl, cbl;
  rc |= s ? store_run_checkpoint(s, run, &rv, &e) : -1;
  rc |= s ? store_revision_file(s, &rv, "model.safetensors", &wb, &wbl, &e) : -1;
  rc |= s ? store_revision_file(s, &rv, "optimizer.safetensors", &ob, &obl, &e) : -1;
  rc |= s ? store_revision_file(s, &rv, "config.json", &cb, &cbl, &e) : -1;
  ModelConfig c2;
  Model *m2 = NULL;
  AdamW *o2 = NULL;
  CkptState st2;
  if (rc == 0 && config_parse(cb, &c2, &e) == 0 && (m2 = model_new(&c2, &e)) != NULL) {
    o2 = make_optim(m2);
    rc |= ckpt_load_weights_memory(m2, wb, wbl, &e) | ckpt_load_state_memory(m2, o2, &st2, ob, obl, &e);
  } else {
    rc = -1;
  }
  check(rc == 0 && m2 && memcmp(model_params(m), model_params(m2), model_num_params(m) * sizeof(float)) == 0 &&
            memcmp(o->m, o2->m, o->n * sizeof(float)) == 0 && memcmp(o->v, o2->v, o->n * sizeof(float)) == 0 &&
            o2->step == 12 && st2.epoch == 2 && memcmp(&st2.rng, &st.rng, sizeof st.rng) == 0,
        "ckpt_through_store_bit_identical", "rc %d (%s)", rc, e.msg);
  free(w); free(opt); free(cfg); free(wb); free(ob); free(cb);
  adamw_free(o); adamw_free(o2);
  model_free(m); model_free(m2);
  store_close(s);
}

/* ---- streaming writers ---- */

/* A growing memory sink; fail_after > 0 makes the write that would pass that many bytes fail. */
typedef struct { unsigned char *p; size_t len, cap, fail_after; } MemSink;

static int mem_write(void *ctx, const void *data, size_t n, Err *err) {
  MemSink *s = ctx;
  if (s->fail_after && s->len + n > s->fail_after) return err_set(err, "sink full");
  if (s->len + n > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + n) cap *= 2;
    unsigned char *q = realloc(s->p, cap);
    if (!q) return err_set(err, "out of memory");
    s->p = q;
    s->cap = cap;
  }
  memcpy(s->p + s->len, data, n);
  s->len += n;
  return 0;
}

/* A moments source over an AdamW that logs each request and can fail on the k-th. */
typedef struct {
  CkptMoments inner;
  int n, fail_at, bad_order;
  size_t biggest;
  int last_which;
  size_t next;            /* offset expected next when a tensor continues */
} LogSource;

static int log_read(void *ctx, int which, size_t offset, size_t count, float *dst, Err *err) {
  LogSource *l = ctx;
  if (++l->n == l->fail_at) return err_set(err, "gather failed");
  if (count > l->biggest) l->biggest = count;
  if (which < l->last_which) l->bad_order = 1;
  l->last_which = which;
  return l->inner.read(l->inner.ctx, which, offset, count, dst, err);
}

static void stream_test(int vocab, const char *tag) {
  char name[96];
  ModelConfig c = tiny(MODEL_ROBERTA);
  c.vocab_size = vocab;
  Err e = {0};
  Model *m = model_new(&c, &e);
  model_init_weights(m, 3);
  AdamW *o = make_optim(m);
  Rng r;
  rng_seed(&r, 7);
  for (size_t i = 0; i < o->n; i++) { o->m[i] = (float)rng_uniform(&r) - 0.5f; o->v[i] = (float)rng_uniform(&r); }
  CkptState st = {.step = 1234, .epoch = 3, .position = 9, .rng = r, .n_extra = CKPT_EXTRA_WORDS};
  for (int i = 0; i < CKPT_EXTRA_WORDS; i++) st.extra[i] = UINT64_MAX - (uint64_t)i * 977;

  for (int bf16 = 0; bf16 < 2; bf16++) {
    unsigned char *b = NULL;
    size_t bl = 0;
    MemSink ms = {0};
    CkptSink sink = {mem_write, &ms};
    int rc = ckpt_weights_bytes(m, bf16, &b, &bl, &e) | ckpt_weights_stream(m, bf16, &sink, &e);
    snprintf(name, sizeof name, "ckpt_weights_stream_identical_%s%s", bf16 ? "bf16_" : "", tag);
    check(rc == 0 && ms.len == bl && ckpt_weights_size(m, bf16) == bl && memcmp(ms.p, b, bl) == 0, name,
          "rc %d, %zu vs %zu bytes, size %zu (%s)", rc, ms.len, bl, ckpt_weights_size(m, bf16), e.msg);
    free(b);
    free(ms.p);
  }

  unsigned char *b = NULL;
  size_t bl = 0;
  MemSink ms = {0};
  CkptSink sink = {mem_write, &ms};
  LogSource ls = {ckpt_moments_of(o), 0, 0, 0, 0, 0, 0};
  CkptMoments src = {log_read, &ls};
  int rc = ckpt_state_bytes(m, o, &st, &b, &bl, &e) | ckpt_state_stream(m, &src, &st, &sink, &e);
  snprintf(name, sizeof name, "ckpt_state_stream_identical_%s", tag);
  check(rc == 0 && ms.len == bl && ckpt_state_size(m, &st) == bl && memcmp(ms.p, b, bl) == 0, name,
        "rc %d, %zu vs %zu bytes, size %zu (%s)", rc, ms.len, bl, ckpt_state_size(m, &st), e.msg);
  /* Ranges bounded by the scratch, all m before all v; a big vocabulary makes the
  ** embedding span several chunks. */
  size_t chunks = 0;
  for (int i = 0; i < model_tensor_count(m); i++)
    chunks += 2 * ((model_tensor(m, i)->numel + CKPT_STREAM_FLOATS - 1) / CKPT_STREAM_FLOATS);
  snprintf(name, sizeof name, "ckpt_state_stream_reads_in_order_%s", tag);
  check(ls.biggest <= CKPT_STREAM_FLOATS && !ls.bad_order && (size_t)ls.n == chunks, name,
        "biggest %zu, bad order %d, %d reads for %zu chunks", ls.biggest, ls.bad_order, ls.n, chunks);

  /* The n_extra = CKPT_EXTRA_WORDS state loads back word for word. */
  AdamW *o2 = make_optim(m);
  CkptState st2;
  rc = ckpt_load_state_memory(m, o2, &st2, ms.p, ms.len, &e);
  snprintf(name, sizeof name, "ckpt_state_stream_loads_%s", tag);
  check(rc == 0 && st2.n_extra == CKPT_EXTRA_WORDS && memcmp(st2.extra, st.extra, sizeof st.extra) == 0 &&
            memcmp(o->m, o2->m, o->n * sizeof(float)) == 0 && memcmp(o->v, o2->v, o->n * sizeof(float)) == 0,
        name, "rc %d (%s)", rc, e.msg);

  /* A failing source or sink stops the stream with the error. */
  ms.len = 0;
  ls = (LogSource){ckpt_moments_of(o), 0, 3, 0, 0, 0, 0};
  rc = ckpt_state_stream(m, &src, &st, &sink, &e);
  snprintf(name, sizeof name, "ckpt_state_stream_source_error_%s", tag);
  check(rc == -1 && strstr(e.msg, "gather failed") && ls.n == 3, name, "rc %d, %d reads (%s)", rc, ls.n, e.msg);
  ms.len = 0;
  ms.fail_after = bl / 2;
  ls = (LogSource){ckpt_moments_of(o), 0, 0, 0, 0, 0, 0};
  rc = ckpt_state_stream(m, &src, &st, &sink, &e);
  snprintf(name, sizeof name, "ckpt_state_stream_sink_error_%s", tag);
  check(rc == -1 && strstr(e.msg, "sink full"), name, "rc %d (%s)", rc, e.msg);
  /* A source that knows fewer parameters than the model is refused by ckpt_moments_of's bounds. */
  AdamWSegment none = {0, 0, 0};
  AdamW *small = adamw_new(&o->cfg, 10, &none, 0, &e);
  CkptMoments bad = ckpt_moments_of(small);
  ms.len = 0;
  ms.fail_after = 0;
  rc = ckpt_state_stream(m, &bad, &st, &sink, &e);
  snprintf(name, sizeof name, "ckpt_moments_of_bounds_%s", tag);
  check(rc == -1 && strstr(e.msg, "outside"), name, "rc %d (%s)", rc, e.msg);
  CkptState over = st;
  over.n_extra = CKPT_EXTRA_WORDS + 1;
  snprintf(name, sizeof name, "ckpt_state_stream_refuses_n_extra_%s", tag);
  check(ckpt_state_size(m, &over) == 0 && ckpt_state_stream(m, &src, &over, &sink, &e) == -1, name, "%s", e.msg);
  adamw_free(small);
  adamw_free(o2);
  adamw_free(o);
  free(b);
  free(ms.p);
  model_free(m);
}

/* A classifier started from a masked LM (issue 16): the encoder's numbers come from
** the file, the head keeps its initialisation, the MLM head is skipped; a classifier's
** own file round-trips whole, and a masked LM cannot load a classifier's file. */
static void encoder_test(ModelType type, const char *tag) {
  Err e = {0};
  char name[96];
  ModelConfig c = fixture_config(type, 30, 16, 2, 2, 32, 20);
  Model *mlm = model_new(&c, &e);
  model_init_weights(mlm, 11);
  const char *names[3] = {"neg", "neu", "pos"};
  ModelConfig k = c;
  config_set_labels(&k, 3, names, &e);
  Model *cls = model_new(&k, &e), *again = model_new(&k, &e);
  model_init_weights(cls, 12);
  model_init_weights(again, 13);
  unsigned char *bytes = NULL, *cbytes = NULL;
  size_t len = 0, clen = 0;
  int head = -1;
  StFile *f = NULL;
  int rc = ckpt_weights_bytes(mlm, 0, &bytes, &len, &e);
  if (!rc) f = st_open_memory(bytes, len, &e);
  rc = f ? ckpt_load_encoder(cls, f, &head, &e) : -1;
  int enc_same = 1, head_kept = 1;
  for (int i = 0; i < model_tensor_count(cls); i++) {
    const ModelTensor *t = model_tensor(cls, i);
    const ModelTensor *u = model_tensor_by_name(mlm, t->name);
    if (u) enc_same &= !memcmp(model_params(cls) + t->offset, model_params(mlm) + u->offset, t->numel * sizeof(float));
    else head_kept &= model_params(cls)[t->offset] != 0 || t->ndim == 1;
  }
  snprintf(name, sizeof name, "ckpt_encoder_from_mlm_%s", tag);
  check(rc == 0 && head == 0 && enc_same && head_kept, name, "rc %d head %d same %d kept %d %s", rc, head, enc_same, head_kept, e.msg);
  st_close(f);
  /* The classifier's own file: every tensor, head included. */
  f = NULL;
  rc = ckpt_weights_bytes(cls, 0, &cbytes, &clen, &e);
  if (!rc) rc = ckpt_load_weights_memory(again, cbytes, clen, &e);
  snprintf(name, sizeof name, "ckpt_classifier_roundtrip_%s", tag);
  check(rc == 0 && !memcmp(model_params(again), model_params(cls), model_num_params(cls) * sizeof(float)), name, "%s", e.msg);
  if (!rc) f = st_open_memory(cbytes, clen, &e);
  rc = f ? ckpt_load_encoder(again, f, &head, &e) : -1;
  snprintf(name, sizeof name, "ckpt_encoder_from_classifier_loads_head_%s", tag);
  check(rc == 0 && head == 4, name, "rc %d head %d %s", rc, head, e.msg);
  st_close(f);
  rc = ckpt_load_weights_memory(mlm, cbytes, clen, &e);
  snprintf(name, sizeof name, "ckpt_mlm_refuses_classifier_file_%s", tag);
  check(rc == -1 && strstr(e.msg, "is missing"), name, "rc %d %s", rc, e.msg);
  rc = ckpt_load_weights_memory(cls, bytes, len, &e);
  snprintf(name, sizeof name, "ckpt_classifier_refuses_mlm_file_%s", tag);
  check(rc == -1, name, "rc %d %s", rc, e.msg);
  free(bytes); free(cbytes);
  model_free(mlm); model_free(cls); model_free(again);
}

int main(void) {
  if (fixture_tmpdir(tmpdir, sizeof tmpdir, "ckpt")) return 1;
  encoder_test(MODEL_ROBERTA, "roberta");
  encoder_test(MODEL_BERT, "bert");
  char cmd[300];
  folder_tests(MODEL_ROBERTA, "roberta");
  folder_tests(MODEL_BERT, "bert");
  resume_test(MODEL_ROBERTA, "roberta");
  resume_test(MODEL_BERT, "bert");
  store_round_trip();
  stream_test(40, "tiny");
  stream_test(70000, "chunked");
  Err e = {0};
  check(ckpt_save_model(NULL, "", 0, &e) == -1 && e.msg[0], "ckpt_save_refuses_empty_dir", "%s", e.msg);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) return 1;
  return check_exit();
}
