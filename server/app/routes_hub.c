/* The Hugging Face Hub's HTTP protocol over the store's model repositories, as the
** official clients (huggingface_hub, @huggingface/hub) use it with the endpoint or hubUrl
** set to this server: files by /{repo}/resolve|raw/{rev}/{file} (and under /models/),
** /api/models/{repo}[/revision/{rev}] (model info), /api/models/{repo}/tree/{rev}
** (listFiles) and POST /api/models/{repo}/paths-info/{rev}.
**
** A repo is "name" or "owner/name" (store_check_name): every route is registered for
** both shapes (server/cli/cmd_serve.c), so the repo is the leading path parameters joined
** by '/'. A revision is "main" (or the Hub's "HEAD": the newest), a number, or a commit id.
**
** What a revision holds, as the Hub would list it: the five files of a transformers
** folder, byte for byte what `maskd export` writes. optimizer.safetensors is training
** state, not part of a model repository on the Hub, and doubles a download: not listed
** nor served. metrics.json is maskd's own: served as before, not listed. An "oid" is what
** git would name the file: the blob id (SHA-1 of "blob <size>\0" and the bytes) of a file,
** and of the LFS pointer for model.safetensors, whose "lfs" entry carries the sha256; a
** file's ETag is its blob id, the weights' their sha256 (X-Linked-Etag), as on the Hub.
** model.safetensors is the one LFS file (its pointer is what raw/ serves, as on the Hub;
** resolve/ by a branch or number redirects it to its commit, as the Hub redirects LFS
** files to content-addressed storage). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/nn/config.h"
#include "engine/tok/tokenizer.h"
#include "server/app/app.h"
#include "server/http/http_ranged.h"
#include "store/git_oid.h"

static const char *const listed[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                     "special_tokens_map.json"};
#define N_LISTED (sizeof listed / sizeof listed[0])

/* One file of a revision as the tree and paths-info describe it. */
typedef struct HubEntry {
  char sha[65];             /* sha256 of the bytes */
  char oid[41];             /* git's blob id: of the bytes, or of the LFS pointer */
  size_t size;
  int lfs;                  /* stored as LFS on the Hub: model.safetensors */
} HubEntry;

/* 404 with the Hub's X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound), which
** the clients read to tell the three apart (a missing file is "no such file", not an error). */
void hub_not_found(HttpRes *rs, const char *code, const char *error, json_t *detail) {
  http_error(rs, 404, error, detail);
  http_res_header(rs, "X-Error-Code", code);
}

/* Resolves repo at rev into r; answers the 404 (with its code) or error and returns -1 if it cannot. */
int hub_revision(Store *s, HttpRes *rs, const char *repo, const char *rev, StoreRevision *r) {
  char spec[512];
  Err e = {0};
  /* The Hub's "HEAD" (modelInfo's default) is its default branch, maskd's "main": the newest.
  ** A revision too long to be one is not found, in a repo that may well exist (the repo
  ** part always fits: app_path_repo bounds it). */
  if ((size_t)snprintf(spec, sizeof spec, "%s@%s", repo, strcmp(rev, "HEAD") ? rev : "main") >= sizeof spec)
    err_setk(&e, ERR_NOT_FOUND, "a revision of %zu bytes names none", strlen(rev));
  else if (store_resolve(s, spec, r, &e) == 0)
    return 0;
  if (e.kind != ERR_NOT_FOUND) {
    http_error_from(rs, &e, "cannot resolve the revision", json_pack("{s:s, s:s}", "revision", spec, "why", e.msg));
    return -1;
  }
  Err e2 = {0};
  json_t *m = store_model_get(s, repo, &e2);
  int has_model = m != NULL;
  json_decref(m);
  if (!has_model && e2.kind != ERR_NOT_FOUND) {   /* the store busy or failing: not an answer about the repo */
    http_error_from(rs, &e2, "cannot resolve the revision", json_pack("{s:s, s:s}", "revision", spec, "why", e2.msg));
    return -1;
  }
  if (has_model)
    hub_not_found(rs, "RevisionNotFound", "no such model revision",
                  json_pack("{s:s, s:s, s:s}", "model", repo, "revision", rev, "why", e.msg));
  else
    hub_not_found(rs, "RepoNotFound", "no such model", json_pack("{s:s, s:s}", "model", repo, "why", e.msg));
  return -1;
}

