/* engine/io/hf_weights and engine/io/torch_pickle: a folder's weights under HF's name
** rules, and pytorch_model.bin read without Python, against hostile inputs: forbidden
** globals and opcodes, truncation at every byte, huge sizes, offsets outside storages,
** strided views copied out (or refused past their storage), float64 storages,
** compressed or damaged zip entries, shard names leaving the folder, symlinks followed
** as a Hugging Face cache snapshot has them, F16/BF16 special values converted
** exactly, and NaN or infinite weights refused in every layout; many tensors (sharded
** safetensors, a .bin's storages) read in time near-linear in their count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/buf.h"
#include "engine/core/now.h"
#include "engine/io/hf_weights.h"
#include "engine/io/torch_pickle.h"
#include "engine/nn/model.h"
#include "tests/unit/check.h"

static char tmpdir[200];

/* ---- a stored zip, built here ---- */

static void put16(Buf *b, unsigned v) { unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)}; buf_put(b, x, 2); }
static void put32(Buf *b, uint32_t v) { put16(b, v & 0xFFFF); put16(b, v >> 16); }

/* entries: n (name, bytes, len); method is written for every entry (0 = stored). */
static Buf make_zip(int n, const char *const *names, const void *const *data, const size_t *len, unsigned method) {
  Buf z = {0}, cd = {0};
  for (int i = 0; i < n; i++) {
    uint32_t off = (uint32_t)z.len;
    size_t nl = strlen(names[i]);
    put32(&z, 0x04034b50); put16(&z, 20); put16(&z, 0); put16(&z, method); put16(&z, 0); put16(&z, 0);
    put32(&z, 0); put32(&z, (uint32_t)len[i]); put32(&z, (uint32_t)len[i]); put16(&z, (unsigned)nl); put16(&z, 0);
    buf_put(&z, names[i], nl);
    buf_put(&z, data[i], len[i]);
    put32(&cd, 0x02014b50); put16(&cd, 20); put16(&cd, 20); put16(&cd, 0); put16(&cd, method); put16(&cd, 0); put16(&cd, 0);
    put32(&cd, 0); put32(&cd, (uint32_t)len[i]); put32(&cd, (uint32_t)len[i]); put16(&cd, (unsigned)nl); put16(&cd, 0);
    put16(&cd, 0); put16(&cd, 0); put16(&cd, 0); put32(&cd, 0); put32(&cd, off);
    buf_put(&cd, names[i], nl);
  }
  uint32_t cd_off = (uint32_t)z.len;
  buf_put(&z, cd.p, cd.len);
  put32(&z, 0x06054b50); put16(&z, 0); put16(&z, 0); put16(&z, (unsigned)n); put16(&z, (unsigned)n);
  put32(&z, (uint32_t)cd.len); put32(&z, cd_off); put16(&z, 0);
  buf_free(&cd);
  return z;
}

/* ---- a state-dict pickle, built here ---- */

static void op(Buf *b, int c) { unsigned char x = (unsigned char)c; buf_put(b, &x, 1); }
static void str(Buf *b, const char *s) { op(b, 'X'); put32(b, (uint32_t)strlen(s)); buf_puts(b, s); }
static void glob(Buf *b, const char *mod, const char *name) { op(b, 'c'); buf_printf(b, "%s\n%s\n", mod, name); }
static void bint(Buf *b, int64_t v) {
  if (v >= 0 && v < 256) { op(b, 'K'); op(b, (int)v); return; }
  op(b, 0x8a); op(b, 8);
  for (int i = 0; i < 8; i++) op(b, (int)((uint64_t)v >> (8 * i)) & 0xFF);
}

/* {"w": tensor of storage type stype, numel storage elements, at offset, shape (a, b), stride (sa, sb)}. */
typedef struct { const char *smod, *stype; int64_t numel, offset, a, b, sa, sb; } PkSpec;

static Buf make_pickle(const PkSpec *s) {
  Buf p = {0};
  op(&p, 0x80); op(&p, 2);
  glob(&p, "collections", "OrderedDict"); op(&p, ')'); op(&p, 'R'); op(&p, 'q'); op(&p, 0);
  op(&p, '(');
  str(&p, "w");
  glob(&p, "torch._utils", "_rebuild_tensor_v2");
  op(&p, '(');
  op(&p, '('); str(&p, "storage"); glob(&p, s->smod, s->stype); str(&p, "0"); str(&p, "cpu"); bint(&p, s->numel); op(&p, 't');
  op(&p, 'Q');
  bint(&p, s->offset);
  bint(&p, s->a); bint(&p, s->b); op(&p, 0x86);
  bint(&p, s->sa); bint(&p, s->sb); op(&p, 0x86);
  op(&p, 0x89);
  op(&p, 'h'); op(&p, 0);   /* the OrderedDict global's memo... here: the dict itself, as hooks */
  op(&p, 't');
  op(&p, 'R');
  op(&p, 'u');
  /* state_dict's _metadata, as BUILD state: ignored. */
  op(&p, '}'); str(&p, "_metadata"); op(&p, '}'); op(&p, 's'); op(&p, 'b');
  op(&p, '.');
  return p;
}

