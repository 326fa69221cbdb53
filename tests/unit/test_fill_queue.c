/* Unit tests of server/fill_queue: requests answered strictly in arrival order
** across passes, from many threads; passes filled oldest-first up to their budget
** (and never past it but for a lone job); a job whose deadline passes while it
** waits behind a busy runner leaves the queue without disturbing the others, and one
** past it at an idle runner is answered; one at a time without
** batching. Arrival order is the queue's ticket, handed out under its lock. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/now.h"
#include "server/app/fill_queue.h"
#include "tests/unit/check.h"

/* What the pass function saw, and a gate that can hold the runner in a pass. */
typedef struct Log {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int gate_closed, in_pass;
  long budget;
  int max_jobs;
  int n_passes, n_jobs;
  int order[4096];           /* the jobs' ids in the order passes carried them */
  int pass_start[4096];      /* index into order where each pass began */
  int pass_cost[4096];
  unsigned long last_ticket;
  int overtaken, over_budget, over_size;
} Log;

typedef struct Req { int id; int answered; } Req;

static void pass_fn(void *ctx, FillJob *const *jobs, int n) {
  Log *l = ctx;
  pthread_mutex_lock(&l->mu);
  l->in_pass = 1;
  pthread_cond_broadcast(&l->cv);
  while (l->gate_closed) pthread_cond_wait(&l->cv, &l->mu);
  int cost = 0;
  l->pass_start[l->n_passes] = l->n_jobs;
  for (int i = 0; i < n; i++) {
    Req *r = jobs[i]->data;
    if (jobs[i]->ticket <= l->last_ticket) l->overtaken++;
    l->last_ticket = jobs[i]->ticket;
    cost += jobs[i]->cost;
    if (l->n_jobs < 4096) l->order[l->n_jobs++] = r->id;
    r->answered = 1;
  }
  if (n > 1 && cost > l->budget) l->over_budget++;
  if (n > l->max_jobs) l->over_size++;
  if (l->n_passes < 4095) l->pass_cost[l->n_passes++] = cost;
  l->in_pass = 0;
  pthread_mutex_unlock(&l->mu);
}

static void log_init(Log *l, long budget, int max_jobs) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
  l->budget = budget;
  l->max_jobs = max_jobs;
}

