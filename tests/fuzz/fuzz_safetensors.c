/* libFuzzer harness: safetensors files (engine/io/safetensors.h), from memory and from a
** file (the mmap path). Checks beyond "no crash": both entry points agree; an accepted
** file's tensors tile the data buffer (8 + header + sum of sizes = file size), each
** size is shape x dtype, names resolve to their tensors; every tensor converts with
** the st_read_* readers that take its dtype; and what was accepted round-trips: the
** writer's bytes for it open to the same tensors and metadata, and writing those
** again gives the same bytes. */
#include <stdint.h>
#include <string.h>

#include "engine/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

static int is_float(StDtype d) { return d == ST_F32 || d == ST_F16 || d == ST_BF16 || d == ST_F64; }
static int is_int(StDtype d) {
  return d == ST_BOOL || d == ST_U8 || d == ST_I8 || d == ST_I16 || d == ST_U16 || d == ST_I32 || d == ST_U32 ||
         d == ST_I64 || d == ST_U64;
}

static void check_file(const StFile *f, size_t size) {
  int n = st_count(f);
  FUZZ_CHECK(n >= 0, "negative count");
  size_t sum = 0;
  const unsigned char *prev_end = NULL;
  for (int i = 0; i < n; i++) {
    const StTensor *t = st_tensor(f, i);
    FUZZ_CHECK(t && t->name, "tensor %d missing", i);
    FUZZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "ndim %d", t->ndim);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) { FUZZ_CHECK(t->shape[d] >= 0, "negative dim"); numel *= t->shape[d]; }
    FUZZ_CHECK(numel == t->numel, "numel %lld, shape says %lld", (long long)t->numel, (long long)numel);
    FUZZ_CHECK((uint64_t)numel * (uint64_t)st_dtype_bits(t->dtype) == (uint64_t)t->nbytes * 8, "size of \"%s\"", t->name);
    FUZZ_CHECK(st_find(f, t->name) == t, "st_find(\"%s\") is another tensor", t->name);
    if (prev_end) FUZZ_CHECK((const unsigned char *)t->data == prev_end, "tensor %d does not follow the previous one", i);
    prev_end = (const unsigned char *)t->data + t->nbytes;
    sum += t->nbytes;
  }
  FUZZ_CHECK(sum <= size - 8, "tensors cover %zu bytes of a %zu-byte file", sum, size);
  const char *k, *v;
  for (int i = 0; i < st_metadata_count(f); i++) {
    st_metadata_at(f, i, &k, &v);
    FUZZ_CHECK(k && v, "metadata %d missing", i);
    FUZZ_CHECK(st_metadata(f, k) == v, "metadata \"%s\" looks up another value", k);
  }
}

static void check_readers(const StFile *f) {
  for (int i = 0; i < st_count(f); i++) {
    const StTensor *t = st_tensor(f, i);
    Err err = {0};
    if (is_float(t->dtype)) {
      float *out = malloc((size_t)t->numel * sizeof *out + 1);
      FUZZ_CHECK(out, "oom");
      FUZZ_CHECK(st_read_f32(t, out, t->numel, &err) == 0, "st_read_f32(\"%s\"): %s", t->name, err.msg);
      if (t->dtype == ST_F32 && t->numel) FUZZ_CHECK(!memcmp(out, t->data, t->nbytes), "F32 copy differs");
      FUZZ_CHECK(st_read_f32(t, out, t->numel + 1, &err) == -1, "st_read_f32 took a wrong count");
      free(out);
    } else if (is_int(t->dtype)) {
      int64_t *o64 = malloc((size_t)t->numel * sizeof *o64 + 1);
      int32_t *o32 = malloc((size_t)t->numel * sizeof *o32 + 1);
      FUZZ_CHECK(o64 && o32, "oom");
      int r64 = st_read_i64(t, o64, t->numel, &err);
      int r32 = st_read_i32(t, o32, t->numel, &err);
      if (r32 == 0) {
        FUZZ_CHECK(r64 == 0, "i32 read worked where i64 failed");
        for (int64_t j = 0; j < t->numel; j++) FUZZ_CHECK(o32[j] == o64[j], "i32/i64 readers differ at %lld", (long long)j);
      }
      free(o64);
      free(o32);
    }
  }
}

/* The writer's bytes for f (all its tensors and metadata). */
static unsigned char *serialize(const StFile *f, size_t *len) {
  int n = st_count(f), nm = st_metadata_count(f);
  StWriteTensor *ts = calloc((size_t)n + 1, sizeof *ts);
  const char **meta = calloc(2 * (size_t)nm + 1, sizeof *meta);
  FUZZ_CHECK(ts && meta, "oom");
  for (int i = 0; i < n; i++) {
    const StTensor *t = st_tensor(f, i);
    ts[i].name = t->name;
    ts[i].dtype = t->dtype;
    ts[i].ndim = t->ndim;
    memcpy(ts[i].shape, t->shape, sizeof ts[i].shape);
    ts[i].data = t->data;
  }
  for (int i = 0; i < nm; i++) st_metadata_at(f, i, &meta[2 * i], &meta[2 * i + 1]);
  unsigned char *out = NULL;
  Err err = {0};
  int rc = st_serialize(ts, n, meta, nm, &out, len, &err);
  FUZZ_CHECK(rc == 0, "the writer refuses what the reader accepted: %s", err.msg);
  free(ts);
  free(meta);
  return out;
}