/* tokenizer_config.json and special_tokens_map.json of a revision maskd made are not
** stored: they follow from tokenizer.json, so they are generated as `maskd export`
** writes them, by the same function (tokenizer_pretrained_json), which keeps the bytes
** identical to an exported folder's. An import's own are stored and served as they came. */
static int generated_file(Store *s, const StoreRevision *r, const char *file, void **data, size_t *len, Err *e) {
  void *tj = NULL;
  size_t tj_len = 0;
  if (!r->tokenizer[0]) return err_setk(e, ERR_NOT_FOUND, "revision %s has no tokenizer", r->commit);
  if (store_revision_file(s, r, "tokenizer.json", &tj, &tj_len, e)) return -1;
  Tokenizer *t = tokenizer_from_json(tj, tj_len, e);
  free(tj);
  if (!t) { err_prefix(e, "stored tokenizer.json"); if (e->kind != ERR_NOMEM) e->kind = ERR_INTERNAL; return -1; }  /* a damaged store */
  /* model_max_length is the revision's positions, as in an exported folder. */
  void *cj = NULL;
  size_t cj_len = 0;
  char *cs = NULL;
  ModelConfig c;
  int crc = store_revision_file(s, r, "config.json", &cj, &cj_len, e);
  if (crc == 0 && !(cs = malloc(cj_len + 1))) crc = err_setk(e, ERR_NOMEM, "out of memory");
  if (crc == 0) {
    memcpy(cs, cj, cj_len);
    cs[cj_len] = 0;
    if ((crc = config_parse(cs, &c, e))) { err_prefix(e, "stored config.json"); if (e->kind != ERR_NOMEM) e->kind = ERR_INTERNAL; }
  }
  free(cj);
  free(cs);
  if (crc) { tokenizer_free(t); return -1; }
  char *config = NULL, *special_map = NULL;
  int rc = tokenizer_pretrained_json(t, config_max_tokens(&c), &config, &special_map, e);
  tokenizer_free(t);
  if (rc) return -1;
  int want_config = !strcmp(file, "tokenizer_config.json");
  *data = want_config ? config : special_map;
  *len = strlen(*data);
  free(want_config ? special_map : config);
  return 0;
}

/* A file's bytes (malloc'd): stored, or generated for maskd's own revisions. */
static int hub_file(Store *s, const StoreRevision *r, const char *file, void **data, size_t *len, Err *e) {
  int generated = !strcmp(file, "tokenizer_config.json") || !strcmp(file, "special_tokens_map.json");
  int rc = store_revision_file(s, r, file, data, len, e);
  if (rc && generated && e->kind == ERR_NOT_FOUND) {
    *e = (Err){0};
    rc = generated_file(s, r, file, data, len, e);
  }
  return rc;
}

/* The blob sha256 behind a stored-blob file, or NULL for a file kept as text. */
static const char *hub_blob(const StoreRevision *r, const char *file) {
  if (!strcmp(file, "model.safetensors")) return r->weights;
  if (!strcmp(file, "tokenizer.json")) return r->tokenizer;
  return NULL;
}

static int lfs_pointer(const HubEntry *h, char *out, size_t cap);

/* A listed file's size, sha256 and blob id (the weights' without reading them: their
** id is their pointer's); ERR_NOT_FOUND when absent. */
static int hub_entry(Store *s, const StoreRevision *r, const char *file, HubEntry *out, Err *e) {
  memset(out, 0, sizeof *out);
  out->lfs = !strcmp(file, "model.safetensors");
  const char *blob = hub_blob(r, file);
  if (blob && !blob[0]) return err_setk(e, ERR_NOT_FOUND, "%s@%lld has no %s", r->model, (long long)r->seq, file);
  if (out->lfs) {
    uint64_t len = 0;
    StoreBlobReader *br = store_blob_open(s, blob, &len, e);
    if (!br) return -1;
    store_blob_close(br);
    snprintf(out->sha, sizeof out->sha, "%s", blob);
    out->size = (size_t)len;
    char p[200];
    int n = lfs_pointer(out, p, sizeof p);
    store_git_blob_oid(p, (size_t)n, out->oid);
    return 0;
  }
  void *data = NULL;
  size_t len = 0;
  if (hub_file(s, r, file, &data, &len, e)) return -1;
  store_sha256_hex(data, len, out->sha);
  store_git_blob_oid(data, len, out->oid);
  out->size = len;
  free(data);
  return 0;
}

