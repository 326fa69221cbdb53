/* The fill-mask request queue (see fill_queue.h). */
#include "server/app/fill_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { JOB_QUEUED = 1, JOB_TAKEN, JOB_DONE };

struct FillQueue {
  FillPassFn fn;
  void *ctx;
  int max_jobs;
  long budget;
  int window_us;
  pthread_mutex_t lock;     /* guards everything below and the queued jobs' state */
  pthread_cond_t work;      /* the runner waits here for jobs */
  FillJob *head, *tail;     /* oldest first */
  int waiting;
  int busy;                 /* the runner has taken a pass (its window included) and not yet answered it */
  int parked;               /* jobs past their deadline waiting, untimed, for the idle runner to take them */
  int stop;
  unsigned long tickets;
  FillJob **pass;           /* the runner's: the jobs of the current pass */
  pthread_t runner;
};

/* Moves the oldest waiting jobs into pass[*n..) while they fit (the first always does). */
static void take(FillQueue *q, FillJob **pass, int *n, long *cost) {
  while (q->head && *n < q->max_jobs && (*n == 0 || *cost + q->head->cost <= q->budget)) {
    FillJob *j = q->head;
    q->head = j->next;
    if (!q->head) q->tail = NULL;
    q->waiting--;
    j->next = NULL;
    j->state = JOB_TAKEN;
    if (j->parked) { j->parked = 0; q->parked--; }
    *cost += j->cost;
    pass[(*n)++] = j;
  }
}

static void *runner_main(void *arg) {
  FillQueue *q = arg;
  FillJob **pass = q->pass;
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while (!q->head && !q->stop) pthread_cond_wait(&q->work, &q->lock);
    if (q->stop) break;
    int n = 0;
    long cost = 0;
    take(q, pass, &n, &cost);
    q->busy = 1;
    /* Jobs whose deadline passed while the runner was idle waited for this pass; those
    ** it left behind now wait behind a busy runner, so they go (fill_queue_submit). */
    if (q->parked)
      for (FillJob *j = q->head; j; j = j->next)
        if (j->parked) { j->parked = 0; q->parked--; pthread_cond_signal(&j->done); }
    if (q->window_us > 0 && n < q->max_jobs && cost < q->budget) {
      /* The pass has begun with the jobs taken; later ones may join it for a while. */
      pthread_mutex_unlock(&q->lock);
      usleep((useconds_t)q->window_us);
      pthread_mutex_lock(&q->lock);
      take(q, pass, &n, &cost);
    }
    pthread_mutex_unlock(&q->lock);
    q->fn(q->ctx, pass, n);
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < n; i++) {
      pass[i]->state = JOB_DONE;
      pthread_cond_signal(&pass[i]->done);
    }
    q->busy = 0;
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

FillQueue *fill_queue_start(FillPassFn fn, void *ctx, int max_jobs, long budget, int window_us, Err *err) {
  FillQueue *q = calloc(1, sizeof *q);
  if (!q) { err_set(err, "out of memory"); return NULL; }
  q->fn = fn;
  q->ctx = ctx;
  q->max_jobs = max_jobs > 0 ? max_jobs : 1;
  q->budget = budget;
  q->window_us = window_us;
  if (!(q->pass = malloc(sizeof *q->pass * (size_t)q->max_jobs))) { free(q); err_set(err, "out of memory"); return NULL; }
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->work, NULL);
  if (pthread_create(&q->runner, NULL, runner_main, q)) {
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->work);
    free(q->pass);
    free(q);
    err_set(err, "cannot start a thread for the model");
    return NULL;
  }
  return q;
}

int fill_queue_submit(FillQueue *q, FillJob *job, double deadline) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&job->done, &ca);
  pthread_condattr_destroy(&ca);
  int late = 0;
  pthread_mutex_lock(&q->lock);
  job->state = JOB_QUEUED;
  job->parked = 0;
  job->next = NULL;
  job->ticket = ++q->tickets;
  if (q->tail) q->tail->next = job; else q->head = job;
  q->tail = job;
  q->waiting++;
  pthread_cond_signal(&q->work);
  while (job->state != JOB_DONE) {
    /* No deadline, a job in a pass (answered whatever the time) and a parked one wait
    ** for a signal: a timed wait past the deadline would return at once, again and
    ** again, spinning on the lock the runner needs. */
    if (deadline <= 0 || job->state != JOB_QUEUED || job->parked) { pthread_cond_wait(&job->done, &q->lock); continue; }
    struct timespec ts = {(time_t)deadline, (long)((deadline - (double)(time_t)deadline) * 1e9)};
    if (pthread_cond_timedwait(&job->done, &q->lock, &ts) != ETIMEDOUT || job->state != JOB_QUEUED) continue;
    if (!q->busy) {
      /* The runner is idle (or has just been woken): the job waits for no one, and the
      ** runner's next pass takes the oldest jobs, this one among them unless the pass is
      ** full; the runner signals it if not. */
      job->parked = 1;
      q->parked++;
      continue;
    }
    FillJob *prev = NULL, *j = q->head;
    while (j && j != job) { prev = j; j = j->next; }
    if (prev) prev->next = job->next; else q->head = job->next;
    if (q->tail == job) q->tail = prev;
    q->waiting--;
    late = 1;
    break;
  }
  pthread_mutex_unlock(&q->lock);
  pthread_cond_destroy(&job->done);
  return late ? -1 : 0;
}

int fill_queue_waiting(FillQueue *q) {
  pthread_mutex_lock(&q->lock);
  int n = q->waiting;
  pthread_mutex_unlock(&q->lock);
  return n;
}

void fill_queue_stop(FillQueue *q) {
  if (!q) return;
  pthread_mutex_lock(&q->lock);
  q->stop = 1;
  pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->lock);
  pthread_join(q->runner, NULL);
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->work);
  free(q->pass);
  free(q);
}