static const PkSpec GOOD = {"torch", "FloatStorage", 6, 0, 2, 3, 3, 1};
static const float STORAGE[6] = {1, -2, 3.5f, 0, 1e-3f, 7};

/* The archive of pickle p with storage "0" (bytes of data) and byteorder bo (NULL: none). */
static Buf make_archive(const Buf *p, const void *data, size_t len, const char *bo, unsigned method) {
  const char *names[4] = {"archive/data.pkl", "archive/data/0", "archive/version", "archive/byteorder"};
  const void *d[4] = {p->p, data, "3\n", bo};
  size_t l[4] = {p->len, len, 2, bo ? strlen(bo) : 0};
  return make_zip(bo ? 4 : 3, names, d, l, method);
}

/* Reads an archive: 0 and the one tensor's values checked, or -1 with e set. */
static int read_archive(const Buf *z, Err *e, float *first) {
  HfWeights *w = hfw_new();
  TpSink sink = hfw_torch_sink(w);
  int rc = tp_read_state_dict_memory(z->p, z->len, &sink, e);
  if (rc == 0 && first) {
    const HfTensor *t = hfw_count(w) == 1 ? hfw_tensor(w, 0) : NULL;
    *first = t && !strcmp(t->name, "w") && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 ? t->data[0] : NAN;
  }
  hfw_free(w);
  return rc;
}

/* Reads the one tensor "w" of spec over storage bytes data: its values into got (at
** most 6), their count into *n; the reader's status, with e set on refusal. */
static int read_view(const PkSpec *spec, const void *data, size_t len, float *got, int *n, Err *e) {
  Buf p = make_pickle(spec);
  Buf z = make_archive(&p, data, len, "little", 0);
  HfWeights *w = hfw_new();
  TpSink sink = hfw_torch_sink(w);
  e->msg[0] = 0;
  int rc = tp_read_state_dict_memory(z.p, z.len, &sink, e);
  const HfTensor *t = rc == 0 && hfw_count(w) == 1 ? hfw_tensor(w, 0) : NULL;
  *n = -1;
  if (t && !strcmp(t->name, "w") && t->ndim == 2 && t->shape[0] == spec->a && t->shape[1] == spec->b && t->numel <= 6) {
    *n = (int)t->numel;
    memcpy(got, t->data, (size_t)t->numel * sizeof *got);
  }
  hfw_free(w);
  buf_free(&p);
  buf_free(&z);
  return rc;
}

static void refuse_pickle(const char *name, const PkSpec *s, const char *needle) {
  Buf p = make_pickle(s);
  Buf z = make_archive(&p, STORAGE, sizeof STORAGE, "little", 0);
  Err e = {0};
  int rc = read_archive(&z, &e, NULL);
  check(rc == -1 && e.kind == ERR_BAD_INPUT && strstr(e.msg, needle), name, "rc %d: %s", rc, e.msg);
  buf_free(&p);
  buf_free(&z);
}

static void refuse_raw_pickle(const char *name, const char *bytes, size_t n, const char *needle) {
  Buf p = {0};
  buf_put(&p, bytes, n);
  Buf z = make_archive(&p, STORAGE, sizeof STORAGE, NULL, 0);
  Err e = {0};
  int rc = read_archive(&z, &e, NULL);
  check(rc == -1 && strstr(e.msg, needle), name, "rc %d: %s", rc, e.msg);
  buf_free(&p);
  buf_free(&z);
}

/* A state dict of n one-element tensors, each over a storage of its own (as torch.save
** writes separate parameters): every storage is one zip entry, each found by its name
** among the n once (a scan of the central directory per storage took 10 s for 40000). */
static void test_many_storages(void) {
  enum { N = 40000 };   /* (a zip without zip64 holds at most 65535 entries) */
  Buf p = {0};
  op(&p, 0x80); op(&p, 2);
  glob(&p, "collections", "OrderedDict"); op(&p, ')'); op(&p, 'R');
  op(&p, '(');
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof key, "t%d", i);
    str(&p, key);
    glob(&p, "torch._utils", "_rebuild_tensor_v2");
    op(&p, '(');
    snprintf(key, sizeof key, "%d", i);
    op(&p, '('); str(&p, "storage"); glob(&p, "torch", "FloatStorage"); str(&p, key); str(&p, "cpu"); bint(&p, 1); op(&p, 't');
    op(&p, 'Q');
    bint(&p, 0);
    bint(&p, 1); op(&p, 0x85);
    bint(&p, 1); op(&p, 0x85);
    op(&p, 0x89);
    op(&p, '}');
    op(&p, 't');
    op(&p, 'R');
  }
  op(&p, 'u');
  op(&p, '.');
  const char **names = calloc(N + 2, sizeof *names);
  const void **data = calloc(N + 2, sizeof *data);
  size_t *len = calloc(N + 2, sizeof *len);
  char(*keys)[32] = malloc(N * sizeof *keys);
  float *values = malloc(N * sizeof *values);
  Buf z = {0};
  if (names && data && len && keys && values && !p.oom) {
    names[0] = "archive/data.pkl", data[0] = p.p, len[0] = p.len;
    names[1] = "archive/byteorder", data[1] = "little", len[1] = 6;
    for (int i = 0; i < N; i++) {
      snprintf(keys[i], sizeof keys[i], "archive/data/%d", i);
      values[i] = (float)i;
      names[i + 2] = keys[i], data[i + 2] = &values[i], len[i + 2] = sizeof(float);
    }
    z = make_zip(N + 2, names, data, len, 0);
  }
  HfWeights *w = hfw_new();
  TpSink sink = hfw_torch_sink(w);
  Err e = {0};
  double t0 = now_monotonic();
  int rc = z.len ? tp_read_state_dict_memory(z.p, z.len, &sink, &e) : -1;
  double secs = now_monotonic() - t0;
  const HfTensor *last = rc == 0 && hfw_count(w) == N ? hfw_tensor(w, N - 1) : NULL;
  char want[32];
  snprintf(want, sizeof want, "t%d", N - 1);
  check(last && !strcmp(last->name, want) && last->data[0] == (float)(N - 1), "pickle_many_storages_read", "rc %d, %d tensors: %s",
        rc, hfw_count(w), e.msg);
  check(secs < 3, "pickle_many_storages_fast", "%.1f s for %d storages", secs, N);
  hfw_free(w);
  buf_free(&z);
  buf_free(&p);
  free(names); free(data); free(len); free(keys); free(values);
}

