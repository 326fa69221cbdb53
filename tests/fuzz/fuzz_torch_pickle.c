/* libFuzzer harness: pytorch_model.bin (engine/io/torch_pickle.h), a torch.save zip
** read from memory. Checks beyond "no crash": an accepted archive gives tensors whose
** element count is the product of their shape, each with a name; a refused one leaves
** one message of the bad-input or too-large kind (or out of memory). */
#include <stdint.h>
#include <string.h>

#include "engine/core/buf.h"
#include "engine/io/hf_weights.h"
#include "engine/io/torch_pickle.h"
#include "tests/fuzz/fuzz_common.h"

static void put16(Buf *b, unsigned v) { unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)}; buf_put(b, x, 2); }
static void put32(Buf *b, uint32_t v) { put16(b, v & 0xFFFF); put16(b, v >> 16); }

/* A stored zip of n entries, as torch.save lays one out (without its alignment padding). */
static Buf make_zip(int n, const char *const *names, const void *const *data, const size_t *len) {
  Buf z = {0}, cd = {0};
  for (int i = 0; i < n; i++) {
    uint32_t off = (uint32_t)z.len;
    size_t nl = strlen(names[i]);
    put32(&z, 0x04034b50); put16(&z, 20); put16(&z, 0); put16(&z, 0); put16(&z, 0); put16(&z, 0);
    put32(&z, 0); put32(&z, (uint32_t)len[i]); put32(&z, (uint32_t)len[i]); put16(&z, (unsigned)nl); put16(&z, 0);
    buf_put(&z, names[i], nl);
    buf_put(&z, data[i], len[i]);
    put32(&cd, 0x02014b50); put16(&cd, 20); put16(&cd, 20); put16(&cd, 0); put16(&cd, 0); put16(&cd, 0); put16(&cd, 0);
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

/* Seeds: a state dict of two tensors over one storage (F32), a Half one, and a parameter;
** a float64 one whose tensor is a strided view (the transpose of its storage). */
static void write_seeds(const char *dir) {
  static const char f32_pkl[] =
    "\x80\x02\x63" "collections\nOrderedDict\nq\x00)Rq\x01(X\x01\x00\x00\x00" "ac" "torch._utils\n_rebuild_tensor_v2\nq\x02"
    "((X\x07\x00\x00\x00" "storagec" "torch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x00K\x02K\x03\x86K\x03K\x01\x86\x89h\x00)Rtq\x03R"
    "X\x01\x00\x00\x00" "bh\x02((X\x07\x00\x00\x00" "storagec" "torch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x02K\x04\x85K\x01\x85\x89h\x00)RtR"
    "u}X\x09\x00\x00\x00_metadata}sb.";
  static const char f16_pkl[] =
    "\x80\x02}(X\x01\x00\x00\x00" "wc" "torch._utils\n_rebuild_parameter\n(c" "torch._utils\n_rebuild_tensor_v2\n"
    "((X\x07\x00\x00\x00" "storagec" "torch\nHalfStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x00K\x06\x85K\x01\x85\x89}tR\x88}tRu.";
  static const char f64_pkl[] =
    "\x80\x02}(X\x01\x00\x00\x00" "wc" "torch._utils\n_rebuild_tensor_v2\n"
    "((X\x07\x00\x00\x00" "storagec" "torch\nDoubleStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x00K\x02K\x03\x86K\x01K\x02\x86\x89}tRu.";
  static const double f64[6] = {1, -2, 3.5, 0, 1e-3, 7};
  static const float f32[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
  static const uint16_t f16[6] = {0x3c00, 0x0001, 0x7c00, 0x7e00, 0x8000, 0xfbff};
  const char *names[4] = {"archive/data.pkl", "archive/data/0", "archive/byteorder", "archive/version"};
  const char *const pkl[3] = {f32_pkl, f16_pkl, f64_pkl}, *const file[3] = {"float_two_views.bin", "half_parameter.bin", "double_strided.bin"};
  const size_t pkl_len[3] = {sizeof f32_pkl - 1, sizeof f16_pkl - 1, sizeof f64_pkl - 1}, data_len[3] = {sizeof f32, sizeof f16, sizeof f64};
  const void *const data[3] = {f32, f16, f64};
  for (int s = 0; s < 3; s++) {
    const void *d[4] = {pkl[s], data[s], "little", "3\n"};
    size_t l[4] = {pkl_len[s], data_len[s], 6, 2};
    Buf z = make_zip(4, names, d, l);
    fuzz_write_file(fuzz_seed_path(dir, file[s]), z.p, z.len);
    buf_free(&z);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fuzz_seeds_then_exit(write_seeds);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  HfWeights *w = hfw_new();
  Err err = {0};
  if (!w) return 0;
  TpSink sink = hfw_torch_sink(w);
  int rc = tp_read_state_dict_memory(data, size, &sink, &err);
  if (rc == 0) {
    FUZZ_CHECK(hfw_count(w) >= 0, "negative count");
    for (int i = 0; i < hfw_count(w); i++) {
      const HfTensor *t = hfw_tensor(w, i);
      FUZZ_CHECK(t && t->name && t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "tensor %d malformed", i);
      int64_t n = 1;
      for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
      FUZZ_CHECK(n == t->numel, "tensor \"%s\": numel %lld, shape says %lld", t->name, (long long)t->numel, (long long)n);
    }
  } else {
    FUZZ_CHECK(err.msg[0] && (err.kind == ERR_BAD_INPUT || err.kind == ERR_TOO_LARGE || err.kind == ERR_NOMEM),
               "refused with kind %s: %s", err_kind_name(err.kind), err.msg);
  }
  hfw_free(w);
  return 0;
}
