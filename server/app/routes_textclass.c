/* POST /text-classification: the Hugging Face Inference API's request shape
** ({"inputs": str | [str], "parameters": {"top_k", "function_to_apply", "truncation"},
** "model": "name[@rev]"}) answered exactly as pipeline("text-classification") does
** (engine/infer/textclass.h). POST /models/{name}: the Inference API's own URL, which
** answers the pipeline the model is for (fill-mask for a masked LM, text-classification
** for a classifier). Both go through the fill-mask route's cache and queues
** (routes_fill.c, app_serve_pipeline): one loaded revision, one queue, one pass at a time. */
#include <stdio.h>
#include <string.h>

#include "server/app/app.h"

void route_text_classification(void *app, HttpReq *rq, HttpRes *rs) {
  app_serve_pipeline(app, APP_TEXT_CLASSIFICATION, NULL, rq, rs);
}

void route_model_pipeline(void *app, HttpReq *rq, HttpRes *rs) {
  char name[260];
  if (app_path_repo(rq, 0, name, sizeof name)) {
    http_error(rs, 404, "no such model (the name is too long)", NULL);
    return;
  }
  const char *rev = http_query(rq, "revision");
  char spec[300];
  /* The Hub's form names the revision apart (?revision=); "name@rev" in the path works too. */
  if (rev && strchr(name, '@')) {
    http_error(rs, 422, "give the revision once: in the path (name@rev) or as ?revision=",
               json_pack("{s:s, s:s}", "model", name, "revision", rev));
    return;
  }
  if (rev && !rev[0]) { http_error(rs, 422, "?revision= is empty", json_pack("{s:s}", "model", name)); return; }
  int n = rev ? snprintf(spec, sizeof spec, "%s@%s", name, rev) : snprintf(spec, sizeof spec, "%s", name);
  if (n < 0 || (size_t)n >= sizeof spec) {
    http_error(rs, 404, "no such model (the name is too long)", json_pack("{s:s}", "model", name));
    return;
  }
  app_serve_pipeline(app, APP_PIPELINE_ANY, spec, rq, rs);
}
