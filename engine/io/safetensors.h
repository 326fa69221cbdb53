/* safetensors files (huggingface/safetensors): an 8-byte little-endian header
** length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets"}, ...,
** "__metadata__": {str: str}} padded with spaces, then the data buffer, which
** the tensors cover exactly (no holes, no overlaps), little-endian, C order.
** The reader validates all of that and never trusts a number from the file; the
** writer produces what the HF writer produces (same order, same padding). */
#ifndef MASKD_SAFETENSORS_H
#define MASKD_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER 100000000  /* the format's limit on N */
/* The largest file opened: a "base" model with its optimizer state is about 1.5 GB. */
#define ST_MAX_FILE ((uint64_t)64 << 30)

/* The format's dtypes, in the order of the HF writer's enum (its sort key). */
typedef enum {
  ST_BOOL, ST_F4, ST_F6_E2M3, ST_F6_E3M2, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_F8_E8M0,
  ST_F8_E4M3FNUZ, ST_F8_E5M2FNUZ, ST_I16, ST_U16, ST_F16, ST_BF16, ST_I32, ST_U32, ST_F32, ST_C64,
  ST_F64, ST_I64, ST_U64, ST_NDTYPES
} StDtype;

/* One tensor of an open file. data points into the file's buffer and may be
** unaligned for its dtype: read it with memcpy or the st_read_* converters. A
** file opened from a source (st_open_source, st_open_stream) holds no buffer:
** data is NULL, and st_read_f32_range / st_read_bf16_range read the bytes. */
typedef struct StTensor {
  const char *name;
  StDtype dtype;
  int ndim;                       /* 0 (a scalar) .. ST_MAX_DIMS */
  int64_t shape[ST_MAX_DIMS];
  int64_t numel;                  /* product of shape (1 for a scalar) */
  const void *data;
  size_t nbytes;
  uint64_t offset;                /* of its first byte, from the start of the file */
} StTensor;

typedef struct StFile StFile;

/* Maps (read-only) and validates a whole file, a regular file of at most ST_MAX_FILE
** bytes; NULL with a message naming the file and the problem. The file must not be
** truncated while open (st_write replaces files by rename, which is safe). */
StFile *st_open(const char *path, Err *err);
/* Same for bytes in memory (copied; the caller keeps buf). */
StFile *st_open_memory(const void *buf, size_t len, Err *err);
/* Where a streamed file's bytes come from: read() copies n bytes at offset (inside
** [0, len)) into dst; 0, or -1 with err set (its kind kept). */
typedef struct StSource {
  int (*read)(void *ctx, uint64_t offset, void *dst, size_t n, Err *err);
  void *ctx;
  uint64_t len;                   /* the file's size in bytes */
} StSource;
/* Reads and validates the header only (as st_open does, the same messages); the
** tensors' bytes are read on demand through src (copied; its ctx must outlive the
** file), so no copy of the file is ever held. One thread at a time per file. */
StFile *st_open_source(const StSource *src, Err *err);
/* st_open_source() over a file read with pread (not mapped, so its pages never
** count in the process's memory): the checks and messages of st_open(). */
StFile *st_open_stream(const char *path, Err *err);
/* Frees an open file; NULL allowed. Tensors and strings from it die with it. */
void st_close(StFile *f);
/* Number of tensors. */
int st_count(const StFile *f);
/* The i-th tensor in data-buffer order, 0 <= i < st_count(). */
const StTensor *st_tensor(const StFile *f, int i);
/* The tensor with this name, or NULL. */
const StTensor *st_find(const StFile *f, const char *name);
/* The __metadata__ value for key, or NULL. */
const char *st_metadata(const StFile *f, const char *key);
/* Number of __metadata__ pairs and the i-th pair (in header order). */
int st_metadata_count(const StFile *f);
void st_metadata_at(const StFile *f, int i, const char **key, const char **value);

