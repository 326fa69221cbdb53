/* What the PyTorch parity tests share (test_model_parity.c: the masked LM;
** test_model_cls_parity.c: the sequence classifier): reading a reference dump
** (safetensors written by scripts/torch_reference.py, torch_bf16_reference.py,
** torch_cls_reference.py), loading its weights into a model by HF name, the
** AdamW setup of its "steps_config", and generating the dumps when missing. */
#ifndef MASKD_TESTS_PARITY_COMMON_H
#define MASKD_TESTS_PARITY_COMMON_H
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/io/safetensors.h"
#include "engine/nn/model.h"
#include "engine/nn/optim.h"
#include "tests/unit/check.h"

/* The dump's tensor name as floats (numel < 0: all of it); NULL with err when missing. */
static inline float *parity_read_f32(const StFile *f, const char *name, int64_t numel, Err *err) {
  const StTensor *t = st_find(f, name);
  if (!t) { err_set(err, "no tensor %s in the dump", name); return NULL; }
  if (numel < 0) numel = t->numel;
  float *out = malloc((size_t)(numel ? numel : 1) * sizeof(float));
  if (st_read_f32(t, out, numel, err)) { free(out); return NULL; }
  return out;
}

/* The dump's integer tensor name (numel elements) as int32; NULL with err when missing. */
static inline int32_t *parity_read_i32(const StFile *f, const char *name, int64_t numel, Err *err) {
  const StTensor *t = st_find(f, name);
  if (!t) { err_set(err, "no tensor %s in the dump", name); return NULL; }
  int64_t *tmp = malloc((size_t)(numel ? numel : 1) * sizeof(int64_t));
  if (st_read_i64(t, tmp, numel, err)) { free(tmp); return NULL; }
  int32_t *out = malloc((size_t)(numel ? numel : 1) * sizeof(int32_t));
  for (int64_t i = 0; i < numel; i++) out[i] = (int32_t)tmp[i];
  free(tmp);
  return out;
}

static inline double parity_jnum(json_t *o, const char *k, double dflt) {
  json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : dflt;
}

/* Copies every model tensor from the dump by HF name and shape; prints each one that is
** missing or differs. 1 when all were loaded. */
static inline int parity_load_weights(Model *m, const StFile *f) {
  Err err = {0};
  int loaded = 1;
  for (int i = 0; i < model_tensor_count(m); i++) {
    const ModelTensor *mt = model_tensor(m, i);
    const StTensor *t = st_find(f, mt->name);
    int shape_ok = t && t->ndim == mt->ndim && t->shape[0] == mt->shape[0] && (mt->ndim == 1 || t->shape[1] == mt->shape[1]);
    if (!shape_ok || st_read_f32(t, model_params(m) + mt->offset, (int64_t)mt->numel, &err)) {
      printf("  %s: %s\n", mt->name, t ? (shape_ok ? err.msg : "shape differs") : "missing");
      loaded = 0;
    }
  }
  return loaded;
}

/* The AdamW configuration of a dump's "steps_config" JSON (torch_reference.py's STEPS). */
static inline AdamWConfig parity_adamw_config(const char *steps_text) {
  json_t *sj = json_loads(steps_text, 0, NULL);
  AdamWConfig oc = adamw_defaults();
  oc.lr = parity_jnum(sj, "lr", oc.lr);
  oc.weight_decay = parity_jnum(sj, "weight_decay", 0);
  oc.warmup_steps = (long)parity_jnum(sj, "warmup_steps", 0);
  oc.total_steps = (long)parity_jnum(sj, "total_steps", 10);
  oc.clip_norm = parity_jnum(sj, "clip_norm", 0);
  oc.beta1 = parity_jnum(sj, "beta1", 0.9);
  oc.beta2 = parity_jnum(sj, "beta2", 0.999);
  oc.eps = parity_jnum(sj, "eps", 1e-8);
  oc.min_lr_ratio = parity_jnum(sj, "min_lr_ratio", 0);
  json_decref(sj);
  return oc;
}

/* An optimizer over m's tensors (weight decay where the tensor's decay flag says). */
static inline AdamW *parity_adamw_new(Model *m, const AdamWConfig *oc, Err *err) {
  int nt = model_tensor_count(m);
  AdamWSegment *segs = malloc((size_t)nt * sizeof *segs);
  for (int i = 0; i < nt; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    segs[i] = (AdamWSegment){mt->offset, mt->numel, mt->decay};
  }
  AdamW *opt = adamw_new(oc, model_num_params(m), segs, nt, err);
  free(segs);
  return opt;
}

static inline int parity_exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

/* Runs script into dir when DIR/<a>.safetensors or DIR/<b>.safetensors is missing; 0 when
** both are there after it. The generator needs Debian's python3-torch: its absence is a
** failure (check_name FAILs), never a skip. The optimised and the sanitizer build's tests
** share the dumps and may run at once (tests/run's lanes): the check and the generation
** hold an exclusive lock on DIR.lock, so no test reads a dump half written. */
static inline int parity_generate(const char *dir, const char *script, const char *a_name, const char *b_name,
                                  const char *check_name) {
  char a[1000], b[1000], lock[1000];
  snprintf(a, sizeof a, "%s/%s.safetensors", dir, a_name);
  snprintf(b, sizeof b, "%s/%s.safetensors", dir, b_name);
  snprintf(lock, sizeof lock, "%s.lock", dir);
  int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    check(0, check_name, "cannot lock %s", lock);
    if (fd >= 0) close(fd);
    return -1;
  }
  int rc = 0;
  char cmd[2048] = "";
  if (!parity_exists(a) || !parity_exists(b)) {
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s '%s' >/dev/null", script, dir);
    rc = system(cmd);
    check(rc == 0 && parity_exists(a) && parity_exists(b), check_name,
          "'%s' failed (status %d): is python3-torch installed (scripts/setup) and is the test run from the "
          "repository root?", cmd, rc);
  }
  int ok = rc == 0 && parity_exists(a) && parity_exists(b);
  close(fd);   /* releases the lock */
  return ok ? 0 : -1;
}

/* The dumps' folder: argv[1] when given, else $MASKD_TMP/parity (/tmp/parity). */
static inline void parity_dir(int argc, char **argv, char *dir, size_t size) {
  if (argc > 1) {
    snprintf(dir, size, "%s", argv[1]);
  } else {
    const char *tmp = getenv("MASKD_TMP");
    snprintf(dir, size, "%s/parity", tmp && *tmp ? tmp : "/tmp");
  }
}

#endif
