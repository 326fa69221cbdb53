#include "engine/train/grad_sync.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/now.h"
#include "engine/core/platform.h"

typedef struct Bucket {
  size_t off, n;          /* [off, off + n) of the parameter buffer */
  int seg0, seg1;         /* its segments */
  size_t *piece;          /* W + 1 boundaries: rank q owns [piece[q], piece[q + 1]) */
  size_t coff;            /* where this rank's piece starts in its compact buffers (moments, sum) */
} Bucket;

struct GradSync {
  Model *m;
  Dist *d;
  int W, me, accum, a, threads;
  AdamW *o;
  Bucket *b;
  int nb;
  int *group_b0, *group_b1;   /* the buckets of each gradient group */
  size_t *piece_mem;
  size_t *seg_off, *seg_n;    /* segments, in bucket order */
  int nseg;
  double *segsum;
  size_t n_own;
  float *gacc;                /* accum > 1: the step's running sum of this rank's pieces */
  /* Exchange: a slot holds one bucket's incoming pieces from the W - 1 other ranks. */
  float *slots;
  size_t piece_max;
  const float **src;              /* W: the pieces a fold adds, in rank order */
  int slot_bucket[GSYNC_SLOTS];   /* -1: free */
  DistReq *slot_reqs;             /* 2 (W - 1) per slot */
  int *ag_counts, *ag_displs;     /* per bucket, W each: the parameter all-gather */
  DistReq *ag_reqs;               /* per bucket */
  int ready;                      /* buckets of this micro-batch whose gradients are final (in order) */
  int started;                    /* buckets sent in this micro-batch (the first `started` of them) */
  double t_first;
  GsyncStats stats;
};

static size_t piece_lo(const Bucket *b, int q) { return b->piece[q]; }
static size_t piece_n(const Bucket *b, int q) { return b->piece[q + 1] - b->piece[q]; }

void gsync_free(GradSync *g) {
  if (!g) return;
  model_set_grad_ready(g->m, NULL, NULL);
  adamw_free(g->o);
  free(g->b); free(g->group_b0); free(g->group_b1); free(g->piece_mem);
  free(g->seg_off); free(g->seg_n); free(g->segsum);
  free(g->gacc); free(g->slots); free(g->slot_reqs);
  free(g->ag_counts); free(g->ag_displs); free(g->ag_reqs); free(g->src);
  free(g);
}

static void on_group(void *ctx, int group);