static void test_pickle(void) {
  Err e = {0};
  float first = 0;
  Buf p = make_pickle(&GOOD);
  Buf z = make_archive(&p, STORAGE, sizeof STORAGE, "little", 0);
  HfWeights *w = hfw_new();
  TpSink sink = hfw_torch_sink(w);
  int rc = tp_read_state_dict_memory(z.p, z.len, &sink, &e);
  const HfTensor *t = rc == 0 && hfw_count(w) == 1 ? hfw_tensor(w, 0) : NULL;
  check(t && !strcmp(t->name, "w") && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && !memcmp(t->data, STORAGE, sizeof STORAGE),
        "pickle_state_dict_read", "rc %d %s", rc, e.msg);
  hfw_free(w);
  /* Truncated at every byte: refused, never a crash (ASan watches the reads). */
  int all = 1;
  for (size_t n = 0; n < z.len; n++) {
    Err te = {0};
    HfWeights *tw = hfw_new();
    TpSink tsink = hfw_torch_sink(tw);
    if (tp_read_state_dict_memory(z.p, n, &tsink, &te) == 0) all = 0;
    hfw_free(tw);
  }
  check(all, "zip_truncated_everywhere_refused", "a prefix was accepted");
  all = 1;
  for (size_t n = 0; n + 1 < p.len; n++) {
    Buf q = {0};
    buf_put(&q, p.p, n);
    Buf zq = make_archive(&q, STORAGE, sizeof STORAGE, NULL, 0);
    if (read_archive(&zq, &e, &first) == 0) all = 0;
    buf_free(&q);
    buf_free(&zq);
  }
  check(all, "pickle_truncated_everywhere_refused", "a prefix was accepted");
  /* Every single byte flipped: refused or read, never a crash. */
  for (size_t i = 0; i < p.len; i++) {
    Buf q = {0};
    buf_put(&q, p.p, p.len);
    q.p[i] ^= 0x5A;
    Buf zq = make_archive(&q, STORAGE, sizeof STORAGE, NULL, 0);
    read_archive(&zq, &e, &first);
    buf_free(&q);
    buf_free(&zq);
  }
  check(1, "pickle_flipped_bytes_no_crash", "");
  buf_free(&z);

  z = make_archive(&p, STORAGE, sizeof STORAGE, "big", 0);
  rc = read_archive(&z, &e, NULL);
  check(rc == -1 && strstr(e.msg, "byteorder"), "pickle_refuses_big_endian", "%s", e.msg);
  buf_free(&z);
  z = make_archive(&p, STORAGE, sizeof STORAGE, NULL, 8);
  rc = read_archive(&z, &e, NULL);
  check(rc == -1 && strstr(e.msg, "compressed (method 8)"), "zip_refuses_deflate", "%s", e.msg);
  buf_free(&z);
  z = make_archive(&p, STORAGE, sizeof STORAGE - 4, NULL, 0);
  rc = read_archive(&z, &e, NULL);
  check(rc == -1 && strstr(e.msg, "elements of F32 need"), "pickle_refuses_short_storage", "%s", e.msg);
  buf_free(&z);
  /* The central directory pointing past the file. */
  z = make_archive(&p, STORAGE, sizeof STORAGE, NULL, 0);
  z.p[z.len - 6] = 0xFF;
  z.p[z.len - 5] = 0xFF;
  rc = read_archive(&z, &e, NULL);
  check(rc == -1 && strstr(e.msg, "central directory"), "zip_refuses_directory_outside", "%s", e.msg);
  buf_free(&z);
  buf_free(&p);

  PkSpec s = GOOD;
  s.smod = "os"; s.stype = "system";
  refuse_pickle("pickle_refuses_os_system", &s, "global os.system is not allowed: only a state dict of tensors is read");
  s = GOOD; s.stype = "IntStorage";
  refuse_pickle("pickle_refuses_int_storage", &s, "global torch.IntStorage is not allowed");
  s = GOOD; s.stype = "LongStorage"; s.numel = 3; s.a = 1; s.sa = 3;
  refuse_pickle("pickle_refuses_int64_weight", &s, "tensor \"w\": int64, not a weight");
  s = GOOD; s.offset = 1;
  refuse_pickle("pickle_refuses_offset_past_storage", &s, "outside its storage");
  /* Strided views (torch.save of a transposed, sliced or expanded tensor keeps the view's
  ** strides over its storage) are copied out in row-major order; one reaching past its
  ** storage, by its strides or its offset, or with a negative or overflowing stride, is
  ** refused (a view that was not contiguous was refused whole). */
  static const struct { const char *name; PkSpec spec; float want[6]; } views[] = {
    {"pickle_strided_transposed_read", {"torch", "FloatStorage", 6, 0, 2, 3, 1, 2}, {1, 3.5f, 1e-3f, -2, 0, 7}},
    {"pickle_strided_slice_read", {"torch", "FloatStorage", 6, 1, 2, 2, 3, 1}, {-2, 3.5f, 1e-3f, 7}},
    {"pickle_strided_expanded_read", {"torch", "FloatStorage", 6, 0, 2, 3, 0, 1}, {1, -2, 3.5f, 1, -2, 3.5f}},
    {"pickle_strided_size_one_any_stride", {"torch", "FloatStorage", 6, 3, 1, 3, 999, 1}, {0, 1e-3f, 7}},
  };
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
    float got[6];
    int n = 0;
    int vrc = read_view(&views[i].spec, STORAGE, sizeof STORAGE, got, &n, &e);
    int64_t want_n = views[i].spec.a * views[i].spec.b;
    check(vrc == 0 && n == want_n && !memcmp(got, views[i].want, (size_t)n * sizeof *got), views[i].name, "rc %d, %d values: %s", vrc, n,
          e.msg);
  }
  s = GOOD; s.sa = 1; s.sb = 3;
  refuse_pickle("pickle_refuses_strided_past_storage", &s, "reaches past its storage of 6");
  s = GOOD; s.offset = 2; s.sa = 1; s.sb = 2;
  refuse_pickle("pickle_refuses_strided_offset_past_storage", &s, "reaches past its storage of 6");
  s = GOOD; s.sa = 1; s.sb = -2;
  refuse_pickle("pickle_refuses_negative_stride", &s, "a negative stride");
  s = GOOD; s.sa = 1; s.sb = (int64_t)1 << 62;
  refuse_pickle("pickle_refuses_overflowing_stride", &s, "reaches past its storage of 6");
  s = GOOD; s.a = (int64_t)1 << 20; s.b = (int64_t)1 << 20; s.sa = 0; s.sb = 0;
  refuse_pickle("pickle_refuses_expanded_past_archive", &s, "more than an archive of");
  /* A float64 state dict: DoubleStorage, converted to float32 as F64 safetensors are. */
  {
    static const double d64[6] = {1, -2, 3.5, 0, 1e-3, 7};
    PkSpec ds = GOOD;
    ds.stype = "DoubleStorage";
    float got[6];
    int n = 0;
    int drc = read_view(&ds, d64, sizeof d64, got, &n, &e);
    check(drc == 0 && n == 6 && !memcmp(got, STORAGE, sizeof STORAGE), "pickle_double_storage_read", "rc %d: %s", drc, e.msg);
    ds.sa = 1; ds.sb = 2;
    drc = read_view(&ds, d64, sizeof d64, got, &n, &e);
    check(drc == 0 && n == 6 && got[1] == 3.5f && got[3] == -2.0f, "pickle_double_storage_strided_read", "rc %d: %s", drc, e.msg);
    drc = read_view(&ds, d64, sizeof d64 - 8, got, &n, &e);
    check(drc == -1 && strstr(e.msg, "elements of F64 need"), "pickle_refuses_short_double_storage", "rc %d: %s", drc, e.msg);
  }
  s = GOOD; s.numel = (int64_t)1 << 50;
  refuse_pickle("pickle_refuses_huge_storage", &s, "bad size");
  s = GOOD; s.a = (int64_t)1 << 45;
  refuse_pickle("pickle_refuses_huge_shape", &s, "bad size");
  s = GOOD; s.a = (int64_t)1 << 30; s.b = (int64_t)1 << 30; s.sa = (int64_t)1 << 30;
  refuse_pickle("pickle_refuses_overflowing_shape", &s, "overflows");
  static const char stack_eval[] = "\x80\x02X\x08\x00\x00\x00" "builtinsX\x04\x00\x00\x00" "eval\x93)R.";
  refuse_raw_pickle("pickle_refuses_stack_global_eval", stack_eval, sizeof stack_eval - 1, "global builtins.eval is not allowed");
  static const char inst[] = "\x80\x02(ios\nsystem\n.";
  refuse_raw_pickle("pickle_refuses_inst", inst, sizeof inst - 1, "opcode 'i' is not allowed");
  static const char get[] = "\x80\x02j\xff\xff\xff\x7f.";
  refuse_raw_pickle("pickle_refuses_unset_memo", get, sizeof get - 1, "memo");
  static const char put[] = "\x80\x02}r\xff\xff\xff\x7f.";
  refuse_raw_pickle("pickle_refuses_huge_memo", put, sizeof put - 1, "too large");
  static const char notdict[] = "\x80\x02K\x01.";
  refuse_raw_pickle("pickle_refuses_non_dict", notdict, sizeof notdict - 1, "not a dict of tensors");
  static const char notensor[] = "\x80\x02}(X\x01\x00\x00\x00" "aK\x01u.";
  refuse_raw_pickle("pickle_refuses_non_tensor_value", notensor, sizeof notensor - 1, "\"a\" is not a tensor");
  static const char underflow[] = "\x80\x02R.";
  refuse_raw_pickle("pickle_refuses_underflow", underflow, sizeof underflow - 1, "underflow");
  static const char nostop[] = "\x80\x02}";
  refuse_raw_pickle("pickle_refuses_no_stop", nostop, sizeof nostop - 1, "without STOP");
  static const char legacy[] = "\x80\x02\x8a\x0alo\x1b";
  w = hfw_new();
  sink = hfw_torch_sink(w);
  rc = tp_read_state_dict_memory(legacy, sizeof legacy - 1, &sink, &e);
  hfw_free(w);
  check(rc == -1 && strstr(e.msg, "legacy (pre-1.6) format"), "pickle_refuses_legacy_format", "%s", e.msg);
}

