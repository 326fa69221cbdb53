/* safetensors reader and writer. The reader holds the whole file in one buffer
** (a read-only mapping of the file, or a copy of bytes in memory); every tensor's
** data pointer points into it. Validation follows the reference
** implementation (safetensors' tensor.rs): header length bounded and inside the
** file, JSON object, known dtype, shape x dtype size equal to the offsets' span,
** and the tensors tiling the data buffer exactly. */
#include "engine/core/json_text.h"
#include "engine/io/safetensors.h"

#include "engine/core/bf16.h"
#include "engine/core/files.h"
#include "engine/core/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct StFile {
  unsigned char *buf;       /* the whole file; NULL for a file read through src */
  size_t len;
  int mapped;               /* buf is an mmap of the file (else malloc'd) */
  StSource src;             /* a streamed file's bytes (src.read NULL otherwise) */
  int fd;                   /* st_open_stream's file, closed with it; else -1 */
  unsigned char *scratch;   /* ST_SCRATCH bytes: a streamed file's reads land here first */
  int n;
  StTensor *tensors;        /* sorted by data offset */
  char **names;             /* owned copies, parallel to tensors */
  int n_meta;
  char **meta;              /* key, value, key, value, ... */
};

/* A streamed tensor is read and converted this many bytes at a time. */
#define ST_SCRATCH ((size_t)1 << 20)

