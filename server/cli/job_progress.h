/* A job's progress in the store: what maskd tokenizer train and maskd prepare, run by
** maskd serve's worker with --job, report while they work (engine/core/report.h), kept
** as the job's "progress" (GET /jobs/{id}): {"phase", "done", "total" (or null), "unit",
** "rate" (units per second since the phase began, or null), "eta_s" (or null)}. Written at most
** about twice a second; the newest report not yet written is written when the progress
** is closed, so a finished job shows its last. A write that fails is skipped (the job
** goes on), and after a few failures no more are tried. */
#ifndef MASKD_JOB_PROGRESS_H
#define MASKD_JOB_PROGRESS_H
#include <stdint.h>
#include "engine/core/err.h"
#include "store/store.h"

typedef struct JobProgress {
  Store *db;                 /* its own connection; NULL: reports are dropped */
  int64_t job;
  char phase[64], unit[32];
  double done, total;        /* the newest report */
  /* Each phase's start, for its rate: the end of the phase before it (a phase that comes
  ** back, as EM iterations between prunings, keeps its first start). */
  struct { char name[64]; double t0; } phases[8];
  int n_phases;
  double phase_t0;           /* the newest report's phase's */
  double last_report, last_write;
  int pending;               /* the newest report is not written yet */
  int failures;
} JobProgress;

/* Opens the store at db_path for job's reports; on failure p drops them (0 either way:
** progress never fails a job; the reason goes to stderr). */
int job_progress_open(JobProgress *p, const char *db_path, int64_t job);
/* A ReportFn (ctx: the JobProgress). */
void job_progress_report(void *ctx, const char *phase, double done, double total, const char *unit);
/* Writes the pending report and closes the connection; safe on a zeroed one. */
void job_progress_close(JobProgress *p);

#endif
