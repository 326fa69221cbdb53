/* Names to paths inside the operator's roots (server/app/workspace.h). */
#include "server/app/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/files.h"

static const char *const work_folders[] = {"tokenizers", "datasets", "jobs", "corpora", "uploads"};

int workspace_open(Workspace *w, const char *data_dir, const char *work_dir, Err *err) {
  memset(w, 0, sizeof *w);
  if (data_dir) {
    struct stat st;
    w->data_root = realpath(data_dir, NULL);
    if (!w->data_root || stat(w->data_root, &st) || !S_ISDIR(st.st_mode)) {
      workspace_close(w);
      return err_setk(err, ERR_NOT_FOUND, "--data-dir %s: not a folder", data_dir);
    }
  }
  if (mkdir(work_dir, 0700) && errno != EEXIST) {
    err_setk(err, ERR_IO, "--work-dir %s: %s", work_dir, strerror(errno));
    workspace_close(w);
    return -1;
  }
  w->work_root = realpath(work_dir, NULL);
  if (!w->work_root) {
    err_setk(err, ERR_IO, "--work-dir %s: %s", work_dir, strerror(errno));
    workspace_close(w);
    return -1;
  }
  for (size_t i = 0; i < sizeof work_folders / sizeof work_folders[0]; i++) {
    char p[WORKSPACE_PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", w->work_root, work_folders[i]);
    if (mkdir(p, 0700) && errno != EEXIST) {
      err_setk(err, ERR_IO, "work folder %s: %s", p, strerror(errno));
      workspace_close(w);
      return -1;
    }
  }
  return 0;
}

void workspace_close(Workspace *w) {
  free(w->data_root);
  free(w->work_root);
  w->data_root = w->work_root = NULL;
}

int workspace_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 64 || name[0] == '.' || name[0] == '-') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
      return 0;
  }
  return strstr(name, "..") == NULL;
}

/* A path relative to the data root: segments of printable characters, none empty,
** "." or "..", no leading '/' or '-' (nothing that reads as an option), at most 1024 bytes. */
static int relative_path_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 1024 || name[0] == '/' || name[0] == '-') return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x20 || c == 0x7f || c == '\\') return 0;
  }
  for (const char *seg = name;;) {
    size_t len = strcspn(seg, "/");
    if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.')) return 0;
    if (!seg[len]) return 1;
    seg += len + 1;
  }
}

/* realpath(root/rel) when it lies inside root and is of the wanted type
** (S_IFREG or S_IFDIR); WORKSPACE_NOT_FOUND for anything else. */
static int inside(const char *root, const char *rel, unsigned type, char *path, size_t cap) {
  char joined[WORKSPACE_PATH_MAX];
  if (!root || (size_t)snprintf(joined, sizeof joined, "%s/%s", root, rel) >= sizeof joined) return WORKSPACE_NOT_FOUND;
  char *real = realpath(joined, NULL);
  if (!real) return WORKSPACE_NOT_FOUND;
  size_t rl = strlen(root);
  struct stat st;
  int ok = !strncmp(real, root, rl) && real[rl] == '/' && !stat(real, &st) && (st.st_mode & S_IFMT) == type &&
           strlen(real) < cap;
  if (ok) strcpy(path, real);
  free(real);
  return ok ? WORKSPACE_OK : WORKSPACE_NOT_FOUND;
}

/* The text checks every name passes; a name with '/' can only be a data-root path. */
static int check_text(const char *field, const char *name, Err *err) {
  if (workspace_name_ok(name) || relative_path_ok(name)) return WORKSPACE_OK;
  err_setk(err, ERR_INVALID, "%s: \"%.64s\" is not a name (letters, digits, - _ .) or a path inside the data folder "
               "(relative, not starting with '-', no '.' or '..' segments)", field, name);
  return WORKSPACE_BAD_NAME;
}

static int not_found(const Workspace *w, const char *field, const char *what, const char *name, Err *err) {
  if (!w->data_root && strchr(name, '/'))
    err_setk(err, ERR_INVALID, "%s: no %s \"%.64s\": this server has no --data-dir, so only registered names can be used", field, what,
            name);
  else
    err_setk(err, ERR_INVALID, "%s: no %s named \"%.64s\"%s", field, what, name, w->data_root ? " here or under the data folder" : "");
  return WORKSPACE_NOT_FOUND;
}