/* The Git LFS pointer of a file (what the Hub's git holds for it). */
static int lfs_pointer(const HubEntry *h, char *out, size_t cap) {
  return snprintf(out, cap, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %zu\n", h->sha, h->size);
}

/* ISO 8601 in UTC with milliseconds, as the Hub writes dates. */
void hub_iso_date(double t, char out[48]) {
  time_t sec = (time_t)t;
  struct tm tm;
  gmtime_r(&sec, &tm);
  int ms = (int)((t - (double)sec) * 1000);
  if (ms < 0 || ms > 999) ms = 0;
  snprintf(out, 48, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
           tm.tm_min, tm.tm_sec, ms);
}

/* The Hub's _id is a 24-hex database id: a stable one from the name. */
void hub_object_id(const char *name, char out[25]) {
  char hex[65];
  store_sha256_hex(name, strlen(name), hex);
  memcpy(out, hex, 24);
  out[24] = '\0';
}

static int is_listed(const char *file) {
  for (size_t i = 0; i < N_LISTED; i++)
    if (!strcmp(file, listed[i])) return 1;
  return 0;
}

/* ---- downloads: a stored blob streamed from the store, never held whole in memory ---- */

/* A download reads the store this much at a time, and the stream takes it out in its
** fills (64 KiB): each read is a short read transaction of its own (store_blob_read), so a
** slow client holds back no WAL checkpoint, and this keeps their number (and the
** allocations each makes) to one per 512 KiB. */
#define DOWNLOAD_READ ((size_t)512 << 10)

/* One download's state: its own store connection (the stream is filled on whichever
** handler thread is free, and a connection serves one thread at a time), the slice
** [off, end), how far the client has it (at) and the bytes read ahead of that. */
typedef struct Download {
  Store *store;
  char pin[65];             /* the blob's pin (store_blob_pin): kept from store_gc until the end */
  StoreBlobReader *br;
  uint64_t at, end;
  int whole;                /* the whole blob: checked against its sha256 before its last bytes go */
  unsigned char *ahead;     /* DOWNLOAD_READ bytes: [ahead_off, ahead_off + ahead_len) of the blob */
  uint64_t ahead_off;
  size_t ahead_len;
} Download;

static void download_free(void *ctx) {
  Download *d = ctx;
  store_blob_close(d->br);
  if (d->store) store_blob_unpin(d->store, d->pin);
  store_close(d->store);
  free(d->ahead);
  free(d);
}

/* The stream function (server/http/http.h): the next bytes of the slice; -1 at its end,
** or early when the store fails or the whole blob does not match its sha256, which cuts
** the connection so the client sees a short body rather than wrong bytes. */
static ssize_t download_fill(void *ctx, char *buf, size_t max) {
  Download *d = ctx;
  if (d->at >= d->end) return -1;
  Err e = {0};
  if (d->at >= d->ahead_off + d->ahead_len) {   /* the bytes read ahead are out: read on */
    size_t k = d->end - d->at < DOWNLOAD_READ ? (size_t)(d->end - d->at) : DOWNLOAD_READ;
    if (store_blob_read(d->br, d->at, d->ahead, k, &e)) {
      fprintf(stderr, "maskd serve: download cut: %s\n", e.msg);
      return -1;
    }
    d->ahead_off = d->at;
    d->ahead_len = k;
  }
  size_t left = (size_t)(d->ahead_off + d->ahead_len - d->at);
  size_t n = left < max ? left : max;
  memcpy(buf, d->ahead + (d->at - d->ahead_off), n);
  if (d->whole && d->at + n == d->end && store_blob_verify(d->br, &e)) {
    fprintf(stderr, "maskd serve: download cut: %s\n", e.msg);
    return -1;
  }
  d->at += n;
  return (ssize_t)n;
}

/* Answers the slice planned by http_ranged_plan (plan 1: the whole blob, 2: a range) as a
** download of blob, read a piece at a time; -1 with e set when it cannot start. */
static int hub_download(App *a, HttpRes *rs, const char *blob, int plan, size_t off, size_t n, size_t total, Err *e) {
  Download *d = calloc(1, sizeof *d);
  if (!d || !(d->ahead = malloc(DOWNLOAD_READ))) { free(d); return err_setk(e, ERR_NOMEM, "out of memory"); }
  uint64_t len = 0;
  if (!(d->store = store_open(a->db_path, e))) {
    /* Out of files or memory for one more connection, for now: the client may try again
    ** (the store's path is the operator's, not said to clients). */
    download_free(d);
    return err_setk(e, ERR_BUSY, "the server cannot open another store connection for this download now; try again");
  }
  /* Pinned before it is opened: a revision dropped meanwhile (a training run's keep-last
  ** takes its step checkpoints) leaves this blob to the end of the download, which else
  ** was cut after its 200 and Content-Length had gone. */
  if (store_blob_pin(d->store, blob, d->pin, e) || !(d->br = store_blob_open(d->store, blob, &len, e))) {
    download_free(d);
    return -1;
  }
  if (len != total) {   /* replaced between the two opens: blobs never change, so this is damage */
    download_free(d);
    return err_setk(e, ERR_INTERNAL, "blob %s changed size while opened", blob);
  }
  d->at = off;
  d->end = (uint64_t)off + n;
  d->whole = plan == 1;
  http_bytes_slice(rs, plan, NULL, off, n, total);   /* status and Content-Range */
  rs->body = NULL;
  rs->len = 0;
  rs->stream = download_fill;
  rs->stream_ctx = d;
  rs->stream_free = download_free;
  rs->stream_sized = 1;
  rs->stream_len = n;
  return 0;
}

/* The Cache-Control of a file's answer: the file's own for its bytes (200, 206) and for a
** 304, which carries what the 200 would (RFC 9111 4.3.4); none (no-store) for a 416, whose
** body is an error about one request's Range, not the file. */
static const char *file_cache(const HttpRes *rs, const char *cache) { return rs->status == 416 ? NULL : cache; }

/* GET (and HEAD) /{repo}/resolve|raw/{rev}/{file}, also under /models/. */
void route_hub_file(void *app, HttpReq *rq, HttpRes *rs) {
  char repo[260];
  const char *rev = rq->params[rq->n_params - 2], *file = rq->params[rq->n_params - 1];
  int raw = strstr(rq->pattern, "/raw/") != NULL;
  if (app_path_repo(rq, 2, repo, sizeof repo)) { hub_not_found(rs, "RepoNotFound", "model name too long", NULL); return; }
  Store *s = app_store(app, rs);
  if (!s) return;
  StoreRevision r;
  if (hub_revision(s, rs, repo, rev, &r)) return;
  if (!is_listed(file) && strcmp(file, "metrics.json")) {
    json_t *list = json_array();
    for (size_t i = 0; i < N_LISTED; i++) json_array_append_new(list, json_string(listed[i]));
    hub_not_found(rs, "EntryNotFound", "no such file in a revision", json_pack("{s:s, s:o}", "file", file, "files", list));
    http_res_header(rs, "X-Repo-Commit", r.commit);
    return;
  }
  Err e = {0};
  void *data = NULL;
  size_t len = 0;
  HubEntry h;
  if (!strcmp(file, "model.safetensors")) {
    if (hub_entry(s, &r, file, &h, &e)) goto fail;
    char v[32];
    snprintf(v, sizeof v, "%zu", h.size);
    char etag[70];
    snprintf(etag, sizeof etag, "\"%s\"", h.sha);
    /* The LFS file's size and sha256, for resolve/ only: raw/ answers the pointer itself,
    ** and a client reading these with it took the pointer for the content. */
    if (!raw) {
      http_res_header(rs, "X-Linked-Size", v);
      http_res_header(rs, "X-Linked-Etag", etag);
    }
    /* The weights by a name that moves (main, a number) are a redirect to the commit, as
    ** the Hub redirects an LFS file to its content: a client that reads the headers first
    ** and the bytes after (huggingface_hub's HEAD, then GET of where it led; a resumed
    ** download) gets one revision's, even while a training run pushes new ones. */
    if (!raw && strcmp(rev, r.commit)) {
      http_bytes(rs, 302, "text/plain; charset=utf-8", "", 0);
      snprintf(rs->location, sizeof rs->location, "%s/%s/resolve/%s/%s", strncmp(rq->pattern, "/models/", 8) ? "" : "/models",
               repo, r.commit, file);
      http_res_header(rs, "ETag", etag);
      http_res_header(rs, "X-Repo-Commit", r.commit);
      rs->cache = "no-cache";
      return;
    }
  }
  const char *ctype = strstr(file, ".json") ? "application/json" : raw ? "text/plain; charset=utf-8"
                                                                       : "application/octet-stream";
  /* "main" or a number may name another revision later; a commit's files never change,
  ** but for maskd's own metrics.json (a fine-tuning run adds the test scores to its best
  ** revision's at the end). */
  const char *cache = strlen(rev) == 40 && strcmp(file, "metrics.json") ? "public, max-age=31536000, immutable" : "no-cache";
  const char *stored = raw || strcmp(file, "model.safetensors") ? NULL : hub_blob(&r, file);
  if (stored && stored[0]) {
    /* The weights are read in place, only the slice asked for: a client's Range: bytes=0-0
    ** probe of them costs a byte, not a copy of the file. */
    char etag[70];
    snprintf(etag, sizeof etag, "\"%s\"", stored);  /* the blob's name is the sha256 of its bytes */
    uint64_t total = 0;
    StoreBlobReader *br = store_blob_open(s, stored, &total, &e);
    if (!br) goto fail;
    store_blob_close(br);   /* its size known; the download reads on a connection of its own */
    http_res_header(rs, "X-Repo-Commit", r.commit);
    size_t off, n;
    int plan = http_ranged_plan(rq, rs, ctype, etag, (size_t)total, &off, &n);
    if (plan && hub_download(app, rs, stored, plan, off, n, (size_t)total, &e)) goto fail;
    rs->cache = file_cache(rs, cache);
    return;
  }
  if (raw && !strcmp(file, "model.safetensors")) {  /* raw/ gives what git holds: the LFS pointer */
    char p[200];
    int n = lfs_pointer(&h, p, sizeof p);
    data = malloc((size_t)n + 1);
    if (!data) { err_setk(&e, ERR_NOMEM, "out of memory"); goto fail; }
    memcpy(data, p, (size_t)n + 1);
    len = (size_t)n;
  } else if (hub_file(s, &r, file, &data, &len, &e)) {
    goto fail;
  }
  char oid[41], etag[70];
  store_git_blob_oid(data, len, oid);   /* the Hub's ETag of a file git holds (raw/'s pointer too) */
  snprintf(etag, sizeof etag, "\"%s\"", oid);
  http_res_header(rs, "X-Repo-Commit", r.commit);
  http_bytes_ranged(rq, rs, ctype, etag, data, len);
  rs->cache = file_cache(rs, cache);
  return;
fail:
  /* What was said about the file (ETag, sizes, ranges) is not said about an error. */
  http_res_clear_headers(rs);
  /* The revision may be gone since it was resolved: a training run's keep-last drops its
  ** step checkpoints and their blobs go with them (the weights' blob then is missing).
  ** That is a revision not found, as it is to a client asking a moment later, not a fault. */
  if (e.kind != ERR_NOMEM && e.kind != ERR_BUSY) {
    StoreRevision again;
    if (hub_revision(s, rs, repo, r.commit, &again)) return;
  }
  if (e.kind == ERR_NOT_FOUND) {
    hub_not_found(rs, "EntryNotFound", "file not in this revision", json_pack("{s:s, s:s}", "file", file, "why", e.msg));
    http_res_header(rs, "X-Repo-Commit", r.commit);
  } else {
    http_error_from(rs, &e, "cannot read the file", json_pack("{s:s, s:s}", "file", file, "why", e.msg));
  }
}

/* The tree entry of a file ({type, oid, size, path, lfs?} and with expand, lastCommit). */
static json_t *tree_entry(const StoreRevision *r, const char *file, const HubEntry *h, int expand) {
  json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "type", "file", "oid", h->oid, "size", (json_int_t)h->size, "path", file);
  if (h->lfs) {
    char p[200];
    int n = lfs_pointer(h, p, sizeof p);
    json_object_set_new(o, "lfs", json_pack("{s:s, s:I, s:i}", "oid", h->sha, "size", (json_int_t)h->size, "pointerSize", n));
  }
  if (expand) {
    char date[48];
    hub_iso_date(r->created, date);
    json_object_set_new(o, "lastCommit", json_pack("{s:s, s:s, s:s}", "id", r->commit, "title",
                                                   r->message[0] ? r->message : "maskd revision", "date", date));
    /* The Hub's keys, all of them: huggingface_hub's RepoFile reads avScan and
    ** pickleImportScan without a default. */
    json_object_set_new(o, "securityFileStatus",
                        json_pack("{s:s, s:{s:b, s:n}, s:n}", "status", "safe", "avScan", "virusFound", 0, "virusNames",
                                  "pickleImportScan"));
  }
  return o;
}

