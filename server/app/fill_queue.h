/* The queue of requests for one loaded fill-mask model, answered by one runner
** thread in passes, strictly in arrival order: a pass takes the oldest waiting
** jobs while their summed cost fits the pass's budget (the oldest always goes,
** whatever its cost), so no job is ever overtaken by a later one and the wait
** behind the running pass is bounded by the budget. Request threads block in
** fill_queue_submit() until their job is answered; any number may wait, each on
** its own condition variable (no wake-up storm when a pass ends). */
#ifndef MASKD_FILL_QUEUE_H
#define MASKD_FILL_QUEUE_H
#include <pthread.h>
#include "engine/core/err.h"

typedef struct FillJob {
  void *data;               /* the caller's request: the pass function answers it */
  int cost;                 /* what it adds to a pass (its tokens) */
  /* The queue's own, set by fill_queue_submit(): */
  int state;
  int parked;               /* past its deadline while the runner was idle: waits for its pass */
  unsigned long ticket;     /* arrival order: 1, 2, ... as jobs joined the queue */
  pthread_cond_t done;
  struct FillJob *next;
} FillJob;

/* Answers jobs[0..n) (oldest first), in the runner thread. */
typedef void (*FillPassFn)(void *ctx, FillJob *const *jobs, int n);

typedef struct FillQueue FillQueue;

/* Starts the runner. A pass carries at most max_jobs jobs (1: one at a time) whose
** costs sum to at most budget, after waiting window_us for more to arrive (0: none). */
FillQueue *fill_queue_start(FillPassFn fn, void *ctx, int max_jobs, long budget, int window_us, Err *err);
/* Queues job (data and cost set, the rest zero) at the tail and returns 0 once fn has
** answered it, or -1 when deadline (CLOCK_MONOTONIC seconds; 0: none) passed while it
** still waited behind a pass the runner was busy with: it is then taken out,
** unanswered. A job already in a pass is answered whatever the time, and so is one
** whose deadline passes while the runner is idle, as long as the runner's next pass
** takes it (a job that pass leaves behind is taken out then). */
int fill_queue_submit(FillQueue *q, FillJob *job, double deadline);
/* Jobs waiting, not yet in a pass. */
int fill_queue_waiting(FillQueue *q);
/* Stops and joins the runner and frees the queue; no job may be waiting; NULL allowed. */
void fill_queue_stop(FillQueue *q);

#endif
