/* A job's progress in the store (server/cli/job_progress.h). */
#include "server/cli/job_progress.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/now.h"

#define WRITE_INTERVAL 0.5
#define MAX_FAILURES 3

int job_progress_open(JobProgress *p, const char *db_path, int64_t job) {
  memset(p, 0, sizeof *p);
  p->job = job;
  p->last_report = now_monotonic();
  Err e = {0};
  p->db = store_open(db_path, &e);
  if (!p->db) fprintf(stderr, "job progress: not recorded: %s\n", e.msg);
  return 0;
}

static json_t *number_or_null(double v) { return v >= 0 ? json_real(v) : json_null(); }

static void write_now(JobProgress *p, double now) {
  p->last_write = now;
  p->pending = 0;
  if (!p->db || p->failures >= MAX_FAILURES) return;
  double dt = now - p->phase_t0, rate = dt > 0.05 ? p->done / dt : -1;
  double eta = p->total >= 0 && rate > 0 ? (p->total - p->done > 0 ? (p->total - p->done) / rate : 0) : -1;
  json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:o, s:o}", "phase", p->phase, "done", json_real(p->done), "total",
                        number_or_null(p->total), "unit", p->unit, "rate", number_or_null(rate), "eta_s", number_or_null(eta));
  char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
  Err e = {0};
  if (!text || store_job_progress(p->db, p->job, text, &e)) {
    if (++p->failures == MAX_FAILURES) fprintf(stderr, "job progress: no longer recorded: %s\n", text ? e.msg : "out of memory");
  }
  free(text);
  json_decref(o);
}

void job_progress_report(void *ctx, const char *phase, double done, double total, const char *unit) {
  JobProgress *p = ctx;
  double now = now_monotonic();
  if (strncmp(p->phase, phase, sizeof p->phase - 1)) {   /* another phase: its start, kept or begun */
    snprintf(p->phase, sizeof p->phase, "%s", phase);
    int i = 0;
    while (i < p->n_phases && strcmp(p->phases[i].name, p->phase)) i++;
    if (i == p->n_phases && i < (int)(sizeof p->phases / sizeof p->phases[0])) {
      snprintf(p->phases[i].name, sizeof p->phases[i].name, "%s", p->phase);
      p->phases[i].t0 = p->last_report;
      p->n_phases++;
    }
    p->phase_t0 = i < p->n_phases ? p->phases[i].t0 : p->last_report;
  }
  p->last_report = now;
  snprintf(p->unit, sizeof p->unit, "%s", unit);
  p->done = done;
  p->total = total;
  p->pending = 1;
  if (now - p->last_write >= WRITE_INTERVAL) write_now(p, now);
}

void job_progress_close(JobProgress *p) {
  if (!p) return;
  if (p->pending) write_now(p, now_monotonic());
  store_close(p->db);
  p->db = NULL;
}