static const struct { const char *name; int bits; } DTYPES[ST_NDTYPES] = {
  [ST_BOOL] = {"BOOL", 8},       [ST_F4] = {"F4", 4},           [ST_F6_E2M3] = {"F6_E2M3", 6},
  [ST_F6_E3M2] = {"F6_E3M2", 6}, [ST_U8] = {"U8", 8},           [ST_I8] = {"I8", 8},
  [ST_F8_E5M2] = {"F8_E5M2", 8}, [ST_F8_E4M3] = {"F8_E4M3", 8}, [ST_F8_E8M0] = {"F8_E8M0", 8},
  [ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8}, [ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
  [ST_I16] = {"I16", 16},        [ST_U16] = {"U16", 16},        [ST_F16] = {"F16", 16},
  [ST_BF16] = {"BF16", 16},      [ST_I32] = {"I32", 32},        [ST_U32] = {"U32", 32},
  [ST_F32] = {"F32", 32},        [ST_C64] = {"C64", 64},        [ST_F64] = {"F64", 64},
  [ST_I64] = {"I64", 64},        [ST_U64] = {"U64", 64},
};

const char *st_dtype_name(StDtype d) { return (unsigned)d < ST_NDTYPES ? DTYPES[d].name : "?"; }
int st_dtype_bits(StDtype d) { return (unsigned)d < ST_NDTYPES ? DTYPES[d].bits : 0; }

int st_dtype_from_name(const char *name) {
  for (int i = 0; i < ST_NDTYPES; i++)
    if (strcmp(DTYPES[i].name, name) == 0) return i;
  return -1;
}

/* Bytes of numel elements of d, or -1 when the element count overflows or the
** bits do not fill whole bytes (the format refuses such sub-byte tensors). */
static int64_t st_nbytes(StDtype d, int64_t numel) {
  int64_t bits = st_dtype_bits(d);
  if (numel < 0 || numel > INT64_MAX / 64) return -1;
  if ((numel * bits) % 8) return -1;
  return numel * bits / 8;
}

void st_close(StFile *f) {
  if (!f) return;
  for (int i = 0; i < f->n; i++) free(f->names[i]);
  for (int i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
  free(f->names);
  free(f->meta);
  free(f->tensors);
  if (f->mapped) munmap(f->buf, f->len);
  else free(f->buf);
  free(f->scratch);
  if (f->fd >= 0) close(f->fd);
  free(f);
}

int st_count(const StFile *f) { return f->n; }
const StTensor *st_tensor(const StFile *f, int i) { return i >= 0 && i < f->n ? &f->tensors[i] : NULL; }

const StTensor *st_find(const StFile *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}

const char *st_metadata(const StFile *f, const char *key) {
  for (int i = 0; i < f->n_meta; i++)
    if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
  return NULL;
}

int st_metadata_count(const StFile *f) { return f->n_meta; }

void st_metadata_at(const StFile *f, int i, const char **key, const char **value) {
  *key = *value = NULL;
  if (i < 0 || i >= f->n_meta) return;
  *key = f->meta[2 * i];
  *value = f->meta[2 * i + 1];
}

static uint64_t le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static int cmp_offset(const void *a, const void *b) {
  const StTensor *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Reads one header entry into t (name still unset); data offsets are checked
** against the data buffer (data_at: its offset in the file; data: its bytes, or
** NULL for a streamed file) here, tiling afterwards. */
static int parse_entry(const char *name, json_t *v, const unsigned char *data, uint64_t data_at, size_t data_len, StTensor *t,
                       Err *err) {
  if (!json_is_object(v)) return err_set(err, "tensor \"%s\": header entry is not an object", name);
  json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
  if (!json_is_string(dt)) return err_set(err, "tensor \"%s\": dtype missing or not a string", name);
  int d = st_dtype_from_name(json_string_value(dt));
  if (d < 0) return err_set(err, "tensor \"%s\": unknown dtype \"%s\"", name, json_string_value(dt));
  t->dtype = (StDtype)d;
  if (!json_is_array(sh)) return err_set(err, "tensor \"%s\": shape missing or not an array", name);
  size_t nd = json_array_size(sh);
  if (nd > ST_MAX_DIMS) return err_set(err, "tensor \"%s\": %zu dimensions, at most %d supported", name, nd, ST_MAX_DIMS);
  t->ndim = (int)nd;
  int64_t numel = 1;
  for (size_t i = 0; i < nd; i++) {
    json_t *x = json_array_get(sh, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      return err_set(err, "tensor \"%s\": shape[%zu] is not a non-negative integer", name, i);
    int64_t s = json_integer_value(x);
    t->shape[i] = s;
    if (s != 0 && numel > INT64_MAX / 64 / s) return err_set(err, "tensor \"%s\": shape overflows", name);
    numel *= s;
  }
  t->numel = numel;
  if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
      !json_is_integer(json_array_get(off, 1)))
    return err_set(err, "tensor \"%s\": data_offsets is not [begin, end]", name);
  int64_t b = json_integer_value(json_array_get(off, 0)), e = json_integer_value(json_array_get(off, 1));
  if (b < 0 || e < b) return err_set(err, "tensor \"%s\": data_offsets [%lld, %lld] are not ordered", name, (long long)b, (long long)e);
  if ((uint64_t)e > data_len)
    return err_set(err, "tensor \"%s\": data_offsets end %lld is past the data buffer (%zu bytes; file truncated?)", name,
                   (long long)e, data_len);
  int64_t want = st_nbytes(t->dtype, numel);
  if (want < 0) return err_set(err, "tensor \"%s\": %lld elements of %s do not fill whole bytes", name, (long long)numel, DTYPES[d].name);
  if (want != e - b)
    return err_set(err, "tensor \"%s\": shape x %s is %lld bytes but data_offsets span %lld", name, DTYPES[d].name,
                   (long long)want, (long long)(e - b));
  t->data = data ? data + b : NULL;
  t->offset = data_at + (uint64_t)b;
  t->nbytes = (size_t)(e - b);
  return 0;
}

/* The header's length word: 0, or -1 with err set when it cannot be the header of a file of len bytes. */
static int header_length(const unsigned char first8[8], size_t len, uint64_t *n, Err *err) {
  *n = le64(first8);
  if (*n > ST_MAX_HEADER)
    return err_set(err, "header length %llu exceeds the format's limit of %d", (unsigned long long)*n, ST_MAX_HEADER);
  if (*n > len - 8)
    return err_set(err, "header length %llu is past the end of the file (%zu bytes; truncated?)", (unsigned long long)*n, len);
  return 0;
}

/* Parses the header (n bytes at head) of f, whose buf (may be NULL: streamed) and
** len are set; fills the tensors and metadata. Frees f on failure. */
static StFile *st_parse_header(StFile *f, const char *head, uint64_t n, Err *err) {
  json_t *root = NULL;
  size_t len = f->len;
  if (n < 2 || head[0] != '{') { err_set(err, "header does not start with '{'"); goto fail; }
  json_error_t je;
  root = json_loadb(head, (size_t)n, JSON_REJECT_DUPLICATES, &je);
  if (!root) { err_set(err, "header JSON is malformed at column %d: %s", je.column, json_error_message(&je)); goto fail; }
  if (!json_is_object(root)) { err_set(err, "header is not a JSON object"); goto fail; }
  const unsigned char *data = f->buf ? f->buf + 8 + n : NULL;
  uint64_t data_at = 8 + n;
  size_t data_len = len - 8 - (size_t)n;

  size_t count = json_object_size(root);
  f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
  f->names = calloc(count ? count : 1, sizeof *f->names);
  if (!f->tensors || !f->names) { err_set(err, "out of memory"); goto fail; }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (strcmp(key, "__metadata__") == 0) {
      if (!json_is_object(v)) { err_set(err, "__metadata__ is not an object"); goto fail; }
      f->meta = calloc(2 * json_object_size(v) + 1, sizeof *f->meta);
      if (!f->meta) { err_set(err, "out of memory"); goto fail; }
      const char *mk;
      json_t *mv;
      json_object_foreach(v, mk, mv) {
        if (!json_is_string(mv)) { err_set(err, "__metadata__ \"%s\" is not a string", mk); goto fail; }
        f->meta[2 * f->n_meta] = strdup(mk);
        f->meta[2 * f->n_meta + 1] = strdup(json_string_value(mv));
        f->n_meta++;
        if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1]) { err_set(err, "out of memory"); goto fail; }
      }
      continue;
    }
    StTensor *t = &f->tensors[f->n];
    if (parse_entry(key, v, data, data_at, data_len, t, err)) goto fail;
    f->names[f->n] = strdup(key);
    if (!f->names[f->n]) { err_set(err, "out of memory"); goto fail; }
    t->name = f->names[f->n];
    f->n++;
  }
  /* The tensors must tile the data buffer: sorted by offset, each begins where
  ** the previous ended, and the last ends at the end of the file. */
  qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, cmp_offset);
  for (int i = 0; i < f->n; i++) f->names[i] = (char *)f->tensors[i].name;
  uint64_t at = data_at;
  for (int i = 0; i < f->n; i++) {
    const StTensor *t = &f->tensors[i];
    if (t->offset != at) {
      if (t->offset < at)
        err_set(err, "tensor \"%s\": data overlaps the tensor before it", t->name);
      else
        err_set(err, "tensor \"%s\": hole in the data buffer before it (offset %zu, expected %zu)", t->name,
                (size_t)(t->offset - data_at), (size_t)(at - data_at));
      goto fail;
    }
    at += t->nbytes;
  }
  if (at != data_at + data_len) {
    err_set(err, "data buffer is %zu bytes but the tensors cover %zu (trailing bytes)", data_len, (size_t)(at - data_at));
    goto fail;
  }
  json_decref(root);
  return f;