/* The format's name of a dtype ("F32"), and the dtype for a name (-1 if unknown). */
const char *st_dtype_name(StDtype d);
int st_dtype_from_name(const char *name);
/* Bits per element (4 for F4, 6 for F6_*, 8 * bytes otherwise). */
int st_dtype_bits(StDtype d);

/* Copies t into numel floats, converting F32, F16, BF16 and F64; errors on other
** dtypes or when numel is not t's element count. */
int st_read_f32(const StTensor *t, float *out, int64_t numel, Err *err);
/* Copies a float tensor into numel bfloat16s (engine/core/bf16.h's rounding; BF16 copied as is). */
int st_read_bf16(const StTensor *t, uint16_t *out, int64_t numel, Err *err);
/* Elements [first, first + count) of a float tensor t of f as floats / bfloat16s
** (the conversions of st_read_f32 / st_read_bf16), from f's buffer or read through
** its source in bounded pieces; errors on other dtypes, a range outside t, or a
** failed read (the source's err kind kept). */
int st_read_f32_range(const StFile *f, const StTensor *t, int64_t first, int64_t count, float *out, Err *err);
int st_read_bf16_range(const StFile *f, const StTensor *t, int64_t first, int64_t count, uint16_t *out, Err *err);
/* Copies an integer (or BOOL) tensor into numel int64s; U64 values above INT64_MAX are errors. */
int st_read_i64(const StTensor *t, int64_t *out, int64_t numel, Err *err);
/* Copies an integer (or BOOL) tensor into numel int32s; values outside int32 are errors. */
int st_read_i32(const StTensor *t, int32_t *out, int64_t numel, Err *err);
/* Float conversions used by the readers and for BF16 export (round to nearest even). */
float st_f16_to_f32(uint16_t h);

/* A tensor to write: data holds numel elements of dtype, little-endian, C order. */
typedef struct StWriteTensor {
  const char *name;
  StDtype dtype;
  int ndim;
  int64_t shape[ST_MAX_DIMS];
  const void *data;
} StWriteTensor;

/* Serialises tensors and metadata (n_meta key/value pairs in meta[2*i], meta[2*i+1];
** "format": "pt" comes first unless the caller gives "format") into a malloc'd
** buffer (*out, *out_len). Tensors are laid out as the HF writer does: by dtype
** descending in its enum order, then by name; the header is padded with spaces
** to a multiple of 8 so every tensor starts 8-byte aligned. */
int st_serialize(const StWriteTensor *ts, int n, const char *const *meta, int n_meta,
                 unsigned char **out, size_t *out_len, Err *err);
/* The byte length st_serialize() would produce, into *len; tensors' data may be NULL. */
int st_serialized_size(const StWriteTensor *ts, int n, const char *const *meta, int n_meta, size_t *len, Err *err);
/* A byte sink: takes the next n bytes of the output; 0, or -1 with err set. */
typedef int (*StWriteFn)(void *ctx, const void *data, size_t n, Err *err);
/* Produces the bytes of a tensor given with data == NULL: calls write(write_ctx, ...)
** with exactly the tensor's byte count in total, in order; 0, or -1 with err set. */
typedef int (*StFillFn)(void *ctx, const StWriteTensor *t, StWriteFn write, void *write_ctx, Err *err);
/* The bytes of st_serialize(), first to last, passed to write without building them:
** tensors with data are written from it, those with data == NULL (and a nonzero
** size) come from fill, called once each in file order. A fill that writes more or
** fewer bytes than its tensor holds is an error. */
int st_serialize_stream(const StWriteTensor *ts, int n, const char *const *meta, int n_meta, StFillFn fill, void *fill_ctx,
                        StWriteFn write, void *write_ctx, Err *err);
/* st_serialize() to a file, atomically: a temporary beside it, synced, renamed. */
int st_write(const char *path, const StWriteTensor *ts, int n, const char *const *meta, int n_meta, Err *err);
/* Writes len bytes to path atomically (a temporary, fsync, rename), so a crash
** leaves either the old file or the whole new one. */
int st_write_bytes(const char *path, const void *bytes, size_t len, Err *err);

#endif