/* ---- folders ---- */

static ModelConfig tiny_config(void) {
  ModelConfig c;
  Err e = {0};
  config_parse("{\"model_type\": \"bert\", \"vocab_size\": 10, \"hidden_size\": 4, \"num_hidden_layers\": 1, "
               "\"num_attention_heads\": 1, \"intermediate_size\": 8, \"max_position_embeddings\": 8}", &c, &e);
  return c;
}

/* When poison_name is set, write_model puts poison_bits (F16/BF16) or poison_value (F32)
** at element poison_at of the tensor of that name. */
static const char *poison_name;
static size_t poison_at;
static float poison_value;
static uint16_t poison_bits;

/* dir/model.safetensors with the tiny BERT's tensors (F32, values i + 0.5), renamed by fn (may be NULL). */
static int write_model(const char *dir, const char *file, const char *skip, const char *(*rename)(const char *), StDtype dt) {
  ModelConfig c = tiny_config();
  Err e = {0};
  Model *m = model_new(&c, &e);
  int n = model_tensor_count(m), k = 0;
  StWriteTensor *ts = calloc((size_t)n, sizeof *ts);
  void **bufs = calloc((size_t)n, sizeof *bufs);
  for (int i = 0; i < n; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    if (skip && !strcmp(skip, mt->name)) continue;
    ts[k].name = rename ? rename(mt->name) : mt->name;
    ts[k].dtype = dt;
    ts[k].ndim = mt->ndim;
    for (int d = 0; d < mt->ndim; d++) ts[k].shape[d] = mt->shape[d];
    float *f = malloc(mt->numel * sizeof *f);
    uint16_t *h = malloc(mt->numel * sizeof *h);
    for (size_t j = 0; j < mt->numel; j++) f[j] = (float)j + 0.5f;
    for (size_t j = 0; j < mt->numel; j++) h[j] = (uint16_t)(dt == ST_BF16 ? 0x3f80 : 0x3c00);   /* 1.0 */
    if (poison_name && !strcmp(poison_name, mt->name)) { f[poison_at] = poison_value; h[poison_at] = poison_bits; }
    bufs[k] = dt == ST_F32 ? (void *)f : (void *)h;
    if (dt == ST_F32) free(h); else free(f);
    ts[k].data = bufs[k];
    k++;
  }
  char path[400];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  int rc = st_write(path, ts, k, NULL, 0, &e);
  for (int i = 0; i < k; i++) free(bufs[i]);
  free(bufs);
  free(ts);
  model_free(m);
  return rc;
}

