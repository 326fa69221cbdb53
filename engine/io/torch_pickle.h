/* pytorch_model.bin as torch.save writes it since PyTorch 1.6: a zip archive of
** <prefix>/data.pkl (the pickled state dict), <prefix>/data/<key> (one storage each,
** raw little-endian), <prefix>/byteorder and <prefix>/version. Read without Python:
** a zip reader that takes only stored (uncompressed) entries, and a pickle reader
** that knows only the opcodes and globals a state dict of tensors uses
** (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter,
** torch.FloatStorage / HalfStorage / BFloat16Storage / DoubleStorage, and LongStorage
** for the position_ids buffers older files carry, which are listed and never loaded).
** Anything else is refused by name, never executed; every size, offset and stride is
** checked (a view, contiguous or strided, reaches only elements inside its storage;
** a strided one is copied out in row-major order). The legacy (pre-1.6, non-zip)
** format is refused. */
#ifndef MASKD_TORCH_PICKLE_H
#define MASKD_TORCH_PICKLE_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

/* Where a reader hands the state dict's entries, in the pickle's order. tensor: a
** floating-point tensor converted to float32 (data: numel floats, malloc'd, the callee's
** from the call on, whatever it returns). int64_tensor: an integer tensor's name, never
** loaded (older files carry position_ids buffers in one; the callee says whether the
** name may be such a buffer). Each returns 0, or -1 with err set, which stops the read. */
typedef struct TpSink {
  int (*tensor)(void *ctx, const char *name, int ndim, const int64_t *shape, float *data, Err *err);
  int (*int64_tensor)(void *ctx, const char *name, Err *err);
  void *ctx;
} TpSink;

/* The largest pytorch_model.bin opened, and the largest data.pkl parsed. */
#define TP_MAX_FILE ((uint64_t)64 << 30)
#define TP_MAX_PICKLE ((size_t)64 << 20)

/* Reads the state dict of the torch.save zip at path into sink (names as saved);
** -1 with err naming path and what was refused (ERR_BAD_INPUT), or the sink's error. */
int tp_read_state_dict(const char *path, const TpSink *sink, Err *err);
/* The same over bytes in memory (len bytes at buf; not copied). */
int tp_read_state_dict_memory(const void *buf, size_t len, const TpSink *sink, Err *err);

#endif