static void gate(Log *l, int closed) {
  pthread_mutex_lock(&l->mu);
  l->gate_closed = closed;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

static void wait_in_pass(Log *l) {
  pthread_mutex_lock(&l->mu);
  while (!l->in_pass) pthread_cond_wait(&l->cv, &l->mu);
  pthread_mutex_unlock(&l->mu);
}

typedef struct Client {
  FillQueue *q;
  Req req;
  FillJob job;
  double deadline;
  int rc;
  int repeat;                /* stress: submissions one after another */
  int cost_seed;
  int bad_answer;
} Client;

static void *client_main(void *arg) {
  Client *c = arg;
  c->rc = fill_queue_submit(c->q, &c->job, c->deadline);
  return NULL;
}

/* Jobs queued one at a time behind a held pass, then released: the passes carry them
** in exactly that order, each filled oldest-first while the next fits the budget. */
static void test_order_and_budget(void) {
  enum { N = 40 };
  const long budget = 50;
  Log l;
  log_init(&l, budget, 8);
  FillQueue *q = fill_queue_start(pass_fn, &l, 8, budget, 0, NULL);
  if (!q) { check(0, "fill_queue_start", "no queue"); return; }
  Client cl[N + 1];
  pthread_t th[N + 1];
  memset(cl, 0, sizeof cl);
  srand(3);
  gate(&l, 1);
  for (int i = 0; i <= N; i++) {
    cl[i].q = q;
    cl[i].req.id = i;
    cl[i].job.data = &cl[i].req;
    cl[i].job.cost = i == 7 ? 80 : 1 + rand() % 20;   /* one job alone over the budget */
    pthread_create(&th[i], NULL, client_main, &cl[i]);
    if (i == 0) { wait_in_pass(&l); continue; }   /* job 0 holds the runner */
    while (fill_queue_waiting(q) < i) usleep(200);  /* job i is queued before i + 1 starts */
  }
  gate(&l, 0);
  for (int i = 0; i <= N; i++) pthread_join(th[i], NULL);
  int in_order = l.n_jobs == N + 1, answered = 1;
  for (int i = 0; i <= N; i++) { in_order = in_order && l.order[i] == i; answered = answered && cl[i].req.answered && !cl[i].rc; }
  check(in_order && !l.overtaken, "fill_queue_fifo_order", "%d jobs answered, %d overtaken", l.n_jobs, l.overtaken);
  check(answered, "fill_queue_all_answered", "a submit returned before its job was answered");
  check(!l.over_budget && !l.over_size, "fill_queue_pass_budget", "%d passes over the budget, %d over the size",
        l.over_budget, l.over_size);
  /* Greedy: every pass after the held one stopped only because the next job did not fit. */
  int greedy = 1;
  for (int p = 1; p + 1 < l.n_passes; p++) {
    int n = l.pass_start[p + 1] - l.pass_start[p];
    int next = l.order[l.pass_start[p + 1]];
    greedy = greedy && (n == 8 || l.pass_cost[p] + cl[next].job.cost > budget);
  }
  check(greedy && l.n_passes > 3, "fill_queue_passes_full", "%d passes, one stopped early", l.n_passes);
  fill_queue_stop(q);
}

/* Many threads submitting at once, again and again: the passes see the tickets
** 1, 2, 3, ... with none skipped, so nothing is overtaken whatever the interleaving. */
static void *stress_main(void *arg) {
  Client *c = arg;
  unsigned seed = (unsigned)c->cost_seed;
  for (int i = 0; i < c->repeat; i++) {
    Req r = {c->req.id, 0};
    FillJob j = {.data = &r, .cost = 1 + (int)(rand_r(&seed) % 30)};
    if (fill_queue_submit(c->q, &j, 0) || !r.answered) c->bad_answer++;
  }
  return NULL;
}

static void test_stress(void) {
  enum { T = 12, R = 150 };
  Log l;
  log_init(&l, 64, 16);
  FillQueue *q = fill_queue_start(pass_fn, &l, 16, 64, 0, NULL);
  Client cl[T];
  pthread_t th[T];
  memset(cl, 0, sizeof cl);
  for (int i = 0; i < T; i++) {
    cl[i].q = q;
    cl[i].req.id = i;
    cl[i].repeat = R;
    cl[i].cost_seed = i + 1;
    pthread_create(&th[i], NULL, stress_main, &cl[i]);
  }
  int bad = 0;
  for (int i = 0; i < T; i++) { pthread_join(th[i], NULL); bad += cl[i].bad_answer; }
  check(!l.overtaken && l.last_ticket == (unsigned long)T * R && l.n_jobs == T * R && !bad, "fill_queue_fifo_threads",
        "%d overtaken, last ticket %lu of %d, %d answered, %d bad", l.overtaken, l.last_ticket, T * R, l.n_jobs, bad);
  check(!l.over_budget && !l.over_size && l.n_passes < T * R, "fill_queue_threads_batched",
        "%d passes for %d jobs, %d over budget", l.n_passes, T * R, l.over_budget);
  fill_queue_stop(q);
}

/* A job whose deadline passes while it waits comes back -1, unanswered, at about
** its deadline; the jobs before and after it are answered in order. */
static void test_deadline(void) {
  Log l;
  log_init(&l, 100, 8);
  FillQueue *q = fill_queue_start(pass_fn, &l, 8, 100, 0, NULL);
  Client cl[3];
  pthread_t th[3];
  memset(cl, 0, sizeof cl);
  gate(&l, 1);
  for (int i = 0; i < 3; i++) {
    cl[i].q = q;
    cl[i].req.id = i;
    cl[i].job.data = &cl[i].req;
    cl[i].job.cost = 1;
  }
  pthread_create(&th[0], NULL, client_main, &cl[0]);
  wait_in_pass(&l);
  double t0 = now_monotonic();
  cl[1].deadline = t0 + 0.1;
  pthread_create(&th[1], NULL, client_main, &cl[1]);
  while (fill_queue_waiting(q) < 1) usleep(200);
  pthread_create(&th[2], NULL, client_main, &cl[2]);
  pthread_join(th[1], NULL);
  double waited = now_monotonic() - t0;
  int left = fill_queue_waiting(q);
  gate(&l, 0);
  pthread_join(th[0], NULL);
  pthread_join(th[2], NULL);
  check(cl[1].rc == -1 && !cl[1].req.answered && waited >= 0.09 && waited < 2 && left == 1, "fill_queue_deadline",
        "rc %d, answered %d, waited %.3f s, %d left waiting", cl[1].rc, cl[1].req.answered, waited, left);
  check(cl[0].rc == 0 && cl[2].rc == 0 && l.n_jobs == 2 && l.order[0] == 0 && l.order[1] == 2, "fill_queue_deadline_others",
        "rc %d %d, %d answered", cl[0].rc, cl[2].rc, l.n_jobs);
  fill_queue_stop(q);
}

/* A deadline counts the wait behind a busy runner only: a job whose deadline has
** already passed when it reaches an idle runner (maskd serve's first request after a
** slow model load was refused so, "busy" with the model idle) is answered. */
static void test_deadline_idle_runner(void) {
  Log l;
  log_init(&l, 100, 8);
  FillQueue *q = fill_queue_start(pass_fn, &l, 8, 100, 0, NULL);
  int answered = 0;
  for (int i = 0; i < 20; i++) {
    Req r = {i, 0};
    FillJob j = {.data = &r, .cost = 1};
    answered += fill_queue_submit(q, &j, now_monotonic() - 1) == 0 && r.answered;
  }
  check(answered == 20, "fill_queue_deadline_idle_runner", "%d of 20 jobs past their deadline answered by an idle runner",
        answered);
  fill_queue_stop(q);
}

/* A job in a pass that outlasts its deadline sleeps until it is answered: its timed
** wait, past the deadline, must not return at once again and again (a spin on the
** queue's lock for the whole pass). */
static void test_deadline_in_pass_sleeps(void) {
  Log l;
  log_init(&l, 100, 8);
  FillQueue *q = fill_queue_start(pass_fn, &l, 8, 100, 0, NULL);
  Client c;
  memset(&c, 0, sizeof c);
  c.q = q;
  c.job.data = &c.req;
  c.job.cost = 1;
  c.deadline = now_monotonic() + 0.01;
  gate(&l, 1);
  pthread_t th;
  pthread_create(&th, NULL, client_main, &c);
  wait_in_pass(&l);
  struct timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  usleep(300000);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  gate(&l, 0);
  pthread_join(th, NULL);
  double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
  check(c.rc == 0 && c.req.answered && cpu < 0.05, "fill_queue_deadline_in_pass_sleeps",
        "rc %d, answered %d, %.3f s of CPU while the pass was held 0.3 s", c.rc, c.req.answered, cpu);
  fill_queue_stop(q);
}

/* max_jobs 1 (--no-batch): one job per pass, still in order. */
static void test_one_at_a_time(void) {
  enum { N = 6 };
  Log l;
  log_init(&l, 1000, 1);
  FillQueue *q = fill_queue_start(pass_fn, &l, 1, 1000, 0, NULL);
  Client cl[N];
  pthread_t th[N];
  memset(cl, 0, sizeof cl);
  gate(&l, 1);
  for (int i = 0; i < N; i++) {
    cl[i].q = q;
    cl[i].req.id = i;
    cl[i].job.data = &cl[i].req;
    cl[i].job.cost = 1;
    pthread_create(&th[i], NULL, client_main, &cl[i]);
    if (i == 0) wait_in_pass(&l);
    else while (fill_queue_waiting(q) < i) usleep(200);
  }
  gate(&l, 0);
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  int ok = l.n_passes == N && l.n_jobs == N && !l.over_size;
  for (int i = 0; ok && i < N; i++) ok = l.order[i] == i;
  check(ok, "fill_queue_unbatched", "%d passes for %d jobs", l.n_passes, l.n_jobs);
  fill_queue_stop(q);
}

int main(void) {
  test_order_and_budget();
  test_stress();
  test_deadline();
  test_deadline_idle_runner();
  test_deadline_in_pass_sleeps();
  test_one_at_a_time();
  return check_exit();
}
