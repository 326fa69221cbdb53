/* Prometheus counters and histograms (server/http/metrics.h). */
#include "server/http/metrics.h"
#include "engine/core/buf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prometheus' default buckets, which span a cached fill-mask (milliseconds) to a cold model load (seconds). */
static const double bucket_le[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define N_BUCKETS ((int)(sizeof bucket_le / sizeof bucket_le[0]))

typedef struct Hist {
  unsigned long long count[N_BUCKETS + 1];  /* per bucket (not cumulative); the last is +Inf */
  unsigned long long n;
  double sum;
} Hist;

/* Series are labelled by what the server knows, never by what a client sent: the
** route's pattern (the server's own strings), a known method or "other", and the
** status; so their number is bounded whatever clients send. */
typedef struct Counter {
  const char *route;
  const char *method;       /* one of known_methods, or "other" */
  int status;
  unsigned long long n;
} Counter;

/* A family set by metrics_info(), kept as its exposition text. */
typedef struct Info {
  char *name;
  char *text;
} Info;

static const char *const known_methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};

const char *metrics_method_label(const char *method) {
  for (size_t i = 0; i < sizeof known_methods / sizeof known_methods[0]; i++)
    if (!strcmp(method, known_methods[i])) return known_methods[i];
  return "other";
}

/* A served pipeline's latency and passes (a forward pass over one or more requests). */
typedef struct Pipeline {
  Hist latency;
  unsigned long long passes, batched;   /* batched: requests answered in a pass shared with others */
} Pipeline;

struct Metrics {
  pthread_mutex_t mu;
  Counter *c;
  int n, cap;
  Hist requests;
  Pipeline fill, textclass;
  double tokens_per_s;
  Info *info;               /* metrics_info's families, set once at start and rarely more */
  int n_info;
};

Metrics *metrics_new(void) {
  Metrics *m = calloc(1, sizeof *m);
  if (m) pthread_mutex_init(&m->mu, NULL);
  return m;
}

void metrics_free(Metrics *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->mu);
  for (int i = 0; i < m->n_info; i++) free(m->info[i].name), free(m->info[i].text);
  free(m->info);
  free(m->c);
  free(m);
}

static void hist_add(Hist *h, double v) {
  int i = 0;
  while (i < N_BUCKETS && v > bucket_le[i]) i++;
  h->count[i]++;
  h->n++;
  h->sum += v;
}

void metrics_request(Metrics *m, const char *route, const char *method, int status, double seconds) {
  pthread_mutex_lock(&m->mu);
  hist_add(&m->requests, seconds);
  const char *label = metrics_method_label(method);
  if (status < 100 || status > 599) status = 0;
  int i = 0;
  while (i < m->n && !(m->c[i].route == route && m->c[i].status == status && m->c[i].method == label)) i++;
  if (i == m->n) {
    if (m->n == m->cap) {
      int cap = m->cap ? 2 * m->cap : 32;
      Counter *c = realloc(m->c, (size_t)cap * sizeof *c);
      if (!c) { pthread_mutex_unlock(&m->mu); return; }
      m->c = c;
      m->cap = cap;
    }
    m->c[i].route = route;
    m->c[i].method = label;
    m->c[i].status = status;
    m->c[i].n = 0;
    m->n++;
  }
  m->c[i].n++;
  pthread_mutex_unlock(&m->mu);
}

static void pipeline_latency(Metrics *m, Pipeline *p, double seconds) {
  pthread_mutex_lock(&m->mu);
  hist_add(&p->latency, seconds);
  pthread_mutex_unlock(&m->mu);
}

static void pipeline_pass(Metrics *m, Pipeline *p, int requests) {
  pthread_mutex_lock(&m->mu);
  p->passes++;
  if (requests > 1) p->batched += (unsigned long long)requests;
  pthread_mutex_unlock(&m->mu);
}

void metrics_fill_mask(Metrics *m, double seconds) { pipeline_latency(m, &m->fill, seconds); }
void metrics_fill_pass(Metrics *m, int requests) { pipeline_pass(m, &m->fill, requests); }
void metrics_textclass(Metrics *m, double seconds) { pipeline_latency(m, &m->textclass, seconds); }
void metrics_textclass_pass(Metrics *m, int requests) { pipeline_pass(m, &m->textclass, requests); }


void metrics_training(Metrics *m, double tokens_per_s) {
  pthread_mutex_lock(&m->mu);
  m->tokens_per_s = tokens_per_s;
  pthread_mutex_unlock(&m->mu);
}

static void hist_render(Buf *b, const char *name, const char *help, const Hist *h) {
  buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  unsigned long long cum = 0;
  for (int i = 0; i < N_BUCKETS; i++) {
    cum += h->count[i];
    buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, bucket_le[i], cum);
  }
  buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, h->n, name, h->sum, name, h->n);
}

