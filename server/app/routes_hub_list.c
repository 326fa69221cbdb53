/* The Hugging Face Hub's listings and identity over the store, as the official clients
** read them (@huggingface/hub's listModels, listCommits, countCommits, whoAmI;
** huggingface_hub's list_models, list_repo_commits, list_repo_refs, whoami):
** GET /api/models, /api/models/{repo}/commits/{rev}, /api/models/{repo}/refs and
** /api/whoami-v2. The files and model info are routes_hub.c's.
**
** Paging is the Hub's: a page of at most `limit` items (capped: nothing a request asks
** for is allocated beyond it), and while more follow a `Link: <URL>; rel="next"` header
** whose URL the clients fetch as it is. It is absolute (the clients' parser wants
** http(s)://), built from the request's Host, and carries the query the server
** understood with the next page number `p`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/app/app.h"

/* The most items one page holds (the Hub's own cap for these listings). */
#define HUB_PAGE_MAX 1000
/* The largest page number: beyond it an offset would leave every store behind. */
#define HUB_P_MAX 1000000000LL
/* Commits per page when the request names no limit (the Hub's default). */
#define HUB_COMMITS_DEFAULT 50

/* ---- the next page's URL ---- */

typedef struct Url {
  char b[3072];
  size_t n;
  int over;                 /* it outgrew b: no Link can be given */
} Url;

static void url_raw(Url *u, const char *s) {
  size_t k = strlen(s);
  if (u->over || u->n + k >= sizeof u->b) { u->over = 1; return; }
  memcpy(u->b + u->n, s, k + 1);
  u->n += k;
}

/* Appends s percent-encoded (all but RFC 3986's unreserved characters). */
static void url_enc(Url *u, const char *s) {
  char t[4];
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
      t[0] = (char)*p;
      t[1] = '\0';
    } else {
      snprintf(t, sizeof t, "%%%02X", *p);
    }
    url_raw(u, t);
  }
}

static void url_arg(Url *u, const char *key, const char *value) {
  if (!value) return;
  url_raw(u, u->b[u->n - 1] == '?' ? "" : "&");
  url_enc(u, key);
  url_raw(u, "=");
  url_enc(u, value);
}

/* Starts u with http://HOST (the request's Host: what the client reached this server by),
** https:// when a proxy that ends TLS in front of it says so (X-Forwarded-Proto: https; a
** client naming its own scheme only changes the link it is given); -1 after answering 400
** when there is no Host fit to repeat in a URL. */
static int url_start(Url *u, HttpReq *rq, HttpRes *rs) {
  const char *host = http_header(rq, "Host");
  size_t n = host ? strlen(host) : 0;
  int ok = n > 0 && n <= 255;
  for (size_t i = 0; ok && i < n; i++)
    ok = (host[i] >= 'a' && host[i] <= 'z') || (host[i] >= 'A' && host[i] <= 'Z') || (host[i] >= '0' && host[i] <= '9') ||
         strchr(".-:[]", host[i]);
  if (!ok) {
    http_error(rs, 400, "the next page's URL needs a Host header naming this server (host[:port])",
               json_pack("{s:o}", "host", http_json_text(host)));
    return -1;
  }
  u->n = 0;
  u->over = 0;
  u->b[0] = '\0';
  const char *proto = http_header(rq, "X-Forwarded-Proto");
  url_raw(u, proto && !strcasecmp(proto, "https") ? "https://" : "http://");
  url_raw(u, host);
  return 0;
}

/* Appends the page arguments: limit and the page number p. */
static void url_page(Url *u, long long limit, long long p) {
  char num[32];
  snprintf(num, sizeof num, "%lld", limit);
  url_arg(u, "limit", num);
  snprintf(num, sizeof num, "%lld", p);
  url_arg(u, "p", num);
}