fail:
  json_decref(root);
  st_close(f);
  return NULL;
}

/* A new file with no tensors yet; NULL when out of memory. */
static StFile *st_new(void) {
  StFile *f = calloc(1, sizeof *f);
  if (f) f->fd = -1;
  return f;
}

/* Takes ownership of buf (released on failure too). */
static StFile *st_parse(unsigned char *buf, size_t len, int mapped, Err *err) {
  StFile *f = st_new();
  if (!f) {
    if (mapped) munmap(buf, len);
    else free(buf);
    err_set(err, "out of memory");
    return NULL;
  }
  f->buf = buf;
  f->len = len;
  f->mapped = mapped;
  uint64_t n;
  if (len < 8) { err_set(err, "file is %zu bytes, shorter than the 8-byte header length", len); st_close(f); return NULL; }
  if (header_length(buf, len, &n, err)) { st_close(f); return NULL; }
  return st_parse_header(f, (const char *)buf + 8, n, err);
}

/* Takes ownership of f (a streamed file with src, fd and len set; freed on failure). */
static StFile *st_parse_source(StFile *f, Err *err) {
  unsigned char first8[8];
  uint64_t n;
  char *head = NULL;
  if (!(f->scratch = malloc(ST_SCRATCH))) { err_setk(err, ERR_NOMEM, "out of memory"); goto fail; }
  if (f->len < 8) { err_set(err, "file is %zu bytes, shorter than the 8-byte header length", f->len); goto fail; }
  if (f->src.read(f->src.ctx, 0, first8, 8, err) || header_length(first8, f->len, &n, err)) goto fail;
  if (!(head = malloc(n ? (size_t)n : 1))) {
    err_setk(err, ERR_NOMEM, "out of memory for a header of %llu bytes", (unsigned long long)n);
    goto fail;
  }
  if (n && f->src.read(f->src.ctx, 8, head, (size_t)n, err)) goto fail;
  f = st_parse_header(f, head, n, err);
  free(head);
  return f;
fail:
  free(head);
  st_close(f);
  return NULL;
}

