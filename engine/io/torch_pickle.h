/* pytorch_model.bin as torch.save writes it since PyTorch 1.6: a zip archive of
** <prefix>/data.pkl (the pickled state dict), <prefix>/data/<key> (one storage each,
** raw little-endian), <prefix>/byteorder and <prefix>/version. Read without Python:
** a zip reader that takes only stored (uncompressed) entries, and a pickle reader
** that knows only the opcodes and globals a state dict of tensors uses
** (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter,
** torch.FloatStorage / HalfStorage / BFloat16Storage, and LongStorage for the
** position_ids buffers older files carry, which are listed and never loaded). Anything else is refused by
** name, never executed; every size, offset and stride is checked (contiguous
** tensors only, inside their storage). The legacy (pre-1.6, non-zip) format is refused. */
#ifndef MASKD_TORCH_PICKLE_H
#define MASKD_TORCH_PICKLE_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

typedef struct HfWeights HfWeights;

/* The largest pytorch_model.bin opened, and the largest data.pkl parsed. */
#define TP_MAX_FILE ((uint64_t)64 << 30)
#define TP_MAX_PICKLE ((size_t)64 << 20)

/* Reads the state dict of the torch.save zip at path into w (hfw_add_raw, names as
** saved, float32); -1 with err naming path and what was refused (ERR_BAD_INPUT). */
int tp_read_state_dict(const char *path, HfWeights *w, Err *err);
/* The same over bytes in memory (len bytes at buf; not copied). */
int tp_read_state_dict_memory(const void *buf, size_t len, HfWeights *w, Err *err);

#endif
