#include "engine/dist/dist.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t), "an MPI_Request must fit a DistReq");

struct Dist {
  int rank, world;
  int mpi;                 /* MPI was initialised by dist_open */
  char host[256];
};

/* The largest count one MPI call is given: counts are C ints. */
#define DIST_MAX_COUNT ((size_t)1 << 30)

int dist_launched(void) {
  /* Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMIx launchers set PMIX_RANK. */
  return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

Dist *dist_open(Err *err) {
  Dist *d = calloc(1, sizeof *d);
  if (!d) { err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  d->world = 1;
  if (gethostname(d->host, sizeof d->host - 1) != 0) snprintf(d->host, sizeof d->host, "localhost");
  if (!dist_launched()) return d;
  int provided = 0;
  /* FUNNELED: OpenMP threads compute, only the main thread calls MPI. */
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    free(d);
    err_set(err, "MPI_Init_thread failed");
    return NULL;
  }
  d->mpi = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &d->world);
  return d;
}

void dist_close(Dist *d) {
  if (!d) return;
  if (d->mpi) MPI_Finalize();
  free(d);
}

void dist_abort(Dist *d, int status) {
  if (d && d->mpi) MPI_Abort(MPI_COMM_WORLD, status);
  exit(status);
}

int dist_rank(const Dist *d) { return d ? d->rank : 0; }
int dist_world(const Dist *d) { return d ? d->world : 1; }
const char *dist_host(const Dist *d) {
  static char alone[256];   /* this process's name when it runs alone (main thread only) */
  if (d) return d->host;
  if (!alone[0] && gethostname(alone, sizeof alone - 1) != 0) snprintf(alone, sizeof alone, "localhost");
  return alone;
}
int dist_is_mpi(const Dist *d) { return d && d->mpi; }

typedef struct Verdict { int failed; char msg[sizeof(((Err *)0)->msg)]; int kind; char host[256]; } Verdict;

int dist_agree(Dist *d, int failed, Err *err) {
  if (!dist_is_mpi(d)) return failed ? -1 : 0;
  Verdict mine;
  memset(&mine, 0, sizeof mine);
  mine.failed = failed;
  if (failed && err) { snprintf(mine.msg, sizeof mine.msg, "%s", err->msg); mine.kind = err->kind; }
  memcpy(mine.host, d->host, sizeof mine.host);
  Verdict *all = malloc((size_t)d->world * sizeof *all);
  if (!all) return err_setk(err, ERR_NOMEM, "out of memory");
  MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  int r = 0;
  for (int q = 0; q < d->world; q++) {
    if (!all[q].failed) continue;
    char msg[sizeof mine.msg];
    snprintf(msg, sizeof msg, "%s", all[q].msg);
    err_setk(err, (ErrKind)all[q].kind, "rank %d on %s: %s", q, all[q].host, msg);
    r = -1;
    break;
  }
  free(all);
  return r;
}

int dist_bcast(Dist *d, void *buf, size_t bytes, int root, Err *err) {
  (void)err;
  if (!dist_is_mpi(d)) return 0;
  for (size_t off = 0; off < bytes; off += DIST_MAX_COUNT) {
    size_t n = bytes - off < DIST_MAX_COUNT ? bytes - off : DIST_MAX_COUNT;
    MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
  }
  return 0;
}

int dist_allgather(Dist *d, const void *mine, size_t bytes, void *all, Err *err) {
  if (!dist_is_mpi(d)) { memcpy(all, mine, bytes); return 0; }
  if (bytes > DIST_MAX_COUNT) return err_set(err, "allgather of %zu bytes is more than one call takes", bytes);
  MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
  return 0;
}

int dist_sum_i64(Dist *d, int64_t *x, size_t n, Err *err) {
  if (!dist_is_mpi(d)) return 0;
  if (n > DIST_MAX_COUNT) return err_set(err, "sum of %zu integers is more than one call takes", n);
  MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return 0;
}

int dist_merge_f64(Dist *d, double *x, size_t n, Err *err) {
  if (!dist_is_mpi(d)) return 0;
  if (n > DIST_MAX_COUNT) return err_set(err, "merge of %zu doubles is more than one call takes", n);
  MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return 0;
}

int dist_barrier(Dist *d, Err *err) {
  (void)err;
  if (dist_is_mpi(d)) MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}

static MPI_Request *req(DistReq *r) { return (MPI_Request *)(void *)&r->handle; }

void dist_isend_f32(Dist *d, const float *buf, size_t n, int to, int tag, DistReq *r) {
  (void)d;
  MPI_Isend(buf, (int)n, MPI_FLOAT, to, tag, MPI_COMM_WORLD, req(r));
}

void dist_irecv_f32(Dist *d, float *buf, size_t n, int from, int tag, DistReq *r) {
  (void)d;
  MPI_Irecv(buf, (int)n, MPI_FLOAT, from, tag, MPI_COMM_WORLD, req(r));
}

void dist_iallgatherv_f32(Dist *d, float *buf, const int *counts, const int *displs, DistReq *r) {
  (void)d;
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, MPI_COMM_WORLD, req(r));
}

int dist_test(Dist *d, DistReq *reqs, int n) {
  (void)d;
  int done = 1;
  for (int i = 0; i < n; i++) {
    int flag = 1;
    if (*req(&reqs[i]) != MPI_REQUEST_NULL) MPI_Test(req(&reqs[i]), &flag, MPI_STATUS_IGNORE);
    done &= flag;
  }
  return done;
}

void dist_wait(Dist *d, DistReq *reqs, int n) {
  (void)d;
  for (int i = 0; i < n; i++)
    if (*req(&reqs[i]) != MPI_REQUEST_NULL) MPI_Wait(req(&reqs[i]), MPI_STATUS_IGNORE);
}