static const char *legacy_name(const char *name) {
  static char buf[64][128];   /* the writer holds every name at once */
  static int at;
  char *b = buf[at++ % 64];
  size_t n = strlen(name);
  if (n > 16 && !strcmp(name + n - 16, "LayerNorm.weight")) snprintf(b, 128, "%.*sgamma", (int)(n - 6), name);
  else if (n > 14 && !strcmp(name + n - 14, "LayerNorm.bias")) snprintf(b, 128, "%.*sbeta", (int)(n - 4), name);
  else snprintf(b, 128, "%s", name);
  return b;
}

static void clear_dir(const char *dir) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot reset %s\n", dir);
}

static void write_text(const char *dir, const char *file, const char *text) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "w");
  if (f) { fputs(text, f); fclose(f); }
}

static void refuse_dir(const char *name, const char *dir, const char *needle) {
  ModelConfig c = tiny_config();
  Err e = {0};
  HfWeights *w = hfw_read_dir(dir, &c, &e);
  check(!w && strstr(e.msg, needle), name, "%s", w ? "accepted" : e.msg);
  hfw_free(w);
}

/* A NaN or an infinity in any tensor, in any layout, is refused with the tensor and
** the element named (it made every fill-mask score NaN after an import that said
** nothing). */
static void test_non_finite(const char *dir) {
  const char *word = "bert.embeddings.word_embeddings.weight";
  poison_name = word;
  poison_at = 9;   /* row 2, column 1 of the (10, 4) embeddings */
  poison_value = NAN;
  clear_dir(dir);
  write_model(dir, "model.safetensors", NULL, NULL, ST_F32);
  refuse_dir("hfw_nan_refused", dir, "tensor \"bert.embeddings.word_embeddings.weight\": element 9 [2, 1] is NaN");
  poison_name = "bert.encoder.layer.0.output.dense.bias";
  poison_at = 3;
  poison_value = -INFINITY;
  clear_dir(dir);
  write_model(dir, "model.safetensors", NULL, NULL, ST_F32);
  refuse_dir("hfw_minus_inf_refused", dir, "tensor \"bert.encoder.layer.0.output.dense.bias\": element 3 is -Inf");
  /* F16's infinity (0x7c00) and BF16's NaN (0x7fc0) are refused once converted. */
  poison_name = word;
  poison_at = 39;
  poison_bits = 0x7c00;
  clear_dir(dir);
  write_model(dir, "model.safetensors", NULL, NULL, ST_F16);
  refuse_dir("hfw_f16_inf_refused", dir, "element 39 [9, 3] is +Inf");
  poison_bits = 0x7fc0;
  clear_dir(dir);
  write_model(dir, "model.safetensors", NULL, NULL, ST_BF16);
  refuse_dir("hfw_bf16_nan_refused", dir, "element 39 [9, 3] is NaN");
  /* A sharded folder: the shard's tensor. */
  poison_bits = 0;
  poison_at = 0;
  poison_value = NAN;
  clear_dir(dir);
  write_model(dir, "s1.safetensors", NULL, NULL, ST_F32);
  {
    ModelConfig c = tiny_config();
    Err e = {0};
    Model *m = model_new(&c, &e);
    Buf idx = {0};
    buf_puts(&idx, "{\"weight_map\": {");
    for (int i = 0; m && i < model_tensor_count(m); i++) buf_printf(&idx, "%s\"%s\": \"s1.safetensors\"", i ? ", " : "", model_tensor(m, i)->name);
    buf_puts(&idx, "}}");
    model_free(m);
    if (!idx.oom) write_text(dir, "model.safetensors.index.json", idx.p);
    buf_free(&idx);
  }
  refuse_dir("hfw_sharded_nan_refused", dir, "element 0 [0, 0] is NaN");
  poison_name = NULL;
  /* pytorch_model.bin: the one tensor "w" holds a NaN (refused before the names are checked). */
  clear_dir(dir);
  float storage[6];
  memcpy(storage, STORAGE, sizeof storage);
  storage[4] = NAN;
  Buf p = make_pickle(&GOOD);
  Buf z = make_archive(&p, storage, sizeof storage, "little", 0);
  char path[400];
  snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
  FILE *f = fopen(path, "wb");
  if (f) { fwrite(z.p, 1, z.len, f); fclose(f); }
  refuse_dir("hfw_bin_nan_refused", dir, "tensor \"w\": element 4 [1, 1] is NaN");
  buf_free(&p);
  buf_free(&z);
}