StFile *st_open_source(const StSource *src, Err *err) {
  if (src->len > ST_MAX_FILE) {
    err_set(err, "%llu bytes, more than a safetensors file may have here", (unsigned long long)src->len);
    return NULL;
  }
  StFile *f = st_new();
  if (!f) { err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  f->src = *src;
  f->len = (size_t)src->len;
  return st_parse_source(f, err);
}

/* pread of a streamed file's bytes; ctx is the StFile. */
static int fd_read(void *ctx, uint64_t offset, void *dst, size_t n, Err *err) {
  const StFile *f = ctx;
  unsigned char *p = dst;
  while (n) {
    ssize_t got = pread(f->fd, p, n, (off_t)offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return err_setk(err, ERR_IO, "read error: %s", strerror(errno));
    if (got == 0)
      return err_setk(err, ERR_IO, "short read at byte %llu (file truncated while open?)", (unsigned long long)offset);
    p += got;
    offset += (uint64_t)got;
    n -= (size_t)got;
  }
  return 0;
}

/* path opened as a regular file of at most ST_MAX_FILE bytes (its size in *size); -1 with err set otherwise. */
static int open_bounded(const char *path, uint64_t *size, Err *err) {
  int fd = files_open_regular(path, size, err);
  if (fd < 0) return -1;
  if (*size > ST_MAX_FILE) {
    char cap[32];
    close(fd);
    return err_set(err, "%s: %llu bytes, more than the %s a safetensors file may have here", path,
                   (unsigned long long)*size, files_size_text(ST_MAX_FILE, cap, sizeof cap));
  }
  return fd;
}

StFile *st_open_stream(const char *path, Err *err) {
  uint64_t size;
  int fd = open_bounded(path, &size, err);
  if (fd < 0) return NULL;
  StFile *f = st_new();
  if (!f) { close(fd); err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  f->fd = fd;
  f->len = (size_t)size;
  f->src = (StSource){fd_read, f, size};
  f = st_parse_source(f, err);
  if (!f) err_prefix(err, path);
  return f;
}

StFile *st_open_memory(const void *buf, size_t len, Err *err) {
  unsigned char *copy = malloc(len ? len : 1);
  if (!copy) { err_set(err, "out of memory for %zu bytes", len); return NULL; }
  if (len) memcpy(copy, buf, len);
  return st_parse(copy, len, 0, err);
}

StFile *st_open(const char *path, Err *err) {
  uint64_t size;
  int fd = open_bounded(path, &size, err);
  if (fd < 0) return NULL;
  size_t len = (size_t)size;
  /* Mapped, not read: the page cache is the buffer, which saves a copy of a
  ** model-sized file. Our writers replace files by rename, so a mapped file is
  ** never truncated under us. Files too small to hold a header are read. */
  unsigned char *buf = NULL;
  int mapped = 0;
  if (len >= 8) {
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) { buf = p; mapped = 1; }
  }
  if (!mapped) {
    buf = malloc(len ? len : 1);
    if (!buf) { close(fd); err_set(err, "%s: out of memory for %zu bytes", path, len); return NULL; }
    ssize_t got = files_read_full(fd, buf, len);
    if (got != (ssize_t)len) {
      int saved = errno;
      close(fd);
      free(buf);
      if (got < 0) err_set(err, "%s: read error: %s", path, strerror(saved));
      else err_set(err, "%s: short read (%zd of %zu bytes)", path, got, len);
      return NULL;
    }
  }
  close(fd);
  StFile *f = st_parse(buf, len, mapped, err);
  if (!f) err_prefix(err, path);
  return f;
}

/* ---- conversions ---- */

float st_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | man << 13;             /* inf, nan (payload kept) */
  } else if (exp == 0) {
    float x = ldexpf((float)man, -24);              /* zero and subnormals: exact in float */
    return sign ? -x : x;
  } else {
    u = sign | (exp + 112) << 23 | man << 13;       /* rebias 15 -> 127 */
  }
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* 0 for the float dtypes the readers convert (F32, F16, BF16, F64), else -1 with err set. */
static int check_float_dtype(const StTensor *t, Err *err) {
  if (t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16 || t->dtype == ST_F64) return 0;
  return err_set(err, "tensor \"%s\": dtype %s is not a float type F32/F16/BF16/F64", t->name, st_dtype_name(t->dtype));
}

/* Little-endian 16 bits at p. */
static inline uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Writes x as element i of out: a float (out_dtype ST_F32) or a bfloat16 (ST_BF16). */
static inline void put_float(void *out, StDtype out_dtype, int64_t i, float x) {
  if (out_dtype == ST_F32) ((float *)out)[i] = x;
  else ((uint16_t *)out)[i] = bf16_from_f32(x);
}

/* st_read_f32 (out_dtype ST_F32) and st_read_bf16 (ST_BF16). A tensor stored in
** the output's dtype is a straight copy (a big model's load is that copy); the others
** go through float, so F16 and F64 reach bfloat16 by way of their float value. One
** loop per stored dtype, so each stays a tight (vectorisable) loop. */
static int read_floats(const StTensor *t, void *out, StDtype out_dtype, int64_t numel, Err *err) {
  if (!t->data && t->nbytes) return err_set(err, "tensor \"%s\": a streamed file's tensor (read it by ranges)", t->name);
  if (numel != t->numel) return err_set(err, "tensor \"%s\": has %lld elements, expected %lld", t->name, (long long)t->numel, (long long)numel);
  if (check_float_dtype(t, err)) return -1;
  const unsigned char *p = t->data;
  if (t->dtype == out_dtype) {
    if (numel) memcpy(out, p, (size_t)numel * (size_t)(st_dtype_bits(out_dtype) / 8));
    return 0;
  }
  switch (t->dtype) {
    case ST_F32:
      for (int64_t i = 0; i < numel; i++) { float x; memcpy(&x, p + 4 * i, 4); put_float(out, out_dtype, i, x); }
      break;
    case ST_BF16:
      for (int64_t i = 0; i < numel; i++) put_float(out, out_dtype, i, bf16_to_f32(le16(p + 2 * i)));
      break;
    case ST_F16:
      for (int64_t i = 0; i < numel; i++) put_float(out, out_dtype, i, st_f16_to_f32(le16(p + 2 * i)));
      break;
    default:
      for (int64_t i = 0; i < numel; i++) { double x; memcpy(&x, p + 8 * i, 8); put_float(out, out_dtype, i, (float)x); }
  }
  return 0;
}

int st_read_f32(const StTensor *t, float *out, int64_t numel, Err *err) { return read_floats(t, out, ST_F32, numel, err); }

int st_read_bf16(const StTensor *t, uint16_t *out, int64_t numel, Err *err) { return read_floats(t, out, ST_BF16, numel, err); }

/* Shared by the range readers: the elements [first, first + count) of t as a
** tensor of their own (a view of f's buffer, or read into f's scratch piece by
** piece) handed to convert, which writes them at out + i * out_size. */
typedef int (*StConvert)(const StTensor *t, void *out, int64_t numel, Err *err);

static int read_range(const StFile *f, const StTensor *t, int64_t first, int64_t count, void *out, size_t out_size,
                      StConvert convert, Err *err) {
  int bytes = st_dtype_bits(t->dtype) / 8;
  if (check_float_dtype(t, err)) return -1;
  if (first < 0 || count < 0 || first > t->numel || count > t->numel - first)
    return err_set(err, "tensor \"%s\": elements [%lld, +%lld) outside its %lld", t->name, (long long)first, (long long)count,
                   (long long)t->numel);
  StTensor part = *t;
  if (t->data) {
    part.data = (const unsigned char *)t->data + first * bytes;
    part.numel = count;
    return convert(&part, out, count, err);
  }
  int64_t per = (int64_t)(ST_SCRATCH / (size_t)bytes);
  for (int64_t done = 0; done < count; done += per) {
    int64_t k = count - done < per ? count - done : per;
    if (f->src.read(f->src.ctx, t->offset + (uint64_t)((first + done) * bytes), f->scratch, (size_t)(k * bytes), err))
      return err_prefix(err, t->name);
    part.data = f->scratch;
    part.numel = k;
    if (convert(&part, (unsigned char *)out + (size_t)done * out_size, k, err)) return -1;
  }
  return 0;
}

static int convert_f32(const StTensor *t, void *out, int64_t numel, Err *err) { return st_read_f32(t, out, numel, err); }
static int convert_bf16(const StTensor *t, void *out, int64_t numel, Err *err) { return st_read_bf16(t, out, numel, err); }

int st_read_f32_range(const StFile *f, const StTensor *t, int64_t first, int64_t count, float *out, Err *err) {
  return read_range(f, t, first, count, out, sizeof *out, convert_f32, err);
}

int st_read_bf16_range(const StFile *f, const StTensor *t, int64_t first, int64_t count, uint16_t *out, Err *err) {
  return read_range(f, t, first, count, out, sizeof *out, convert_bf16, err);
}

int st_read_i64(const StTensor *t, int64_t *out, int64_t numel, Err *err) {
  if (!t->data && t->nbytes) return err_set(err, "tensor \"%s\": a streamed file's tensor (read it by ranges)", t->name);
  if (numel != t->numel) return err_set(err, "tensor \"%s\": has %lld elements, expected %lld", t->name, (long long)t->numel, (long long)numel);
  const unsigned char *p = t->data;
  for (int64_t i = 0; i < numel; i++) {
    switch (t->dtype) {
      case ST_BOOL: case ST_U8: out[i] = p[i]; break;
      case ST_I8: out[i] = (int8_t)p[i]; break;
      case ST_I16: { int16_t x; memcpy(&x, p + 2 * i, 2); out[i] = x; break; }
      case ST_U16: { uint16_t x; memcpy(&x, p + 2 * i, 2); out[i] = x; break; }
      case ST_I32: { int32_t x; memcpy(&x, p + 4 * i, 4); out[i] = x; break; }
      case ST_U32: { uint32_t x; memcpy(&x, p + 4 * i, 4); out[i] = x; break; }
      case ST_I64: memcpy(&out[i], p + 8 * i, 8); break;
      case ST_U64: {
        uint64_t x;
        memcpy(&x, p + 8 * i, 8);
        if (x > INT64_MAX) return err_set(err, "tensor \"%s\": U64 value %llu does not fit in I64", t->name, (unsigned long long)x);
        out[i] = (int64_t)x;
        break;
      }
      default:
        return err_set(err, "tensor \"%s\": dtype %s is not an integer type", t->name, st_dtype_name(t->dtype));
    }
  }
  return 0;
}

int st_read_i32(const StTensor *t, int32_t *out, int64_t numel, Err *err) {
  if (!t->data && t->nbytes) return err_set(err, "tensor \"%s\": a streamed file's tensor (read it by ranges)", t->name);
  if (numel != t->numel) return err_set(err, "tensor \"%s\": has %lld elements, expected %lld", t->name, (long long)t->numel, (long long)numel);
  if (t->dtype == ST_I32) { memcpy(out, t->data, (size_t)numel * 4); return 0; }
  /* Other integer types go through int64 one element at a time (no big buffer). */
  StTensor one = *t;
  one.numel = 1;
  int bytes = st_dtype_bits(t->dtype) / 8;
  for (int64_t i = 0; i < numel; i++) {
    int64_t v = 0;
    one.data = (const unsigned char *)t->data + i * bytes;
    if (st_read_i64(&one, &v, 1, err)) return -1;
    if (v < INT32_MIN || v > INT32_MAX) return err_set(err, "tensor \"%s\": value %lld does not fit in I32", t->name, (long long)v);
    out[i] = (int32_t)v;
  }
  return 0;
}

/* ---- writer ---- */

/* A JSON string literal, as serde_json escapes it (control characters as \uXXXX
** or their short forms; other UTF-8 passed through). */
static void buf_json_string(Buf *b, const char *s) {
  buf_put(b, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char esc[8];
    switch (c) {
      case '"': buf_puts(b, "\\\""); break;
      case '\\': buf_puts(b, "\\\\"); break;
      case '\n': buf_puts(b, "\\n"); break;
      case '\r': buf_puts(b, "\\r"); break;
      case '\t': buf_puts(b, "\\t"); break;
      case '\b': buf_puts(b, "\\b"); break;
      case '\f': buf_puts(b, "\\f"); break;
      default:
        if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); buf_puts(b, esc); }
        else buf_put(b, (const char *)s, 1);
    }
  }
  buf_put(b, "\"", 1);
}