/* 1 when the list of names holds file. */
static int names_hold(json_t *names, const char *file) {
  size_t i;
  json_t *v;
  json_array_foreach(names, i, v)
    if (json_is_string(v) && !strcmp(json_string_value(v), file)) return 1;
  return 0;
}

/* After a listing that found files missing: 1 when the revision itself is gone (a training
** run's keep-last dropped it since it was resolved, taking its files), answered as the 404
** RevisionNotFound a client asking a moment later gets; never a 200 with part of its files. */
static int revision_vanished(Store *s, HttpRes *rs, const char *repo, const StoreRevision *r) {
  StoreRevision again;
  return hub_revision(s, rs, repo, r->commit, &again) != 0;
}

/* A store error while a revision's files were read: the 404 of a revision dropped
** meanwhile (its blobs go with it, and a read of one fails as a missing blob), else the
** error's own answer. */
static void answer_read_error(Store *s, HttpRes *rs, const char *repo, const StoreRevision *r, const Err *e,
                              const char *what) {
  if (e->kind != ERR_NOMEM && e->kind != ERR_BUSY && revision_vanished(s, rs, repo, r)) return;
  http_error_from(rs, e, what, json_string(e->msg));
}

/* The entries of the listed files that names holds (all of them when names is NULL), each
** once, whatever a request repeats: at most N_LISTED entries, so the answer and the work are
** bounded by the revision, not by the body. *missing counts the files not found. NULL on a
** store error. */
static json_t *entries(Store *s, const StoreRevision *r, json_t *names, int expand, int *missing, Err *e) {
  *missing = 0;
  json_t *out = json_array();
  for (size_t i = 0; i < N_LISTED; i++) {
    const char *file = listed[i];
    if (names && !names_hold(names, file)) continue;  /* paths-info leaves out what does not exist */
    HubEntry h;
    if (hub_entry(s, r, file, &h, e)) {
      if (e->kind == ERR_NOT_FOUND) { *e = (Err){0}; ++*missing; continue; }
      json_decref(out);
      return NULL;
    }
    json_array_append_new(out, tree_entry(r, file, &h, expand));
  }
  return out;
}