GradSync *gsync_new(Model *m, const AdamWConfig *cfg, const AdamWSegment *segs, int n_segs, int accum, Dist *d,
                    Err *err) {
  GradSync *g = calloc(1, sizeof *g);
  if (!g) { err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  g->m = m; g->d = d;
  g->W = dist_world(d); g->me = dist_rank(d);
  g->accum = accum;
  g->threads = model_threads(m);
  int ng = model_grad_group_count(m), W = g->W;
  size_t P = model_num_params(m);
  /* Buckets: each group cut into near-equal parts of at most GSYNC_BUCKET_FLOATS. */
  int nb = 0, nseg = 0;
  for (int i = 0; i < ng; i++) {
    size_t off, n;
    model_grad_group(m, i, &off, &n);
    nb += (int)((n + GSYNC_BUCKET_FLOATS - 1) / GSYNC_BUCKET_FLOATS);
    nseg += (int)((n + GSYNC_SEGMENT_FLOATS - 1) / GSYNC_SEGMENT_FLOATS) + 2 * (int)((n + GSYNC_BUCKET_FLOATS - 1) / GSYNC_BUCKET_FLOATS);
  }
  g->b = calloc((size_t)nb, sizeof *g->b);
  g->group_b0 = calloc((size_t)ng, sizeof(int));
  g->group_b1 = calloc((size_t)ng, sizeof(int));
  g->piece_mem = calloc((size_t)nb * (size_t)(W + 1), sizeof(size_t));
  g->seg_off = calloc((size_t)nseg, sizeof(size_t));
  g->seg_n = calloc((size_t)nseg, sizeof(size_t));
  g->segsum = calloc((size_t)nseg, sizeof(double));
  g->ag_counts = calloc((size_t)nb * (size_t)W, sizeof(int));
  g->ag_displs = calloc((size_t)nb * (size_t)W, sizeof(int));
  g->ag_reqs = calloc((size_t)nb, sizeof(DistReq));
  g->src = calloc((size_t)W, sizeof *g->src);
  if (!g->src || !g->b || !g->group_b0 || !g->group_b1 || !g->piece_mem || !g->seg_off || !g->seg_n || !g->segsum ||
      !g->ag_counts || !g->ag_displs || !g->ag_reqs)
    goto oom;
  int k = 0, s = 0;
  size_t covered = 0, own = 0;
  for (int i = 0; i < ng; i++) {
    size_t off, n;
    model_grad_group(m, i, &off, &n);
    covered += n;
    int parts = (int)((n + GSYNC_BUCKET_FLOATS - 1) / GSYNC_BUCKET_FLOATS);
    g->group_b0[i] = k;
    for (int p = 0; p < parts; p++, k++) {
      Bucket *b = &g->b[k];
      b->off = off + n * (size_t)p / (size_t)parts;
      b->n = off + n * (size_t)(p + 1) / (size_t)parts - b->off;
      /* Segments: the global grid of GSYNC_SEGMENT_FLOATS, cut at the bucket's ends. */
      b->seg0 = s;
      for (size_t x = b->off; x < b->off + b->n; s++) {
        size_t next = (x / GSYNC_SEGMENT_FLOATS + 1) * GSYNC_SEGMENT_FLOATS;
        if (next > b->off + b->n) next = b->off + b->n;
        g->seg_off[s] = x;
        g->seg_n[s] = next - x;
        x = next;
      }
      b->seg1 = s;
      b->piece = g->piece_mem + (size_t)k * (size_t)(W + 1);
      int ns = b->seg1 - b->seg0;
      for (int q = 0; q <= W; q++) {
        int si = b->seg0 + (int)((long)ns * q / W);
        b->piece[q] = si < b->seg1 ? g->seg_off[si] : b->off + b->n;
      }
      for (int q = 0; q < W; q++) {
        size_t pn = piece_n(b, q);
        if (pn > g->piece_max) g->piece_max = pn;
        g->ag_counts[(size_t)k * W + q] = (int)pn;
        g->ag_displs[(size_t)k * W + q] = (int)(b->piece[q] - b->off);
      }
    }
    g->group_b1[i] = k;
  }
  /* This rank's pieces lie in its compact buffers in parameter order, so one rank's
  ** moments are laid out exactly as the parameters (a plain AdamW). */
  for (size_t at = 0; at < P;) {
    int next = -1;
    for (int j = 0; j < k; j++)
      if (g->b[j].off == at) next = j;
    if (next < 0) break;
    g->b[next].coff = own;
    own += piece_n(&g->b[next], g->me);
    at += g->b[next].n;
  }
  g->nb = k;
  g->nseg = s;
  g->n_own = own;
  if (covered != P) {
    gsync_free(g);
    err_set(err, "grad sync: gradient groups cover %zu of %zu parameters", covered, P);
    return NULL;
  }
  g->o = adamw_new_sharded(cfg, P, segs, n_segs, own, err);
  if (!g->o) { gsync_free(g); return NULL; }
  g->o->threads = g->threads;
  if (accum > 1 && !(g->gacc = platform_alloc_floats(own ? own : 1))) goto oom;
  if (W > 1) {
    g->slots = platform_alloc_floats((size_t)GSYNC_SLOTS * (size_t)(W - 1) * (g->piece_max ? g->piece_max : 1));
    g->slot_reqs = calloc((size_t)GSYNC_SLOTS * 2 * (size_t)(W - 1), sizeof(DistReq));
    if (!g->slots || !g->slot_reqs) goto oom;
    model_set_grad_ready(m, on_group, g);
  }
  for (int i = 0; i < GSYNC_SLOTS; i++) g->slot_bucket[i] = -1;
  return g;
oom:
  gsync_free(g);
  err_setk(err, ERR_NOMEM, "grad sync: out of memory");
  return NULL;
}

AdamW *gsync_optim(GradSync *g) { return g->o; }
int gsync_holds_all(const GradSync *g) { return g->W == 1; }
GsyncStats gsync_stats(const GradSync *g) { return g->stats; }

/* This rank's summed gradient of bucket b: in place in the model's gradients, or in gacc. */
static float *own_sum(GradSync *g, const Bucket *b) {
  return g->accum > 1 ? g->gacc + b->coff : model_grads(g->m) + piece_lo(b, g->me);
}

/* Adds bucket b's pieces from every rank, in rank order, onto this rank's sum. */
static void fold(GradSync *g, int k, const float *slot) {
  const Bucket *b = &g->b[k];
  size_t lo = piece_lo(b, g->me), n = piece_n(b, g->me);
  if (n == 0) return;
  const float **src = g->src;
  int W = g->W;
  float *grads = model_grads(g->m);
  for (int q = 0, x = 0; q < W; q++) src[q] = q == g->me ? grads + lo : slot + (size_t)(x++) * g->piece_max;
  float *dst = own_sum(g, b);
  int onto = g->accum > 1 && g->a > 0;
#pragma omp parallel for num_threads(g->threads) schedule(static)
  for (size_t i = 0; i < n; i++) {
    float x = onto ? dst[i] + src[0][i] : src[0][i];
    for (int q = 1; q < W; q++) x += src[q][i];
    dst[i] = x;
  }
}

static int slot_done(GradSync *g, int s, int wait) {
  DistReq *r = g->slot_reqs + (size_t)s * 2 * (size_t)(g->W - 1);
  int n = 2 * (g->W - 1);
  if (wait) dist_wait(g->d, r, n);
  else if (!dist_test(g->d, r, n)) return 0;
  fold(g, g->slot_bucket[s], g->slots + (size_t)s * (size_t)(g->W - 1) * g->piece_max);
  g->slot_bucket[s] = -1;
  return 1;
}

/* Sends bucket k's pieces to their owners and posts the receives of this rank's piece into slot s. */
static void start_bucket(GradSync *g, int k, int s) {
  if (g->started++ == 0) g->t_first = now_monotonic();
  const Bucket *b = &g->b[k];
  float *grads = model_grads(g->m);
  float *slot = g->slots + (size_t)s * (size_t)(g->W - 1) * g->piece_max;
  DistReq *r = g->slot_reqs + (size_t)s * 2 * (size_t)(g->W - 1);
  size_t mine = piece_n(b, g->me);
  for (int q = 0, x = 0; q < g->W; q++) {
    if (q == g->me) continue;
    /* Zero-length pieces still post a message: both sides then count the same requests. */
    dist_isend_f32(g->d, grads + piece_lo(b, q), piece_n(b, q), q, k, &r[2 * x]);
    dist_irecv_f32(g->d, slot + (size_t)x * g->piece_max, mine, q, k, &r[2 * x + 1]);
    x++;
  }
  g->slot_bucket[s] = k;
}

/* Sums the buckets that have arrived, then sends ready buckets while slots are free. With
** wait, finishes everything that is ready (the oldest slot first when none is free); without,
** never blocks: backward is not held up by a peer that is behind. */
static void pump(GradSync *g, int wait) {
  for (;;) {
    for (int s = 0; s < GSYNC_SLOTS; s++)
      if (g->slot_bucket[s] >= 0) slot_done(g, s, 0);
    int free_slot = -1, oldest = -1;
    for (int s = 0; s < GSYNC_SLOTS; s++) {
      if (g->slot_bucket[s] < 0) { if (free_slot < 0) free_slot = s; }
      else if (oldest < 0 || g->slot_bucket[s] < g->slot_bucket[oldest]) oldest = s;
    }
    if (g->started < g->ready && free_slot >= 0) { start_bucket(g, g->started, free_slot); continue; }
    if (!wait || oldest < 0) return;
    slot_done(g, oldest, 1);
  }
}

/* Between backward's groups: the group's buckets are final; send what slots allow. */
static void on_group(void *ctx, int group) {
  GradSync *g = ctx;
  double t0 = now_monotonic();
  g->ready = g->group_b1[group];
  pump(g, 0);
  g->stats.inline_s += now_monotonic() - t0;
}

void gsync_micro_begin(GradSync *g, int a) {
  g->a = a;
  g->started = g->ready = 0;
  model_zero_grad(g->m);
}

void gsync_micro_end(GradSync *g) {
  if (g->W == 1) {
    if (g->accum == 1) return;
    /* One rank, several micro-batches: the same left-to-right sum as several ranks'. */
    float *grads = model_grads(g->m), *acc = g->gacc;
    int onto = g->a > 0;
    for (int k = 0; k < g->nb; k++) {
      const Bucket *b = &g->b[k];
      const float *src = grads + b->off;
      float *dst = acc + b->coff;
#pragma omp parallel for num_threads(g->threads) schedule(static)
      for (size_t i = 0; i < b->n; i++) dst[i] = onto ? dst[i] + src[i] : src[i];
    }
    return;
  }
  double t0 = now_monotonic();
  /* Every bucket is final now, also those of a backward that did not run (no labelled
  ** token in this rank's micro-batch: model_grads gives zeros), so the ranks always
  ** exchange the same messages. */
  g->ready = g->nb;
  pump(g, 1);
  double t1 = now_monotonic();
  g->stats.exposed_s += t1 - t0;
  if (g->started) g->stats.exchange_s += t1 - g->t_first;
}

double gsync_step(GradSync *g, double *lr) {
  /* The norm: per-segment sums of squares, each computed by its owner, folded in order. */
  memset(g->segsum, 0, (size_t)g->nseg * sizeof(double));
  for (int k = 0; k < g->nb; k++) {
    const Bucket *b = &g->b[k];
    size_t lo = piece_lo(b, g->me), hi = lo + piece_n(b, g->me);
    const float *sum = own_sum(g, b);
#pragma omp parallel for num_threads(g->threads) schedule(static)
    for (int si = b->seg0; si < b->seg1; si++)
      if (g->seg_off[si] >= lo && g->seg_off[si] < hi) g->segsum[si] = adamw_sumsq(sum + (g->seg_off[si] - lo), g->seg_n[si]);
  }
  dist_merge_f64(g->d, g->segsum, (size_t)g->nseg, NULL);
  double ss = 0;
  for (int si = 0; si < g->nseg; si++) ss += g->segsum[si];
  double norm = sqrt(ss);
  AdamWUpdate u = adamw_update_at(g->o, norm);
  float *params = model_params(g->m);
  for (int k = 0; k < g->nb; k++) {
    const Bucket *b = &g->b[k];
    size_t lo = piece_lo(b, g->me), n = piece_n(b, g->me);
    if (n) adamw_apply(g->o, &u, params + lo, own_sum(g, b), g->o->m + b->coff, g->o->v + b->coff, lo, n, g->threads);
    if (g->W > 1) {
      dist_iallgatherv_f32(g->d, params + b->off, g->ag_counts + (size_t)k * g->W, g->ag_displs + (size_t)k * g->W,
                           &g->ag_reqs[k]);
      dist_test(g->d, g->ag_reqs, k + 1);
    }
  }
  if (g->W > 1) {
    double t0 = now_monotonic();
    dist_wait(g->d, g->ag_reqs, g->nb);
    g->stats.gather_s += now_monotonic() - t0;
  }
  g->o->step++;
  if (lr) *lr = u.lr;
  return norm;
}

/* ---- checkpoints and resume ---- */

typedef struct MomentReq { int64_t which, offset, count, end, failed; } MomentReq;

/* Moves moments [lo, hi) of `which` between owners and rank 0 (dst on rank 0), piece by piece. */
static void moments_move(GradSync *g, int which, size_t lo, size_t hi, float *dst) {
  const float *mine = which ? g->o->v : g->o->m;
  for (int k = 0; k < g->nb; k++) {
    const Bucket *b = &g->b[k];
    if (b->off >= hi || b->off + b->n <= lo) continue;
    for (int q = 0; q < g->W; q++) {
      size_t a = piece_lo(b, q), e = a + piece_n(b, q);
      if (a < lo) a = lo;
      if (e > hi) e = hi;
      if (a >= e) continue;
      if (q == g->me && g->me == 0) {
        memcpy(dst + (a - lo), mine + b->coff + (a - piece_lo(b, q)), (e - a) * sizeof(float));
      } else if (g->me == 0) {
        DistReq r;
        dist_irecv_f32(g->d, dst + (a - lo), e - a, q, 1, &r);
        dist_wait(g->d, &r, 1);
      } else if (q == g->me) {
        DistReq r;
        dist_isend_f32(g->d, mine + b->coff + (a - piece_lo(b, q)), e - a, 0, 1, &r);
        dist_wait(g->d, &r, 1);
      }
    }
  }
}

int gsync_moments_read(GradSync *g, int which, size_t offset, size_t count, float *dst, Err *err) {
  if (g->W > 1) {
    MomentReq rq = {which, (int64_t)offset, (int64_t)count, 0, 0};
    if (dist_bcast(g->d, &rq, sizeof rq, 0, err)) return -1;
  }
  moments_move(g, which, offset, offset + count, dst);
  return 0;
}

int gsync_moments_end(GradSync *g, int failed, Err *err) {
  if (g->W == 1) return failed ? -1 : 0;
  MomentReq rq = {0, 0, 0, 1, failed};
  dist_bcast(g->d, &rq, sizeof rq, 0, NULL);
  /* Rank 0's message goes to everyone, so every rank stops with the same words. */
  Err e = {0};
  if (failed && err) e = *err;
  dist_bcast(g->d, &e, sizeof e, 0, NULL);
  if (failed && err) *err = e;
  return failed ? -1 : 0;
}

int gsync_moments_serve(GradSync *g, Err *err) {
  for (;;) {
    MomentReq rq;
    dist_bcast(g->d, &rq, sizeof rq, 0, NULL);
    if (rq.end) {
      Err e = {0};
      dist_bcast(g->d, &e, sizeof e, 0, NULL);
      if (!rq.failed) return 0;
      if (err) *err = e;
      return -1;
    }
    moments_move(g, (int)rq.which, (size_t)rq.offset, (size_t)(rq.offset + rq.count), NULL);
  }
}

int gsync_load(GradSync *g, const float *m_full, const float *v_full, Err *err) {
  size_t P = model_num_params(g->m);
  if (g->W == 1) {
    for (int k = 0; k < g->nb; k++) {
      memcpy(g->o->m + g->b[k].coff, m_full + g->b[k].off, g->b[k].n * sizeof(float));
      memcpy(g->o->v + g->b[k].coff, v_full + g->b[k].off, g->b[k].n * sizeof(float));
    }
    return 0;
  }
  enum { CHUNK = 1 << 20 };
  float *buf = malloc(CHUNK * sizeof(float));
  if (!buf) return err_setk(err, ERR_NOMEM, "out of memory");
  for (int which = 0; which < 2; which++) {
    const float *full = which ? v_full : m_full;
    float *mine = which ? g->o->v : g->o->m;
    for (size_t lo = 0; lo < P; lo += CHUNK) {
      size_t n = P - lo < CHUNK ? P - lo : CHUNK;
      if (g->me == 0) memcpy(buf, full + lo, n * sizeof(float));
      dist_bcast(g->d, buf, n * sizeof(float), 0, NULL);
      for (int k = 0; k < g->nb; k++) {
        const Bucket *b = &g->b[k];
        size_t a = piece_lo(b, g->me), e = a + piece_n(b, g->me);
        size_t x = a > lo ? a : lo, y = e < lo + n ? e : lo + n;
        if (x < y) memcpy(mine + b->coff + (x - a), buf + (x - lo), (y - x) * sizeof(float));
      }
    }
  }
  free(buf);
  return dist_bcast(g->d, model_params(g->m), P * sizeof(float), 0, err);
}
