/* A run that diverged (engine/train/divergence.h). */
#include "engine/train/divergence.h"

#include <math.h>

int divergence_check_step(const char *what, long step, double loss, double grad_norm, Err *err) {
  if (isfinite(grad_norm) && !isinf(loss)) return 0;
  return err_setk(err, ERR_INVALID,
                  "%s diverged at step %ld: loss %g, gradient norm %g; the weights are no longer finite, so the "
                  "run stops without saving them (a lower learning rate keeps them finite)",
                  what, step, fabs(loss), fabs(grad_norm));   /* fabs: "nan", never "-nan" */
}

int divergence_check_weights(Model *m, const char *what, long step, Err *err) {
  const ModelTensor *bad = model_nonfinite_tensor(m);
  if (!bad) return 0;
  return err_setk(err, ERR_INVALID,
                  "%s diverged by step %ld: %s holds values that are not finite, so the run stops without saving "
                  "them (a lower learning rate keeps them finite)", what, step, bad->name);
}