static int truthy(const char *v) { return v && (!strcmp(v, "") || !strcmp(v, "1") || !strcasecmp(v, "true")); }

/* GET /api/models/{repo}/tree/{rev}[/{path+}]: the files (no folders in a revision). */
void route_hub_tree(void *app, HttpReq *rq, HttpRes *rs) {
  int with_path = strstr(rq->pattern, "{path+}") != NULL;
  char repo[260];
  if (app_path_repo(rq, with_path ? 2 : 1, repo, sizeof repo)) { hub_not_found(rs, "RepoNotFound", "model name too long", NULL); return; }
  const char *rev = rq->params[rq->n_params - (with_path ? 2 : 1)];
  Store *s = app_store(app, rs);
  if (!s) return;
  StoreRevision r;
  if (hub_revision(s, rs, repo, rev, &r)) return;
  http_res_header(rs, "X-Repo-Commit", r.commit);
  if (with_path && strcmp(rq->params[rq->n_params - 1], ".")) {
    hub_not_found(rs, "EntryNotFound", "no such folder in a revision (its files are all at the top)",
                  json_pack("{s:s}", "path", rq->params[rq->n_params - 1]));
    return;
  }
  Err e = {0};
  int missing;
  json_t *list = entries(s, &r, NULL, truthy(http_query(rq, "expand")), &missing, &e);
  if (!list) { answer_read_error(s, rs, repo, &r, &e, "cannot list the files"); return; }
  if (missing && revision_vanished(s, rs, repo, &r)) { json_decref(list); return; }
  http_json(rs, 200, list);
}