/* Sets Link to u's URL as the next page; answers 500 when it could not be made (the
** client would stop at this page thinking it the last). */
static int set_next(HttpRes *rs, Url *u) {
  char link[sizeof u->b + 32];
  if (!u->over) snprintf(link, sizeof link, "<%s>; rel=\"next\"", u->b);
  if (u->over || http_res_link(rs, link)) {
    http_error(rs, 500, "the next page's URL is too long to send", NULL);
    return -1;
  }
  return 0;
}

/* ---- query arguments ---- */

/* An integer argument in [lo, hi] into *out (def when absent), above hi taken as hi when
** cap, else refused; -1 after answering 400. */
static int query_int(HttpReq *rq, HttpRes *rs, const char *key, long long lo, long long hi, int cap, long long def,
                     long long *out) {
  const char *v = http_query(rq, key);
  *out = def;
  if (!v) return 0;
  char *end = NULL;
  long long x = strtoll(v, &end, 10);
  int digits = *v && strspn(v + (*v == '-'), "0123456789") == strlen(v + (*v == '-')) && strlen(v) <= 18;
  if (!digits || end == v || x < lo || (!cap && x > hi)) {
    http_error(rs, 400, "bad query argument: expected an integer",
               json_pack("{s:s, s:o, s:I, s:I}", "argument", key, "value", http_json_text(v), "min", (json_int_t)lo,
                         "max", (json_int_t)hi));
    return -1;
  }
  *out = x > hi ? hi : x;
  return 0;
}

static const char *nonempty(const char *v) { return v && *v ? v : NULL; }

static int truthy(const char *v) { return v && (!strcmp(v, "") || !strcmp(v, "1") || !strcasecmp(v, "true")); }

/* ---- GET /api/models ---- */

/* The item fields a listing can carry: those of the Hub's expand[] maskd has values for. */
enum {
  F_AUTHOR = 1 << 0, F_CONFIG = 1 << 1, F_CREATED = 1 << 2, F_DISABLED = 1 << 3, F_DOWNLOADS = 1 << 4,
  F_DOWNLOADS_ALL = 1 << 5, F_GATED = 1 << 6, F_MODIFIED = 1 << 7, F_LIBRARY = 1 << 8, F_LIKES = 1 << 9,
  F_PIPELINE = 1 << 10, F_PRIVATE = 1 << 11, F_SHA = 1 << 12, F_SIBLINGS = 1 << 13, F_SPACES = 1 << 14,
  F_TAGS = 1 << 15, F_TRENDING = 1 << 16, F_LIKES30 = 1 << 17, F_MODEL_ID = 1 << 18
};
static const struct { const char *key; int bit; } expandable[] = {
  {"author", F_AUTHOR}, {"config", F_CONFIG}, {"createdAt", F_CREATED}, {"disabled", F_DISABLED},
  {"downloads", F_DOWNLOADS}, {"downloadsAllTime", F_DOWNLOADS_ALL}, {"gated", F_GATED},
  {"lastModified", F_MODIFIED}, {"library_name", F_LIBRARY}, {"likes", F_LIKES}, {"likes30d", F_LIKES30},
  {"pipeline_tag", F_PIPELINE}, {"private", F_PRIVATE}, {"sha", F_SHA}, {"siblings", F_SIBLINGS},
  {"spaces", F_SPACES}, {"tags", F_TAGS}, {"trendingScore", F_TRENDING},
};
#define N_EXPANDABLE (sizeof expandable / sizeof expandable[0])
/* Keys the Hub expands that maskd has nothing for (a model card, scans, inference
** providers, parameter counts): asked for, they are left out of the item, as the Hub
** leaves out what a repository lacks, rather than refusing a client that asks by default. */
static const char *const absent[] = {"cardData", "gitalyUid", "inferenceProviderMapping", "model-index", "safetensors",
                                     "transformersInfo", "widgetData", "usedStorage", "resourceGroup", "xetEnabled",
                                     "baseModels", "childrenModelCount", "evalResults", "mask_token", "gguf"};
