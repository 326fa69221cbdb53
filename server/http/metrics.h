/* Prometheus metrics of maskd serve: requests by route, method and status, request,
** fill-mask and text-classification latency histograms and passes, training throughput. Thread-safe; rendered in
** the Prometheus text exposition format (version 0.0.4) by metrics_render(). */
#ifndef MASKD_METRICS_H
#define MASKD_METRICS_H
#include <stddef.h>

typedef struct Metrics Metrics;

/* A new, empty set; NULL when out of memory. */
Metrics *metrics_new(void);
/* Frees; NULL allowed. */
void metrics_free(Metrics *m);
/* Counts one finished request. route must outlive m and be one of a fixed set (the
** server's route patterns and labels); a method other than GET, HEAD, POST, PUT,
** DELETE, PATCH, OPTIONS counts as "other". */
void metrics_request(Metrics *m, const char *route, const char *method, int status, double seconds);
/* The label a method is counted under: itself when known, else "other" (static strings). */
const char *metrics_method_label(const char *method);
/* Records one fill-mask computation's latency (model lookup to answer). */
void metrics_fill_mask(Metrics *m, double seconds);
/* Counts one fill-mask forward pass that answered requests requests (> 1: batched). */
void metrics_fill_pass(Metrics *m, int requests);
/* The same two for text-classification, counted apart from fill-mask's. */
void metrics_textclass(Metrics *m, double seconds);
void metrics_textclass_pass(Metrics *m, int requests);
/* Sets the tokens/s of the running training job (0 when none runs). */
void metrics_training(Metrics *m, double tokens_per_s);
/* Sets an info family: "name{k1="v1",...} 1" under its HELP and TYPE gauge lines,
** rendered after the built-in families. labels is key, value, key, value, ...,
** NULL; keys must be valid label names, values may hold anything (escaped here).
** A second call with the same name replaces it. 0, or -1 when out of memory or
** when name or a key is not a Prometheus name. */
int metrics_info(Metrics *m, const char *name, const char *help, const char *const *labels);
/* The exposition text (malloc'd), with extra (more families, already formatted; may be NULL) appended. */
char *metrics_render(Metrics *m, const char *extra);

#endif
