/* Layer: engine/dist/ (this folder: the processes of a data-parallel run) uses
** engine/core only. (ARCHITECTURE.md)
**
** The ranks of one training run and what they say to each other, over MPI (Debian's
** Open MPI). This is the only file of maskd that includes <mpi.h>: everything above it
** sees a Dist, ranks and a handful of collectives.
**
** A process started by mpirun (OMPI_COMM_WORLD_SIZE or PMIX_RANK in its environment)
** joins MPI_COMM_WORLD; any other process is rank 0 of 1 and never touches MPI, so a
** one-process run needs no MPI daemon (Open MPI's singleton start would spawn one).
**
** Invariants: every collective below is called by every rank in the same order;
** results never depend on the order in which messages arrive (the sums here are of
** integers, or of slots that exactly one rank fills, which are exact in any order);
** only the thread that called dist_open calls into this file (MPI_THREAD_FUNNELED). */
#ifndef MASKD_DIST_H
#define MASKD_DIST_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

typedef struct Dist Dist;

/* A pending non-blocking operation (holds an MPI_Request). */
typedef struct DistReq { uint64_t handle; } DistReq;

/* 1 when this process was started by mpirun (or another Open MPI/PMIx launcher). */
int dist_launched(void);
/* Joins the run: MPI when launched, else a one-rank Dist; NULL with err on failure. */
Dist *dist_open(Err *err);
/* Leaves the run (MPI_Finalize when MPI was joined); NULL allowed. */
void dist_close(Dist *d);
/* Ends every rank of the run at once with this exit status (MPI_Abort); exits when alone. */
void dist_abort(Dist *d, int status);

/* This rank, 0 <= rank < world; NULL means rank 0 of 1. */
int dist_rank(const Dist *d);
/* Number of ranks; 1 for NULL. */
int dist_world(const Dist *d);
/* This rank's host name (for messages). */
const char *dist_host(const Dist *d);
/* 1 when the ranks talk over MPI (world > 1, or launched by mpirun). */
int dist_is_mpi(const Dist *d);

/* Collective: rank 0's failed flag and message, or any other rank's, reach every rank.
** Returns 0 when no rank failed; else -1 with err = the lowest failing rank's message,
** prefixed "rank R on HOST: " when that rank is not this one or world > 1. */
int dist_agree(Dist *d, int failed, Err *err);
/* Collective: root's bytes into every rank's buf. */
int dist_bcast(Dist *d, void *buf, size_t bytes, int root, Err *err);
/* Collective: every rank's `bytes` bytes into all (world * bytes), in rank order. */
int dist_allgather(Dist *d, const void *mine, size_t bytes, void *all, Err *err);
/* Collective: element-wise integer sums (exact in any order). */
int dist_sum_i64(Dist *d, int64_t *x, size_t n, Err *err);
/* Collective: element-wise merge of doubles where each slot is non-zero on at most one
** rank (the others hold +0.0): x + 0 = x exactly, so the result is that rank's value
** whatever the order. The caller keeps to that rule; sums of real values would not be exact. */
int dist_merge_f64(Dist *d, double *x, size_t n, Err *err);
/* Collective: a barrier. */
int dist_barrier(Dist *d, Err *err);

/* Non-blocking floats to / from one rank; tag tells concurrent transfers apart. */
void dist_isend_f32(Dist *d, const float *buf, size_t n, int to, int tag, DistReq *r);
void dist_irecv_f32(Dist *d, float *buf, size_t n, int from, int tag, DistReq *r);
/* Collective, non-blocking: rank q's counts[q] floats at buf + displs[q] to every rank (in place). */
void dist_iallgatherv_f32(Dist *d, float *buf, const int *counts, const int *displs, DistReq *r);
/* 1 when all n requests are complete (each completed one is released); lets MPI progress. */
int dist_test(Dist *d, DistReq *reqs, int n);
/* Waits for all n requests. */
void dist_wait(Dist *d, DistReq *reqs, int n);

#endif