typedef struct { const StWriteTensor *t; int64_t nbytes; } Planned;

static int cmp_planned(const void *a, const void *b) {
  const Planned *x = a, *y = b;
  if (x->t->dtype != y->t->dtype) return x->t->dtype > y->t->dtype ? -1 : 1;
  return strcmp(x->t->name, y->t->name);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Checks the tensors and metadata, orders the tensors as the HF writer does and
** builds the padded header; *plan and h->p are the caller's to free. */
static int st_layout(const StWriteTensor *ts, int n, const char *const *meta, int n_meta, int need_data, Planned **plan_out,
                     Buf *h, int64_t *data_len, Err *err) {
  *plan_out = NULL;
  if (n < 0 || n_meta < 0) return err_set(err, "safetensors: negative count");
  Planned *plan = calloc((size_t)n + 1, sizeof *plan);
  if (!plan) return err_set(err, "safetensors: out of memory");
  int caller_format = 0;
  for (int i = 0; i < n; i++) {
    const StWriteTensor *t = &ts[i];
    if (!t->name) { err_set(err, "safetensors: tensor %d has no name", i); goto fail; }
    if (strcmp(t->name, "__metadata__") == 0) { err_set(err, "safetensors: \"__metadata__\" is not a tensor name"); goto fail; }
    if ((unsigned)t->dtype >= ST_NDTYPES) { err_set(err, "safetensors: tensor \"%s\": bad dtype %d", t->name, (int)t->dtype); goto fail; }
    if (t->ndim < 0 || t->ndim > ST_MAX_DIMS) { err_set(err, "safetensors: tensor \"%s\": %d dimensions", t->name, t->ndim); goto fail; }
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
      if (t->shape[d] < 0 || (t->shape[d] && numel > INT64_MAX / 64 / t->shape[d])) {
        err_set(err, "safetensors: tensor \"%s\": bad shape", t->name);
        goto fail;
      }
      numel *= t->shape[d];
    }
    plan[i].t = t;
    plan[i].nbytes = st_nbytes(t->dtype, numel);
    if (plan[i].nbytes < 0) { err_set(err, "safetensors: tensor \"%s\": elements do not fill whole bytes", t->name); goto fail; }
    if (need_data && plan[i].nbytes > 0 && !t->data) { err_set(err, "safetensors: tensor \"%s\": no data", t->name); goto fail; }
  }
  qsort(plan, (size_t)n, sizeof *plan, cmp_planned);
  /* A name given twice, found among the names sorted alone (the plan sorts by dtype
  ** first; a scan per name took 13 s for 50000 tensors). */
  const char **names = malloc(((size_t)n + 1) * sizeof *names);
  if (!names) { err_set(err, "safetensors: out of memory"); goto fail; }
  for (int i = 0; i < n; i++) names[i] = plan[i].t->name;
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  for (int i = 1; i < n; i++)
    if (strcmp(names[i - 1], names[i]) == 0) {
      err_set(err, "safetensors: tensor \"%s\" given twice", names[i]);
      free(names);
      goto fail;
    }
  free(names);
  for (int i = 0; i < n_meta; i++) {
    if (!meta[2 * i] || !meta[2 * i + 1]) { err_set(err, "safetensors: metadata pair %d has a NULL", i); goto fail; }
    if (strcmp(meta[2 * i], "format") == 0) caller_format = 1;
    for (int j = 0; j < i; j++)
      if (strcmp(meta[2 * i], meta[2 * j]) == 0) { err_set(err, "safetensors: metadata key \"%s\" given twice", meta[2 * i]); goto fail; }
  }

  buf_puts(h, "{\"__metadata__\":{");
  if (!caller_format) buf_puts(h, n_meta ? "\"format\":\"pt\"," : "\"format\":\"pt\"");
  for (int i = 0; i < n_meta; i++) {
    buf_json_string(h, meta[2 * i]);
    buf_puts(h, ":");
    buf_json_string(h, meta[2 * i + 1]);
    if (i + 1 < n_meta) buf_puts(h, ",");
  }
  buf_puts(h, "}");
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    const StWriteTensor *t = plan[i].t;
    char num[64];
    buf_puts(h, ",");
    buf_json_string(h, t->name);
    buf_puts(h, ":{\"dtype\":\"");
    buf_puts(h, DTYPES[t->dtype].name);
    buf_puts(h, "\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) {
      snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)t->shape[d]);
      buf_puts(h, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + plan[i].nbytes));
    buf_puts(h, num);
    off += plan[i].nbytes;
  }
  buf_puts(h, "}");
  while (!h->oom && h->len % 8) buf_puts(h, " ");
  if (h->oom) { err_set(err, "safetensors: out of memory"); goto fail; }
  if (h->len > ST_MAX_HEADER) { err_set(err, "safetensors: header of %zu bytes exceeds the format's limit", h->len); goto fail; }
  *plan_out = plan;
  *data_len = off;
  return 0;