int workspace_corpus(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err) {
  if (!relative_path_ok(name)) {
    err_setk(err, ERR_INVALID, "%s: \"%.64s\" is neither an uploaded corpus's name nor a path inside the data folder "
             "(relative, not starting with '-', no '.' or '..' segments)", field, name);
    return WORKSPACE_BAD_NAME;
  }
  if (workspace_name_ok(name)) {
    char rel[WORKSPACE_PATH_MAX];
    snprintf(rel, sizeof rel, "corpora/%s", name);
    if (inside(w->work_root, rel, S_IFREG, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
  }
  if (!w->data_root) {
    err_setk(err, ERR_INVALID, "%s: no uploaded corpus named \"%.64s\" (this server has no --data-dir)", field, name);
    return WORKSPACE_NOT_FOUND;
  }
  if (inside(w->data_root, name, S_IFREG, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
  return not_found(w, field, "corpus file", name, err);
}

int workspace_tokenizer(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err) {
  int rc = check_text(field, name, err);
  if (rc) return rc;
  char rel[WORKSPACE_PATH_MAX];
  if (workspace_name_ok(name)) {
    snprintf(rel, sizeof rel, "tokenizers/%s/tokenizer.json", name);
    if (inside(w->work_root, rel, S_IFREG, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
  }
  if (relative_path_ok(name)) {
    if (inside(w->data_root, name, S_IFREG, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
    snprintf(rel, sizeof rel, "%s/tokenizer.json", name);
    if (inside(w->data_root, rel, S_IFREG, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
  }
  return not_found(w, field, "tokenizer", name, err);
}

int workspace_dataset(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err) {
  int rc = check_text(field, name, err);
  if (rc) return rc;
  char rel[WORKSPACE_PATH_MAX];
  if (workspace_name_ok(name)) {
    snprintf(rel, sizeof rel, "datasets/%s", name);
    if (inside(w->work_root, rel, S_IFDIR, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
  }
  if (relative_path_ok(name) && inside(w->data_root, name, S_IFDIR, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
  return not_found(w, field, "dataset", name, err);
}

int workspace_config(const Workspace *w, const char *field, const char *name, char *path, size_t cap, Err *err) {
  if (!relative_path_ok(name)) {
    err_setk(err, ERR_INVALID, "%s: \"%.64s\" is neither a preset (tiny, small, base) nor a config.json inside the data folder", field,
            name);
    return WORKSPACE_BAD_NAME;
  }
  if (inside(w->data_root, name, S_IFREG, path, cap) == WORKSPACE_OK) return WORKSPACE_OK;
  return not_found(w, field, "config file", name, err);
}

/* work_root/kind/name into path[cap], the name checked first. */
static int output_path(const Workspace *w, const char *kind, const char *name, char *path, size_t cap, Err *err) {
  if (!workspace_name_ok(name)) {
    err_setk(err, ERR_INVALID, "name: \"%.64s\" is not a name (1 to 64 letters, digits, - _ ., not starting with . or -)", name);
    return WORKSPACE_BAD_NAME;
  }
  if ((size_t)snprintf(path, cap, "%s/%s/%s", w->work_root, kind, name) >= cap) {
    err_setk(err, ERR_INVALID, "name: too long");
    return WORKSPACE_BAD_NAME;
  }
  return WORKSPACE_OK;
}

int workspace_output(const Workspace *w, const char *kind, const char *name, char *path, size_t cap, Err *err) {
  int r = output_path(w, kind, name, path, cap, err);
  if (r) return r;
  struct stat st;
  if (lstat(path, &st) == 0) {
    err_setk(err, ERR_CONFLICT, "name: a %s named \"%s\" already exists", !strcmp(kind, "tokenizers") ? "tokenizer" : "dataset", name);
    return WORKSPACE_EXISTS;
  }
  return WORKSPACE_OK;
}

int workspace_job_output(const Workspace *w, const char *kind, const char *name, char *path, size_t cap, Err *err) {
  int r = output_path(w, kind, name, path, cap, err);
  if (r) return r;
  /* lstat: the worker made a folder, so a link in its place is not the job's. */
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
    err_setk(err, ERR_NOT_FOUND, "name: no output folder \"%s\" (the server's worker makes it when it starts the job)", name);
    return WORKSPACE_NOT_FOUND;
  }
  return WORKSPACE_OK;
}

int workspace_corpus_upload(const Workspace *w, const char *name, char *path, size_t cap, Err *err) {
  int r = output_path(w, "corpora", name, path, cap, err);
  if (r) return r;
  struct stat st;
  char real[WORKSPACE_PATH_MAX];
  if (lstat(path, &st) == 0 || inside(w->data_root, name, S_IFREG, real, sizeof real) == WORKSPACE_OK) {
    err_setk(err, ERR_CONFLICT, "name: a corpus named \"%s\" already exists", name);
    return WORKSPACE_EXISTS;
  }
  return WORKSPACE_OK;
}

int workspace_upload_dir(const Workspace *w, char *path, size_t cap, Err *err) {
  if ((size_t)snprintf(path, cap, "%s/uploads", w->work_root) >= cap) return err_set(err, "upload folder path too long");
  return 0;
}

int workspace_job_file(const Workspace *w, const char *file, char *path, size_t cap, Err *err) {
  if ((size_t)snprintf(path, cap, "%s/jobs/%s", w->work_root, file) >= cap) return err_set(err, "job file path too long");
  return 0;
}

static long long file_bytes(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* An entry of GET /corpora. */
static json_t *corpus_entry(const char *name, long long bytes, int uploaded) {
  return json_pack("{s:s, s:I, s:b}", "name", name, "bytes", (json_int_t)bytes, "uploaded", uploaded);
}

/* Regular files under dir (relative names prefixed by rel), depth levels down; a name
** skip holds (an uploaded corpus's) is left out. */
static void list_files(const char *root, const char *dir, const char *rel, int depth, json_t *out, int limit,
                       const json_t *skip) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) && (int)json_array_size(out) < limit) {
    if (e->d_name[0] == '.') continue;
    char full[WORKSPACE_PATH_MAX], name[WORKSPACE_PATH_MAX], real[WORKSPACE_PATH_MAX];
    if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, e->d_name) >= sizeof full) continue;
    if ((size_t)snprintf(name, sizeof name, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >= sizeof name) continue;
    if (!relative_path_ok(name)) continue;
    /* The same rule as a request's: what resolves outside the root is not listed. */
    if (inside(root, name, S_IFREG, real, sizeof real) == WORKSPACE_OK) {
      if (!json_object_get(skip, name)) json_array_append_new(out, corpus_entry(name, file_bytes(real), 0));
    } else if (depth > 1 && inside(root, name, S_IFDIR, real, sizeof real) == WORKSPACE_OK) {
      list_files(root, full, name, depth - 1, out, limit, skip);
    }
  }
  closedir(d);
}

static int by_name(const void *a, const void *b) {
  const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
  return strcmp(json_string_value(json_object_get(x, "name")), json_string_value(json_object_get(y, "name")));
}

json_t *workspace_corpora(const Workspace *w, int limit) {
  json_t *out = json_array();
  if (!out) return NULL;
  /* The uploads first, by the resolver's rule, then the data root's files. */
  json_t *uploaded = json_object();
  char dir[WORKSPACE_PATH_MAX];
  snprintf(dir, sizeof dir, "%s/corpora", w->work_root);
  DIR *d = opendir(dir);
  struct dirent *e;
  while (uploaded && d && (e = readdir(d)) && (int)json_array_size(out) < limit) {
    char p[WORKSPACE_PATH_MAX], rel[WORKSPACE_PATH_MAX];
    if (!workspace_name_ok(e->d_name)) continue;
    snprintf(rel, sizeof rel, "corpora/%s", e->d_name);
    if (inside(w->work_root, rel, S_IFREG, p, sizeof p) != WORKSPACE_OK) continue;
    json_array_append_new(out, corpus_entry(e->d_name, file_bytes(p), 1));
    json_object_set_new(uploaded, e->d_name, json_true());
  }
  if (d) closedir(d);
  if (w->data_root && uploaded) list_files(w->data_root, w->data_root, "", 3, out, limit, uploaded);
  json_decref(uploaded);
  /* Sorted, so the page and tests see a stable order. */
  size_t n = json_array_size(out);
  json_t **items = malloc(sizeof *items * (n ? n : 1));
  if (!items) { json_decref(out); return NULL; }
  for (size_t i = 0; i < n; i++) items[i] = json_incref(json_array_get(out, i));
  qsort(items, n, sizeof *items, by_name);
  json_array_clear(out);
  for (size_t i = 0; i < n; i++) json_array_append_new(out, items[i]);
  free(items);
  return out;
}

/* ---- answers without host paths ---- */

static void scrub_root(char *text, const char *root) {
  size_t n = root ? strlen(root) : 0;
  if (!n) return;
  char *p = text;
  while ((p = strstr(p, root))) {
    if (p[n] != '/') { p += n; continue; }   /* "/data/x" is not inside root "/dat" */
    memmove(p, p + n + 1, strlen(p + n + 1) + 1);
  }
}

void workspace_scrub(const Workspace *w, char *text) {
  if (!text) return;
  /* The work root may lie inside the data root (or the other way): the longer goes first. */
  const char *a = w->work_root, *b = w->data_root;
  if (a && b && strlen(b) > strlen(a)) { const char *t = a; a = b; b = t; }
  scrub_root(text, a);
  scrub_root(text, b);
}

json_t *workspace_scrub_json(const Workspace *w, json_t *v) {
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if ((w->work_root && strstr(s, w->work_root)) || (w->data_root && strstr(s, w->data_root))) {
      char *copy = strdup(s);
      if (copy) {
        workspace_scrub(w, copy);
        json_string_set(v, copy);
        free(copy);
      }
    }
  } else if (json_is_object(v)) {
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) workspace_scrub_json(w, x);
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) workspace_scrub_json(w, x);
  }
  return v;
}