/* Every file is followed when it is a symlink, wherever it leads, as config.json and the
** tokenizer are: a Hugging Face cache snapshot (snapshots/<rev>/FILE -> ../../blobs/<hash>)
** reads as the plain folder, whole or sharded (the index a link too). A shard linked
** outside the folder was refused ("a symlink leaving the folder") while the config
** beside it was followed. A link to nothing says so. */
static void test_symlinks(void) {
  char cache[256], snap[320], blobs[320], path[512];
  snprintf(cache, sizeof cache, "%s/cache", tmpdir);
  snprintf(snap, sizeof snap, "%s/snapshots/abc", cache);
  snprintf(blobs, sizeof blobs, "%s/blobs", cache);
  ModelConfig c = tiny_config();
  Err e = {0};
  for (int sharded = 0; sharded < 2; sharded++) {
    clear_dir(cache);
    clear_dir(snap);
    clear_dir(blobs);
    write_model(blobs, "4f2a", NULL, NULL, ST_F32);
    const char *weights = sharded ? "model-00001-of-00001.safetensors" : "model.safetensors";
    snprintf(path, sizeof path, "%s/%s", snap, weights);
    int ok = symlink("../../blobs/4f2a", path) == 0;
    if (sharded) {
      Model *m = model_new(&c, &e);
      Buf idx = {0};
      buf_puts(&idx, "{\"weight_map\": {");
      for (int i = 0; m && i < model_tensor_count(m); i++) buf_printf(&idx, "%s\"%s\": \"%s\"", i ? ", " : "", model_tensor(m, i)->name, weights);
      buf_puts(&idx, "}}");
      model_free(m);
      if (!idx.oom) write_text(blobs, "9c1d", idx.p);
      buf_free(&idx);
      snprintf(path, sizeof path, "%s/model.safetensors.index.json", snap);
      ok &= symlink("../../blobs/9c1d", path) == 0;
    }
    HfWeights *w = ok ? hfw_read_dir(snap, &c, &e) : NULL;
    check(w && hfw_count(w) == 26 && hfw_tensor(w, 0)->data[0] == 0.5f, sharded ? "hfw_hf_cache_sharded_read" : "hfw_hf_cache_read",
          "%s", ok ? e.msg : "symlink failed");
    hfw_free(w);
  }
  /* A link to an absolute path outside the folder is followed too. */
  clear_dir(snap);
  snprintf(path, sizeof path, "%s/model.safetensors", snap);
  char target[512];
  snprintf(target, sizeof target, "%s/4f2a", blobs);
  HfWeights *w = symlink(target, path) == 0 ? hfw_read_dir(snap, &c, &e) : NULL;
  check(w && hfw_count(w) == 26, "hfw_symlink_outside_followed", "%s", e.msg);
  hfw_free(w);
  /* The blob missing: an unfinished download. */
  if (unlink(target) != 0) fprintf(stderr, "unlink failed\n");
  refuse_dir("hfw_symlink_dangling_refused", snap, "model.safetensors: a symlink whose target is missing");
  /* A link to a folder, not a file. */
  if (unlink(path) != 0 || symlink(blobs, path) != 0) fprintf(stderr, "symlink failed\n");
  refuse_dir("hfw_symlink_to_folder_refused", snap, "not a regular file");
}