/* The paths of a paths-info body: JSON {"paths": [...], "expand"} or a form
** (paths=a&paths=b&expand=true, as huggingface_hub posts it). NULL after answering 400/422. */
static json_t *paths_request(const HttpReq *rq, HttpRes *rs, int *expand) {
  const char *ct = http_header(rq, "Content-Type");
  json_t *paths;
  if (ct && !strncasecmp(ct, "application/x-www-form-urlencoded", 33)) {
    paths = json_array();
    const char *p = rq->body;
    while (*p) {
      size_t n = strcspn(p, "&");
      char *kv = strndup(p, n);
      if (!kv) break;
      /* Decode + and %XX in place. */
      char *w = kv;
      for (const char *q = kv; *q; q++) {
        if (*q == '+') *w++ = ' ';
        else if (*q == '%' && q[1] && q[2] && strchr("0123456789abcdefABCDEF", q[1]) && strchr("0123456789abcdefABCDEF", q[2])) {
          char hex[3] = {q[1], q[2], 0};
          *w++ = (char)strtol(hex, NULL, 16);
          q += 2;
        } else *w++ = *q;
      }
      *w = '\0';
      char *eq = strchr(kv, '=');
      const char *v = eq ? eq + 1 : "";
      if (eq) *eq = '\0';
      if (!strcmp(kv, "paths")) json_array_append_new(paths, http_json_text(v));
      else if (!strcmp(kv, "expand")) *expand = truthy(v);
      free(kv);
      p += n + (p[n] == '&');
    }
    return paths;
  }
  json_t *b = http_body_object(rq, rs);
  if (!b) return NULL;
  paths = json_object_get(b, "paths");
  json_t *ex = json_object_get(b, "expand");
  if (json_is_string(paths)) paths = json_pack("[O]", paths);  /* one path, as the Hub also takes it */
  else if (json_is_array(paths)) json_incref(paths);
  else {
    http_error(rs, 422, "'paths' must be a list of file names", json_pack("{s:s}", "paths", http_json_type(paths)));
    json_decref(b);
    return NULL;
  }
  *expand = json_is_true(ex);
  json_decref(b);
  return paths;
}