/* A pipeline's three families: maskd_NAME_duration_seconds, _passes_total, _batched_requests_total. */
static void pipeline_render(Buf *b, const char *name, const char *title, const Pipeline *p) {
  char family[96], help[160];
  snprintf(family, sizeof family, "maskd_%s_duration_seconds", name);
  snprintf(help, sizeof help, "%s latency: model lookup, forward pass and answer.", title);
  hist_render(b, family, help, &p->latency);
  buf_printf(b, "# HELP maskd_%s_passes_total %s pipeline calls (forward passes over one or more requests).\n"
             "# TYPE maskd_%s_passes_total counter\nmaskd_%s_passes_total %llu\n"
             "# HELP maskd_%s_batched_requests_total Requests answered in a pass shared with others.\n"
             "# TYPE maskd_%s_batched_requests_total counter\nmaskd_%s_batched_requests_total %llu\n",
             name, title, name, name, p->passes, name, name, name, p->batched);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]*: a metric name. Label names may not hold ":"; the keys
** are the caller's constants, so this one check serves both. */
static int prom_name_ok(const char *s) {
  if (!s || !*s || (*s >= '0' && *s <= '9')) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == ':'))
      return 0;
  return 1;
}

/* A label value as the text format requires: backslash, double quote and line feed escaped. */
static void label_value(Buf *b, const char *v) {
  for (; *v; v++)
    if (*v == '\\') buf_printf(b, "\\\\");
    else if (*v == '"') buf_printf(b, "\\\"");
    else if (*v == '\n') buf_printf(b, "\\n");
    else buf_printf(b, "%c", *v);
}

int metrics_info(Metrics *m, const char *name, const char *help, const char *const *labels) {
  if (!prom_name_ok(name)) return -1;
  Buf b = {0};
  buf_printf(&b, "# HELP %s ", name);
  for (const char *h = help ? help : ""; *h; h++)   /* HELP text escapes backslash and line feed */
    if (*h == '\\') buf_printf(&b, "\\\\");
    else if (*h == '\n') buf_printf(&b, "\\n");
    else buf_printf(&b, "%c", *h);
  buf_printf(&b, "\n# TYPE %s gauge\n%s{", name, name);
  for (int i = 0; labels && labels[i]; i += 2) {
    if (!prom_name_ok(labels[i]) || !labels[i + 1]) { buf_free(&b); return -1; }
    buf_printf(&b, "%s%s=\"", i ? "," : "", labels[i]);
    label_value(&b, labels[i + 1]);
    buf_printf(&b, "\"");
  }
  buf_printf(&b, "} 1\n");
  char *copy = strdup(name);
  if (b.oom || !copy) { buf_free(&b); free(copy); return -1; }
  pthread_mutex_lock(&m->mu);
  int i = 0;
  while (i < m->n_info && strcmp(m->info[i].name, name)) i++;
  if (i < m->n_info) {
    free(m->info[i].name), free(m->info[i].text);
  } else {
    Info *grown = realloc(m->info, (size_t)(m->n_info + 1) * sizeof *grown);
    if (!grown) { pthread_mutex_unlock(&m->mu); buf_free(&b); free(copy); return -1; }
    m->info = grown;
    m->n_info++;
  }
  m->info[i] = (Info){copy, b.p};
  pthread_mutex_unlock(&m->mu);
  return 0;
}

char *metrics_render(Metrics *m, const char *extra) {
  Buf b = {0};
  if (buf_reserve(&b, 8192)) return NULL;   /* room for the usual text, allocated before the lock */
  pthread_mutex_lock(&m->mu);
  buf_printf(&b, "# HELP maskd_http_requests_total HTTP requests answered, by route pattern, method and status.\n"
              "# TYPE maskd_http_requests_total counter\n");
  for (int i = 0; i < m->n; i++)
    buf_printf(&b, "maskd_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n", m->c[i].route,
            m->c[i].method, m->c[i].status, m->c[i].n);
  hist_render(&b, "maskd_http_request_duration_seconds", "Time from request headers to the queued answer.",
              &m->requests);
  pipeline_render(&b, "fill_mask", "Fill-mask", &m->fill);
  pipeline_render(&b, "text_classification", "Text-classification", &m->textclass);
  buf_printf(&b, "# HELP maskd_training_tokens_per_second Throughput of the running training job (0 when none).\n"
              "# TYPE maskd_training_tokens_per_second gauge\nmaskd_training_tokens_per_second %.6g\n",
          m->tokens_per_s);
  for (int i = 0; i < m->n_info; i++) buf_printf(&b, "%s", m->info[i].text);
  pthread_mutex_unlock(&m->mu);
  if (extra) buf_printf(&b, "%s", extra);
  if (b.oom) { buf_free(&b); return NULL; }
  return b.p;
}