static void test_folders(void) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/f", tmpdir);
  ModelConfig c = tiny_config();
  Err e = {0};

  clear_dir(dir);
  write_model(dir, "model.safetensors", NULL, legacy_name, ST_F32);
  HfWeights *w = hfw_read_dir(dir, &c, &e);
  check(w && hfw_count(w) == 26 && !strstr(hfw_tensor(w, 0)->name, "gamma") && c.task == MODEL_TASK_MLM && hfw_tensor(w, 0)->name[0] == 'b', "hfw_legacy_gamma_beta", "%d %s", w ? hfw_count(w) : -1, e.msg);
  hfw_free(w);

  /* F16 and BF16 ones become float 1.0 exactly; the special values through st_f16_to_f32. */
  clear_dir(dir);
  write_model(dir, "model.safetensors", NULL, NULL, ST_F16);
  w = hfw_read_dir(dir, &c, &e);
  check(w && hfw_tensor(w, 0)->data[0] == 1.0f, "hfw_f16_read", "%s", e.msg);
  hfw_free(w);
  clear_dir(dir);
  write_model(dir, "model.safetensors", NULL, NULL, ST_BF16);
  w = hfw_read_dir(dir, &c, &e);
  check(w && hfw_tensor(w, 0)->data[0] == 1.0f, "hfw_bf16_read", "%s", e.msg);
  hfw_free(w);
  check(st_f16_to_f32(0x0001) == ldexpf(1, -24) && st_f16_to_f32(0x03ff) == ldexpf(1023, -24) && isinf(st_f16_to_f32(0x7c00)) &&
            isnan(st_f16_to_f32(0x7e00)) && signbit(st_f16_to_f32(0x8000)) && st_f16_to_f32(0xfbff) == -65504.0f,
        "hfw_f16_special_values", "");

  /* The head missing entirely: a base model. */
  clear_dir(dir);
  write_model(dir, "model.safetensors", "cls.predictions.bias", NULL, ST_F32);
  w = hfw_read_dir(dir, &c, &e);
  check(!w && strstr(e.msg, "cls.predictions.bias"), "hfw_part_of_head_missing_refused", "%s", w ? "accepted" : e.msg);
  hfw_free(w);
  clear_dir(dir);
  write_model(dir, "model.safetensors", "bert.encoder.layer.0.output.dense.bias", NULL, ST_F32);
  refuse_dir("hfw_missing_listed", dir, "1 tensor the BertForMaskedLM needs is missing: bert.encoder.layer.0.output.dense.bias");

  /* Sharded: names leaving the folder, a wrong shard, a missing tensor, no file. */
  clear_dir(dir);
  write_model(dir, "s1.safetensors", NULL, NULL, ST_F32);
  static const char *const bad_names[] = {"../s1.safetensors", "/etc/passwd", "sub/s1.safetensors", "..", ""};
  for (int i = 0; i < 5; i++) {
    char text[300], name[64];
    snprintf(text, sizeof text, "{\"metadata\": {}, \"weight_map\": {\"bert.embeddings.word_embeddings.weight\": \"%s\"}}", bad_names[i]);
    write_text(dir, "model.safetensors.index.json", text);
    snprintf(name, sizeof name, "hfw_shard_name_refused_%d", i);
    refuse_dir(name, dir, "is not a file name inside the folder");
  }
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"bert.embeddings.word_embeddings.weight\": \"s1.safetensors\"}}");
  refuse_dir("hfw_shard_unmapped_tensor", dir, "is not in the index's weight_map");
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"x\": \"nothere.safetensors\"}}");
  refuse_dir("hfw_shard_file_missing", dir, "nothere.safetensors");
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": []}");
  refuse_dir("hfw_shard_bad_map", dir, "no weight_map");
  /* Many shard names: over the limit refused, under it the first missing one named, both
  ** at once (a scan per entry took 115 s for 100000 names). */
  for (int many = 0; many < 2; many++) {
    int names = many ? 200000 : HFW_MAX_SHARDS;
    Buf idx = {0};
    buf_puts(&idx, "{\"weight_map\": {");
    for (int i = 0; i < names; i++) buf_printf(&idx, "%s\"t%d\": \"m-%07d.safetensors\"", i ? ", " : "", i, names - 1 - i);
    buf_puts(&idx, "}}");
    if (!idx.oom) write_text(dir, "model.safetensors.index.json", idx.p);
    buf_free(&idx);
    double t0 = now_monotonic();
    refuse_dir(many ? "hfw_shard_too_many_refused" : "hfw_shard_many_names_first_missing", dir,
               many ? "200000 shards, more than the 4096" : "m-0000000.safetensors");
    check(now_monotonic() - t0 < 5, many ? "hfw_shard_too_many_fast" : "hfw_shard_many_names_fast", "%.1f s", now_monotonic() - t0);
  }
  /* Many tensors in a sharded folder, half of them buffers (left out): each mapped name
  ** is looked up among those read once, not by a scan of them (40000 names took 8 s,
  ** 80000 half a minute, and a 16 MiB index holds a million). */
  clear_dir(dir);
  write_model(dir, "s1.safetensors", NULL, NULL, ST_F32);
  {
    enum { MANY = 50000 };
    StWriteTensor *ts = calloc(MANY, sizeof *ts);
    char(*names)[32] = malloc(MANY * sizeof *names);
    static const int64_t none[1];
    Buf idx = {0};
    buf_puts(&idx, "{\"weight_map\": {");
    Model *m = model_new(&c, &e);
    for (int i = 0; m && i < model_tensor_count(m); i++) buf_printf(&idx, "\"%s\": \"s1.safetensors\", ", model_tensor(m, i)->name);
    model_free(m);
    for (int i = 0; ts && names && i < MANY; i++) {
      snprintf(names[i], sizeof names[i], i % 2 ? "x.%05d.position_ids" : "x.%05d.weight", i);
      ts[i] = (StWriteTensor){.name = names[i], .dtype = i % 2 ? ST_I64 : ST_F32, .ndim = 1, .shape = {0}, .data = none};
      buf_printf(&idx, "%s\"%s\": \"s2.safetensors\"", i ? ", " : "", names[i]);
    }
    buf_puts(&idx, "}}");
    char path[400];
    snprintf(path, sizeof path, "%s/s2.safetensors", dir);
    /* The writer's check for a name given twice was a scan per name too (13 s here). */
    double t0 = now_monotonic();
    if (!ts || !names || idx.oom || st_write(path, ts, MANY, NULL, 0, &e)) fprintf(stderr, "cannot write %s: %s\n", path, e.msg);
    else write_text(dir, "model.safetensors.index.json", idx.p);
    check(now_monotonic() - t0 < 3, "st_write_many_tensors_fast", "%.1f s for %d tensors", now_monotonic() - t0, MANY);
    buf_free(&idx);
    free(names);
    free(ts);
    t0 = now_monotonic();
    refuse_dir("hfw_shard_many_tensors_read", dir, "tensor \"x.00000.weight\" is not part of a BertForMaskedLM model");
    /* A guard against a scan per name (quadratic), not a benchmark: 6 s leaves room for the
    ** ASan build on a loaded machine (3.1 s once in make test's second lane). */
    check(now_monotonic() - t0 < 6, "hfw_shard_many_tensors_fast", "%.1f s for %d tensors", now_monotonic() - t0, MANY);
  }
  clear_dir(dir);
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": ");
  refuse_dir("hfw_shard_malformed_json", dir, "malformed JSON");
  test_symlinks();
  clear_dir(dir);
  refuse_dir("hfw_no_weights", dir, "model.safetensors: missing");
  test_non_finite(dir);
  /* A truncated safetensors file. */
  write_model(dir, "model.safetensors", NULL, NULL, ST_F32);
  char path[400];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (truncate(path, 300) != 0) fprintf(stderr, "truncate failed\n");
  refuse_dir("hfw_truncated_safetensors", dir, "model.safetensors");
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "%s/test_hf_weights.XXXXXX", getenv("MASKD_TMP") ? getenv("MASKD_TMP") : "/tmp");
  if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
  test_pickle();
  test_many_storages();
  test_folders();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
  return check_exit();
}
