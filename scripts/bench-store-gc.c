/* What dropping a checkpoint costs the store, and what other writers wait meanwhile:
**   1. store_gc's delete of a blob of MB megabytes (a base model's optimizer state is
**      880 MB), with secure_delete as Debian's SQLite starts (ON: zeros written over every
**      freed page) and as store_open sets it (FAST), alternated;
**   2. the next push of the same size into the freed pages (how much the file grows);
**   3. returning free pages to the file system, as store_gc did before (one
**      PRAGMA incremental_vacuum, one transaction) and as store_compact does (4 MiB per
**      transaction), while a second connection commits a small write every 10 ms: the
**      longest any of its writes waited.
** The measurements behind store_open's secure_delete and store_compact (BENCHMARKS.md,
** "The store: dropping checkpoints").
**
**   make && gcc -O2 -I. scripts/bench-store-gc.c build/libmaskd-store.a build/libmaskd-engine.a \
**       -ljansson -lsqlite3 -lm -lpthread -fopenmp -o /tmp/bench-store-gc && /tmp/bench-store-gc DIR [MB] [ROUNDS]
**
** DIR must be on the disk the store would use (not tmpfs); it needs about 4 x MB free. */
#include "store/store.h"
#include "store/store_db.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long long q1(Store *s, const char *sql) {
  sqlite3_stmt *st = sdb_prep(s, sql, NULL);
  long long v = st && sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  return v;
}

/* The other writer: a one-row write every 10 ms on a connection of its own, until told to stop. */
typedef struct { const char *path; atomic_int stop; double worst; int writes, failed; } Writer;

static void *writer_main(void *arg) {
  Writer *w = arg;
  Err e = {0};
  Store *s = store_open(w->path, &e);
  if (!s) { w->failed = 1; return NULL; }
  while (!atomic_load(&w->stop)) {
    double t0 = now();
    if (sdb_exec(s, "BEGIN IMMEDIATE; UPDATE models SET created = created; COMMIT", &e)) { w->failed = 1; sdb_rollback(s); }
    double t = now() - t0;
    if (t > w->worst) w->worst = t;
    w->writes++;
    usleep(10000);
  }
  store_close(s);
  return NULL;
}

static int push(Store *s, unsigned char *data, size_t len, int tag, StoreRevision *r, Err *e) {
  data[0] = (unsigned char)tag;   /* a different blob each time */
  data[1] = (unsigned char)(tag >> 8);
  StorePush p = {.message = "checkpoint", .config_json = "{}", .weights = data, .weights_len = len};
  return store_push(s, "m", &p, r, e);
}

static int round_of(const char *dir, const char *mode, int compact, size_t mb, unsigned char *data, int *tag) {
  char path[1024], rm[3200];
  snprintf(path, sizeof path, "%s/bench-gc.db", dir);
  snprintf(rm, sizeof rm, "rm -f %s %s-wal %s-shm", path, path, path);
  if (system(rm) != 0) return -1;
  Err e = {0};
  Store *s = store_open(path, &e);
  if (!s) { fprintf(stderr, "%s\n", e.msg); return -1; }
  char pragma[64];
  snprintf(pragma, sizeof pragma, "PRAGMA secure_delete = %s", mode);
  size_t len = mb << 20;
  StoreRevision r1, r2, r3;
  int rc = sdb_exec(s, pragma, &e) || push(s, data, len, ++*tag, &r1, &e) || push(s, data, len, ++*tag, &r2, &e) ||
           sdb_exec(s, "PRAGMA wal_checkpoint(TRUNCATE)", &e) || store_revision_delete(s, r1.id, &e);
  double t0 = now();
  rc = rc || store_gc(s, NULL, &e);
  double t_gc = now() - t0;
  long long pages0 = q1(s, "PRAGMA page_count");
  rc = rc || push(s, data, len, ++*tag, &r3, &e);
  long long grew = q1(s, "PRAGMA page_count") - pages0, psize = q1(s, "PRAGMA page_size");
  rc = rc || store_revision_delete(s, r2.id, &e) || store_gc(s, NULL, &e) || sdb_exec(s, "PRAGMA wal_checkpoint(TRUNCATE)", &e);
  long long free_pages = q1(s, "PRAGMA freelist_count");
  Writer w = {.path = path};
  pthread_t th;
  rc = rc || pthread_create(&th, NULL, writer_main, &w);
  usleep(100000);
  t0 = now();
  rc = rc || (compact ? store_compact(s, NULL, &e) : sdb_exec(s, "PRAGMA incremental_vacuum", &e));
  double t_vac = now() - t0;
  usleep(100000);
  atomic_store(&w.stop, 1);
  pthread_join(th, NULL);
  if (rc || w.failed) fprintf(stderr, "failed: %s%s\n", e.msg, w.failed ? " (the other writer failed)" : "");
  else
    printf("secure_delete=%-4s %zu MB: store_gc %.3f s; the next push grew the file %.1f MB; %.0f MB returned by %s in %.2f s, "
           "the other writer's longest wait %.3f s (%d writes)\n",
           mode, mb, t_gc, (double)grew * psize / 1e6, (double)free_pages * psize / 1e6,
           compact ? "store_compact" : "one incremental_vacuum", t_vac, w.worst, w.writes);
  store_close(s);
  if (system(rm) != 0) return -1;
  return rc || w.failed;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s DIR [MB] [ROUNDS]\n", argv[0]); return 2; }
  size_t mb = argc > 2 ? (size_t)atol(argv[2]) : 448;
  int rounds = argc > 3 ? atoi(argv[3]) : 3, tag = 0;
  unsigned char *data = malloc(mb << 20);
  if (!data) return 1;
  for (size_t i = 0; i < mb << 20; i++) data[i] = (unsigned char)(i * 2654435761u >> 13);
  for (int r = 0; r < rounds; r++)
    if (round_of(argv[1], "ON", 0, mb, data, &tag) || round_of(argv[1], "FAST", 1, mb, data, &tag)) return 1;
  free(data);
  return 0;
}