/* POST /api/models/{repo}/paths-info/{rev}: the entries of the paths that exist. */
void route_hub_paths_info(void *app, HttpReq *rq, HttpRes *rs) {
  char repo[260];
  if (app_path_repo(rq, 1, repo, sizeof repo)) { hub_not_found(rs, "RepoNotFound", "model name too long", NULL); return; }
  /* The repository and revision first, as the Hub answers: a request for a model that is
  ** not there is a 404 RepoNotFound whatever its body holds. */
  Store *s = app_store(app, rs);
  StoreRevision r;
  if (!s || hub_revision(s, rs, repo, rq->params[rq->n_params - 1], &r)) return;
  int expand = 0;
  json_t *paths = paths_request(rq, rs, &expand);
  if (!paths) return;
  Err e = {0};
  int missing;
  json_t *list = entries(s, &r, paths, expand, &missing, &e);
  json_decref(paths);
  if (!list) { answer_read_error(s, rs, repo, &r, &e, "cannot describe the files"); return; }
  if (missing && revision_vanished(s, rs, repo, &r)) { json_decref(list); return; }
  http_json(rs, 200, list);
  http_res_header(rs, "X-Repo-Commit", r.commit);
}

/* The pipeline a config's architectures serve (config_parse's rule, as the listing's
** SQL and serving read it): their first name, or none at all (a masked LM). */
const char *hub_pipeline_of(json_t *archs) {
  json_t *first = json_array_get(archs, 0);
  if (archs && !json_is_null(archs) && !json_is_string(first)) return NULL;
  return config_task_pipeline(config_task_of_architecture(json_string_value(first)));
}