fail:
  free(plan);
  return -1;
}

int st_serialize(const StWriteTensor *ts, int n, const char *const *meta, int n_meta,
                 unsigned char **out, size_t *out_len, Err *err) {
  *out = NULL;
  *out_len = 0;
  Planned *plan;
  Buf h = {0};
  int64_t data_len;
  if (st_layout(ts, n, meta, n_meta, 1, &plan, &h, &data_len, err)) { free(h.p); return -1; }
  size_t total = 8 + h.len + (size_t)data_len;
  unsigned char *o = malloc(total);
  if (!o) { free(h.p); free(plan); return err_set(err, "safetensors: out of memory for %zu bytes", total); }
  for (int i = 0; i < 8; i++) o[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
  memcpy(o + 8, h.p, h.len);
  unsigned char *p = o + 8 + h.len;
  for (int i = 0; i < n; i++) {
    if (plan[i].nbytes) memcpy(p, plan[i].t->data, (size_t)plan[i].nbytes);
    p += plan[i].nbytes;
  }
  free(h.p);
  free(plan);
  *out = o;
  *out_len = total;
  return 0;
}

/* Writes the pieces one after another to path atomically: a temporary, fsync, rename. */
static int write_pieces(const char *path, const void *const *ptr, const size_t *len, int k, Err *err) {
  FilesAtomic f;
  if (files_atomic_open(&f, path, err)) return -1;
  for (int i = 0; i < k; i++)
    if (files_atomic_write(&f, ptr[i], len[i], err)) { files_atomic_abort(&f); return -1; }
  return files_atomic_commit(&f, err);
}

int st_write_bytes(const char *path, const void *bytes, size_t len, Err *err) {
  const void *ptr[1] = {bytes};
  return write_pieces(path, ptr, &len, 1, err);
}

int st_write(const char *path, const StWriteTensor *ts, int n, const char *const *meta, int n_meta, Err *err) {
  Planned *plan;
  Buf h = {0};
  int64_t data_len;
  if (st_layout(ts, n, meta, n_meta, 1, &plan, &h, &data_len, err)) { free(h.p); return err_prefix(err, path); }
  /* Streamed from the callers' buffers: no model-sized copy. */
  const void **ptr = calloc((size_t)n + 2, sizeof *ptr);
  size_t *len = calloc((size_t)n + 2, sizeof *len);
  unsigned char head[8];
  int rc = -1;
  if (ptr && len) {
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    ptr[0] = head; len[0] = 8;
    ptr[1] = h.p; len[1] = h.len;
    for (int i = 0; i < n; i++) { ptr[i + 2] = plan[i].t->data; len[i + 2] = (size_t)plan[i].nbytes; }
    rc = write_pieces(path, ptr, len, n + 2, err);
  } else {
    err_set(err, "%s: out of memory", path);
  }
  free(ptr);
  free(len);
  free(h.p);
  free(plan);
  return rc;
}

int st_serialized_size(const StWriteTensor *ts, int n, const char *const *meta, int n_meta, size_t *len, Err *err) {
  Planned *plan;
  Buf h = {0};
  int64_t data_len;
  *len = 0;
  if (st_layout(ts, n, meta, n_meta, 0, &plan, &h, &data_len, err)) { free(h.p); return -1; }
  *len = 8 + h.len + (size_t)data_len;
  free(h.p);
  free(plan);
  return 0;
}

/* Counts what a fill callback writes, so a short or long tensor is caught at once
** instead of shifting every later tensor's bytes. */
typedef struct {
  StWriteFn write;
  void *ctx;
  size_t left;
  const char *name;
} Counted;

static int counted_write(void *ctx, const void *data, size_t n, Err *err) {
  Counted *c = ctx;
  if (n > c->left) return err_set(err, "safetensors: tensor \"%s\": more bytes than its shape holds", c->name);
  c->left -= n;
  return c->write(c->ctx, data, n, err);
}

int st_serialize_stream(const StWriteTensor *ts, int n, const char *const *meta, int n_meta, StFillFn fill, void *fill_ctx,
                        StWriteFn write, void *write_ctx, Err *err) {
  Planned *plan;
  Buf h = {0};
  int64_t data_len;
  if (st_layout(ts, n, meta, n_meta, 0, &plan, &h, &data_len, err)) { free(h.p); return -1; }
  unsigned char head[8];
  for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
  int rc = write(write_ctx, head, 8, err) || write(write_ctx, h.p, h.len, err) ? -1 : 0;
  for (int i = 0; rc == 0 && i < n; i++) {
    const StWriteTensor *t = plan[i].t;
    size_t nb = (size_t)plan[i].nbytes;
    if (!nb) continue;
    if (t->data) { rc = write(write_ctx, t->data, nb, err); continue; }
    if (!fill) { rc = err_set(err, "safetensors: tensor \"%s\": no data", t->name); break; }
    Counted c = {write, write_ctx, nb, t->name};
    rc = fill(fill_ctx, t, counted_write, &c, err);
    if (rc == 0 && c.left) rc = err_set(err, "safetensors: tensor \"%s\": %zu bytes short", t->name, c.left);
  }
  free(h.p);
  free(plan);
  return rc ? -1 : 0;
}
