/* torch.save zip archives (engine/io/torch_pickle.h). */
#include "engine/io/torch_pickle.h"
#include "engine/io/hf_weights.h"

int tp_read_state_dict_memory(const void *buf, size_t len, HfWeights *w, Err *err) {
  (void)buf; (void)len; (void)w;
  return err_setk(err, ERR_BAD_INPUT, "pytorch_model.bin is not supported yet");
}

int tp_read_state_dict(const char *path, HfWeights *w, Err *err) {
  (void)w;
  return err_setk(err, ERR_BAD_INPUT, "%s: pytorch_model.bin is not supported yet", path);
}
