/* The data-parallel half of a training step: the gradients of every rank's micro-batches
** summed in one fixed order, AdamW with each rank holding the moments of its share of
** the parameters only (ZeRO stage 1), and the updated parameters gathered back to all.
** A one-rank run goes through the same code, so its bits are those of any rank count.
**
** The parameter buffer is cut, independently of the rank count, into buckets (the
** model's gradient groups, split to at most GSYNC_BUCKET_FLOATS) and buckets into
** segments (the 4096-float grid, cut at bucket ends). Rank q owns piece q of every
** bucket: a run of whole segments, so each rank sends each bucket's other pieces to
** their owners while backward computes the next group (model_set_grad_ready), with
** MPI progressed between groups (MPI_Test) and at most GSYNC_SLOTS buckets in flight.
**
** The sum: the step's micro-batches are numbered j = a * ranks + r (rank r's a-th), and
** the gradient is ((d_0 + d_1) + d_2) + ... in j order, element by element, whoever holds
** them: so N ranks of batch b equal one rank of batch b with grad_accum N, bit for bit.
** The clipping norm folds per-segment sums of squares in segment order. */
#ifndef MASKD_GRAD_SYNC_H
#define MASKD_GRAD_SYNC_H
#include <stddef.h>
#include "engine/core/err.h"
#include "engine/dist/dist.h"
#include "engine/nn/model.h"
#include "engine/nn/optim.h"

#define GSYNC_BUCKET_FLOATS ((size_t)1 << 22)
#define GSYNC_SEGMENT_FLOATS ((size_t)4096)
#define GSYNC_SLOTS 4

typedef struct GradSync GradSync;

/* Communication time of the steps so far. */
typedef struct GsyncStats {
  double exchange_s;   /* from the first bucket sent to the last one summed, per micro-batch, added up */
  double exposed_s;    /* of which spent waiting after backward had finished (not hidden by it) */
  double inline_s;     /* time backward itself spent between its groups sending, moving and summing buckets */
  double gather_s;     /* waiting for the updated parameters (after AdamW) */
} GsyncStats;

/* For m (planned for training) over d's ranks with `accum` micro-batches per rank and
** step; the optimizer as cfg and segs (decay flags for all parameters) with moments for
** this rank's pieces only. Allocates everything a step needs. */
GradSync *gsync_new(Model *m, const AdamWConfig *cfg, const AdamWSegment *segs, int n_segs, int accum, Dist *d,
                    Err *err);
/* Frees; NULL allowed. Leaves the model's callback cleared. */
void gsync_free(GradSync *g);
/* Before micro-batch a (0 <= a < accum) of a step: the next backward writes fresh gradients. */
void gsync_micro_begin(GradSync *g, int a);
/* After that micro-batch's backward: finishes its exchange and adds it to the step's sum. */
void gsync_micro_end(GradSync *g);
/* The update: global norm, AdamW on this rank's pieces, parameters gathered. Returns
** the pre-clip norm; *lr is the rate used. Collective. */
double gsync_step(GradSync *g, double *lr);
/* The optimizer (its m and v hold this rank's pieces; step is the run's). */
AdamW *gsync_optim(GradSync *g);
/* 1 when this rank holds every moment (one rank): the optimizer is a plain full AdamW. */
int gsync_holds_all(const GradSync *g);
/* Communication time so far. */
GsyncStats gsync_stats(const GradSync *g);

/* Checkpoints (collective; rank 0 drives): rank 0 asks for moments [offset, offset +
** count) of which (0: exp_avg, 1: exp_avg_sq) into dst; the other ranks answer in
** gsync_moments_serve until rank 0 calls gsync_moments_end with its status, which
** gsync_moments_serve returns (0 or -1; err gets rank 0's message). */
int gsync_moments_read(GradSync *g, int which, size_t offset, size_t count, float *dst, Err *err);
int gsync_moments_end(GradSync *g, int failed, Err *err);
int gsync_moments_serve(GradSync *g, Err *err);
/* Resume (collective): rank 0's full moments (m, v of all parameters; NULL on other
** ranks) into every rank's pieces, and rank 0's parameters to all. */
int gsync_load(GradSync *g, const float *m_full, const float *v_full, Err *err);

#endif