/* The fields of an item when the request names none, and what full adds (the Hub's shapes). */
#define F_DEFAULT                                                                                                   \
  (F_AUTHOR | F_CREATED | F_DOWNLOADS | F_MODIFIED | F_LIBRARY | F_LIKES | F_PIPELINE | F_PRIVATE | F_SHA | F_TAGS | \
   F_TRENDING | F_MODEL_ID)
#define F_FULL (F_GATED | F_DISABLED | F_SIBLINGS)
/* The most expand values read: each is one of the keys above, so more can only repeat them. */
#define MAX_EXPAND 64

/* The files a listed revision has (rfilename only: whether it exists, without reading it). */
static json_t *siblings_of(Store *s, const char *name, const char *commit, int has_tokenizer, Err *e) {
  json_t *out = json_pack("[{s:s}, {s:s}]", "rfilename", "config.json", "rfilename", "model.safetensors");
  if (has_tokenizer) {
    /* The tokenizer's side files are generated from it when not stored (routes_hub.c). */
    json_array_append_new(out, json_pack("{s:s}", "rfilename", "tokenizer.json"));
    json_array_append_new(out, json_pack("{s:s}", "rfilename", "tokenizer_config.json"));
    json_array_append_new(out, json_pack("{s:s}", "rfilename", "special_tokens_map.json"));
    return out;
  }
  char spec[200];
  snprintf(spec, sizeof spec, "%s@%s", name, commit);
  StoreRevision r;
  if (store_resolve(s, spec, &r, e)) { json_decref(out); return NULL; }
  static const char *const side[] = {"tokenizer_config.json", "special_tokens_map.json"};
  for (size_t i = 0; i < 2; i++) {
    void *data = NULL;
    size_t len = 0;
    if (store_revision_file(s, &r, side[i], &data, &len, e) == 0) {
      json_array_append_new(out, json_pack("{s:s}", "rfilename", side[i]));
      free(data);
    } else if (e->kind == ERR_NOT_FOUND) {
      *e = (Err){0};
    } else {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

/* One listing item from a store_models_query row, with the fields in want. */
static json_t *model_item(Store *s, json_t *row, int want, Err *e) {
  const char *name = json_string_value(json_object_get(row, "name"));
  const char *commit = json_string_value(json_object_get(row, "commit"));
  json_t *pipeline = json_object_get(row, "pipeline_tag");
  json_t *archs = json_object_get(row, "architectures"), *mtype = json_object_get(row, "model_type");
  char id[25], created[48], modified[48];
  hub_object_id(name, id);
  hub_iso_date(json_number_value(json_object_get(row, "created")), created);
  hub_iso_date(json_number_value(json_object_get(row, "last_modified")), modified);
  json_t *o = json_pack("{s:s, s:s}", "_id", id, "id", name);
  if (want & F_MODEL_ID) json_object_set_new(o, "modelId", json_string(name));
  const char *slash = strchr(name, '/');
  if ((want & F_AUTHOR) && slash) json_object_set_new(o, "author", json_stringn(name, (size_t)(slash - name)));
  if (want & F_SHA) json_object_set_new(o, "sha", json_string(commit));
  if (want & F_MODIFIED) json_object_set_new(o, "lastModified", json_string(modified));
  if (want & F_CREATED) json_object_set_new(o, "createdAt", json_string(created));
  if (want & F_PRIVATE) json_object_set_new(o, "private", json_false());
  if (want & F_GATED) json_object_set_new(o, "gated", json_false());
  if (want & F_DISABLED) json_object_set_new(o, "disabled", json_false());
  if (want & F_DOWNLOADS) json_object_set_new(o, "downloads", json_integer(0));
  if (want & F_DOWNLOADS_ALL) json_object_set_new(o, "downloadsAllTime", json_integer(0));
  if (want & F_LIKES) json_object_set_new(o, "likes", json_integer(0));
  if (want & F_LIKES30) json_object_set_new(o, "likes30d", json_integer(0));
  if (want & F_TRENDING) json_object_set_new(o, "trendingScore", json_integer(0));
  if (want & F_PIPELINE) json_object_set(o, "pipeline_tag", pipeline);
  if (want & F_LIBRARY) json_object_set_new(o, "library_name", json_string("transformers"));
  if (want & F_SPACES) json_object_set_new(o, "spaces", json_array());
  if (want & F_TAGS) {   /* as model info tags a revision (the weights are always there) */
    json_t *tags = json_pack("[s, s]", "transformers", "safetensors");
    if (json_is_string(mtype)) json_array_append(tags, mtype);
    if (json_is_string(pipeline)) json_array_append(tags, pipeline);
    json_object_set_new(o, "tags", tags);
  }
  if (want & F_CONFIG) {
    json_t *config = json_object();
    if (json_is_array(archs)) json_object_set(config, "architectures", archs);
    if (json_is_string(mtype)) json_object_set(config, "model_type", mtype);
    json_object_set_new(o, "config", config);
  }
  if (want & F_SIBLINGS) {
    json_t *sib = siblings_of(s, name, commit, json_is_true(json_object_get(row, "has_tokenizer")) ||
                                                 json_integer_value(json_object_get(row, "has_tokenizer")), e);
    if (!sib) { json_decref(o); return NULL; }
    json_object_set_new(o, "siblings", sib);
  }
  return o;
}

/* The fields expand asks for (expand=a&expand=b, or expand[]= as some clients write it)
** into *want; -1 after answering 400 for a key the Hub does not expand either. */
static int read_expand(HttpReq *rq, HttpRes *rs, int *want, int *given) {
  static const char *const names[] = {"expand", "expand[]"};
  *given = 0;
  for (size_t k = 0; k < 2; k++) {
    const char *v;
    for (size_t i = 0; (v = http_query_nth(rq, names[k], i)); i++) {
      if (i >= MAX_EXPAND) {
        http_errorf(rs, 400, "more than %d expand values", MAX_EXPAND);
        return -1;
      }
      *given = 1;
      int bit = 0, known = 0;
      for (size_t j = 0; j < N_EXPANDABLE && !bit; j++)
        if (!strcmp(v, expandable[j].key)) bit = expandable[j].bit;
      for (size_t j = 0; j < sizeof absent / sizeof absent[0] && !bit && !known; j++) known = !strcmp(v, absent[j]);
      if (!bit && !known) {
        json_t *ok = json_array();
        for (size_t j = 0; j < N_EXPANDABLE; j++) json_array_append_new(ok, json_string(expandable[j].key));
        http_error(rs, 400, "unknown expand value", json_pack("{s:o, s:o}", "expand", http_json_text(v), "supported", ok));
        return -1;
      }
      *want |= bit;
    }
  }
  return 0;
}

void route_hub_models(void *app, HttpReq *rq, HttpRes *rs) {
  StoreModelQuery q = {0};
  q.search = nonempty(http_query(rq, "search"));
  q.author = nonempty(http_query(rq, "author"));
  q.pipeline = nonempty(http_query(rq, "pipeline_tag"));
  int nothing = 0;          /* filters no repository passes (two pipelines at once) */
  /* filter is the Hub's tag filter (every value must be a tag of the repository): maskd's
  ** repositories are all tagged transformers and safetensors, and their pipeline; other
  ** tags (languages, licences, datasets) they never carry, and answering [] for them would
  ** look like a search that ran, so they are refused. */
  const char *f;
  size_t nf = 0;
  for (; (f = http_query_nth(rq, "filter", nf)); nf++) {
    if (nf >= 32) { http_error(rs, 400, "more than 32 filter values", NULL); return; }
    if (!strcmp(f, "transformers") || !strcmp(f, "safetensors")) continue;
    if (!strcmp(f, "fill-mask") || !strcmp(f, "text-classification")) {
      if (q.pipeline && strcmp(q.pipeline, f)) nothing = 1;
      q.pipeline = f;
      continue;
    }
    http_error(rs, 400, "filter value not supported by maskd",
               json_pack("{s:o, s:[s, s, s, s], s:s}", "filter", http_json_text(f), "supported", "fill-mask",
                         "text-classification", "transformers", "safetensors", "hint",
                         "search= filters by name, author= by owner, pipeline_tag= by task"));
    return;
  }
  /* sort: the Hub's keys; downloads, likes and the scores are 0 for every repository here,
  ** so they order by name alone. The Hub sorts descending unless direction says 1. */
  const char *sort = nonempty(http_query(rq, "sort"));
  q.sort = STORE_SORT_NAME;
  if (sort) {
    if (!strcmp(sort, "lastModified")) q.sort = STORE_SORT_MODIFIED;
    else if (!strcmp(sort, "createdAt")) q.sort = STORE_SORT_CREATED;
    else if (strcmp(sort, "id") && strcmp(sort, "modelId") && strcmp(sort, "downloads") && strcmp(sort, "likes") &&
             strcmp(sort, "likes30d") && strcmp(sort, "trendingScore") && strcmp(sort, "downloadsAllTime")) {
      http_error(rs, 400, "sort key not supported by maskd",
                 json_pack("{s:o, s:[s, s, s, s, s, s, s]}", "sort", http_json_text(sort), "supported", "lastModified",
                           "createdAt", "id", "downloads", "likes", "likes30d", "trendingScore"));
      return;
    }
  }
  const char *dir = nonempty(http_query(rq, "direction"));
  if (dir && strcmp(dir, "-1") && strcmp(dir, "1")) {
    http_error(rs, 400, "direction must be -1 (descending) or 1 (ascending)", json_pack("{s:o}", "direction", http_json_text(dir)));
    return;
  }
  /* Equal keys (downloads, likes) keep names ascending whichever way: the order stays the obvious one. */
  int key_is_zero = sort && q.sort == STORE_SORT_NAME && strcmp(sort, "id") && strcmp(sort, "modelId");
  q.descending = sort && !key_is_zero && !(dir && !strcmp(dir, "1"));
  if (!sort && dir && !strcmp(dir, "-1")) q.descending = 1;
  long long limit, p;
  if (query_int(rq, rs, "limit", 0, HUB_PAGE_MAX, 1, HUB_PAGE_MAX, &limit) ||
      query_int(rq, rs, "p", 0, HUB_P_MAX, 0, 0, &p))
    return;
  /* With expand, an item holds _id, id and what was asked for alone, as the Hub answers it. */
  int want = F_DEFAULT, asked = 0, expand_given = 0;
  if (read_expand(rq, rs, &asked, &expand_given)) return;
  if (expand_given) want = asked;
  int full = truthy(http_query(rq, "full")), config = truthy(http_query(rq, "config"));
  if (full) want |= F_FULL;
  if (config) want |= F_CONFIG;
  q.offset = p * limit;
  q.limit = nothing ? 0 : limit;
  Store *s = app_store(app, rs);
  if (!s) return;
  Err e = {0};
  int64_t total = 0;
  json_t *rows = store_models_query(s, &q, &total, &e);
  if (!rows) { http_error_from(rs, &e, "cannot list the models", json_string(e.msg)); return; }
  if (nothing) total = 0;
  json_t *items = json_array();
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    json_t *item = model_item(s, row, want, &e);
    if (!item) {
      json_decref(rows);
      json_decref(items);
      http_error_from(rs, &e, "cannot list the models", json_string(e.msg));
      return;
    }
    json_array_append_new(items, item);
  }
  json_decref(rows);
  if (limit > 0 && q.offset + (int64_t)json_array_size(items) < total) {
    Url u;
    if (url_start(&u, rq, rs)) { json_decref(items); return; }
    url_raw(&u, "/api/models?");
    url_page(&u, limit, p + 1);
    url_arg(&u, "search", q.search);
    url_arg(&u, "author", q.author);
    url_arg(&u, "pipeline_tag", q.pipeline);
    url_arg(&u, "sort", sort);
    url_arg(&u, "direction", dir);
    if (full) url_arg(&u, "full", "true");
    if (config) url_arg(&u, "config", "true");
    /* expand as given, the keys maskd has no field for too: with only those, the page held
    ** _id and id alone, and a link without expand gave the next one every default field. */
    for (size_t k = 0; expand_given && k < 2; k++) {
      const char *v;
      for (size_t n = 0; (v = http_query_nth(rq, k ? "expand[]" : "expand", n)); n++) url_arg(&u, "expand", v);
    }
    if (set_next(rs, &u)) { json_decref(items); return; }
  }
  http_json(rs, 200, items);
}

/* ---- GET /api/models/{repo}/commits/{rev} ---- */

/* A revision as the Hub lists a commit: its message's first line is the title, the rest the message. */
static json_t *commit_item(json_t *row) {
  const char *msg = json_string_value(json_object_get(row, "message"));
  if (!msg || !*msg) msg = "maskd revision";
  size_t first = strcspn(msg, "\n");
  const char *rest = msg + first;
  while (*rest == '\n' || *rest == '\r') rest++;
  char date[48];
  hub_iso_date(json_number_value(json_object_get(row, "created")), date);
  /* One author: maskd, which pushed every revision (a run, an import); no avatar to show. */
  return json_pack("{s:O, s:s%, s:s, s:[{s:s}], s:s}", "id", json_object_get(row, "commit"), "title", msg, first,
                   "message", rest, "authors", "user", "maskd", "date", date);
}

void route_hub_commits(void *app, HttpReq *rq, HttpRes *rs) {
  char repo[260];
  if (app_path_repo(rq, 1, repo, sizeof repo)) { hub_not_found(rs, "RepoNotFound", "model name too long", NULL); return; }
  const char *rev = rq->params[rq->n_params - 1];
  long long limit, p;
  if (query_int(rq, rs, "limit", 1, HUB_PAGE_MAX, 1, HUB_COMMITS_DEFAULT, &limit) ||
      query_int(rq, rs, "p", 0, HUB_P_MAX, 0, 0, &p))
    return;
  Store *s = app_store(app, rs);
  if (!s) return;
  StoreRevision r;
  if (hub_revision(s, rs, repo, rev, &r)) return;
  Err e = {0};
  int64_t total = 0;
  json_t *rows = store_revision_history(s, r.model_id, r.seq, p * limit, limit, &total, &e);
  if (!rows) { http_error_from(rs, &e, "cannot list the commits", json_string(e.msg)); return; }
  json_t *items = json_array();
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) json_array_append_new(items, commit_item(row));
  json_decref(rows);
  if (p * limit + (long long)json_array_size(items) < total) {
    Url u;
    if (url_start(&u, rq, rs)) { json_decref(items); return; }
    url_raw(&u, "/api/models/");
    url_raw(&u, repo);   /* a repository name: letters, digits, - _ . and one '/' */
    url_raw(&u, "/commits/");
    url_enc(&u, rev);
    url_raw(&u, "?");
    url_page(&u, limit, p + 1);
    if (set_next(rs, &u)) { json_decref(items); return; }
  }
  char count[32];
  snprintf(count, sizeof count, "%lld", (long long)total);
  http_json(rs, 200, items);
  http_res_header(rs, "X-Total-Count", count);
  http_res_header(rs, "X-Repo-Commit", r.commit);
}

/* ---- GET /api/models/{repo}/refs ---- */

void route_hub_refs(void *app, HttpReq *rq, HttpRes *rs) {
  char repo[260];
  if (app_path_repo(rq, 0, repo, sizeof repo)) { hub_not_found(rs, "RepoNotFound", "model name too long", NULL); return; }
  Store *s = app_store(app, rs);
  if (!s) return;
  Err e = {0};
  if (rq->n_params == 1) {
    /* /api/models/x/refs is also model info of a repository named "x/refs": this route comes
    ** first in the table, so it answers that when such a repository exists (its refs are
    ** /api/models/x/refs/refs); x's refs are then out of reach, which only a store holding
    ** both "x" and "x/refs" meets. */
    char other[270];
    snprintf(other, sizeof other, "%s/refs", repo);
    json_t *m = store_check_name("model", other, NULL) ? NULL : store_model_get(s, other, &e);
    if (m) {
      json_decref(m);
      hub_model_info(app, rq, rs, other, "main");
      return;
    }
    if (e.kind != ERR_NOT_FOUND && e.kind != 0) { http_error_from(rs, &e, "cannot read the model", json_string(e.msg)); return; }
    e = (Err){0};
  }
  json_t *m = store_model_get(s, repo, &e);
  if (!m) {
    if (e.kind == ERR_NOT_FOUND) hub_not_found(rs, "RepoNotFound", "no such model", json_pack("{s:s, s:s}", "model", repo, "why", e.msg));
    else http_error_from(rs, &e, "cannot read the model", json_string(e.msg));
    return;
  }
  /* One branch, main, at the newest revision (none while the repository has no revision);
  ** numbers and "best" are maskd's names, not git refs, and are not listed. */
  json_t *branches = json_array();
  json_t *newest = json_array_get(json_object_get(m, "revisions"), 0);
  if (newest)
    json_array_append_new(branches, json_pack("{s:s, s:s, s:O}", "name", "main", "ref", "refs/heads/main", "targetCommit",
                                              json_object_get(newest, "commit")));
  json_decref(m);
  json_t *refs = json_pack("{s:o, s:[], s:[]}", "branches", branches, "tags", "converts");
  if (truthy(http_query(rq, "include_prs"))) json_object_set_new(refs, "pullRequests", json_array());
  http_json(rs, 200, refs);
}

/* ---- GET /api/whoami-v2 ---- */

void route_hub_whoami(void *app, HttpReq *rq, HttpRes *rs) {
  (void)app;
  const char *authz = http_header(rq, "Authorization");
  int bearer = authz && !strncasecmp(authz, "Bearer ", 7) && authz[7];
  /* With a token, the one identity is its holder's. Without one the server lets every
  ** request in, so any token a client holds works: it is answered as valid (a 401 would
  ** make huggingface_hub's login() call a working token invalid); a request with no
  ** credentials at all is anonymous, which the Hub answers 401 too. */
  int ok = rq->auth == HTTP_AUTH_OK || (rq->auth == HTTP_AUTH_NO_TOKEN && bearer);
  if (!ok) {
    http_error(rs, 401, "Invalid credentials in Authorization header",
               json_string(rq->auth == HTTP_AUTH_WRONG ? "the bearer token is not the server's (--token)"
                           : rq->auth == HTTP_AUTH_NO_TOKEN ? "send Authorization: Bearer TOKEN (the server has no token: any one is accepted)"
                                                            : "send Authorization: Bearer TOKEN with the server's token (--token)"));
    return;
  }
  char id[25];
  hub_object_id("maskd", id);
  const char *display = rq->auth == HTTP_AUTH_OK ? "maskd serve --token" : "any token (the server has no --token)";
  json_t *me = json_pack("{s:s, s:s, s:s, s:s, s:n, s:b, s:b, s:b, s:s, s:n, s:s, s:[], s:{s:s, s:{s:s, s:s}}}", "id", id,
                         "type", "user", "name", "maskd", "fullname", "maskd serve", "email", "emailVerified", 0, "isPro",
                         0, "canPay", 0, "avatarUrl", "", "periodEnd", "billingMode", "prepaid", "orgs", "auth", "type",
                         "access_token", "accessToken", "displayName", display, "role", "write");
  http_json(rs, 200, me);
}
