/* Layer: engine/train/ (this folder: trainer loops, run description, metrics) uses
** engine/core, nn, tok, data, io, dist. (ARCHITECTURE.md)
**
** A run that diverged: its loss or gradient norm, then its weights, stop being finite. The
** pretraining loop (trainer.c) and fine-tuning (finetune.c) stop there, before a checkpoint or
** a push saves such weights as a repository's newest revision, with the same one line. */
#ifndef MASKD_DIVERGENCE_H
#define MASKD_DIVERGENCE_H
#include "engine/core/err.h"
#include "engine/nn/model.h"

/* After an update: -1 with ERR_INVALID "WHAT diverged at step N: loss L, gradient norm G; ..."
** when the norm is not finite or the loss infinite (a loss of labelled tokens that is NaN makes
** the norm NaN; a step without labels has a NaN loss and a zero norm, and passes); else 0. */
int divergence_check_step(const char *what, long step, double loss, double grad_norm, Err *err);

/* Before weights are saved: -1 with ERR_INVALID "WHAT diverged by step N: TENSOR holds values
** that are not finite ..." when one of m's tensors does (an update that overflowed on a finite
** gradient); else 0. Reads every parameter once. */
int divergence_check_weights(Model *m, const char *what, long step, Err *err);

#endif