/* GET /api/models/{repo} and /api/models/{repo}/revision/{rev}: model info. */
void route_hub_model_info(void *app, HttpReq *rq, HttpRes *rs) {
  int with_rev = strstr(rq->pattern, "/revision/") != NULL;
  char repo[260];
  if (app_path_repo(rq, with_rev, repo, sizeof repo)) { hub_not_found(rs, "RepoNotFound", "model name too long", NULL); return; }
  hub_model_info(app, rq, rs, repo, with_rev ? rq->params[rq->n_params - 1] : "main");
}

void hub_model_info(void *app, HttpReq *rq, HttpRes *rs, const char *repo, const char *rev) {
  Store *s = app_store(app, rs);
  if (!s) return;
  StoreRevision r;
  if (hub_revision(s, rs, repo, rev, &r)) return;
  Err e = {0};
  void *cfg_text = NULL;
  size_t cfg_len = 0;
  if (store_revision_file(s, &r, "config.json", &cfg_text, &cfg_len, &e)) {
    answer_read_error(s, rs, repo, &r, &e, "cannot read the config");
    return;
  }
  json_t *cfg = json_loadb(cfg_text, cfg_len, 0, NULL);
  free(cfg_text);
  json_t *archs = json_object_get(cfg, "architectures");
  json_t *mtype = json_object_get(cfg, "model_type");
  const char *pipeline = hub_pipeline_of(archs);
  int blobs = truthy(http_query(rq, "blobs"));
  json_t *siblings = json_array();
  int has_safetensors = 0, missing = 0;
  for (size_t i = 0; i < N_LISTED; i++) {
    HubEntry h;
    if (hub_entry(s, &r, listed[i], &h, &e)) {
      if (e.kind == ERR_NOT_FOUND) { e = (Err){0}; missing++; continue; }
      json_decref(siblings);
      json_decref(cfg);
      answer_read_error(s, rs, repo, &r, &e, "cannot list the files");
      return;
    }
    has_safetensors |= h.lfs;
    json_t *sib = json_pack("{s:s}", "rfilename", listed[i]);
    if (blobs) {
      json_object_set_new(sib, "blobId", json_string(h.oid));
      json_object_set_new(sib, "size", json_integer((json_int_t)h.size));
      if (h.lfs) {
        char p[200];
        json_object_set_new(sib, "lfs", json_pack("{s:s, s:I, s:i}", "sha256", h.sha, "size", (json_int_t)h.size,
                                                  "pointerSize", lfs_pointer(&h, p, sizeof p)));
      }
    }
    json_array_append_new(siblings, sib);
  }
  if (missing && revision_vanished(s, rs, repo, &r)) { json_decref(siblings); json_decref(cfg); return; }
  char id[25], date[48], created[48];
  hub_object_id(repo, id);
  hub_iso_date(r.created, date);
  hub_iso_date(r.model_created, created);   /* the repository's, as the Hub's and GET /api/models' */
  json_t *tags = json_pack("[s]", "transformers");
  if (has_safetensors) json_array_append_new(tags, json_string("safetensors"));
  if (json_is_string(mtype)) json_array_append(tags, mtype);
  if (pipeline) json_array_append_new(tags, json_string(pipeline));
  json_t *config = json_object();
  if (archs) json_object_set(config, "architectures", archs);
  if (mtype) json_object_set(config, "model_type", mtype);
  json_t *info = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:i, s:i, s:o, s:s, s:o, s:o}", "_id", id,
                           "id", repo, "modelId", repo, "sha", r.commit, "lastModified", date, "createdAt", created,
                           "private", 0, "disabled", 0, "gated", 0, "downloads", 0, "likes", 0, "tags", tags,
                           "library_name", "transformers", "config", config, "siblings", siblings);
  const char *slash = strchr(repo, '/');
  if (slash) json_object_set_new(info, "author", json_stringn(repo, (size_t)(slash - repo)));
  json_object_set_new(info, "pipeline_tag", pipeline ? json_string(pipeline) : json_null());
  json_decref(cfg);
  http_json(rs, 200, info);
  http_res_header(rs, "X-Repo-Commit", r.commit);
}