static void check_round_trip(const StFile *f) {
  size_t len1, len2;
  unsigned char *b1 = serialize(f, &len1);
  Err err = {0};
  StFile *g = st_open_memory(b1, len1, &err);
  FUZZ_CHECK(g, "the reader refuses the writer's bytes: %s", err.msg);
  FUZZ_CHECK(st_count(g) == st_count(f), "tensor count %d -> %d", st_count(f), st_count(g));
  for (int i = 0; i < st_count(f); i++) {
    const StTensor *a = st_tensor(f, i), *b = st_find(g, a->name);
    FUZZ_CHECK(b, "tensor \"%s\" lost", a->name);
    FUZZ_CHECK(a->dtype == b->dtype && a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof a->shape) &&
                   a->nbytes == b->nbytes && (!a->nbytes || !memcmp(a->data, b->data, a->nbytes)),
               "tensor \"%s\" changed", a->name);
  }
  int added_format = st_metadata(f, "format") == NULL;
  FUZZ_CHECK(st_metadata_count(g) == st_metadata_count(f) + added_format, "metadata count %d -> %d",
             st_metadata_count(f), st_metadata_count(g));
  for (int i = 0; i < st_metadata_count(f); i++) {
    const char *k, *v, *w;
    st_metadata_at(f, i, &k, &v);
    w = st_metadata(g, k);
    FUZZ_CHECK(w && !strcmp(v, w), "metadata \"%s\" changed", k);
  }
  unsigned char *b2 = serialize(g, &len2);
  FUZZ_CHECK(len1 == len2 && !memcmp(b1, b2, len1), "writing twice gives different bytes");
  free(b1);
  free(b2);
  st_close(g);
}

/* Seeds: files the writer makes (metadata, every dtype, empty and zero-size tensors). */
static void write_seeds(const char *dir) {
  float f[6] = {1, -2.5f, 3e-8f, 0, -0.0f, 1e30f};
  int64_t step = 3;
  unsigned char bytes[64];
  for (int i = 0; i < 64; i++) bytes[i] = (unsigned char)(i * 37);
  const char *meta[] = {"format", "pt", "step", "3"};
  StWriteTensor a[] = {{"weight", ST_F32, 2, {2, 3}, f}, {"state.step", ST_I64, 1, {1}, &step}};
  StWriteTensor all[ST_NDTYPES];
  char names[ST_NDTYPES][32];
  for (int d = 0; d < ST_NDTYPES; d++) {
    snprintf(names[d], sizeof names[d], "t.%s", st_dtype_name((StDtype)d));
    int bits = st_dtype_bits((StDtype)d);
    int64_t n = bits == 4 ? 4 : bits == 6 ? 4 : 2;   /* whole bytes for the sub-byte types */
    all[d] = (StWriteTensor){names[d], (StDtype)d, 1, {n}, bytes};
  }
  StWriteTensor zero[] = {{"empty", ST_F32, 2, {0, 3}, NULL}, {"scalar", ST_BF16, 0, {0}, bytes}};
  struct { const char *name; const StWriteTensor *ts; int n; const char *const *meta; int n_meta; } seeds[] = {
    {"two_tensors_meta.safetensors", a, 2, meta, 2},
    {"every_dtype.safetensors", all, ST_NDTYPES, NULL, 0},
    {"zero_size_scalar.safetensors", zero, 2, NULL, 0},
    {"only_metadata.safetensors", NULL, 0, meta + 2, 1},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
    unsigned char *out;
    size_t len;
    Err err = {0};
    FUZZ_CHECK(st_serialize(seeds[i].ts, seeds[i].n, seeds[i].meta, seeds[i].n_meta, &out, &len, &err) == 0, "%s", err.msg);
    fuzz_write_file(fuzz_seed_path(dir, seeds[i].name), out, len);
    free(out);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fuzz_seeds_then_exit(write_seeds);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Err em = {0}, ef = {0};
  StFile *f = st_open_memory(data, size, &em);
  StFile *g = st_open(fuzz_memfd_path(data, size), &ef);
  FUZZ_CHECK(!f == !g, "memory and file disagree: memory %s, file %s", f ? "accepts" : em.msg, g ? "accepts" : ef.msg);
  if (!f) {
    FUZZ_CHECK(em.msg[0] && ef.msg[0], "a refusal without a message");
    return 0;
  }
  FUZZ_CHECK(st_count(f) == st_count(g) && st_metadata_count(f) == st_metadata_count(g), "memory and file differ");
  check_file(f, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | data[i];
  size_t sum = 0;
  for (int i = 0; i < st_count(f); i++) sum += st_tensor(f, i)->nbytes;
  FUZZ_CHECK(8 + n + sum == size, "8 + header %llu + tensors %zu != file size %zu", (unsigned long long)n, sum, size);
  check_readers(f);
  check_round_trip(f);
  st_close(f);
  st_close(g);
  return 0;
}
