#include "engine/data/prepare.h"
#include "engine/core/now.h"
#include "engine/core/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/platform.h"
#include "engine/data/shards.h"

/* The hash as it is written in manifests. */
static int hash_text(uint64_t h, char *out, size_t cap, Err *err) {
  int k = snprintf(out, cap, "fnv1a64:%016" PRIx64, h);
  if (k < 0 || (size_t)k >= cap) return err_set(err, "hash buffer too small");
  return 0;
}

int prepare_file_hash(const char *path, char *out, size_t cap, Err *err) {
  uint64_t size;
  FILE *f = files_fopen_regular(path, &size, err);
  if (!f) return -1;
  if (size > PREPARE_MAX_HASHED) {
    char c[32];
    fclose(f);
    return err_set(err, "%s: more than %s, too large to be a tokenizer", path, files_size_text(PREPARE_MAX_HASHED, c, sizeof c));
  }
  unsigned char buf[1 << 16];
  uint64_t h = SHARD_FNV_INIT, total = 0;
  size_t n;
  while (total <= PREPARE_MAX_HASHED && (n = fread(buf, 1, sizeof buf, f)) > 0) {
    h = shard_fnv1a64(h, buf, n);
    total += n;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) return err_set(err, "%s: read error", path);
  if (total > PREPARE_MAX_HASHED) return err_set(err, "%s: grew while being read", path);
  return hash_text(h, out, cap, err);
}

int prepare_bytes_hash(const void *data, size_t len, char *out, size_t cap, Err *err) {
  return hash_text(shard_fnv1a64(SHARD_FNV_INIT, data, len), out, cap, err);
}

PrepareOptions prepare_default_options(const char *split, int seq_len, uint32_t vocab_size) {
  PrepareOptions o;
  memset(&o, 0, sizeof o);
  o.split = split;
  o.seq_len = seq_len;
  o.shard_size = 5000;
  o.vocab_size = vocab_size;
  return o;
}

static int path_of(char *buf, size_t cap, const char *dir, const char *name, Err *err) {
  int n = snprintf(buf, cap, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= cap) return err_set(err, "%s/%s: path too long", dir, name);
  return 0;
}

enum { SET_NONE = 0, SET_SHARDS = 1, SET_MANIFEST = 2 };

/* Whether dir holds a set of this split: SET_MANIFEST (a manifest.json, of any split)
** or SET_SHARDS (a shard of the split), the path of one in *what; SET_NONE; or -1 when
** dir cannot be read. */
static int existing_set(const char *dir, const char *split, char *what, size_t cap, Err *err) {
  char path[4096];
  if (path_of(path, sizeof path, dir, "manifest.json", err)) return -1;
  if (access(path, F_OK) == 0) { snprintf(what, cap, "%s", path); return SET_MANIFEST; }
  DIR *d = opendir(dir);
  if (!d) return err_set(err, "%s: cannot open directory: %s", dir, strerror(errno));
  int found = 0;
  size_t n = strlen(split);
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    size_t split_len;
    if (shard_parse_name(e->d_name, &split_len, NULL, NULL) != 0 || split_len != n || strncmp(e->d_name, split, n) != 0) continue;
    snprintf(what, cap, "%s/%s", dir, e->d_name);
    found = SET_SHARDS;
  }
  closedir(d);
  return found;
}

/* With overwrite, the manifest in dir must be of this split: another split's set is not
** this one to replace (removing its manifest orphaned its shards, and the folder then
** served the new split under the old one's name). 0 when it is, else -1 naming its split. */
static int manifest_is_split(const char *manifest, const char *split, Err *err) {
  size_t len;
  Err e = {0};
  char *text = files_read_all(manifest, PREPARE_MAX_MANIFEST, &len, &e);
  json_t *m = text ? json_loadb(text, len, 0, NULL) : NULL;
  free(text);
  const char *was = json_string_value(json_object_get(m, "split"));
  int rc = 0;
  if (!was) rc = err_set(err, "%s: cannot tell its split (%s); --overwrite replaces a set of split '%s' only", manifest,
                         e.msg[0] ? e.msg : "not a manifest with a split", split);
  else if (strcmp(was, split))
    rc = err_set(err, "%s is the set of split '%s'; --overwrite replaces a set of split '%s' only (choose another --out)",
                 manifest, was, split);
  json_decref(m);
  return rc;
}

/* Removes the set of this split in dir: the manifest first, so an interrupted removal
** never leaves a manifest naming missing shards. */
static int remove_set(const char *dir, const char *split, Err *err) {
  char path[4096];
  if (path_of(path, sizeof path, dir, "manifest.json", err)) return -1;
  if (unlink(path) != 0 && errno != ENOENT) return err_set(err, "%s: cannot remove: %s", path, strerror(errno));
  DIR *d = opendir(dir);
  if (!d) return err_set(err, "%s: cannot open directory: %s", dir, strerror(errno));
  int rc = 0;
  size_t n = strlen(split);
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t split_len;
    if (shard_parse_name(e->d_name, &split_len, NULL, NULL) != 0 || split_len != n || strncmp(e->d_name, split, n) != 0) continue;
    if (path_of(path, sizeof path, dir, e->d_name, err) || unlink(path) != 0) {
      rc = err_set(err, "%s/%s: cannot remove: %s", dir, e->d_name, strerror(errno));
      break;
    }
  }
  closedir(d);
  return rc;
}

/* 1 when dir is a mount point: its parent is on another mount. rename() fails with
** EXDEV across mounts even of one filesystem (a bind mount), so the mount ids are
** compared; st_dev, where the kernel gives no mount id, tells only filesystems apart. */
static int on_its_own_mount(const char *dir) {
  struct statx a, b;
  char *parent = files_join(dir, "..");
  int own = 0;
  if (parent && statx(AT_FDCWD, dir, 0, STATX_MNT_ID | STATX_BASIC_STATS, &a) == 0 &&
      statx(AT_FDCWD, parent, 0, STATX_MNT_ID | STATX_BASIC_STATS, &b) == 0) {
    if ((a.stx_mask & b.stx_mask & STATX_MNT_ID) && a.stx_mnt_id != b.stx_mnt_id) own = 1;
    if (a.stx_dev_major != b.stx_dev_major || a.stx_dev_minor != b.stx_dev_minor) own = 1;
  }
  free(parent);
  return own;
}

/* 1 when dir holds nothing but "." and "..". */
static int dir_is_empty(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  int empty = 1;
  while (empty && (e = readdir(d))) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
  closedir(d);
  return empty;
}

/* Where the set goes: out_dir made canonical when it exists (so "." and symbolic links
** name the real folder), else as given with its parents created (recorded in *made, for
** a failed run to remove); *exists says which. */
static char *target_dir(const char *out_dir, int *exists, FilesMadeDirs *made, Err *err) {
  struct stat st;
  *exists = stat(out_dir, &st) == 0;
  if (*exists && !S_ISDIR(st.st_mode)) { err_set(err, "%s: not a directory", out_dir); return NULL; }
  char *t = *exists ? realpath(out_dir, NULL) : strdup(out_dir);
  if (!t) { err_set(err, "%s: %s", out_dir, strerror(errno)); return NULL; }
  size_t n = strlen(t);
  while (n > 1 && t[n - 1] == '/') t[--n] = '\0';
  if (!strcmp(t, "/")) { free(t); err_set(err, "%s: cannot write a set into the root folder", out_dir); return NULL; }
  if (!*exists) {
    char *slash = strrchr(t, '/');
    if (slash && slash != t) {
      *slash = '\0';
      int rc = files_make_dirs_undoable(t, made, err);
      *slash = '/';
      if (rc) { free(t); return NULL; }
    }
  }
  return t;
}

/* Puts the finished set (in the temporary folder tmp) into place as dir. A missing or
** empty dir is replaced by tmp in one rename: the set appears whole or not at all.
** A dir holding other files gets the shards moved in and the manifest last, so it
** never shows a manifest before its shards. With overwrite, the old set goes first. */
static int commit_set(const char *tmp, const char *dir, const PrepareOptions *o, json_t *list, Err *err) {
  struct stat st;
  int exists = stat(dir, &st) == 0;
  if (exists && o->overwrite && remove_set(dir, o->split, err)) return -1;
  if (!exists || dir_is_empty(dir)) {
    if (rename(tmp, dir) == 0) return files_sync_parent(dir, err);
    if (!exists) return err_set(err, "%s: cannot rename into place: %s", dir, strerror(errno));
    /* An empty folder that cannot be replaced (a mount point, say): the files move in. */
  }
  char from[4096], to[4096];
  for (size_t i = 0; i <= json_array_size(list); i++) {
    const char *name = i < json_array_size(list) ? json_string_value(json_object_get(json_array_get(list, i), "file"))
                                                 : "manifest.json";
    if (i == json_array_size(list) && files_sync_dir(dir, err)) return -1;
    int bad = path_of(from, sizeof from, tmp, name, err) || path_of(to, sizeof to, dir, name, err);
    if (!bad && rename(from, to) != 0) bad = err_set(err, "%s: cannot move into place: %s", to, strerror(errno));
    if (bad) {  /* the shards moved so far go again: no part of a set stays behind */
      for (size_t j = 0; j < i; j++)
        if (!path_of(to, sizeof to, dir, json_string_value(json_object_get(json_array_get(list, j), "file")), NULL)) unlink(to);
      return -1;
    }
  }
  if (files_sync_dir(dir, err)) return -1;
  rmdir(tmp);   /* (inside dir when dir is a mount point: it goes too) */
  return 0;
}

typedef struct Writer {
  const char *dir;
  const PrepareOptions *opt;
  json_t *list;
  int n_shards;
  uint64_t samples;
} Writer;

static int write_shard(Writer *w, const int32_t *ids, uint64_t n, Err *err) {
  char name[1024], path[4096];
  if (shard_name(name, sizeof name, w->opt->split, w->n_shards, n, err)) return -1;
  if (path_of(path, sizeof path, w->dir, name, err)) return -1;
  ShardInfo info;
  if (shard_write(path, ids, n, (uint32_t)w->opt->seq_len, w->opt->vocab_size, &info, err)) return -1;
  char hex[17];
  snprintf(hex, sizeof hex, "%016" PRIx64, info.checksum);
  json_t *e = json_pack("{s:s, s:I, s:s}", "file", name, "samples", (json_int_t)n, "checksum", hex);
  if (!e || json_array_append_new(w->list, e)) return err_set(err, "out of memory");
  w->n_shards++;
  w->samples += n;
  return 0;
}

static int write_manifest(const char *dir, const PrepareOptions *o, const PrepareStats *s, json_t *list, Err *err) {
  char path[4096];
  if (path_of(path, sizeof path, dir, "manifest.json", err)) return -1;
  json_t *m = json_pack("{s:s, s:i, s:s, s:i, s:I, s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:O}",
                        "format", "maskd-shards", "version", 1, "split", o->split, "seq_len", o->seq_len,
                        "vocab_size", (json_int_t)o->vocab_size, "token_width", (int)shard_token_width(o->vocab_size),
                        "tokenizer_hash", o->tokenizer_hash ? o->tokenizer_hash : "",
                        "source", o->source ? o->source : "",
                        "total_samples", (json_int_t)s->samples, "lines", (json_int_t)s->lines,
                        "lines_skipped", (json_int_t)s->lines_skipped, "tokens", (json_int_t)s->tokens,
                        "tokens_dropped", (json_int_t)s->tokens_dropped, "group_lines", o->group_lines,
                        "keep_empty", o->keep_empty, "shard_size", o->shard_size, "shards", list);
  if (!m) return err_set(err, "%s: cannot build the manifest", path);
  char *text = json_dumps(m, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(m);
  if (!text) return err_set(err, "%s: out of memory", path);
  int rc = strlen(text) + 1 > PREPARE_MAX_MANIFEST ? err_set(err, "%s: the manifest would exceed its limit; use more samples per shard", path)
                                                  : files_write_atomic(path, text, strlen(text), err);
  free(text);
  return rc;
}

static int is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v') return 0;
  return 1;
}

static void show_progress(const PrepareStats *s, const PrepareOptions *o, uint64_t bytes, uint64_t total, double elapsed, int final) {
  double rate = elapsed > 0 ? (double)s->lines / elapsed : 0;
  char eta[32] = "?";
  if (final) snprintf(eta, sizeof eta, "done");
  else if (total > 0 && bytes > 0) snprintf(eta, sizeof eta, "%.0fs", elapsed * (double)(total - (bytes < total ? bytes : total)) / (double)bytes);
  char pct[16] = "";
  if (total > 0) snprintf(pct, sizeof pct, " (%.1f%%)", 100.0 * (double)(bytes < total ? bytes : total) / (double)total);
  fprintf(stderr, "prepare %s: %" PRIu64 " lines%s, %.0f lines/s, %" PRIu64 " tokens, %" PRIu64 " samples in %d shards, %.1fs, ETA %s\n",
          o->split, s->lines, pct, rate, s->tokens, s->samples, s->shards, elapsed, eta);
}

int prepare_run(FILE *in, uint64_t total_bytes, const char *out_dir, const PrepareOptions *opt,
                PrepareEncodeFn encode, void *ctx, PrepareStats *stats_out, Err *err) {
  if (!opt->split || !*opt->split || strchr(opt->split, '/')) return err_set(err, "split name must be non-empty and hold no '/'");
  if (opt->seq_len <= 0) return err_set(err, "sequence length %d must be > 0", opt->seq_len);
  if (opt->shard_size <= 0) return err_set(err, "shard size %d must be > 0", opt->shard_size);
  if (opt->vocab_size == 0) return err_set(err, "vocabulary size must be > 0");
  if (opt->group_lines < 0) return err_set(err, "group size %d must be >= 0", opt->group_lines);
  uint64_t L = (uint64_t)opt->seq_len, cap_tokens = L * (uint64_t)opt->shard_size;
  if (SHARD_HEADER_SIZE + cap_tokens * shard_token_width(opt->vocab_size) > SHARD_MAX_FILE) {
    char c[32];
    return err_set(err, "%d samples of %d tokens make shards over %s; give a smaller shard size", opt->shard_size,
                   opt->seq_len, files_size_text(SHARD_MAX_FILE, c, sizeof c));
  }
  int exists;
  char what[4200];
  FilesMadeDirs made = {0};
  char *dir = target_dir(out_dir, &exists, &made, err);
  if (!dir) return -1;
  int found = exists ? existing_set(dir, opt->split, what, sizeof what, err) : SET_NONE;
  if (found < 0 || (found && !opt->overwrite) || (found == SET_MANIFEST && manifest_is_split(what, opt->split, err))) {
    if (found > 0 && !opt->overwrite) err_set(err, "%s already exists (a prepared set; choose another --out or --overwrite)", what);
    free(dir);
    return -1;
  }
  /* Everything is written into a temporary folder and put in place at the end: beside
  ** the target, so that a missing or empty one is replaced in one rename; inside an
  ** existing target that is a mount point (its parent on another mount, where the
  ** files could not be renamed in) or whose parent cannot be written, so that the files
  ** move in on the target's own filesystem. */
  char *tmp = NULL;
  int inside = exists && on_its_own_mount(dir);
  if (!inside && files_make_temp_dir(dir, &tmp, err)) {
    if (!exists) { files_made_dirs_remove(&made); free(dir); return -1; }
    inside = 1;
  }
  if (inside) {
    char *name = files_join(dir, "set");   /* the temporary: DIR/.set.tmp-XXXXXX */
    int bad = !name ? err_set(err, "out of memory") : files_make_temp_dir(name, &tmp, err);
    free(name);
    if (bad) { free(dir); return -1; }
  }

  int32_t *buf = malloc((size_t)cap_tokens * sizeof *buf);
  int enc_cap = 4096;
  int32_t *enc = malloc((size_t)enc_cap * sizeof *enc);
  Writer w = {tmp, opt, json_array(), 0, 0};
  PrepareStats s;
  memset(&s, 0, sizeof s);
  FilesLines lines;
  files_lines_init(&lines, in, PREPARE_MAX_LINE);
  int rc = 0;
  if (!buf || !enc || !w.list) rc = err_set(err, "out of memory");

  const char *src = opt->source && *opt->source ? opt->source : "input";
  double t0 = now_monotonic(), last = t0, last_report = t0;
  uint64_t fill = 0;
  char *line;
  size_t n;
  int got;
  while (rc == 0 && (got = files_lines_next(&lines, &line, &n, err)) > 0) {
    s.lines++;
    if (opt->stop && *opt->stop) { rc = err_set(err, "stopped by a signal after %" PRIu64 " lines; nothing was written", s.lines); break; }
    if (n > 0 && line[n - 1] == '\r') n--;
    if (!opt->keep_empty && is_blank(line, n)) s.lines_skipped++;
    else {
      int k = encode(ctx, line, n, enc, enc_cap, err);
      if (k > enc_cap) {
        int32_t *bigger = realloc(enc, (size_t)k * sizeof *enc);
        if (!bigger) { rc = err_set(err, "out of memory"); break; }
        enc = bigger;
        enc_cap = k;
        k = encode(ctx, line, n, enc, enc_cap, err);
        if (k > enc_cap) { rc = err_set(err, "%s line %" PRIu64 ": the encoder's length changed between calls", src, s.lines); break; }
      }
      if (k < 0) {
        char where[300];
        snprintf(where, sizeof where, "%.200s line %" PRIu64 ": encode", src, s.lines);
        err_prefix(err, where);
        rc = -1;
        break;
      }
      for (int i = 0; i < k; i++) {
        if (enc[i] < 0 || (uint32_t)enc[i] >= opt->vocab_size) {
          rc = err_set(err, "%s line %" PRIu64 ": id %d is outside the vocabulary [0, %" PRIu32 ")", src, s.lines, (int)enc[i], opt->vocab_size);
          break;
        }
        buf[fill++] = enc[i];
        if (fill == cap_tokens) {
          if (write_shard(&w, buf, (uint64_t)opt->shard_size, err)) { rc = -1; break; }
          fill = 0;
        }
      }
      s.tokens += (uint64_t)(k > 0 ? k : 0);
    }
    if (rc == 0 && opt->group_lines > 0 && s.lines % (uint64_t)opt->group_lines == 0) {
      s.tokens_dropped += fill % L;
      fill -= fill % L;
    }
    s.samples = w.samples + fill / L;
    s.shards = w.n_shards;
    if ((opt->progress || opt->report) && rc == 0) {
      double now = now_monotonic();
      if (opt->progress && now - last >= 1.0) { show_progress(&s, opt, lines.bytes, total_bytes, now - t0, 0); last = now; }
      if (opt->report && now - last_report >= 0.5) {
        opt->report(opt->report_ctx, "encoding", (double)lines.bytes, total_bytes ? (double)total_bytes : -1, "bytes");
        last_report = now;
      }
    }
  }
  if (rc == 0 && got < 0) {
    char where[300];
    snprintf(where, sizeof where, "%.200s after line %" PRIu64, src, s.lines);
    rc = err_prefix(err, where);
  }
  if (rc == 0) {
    s.tokens_dropped += fill % L;
    fill -= fill % L;
    if (fill > 0 && write_shard(&w, buf, fill / L, err)) rc = -1;
  }
  s.samples = w.samples;
  s.shards = w.n_shards;
  if (rc == 0 && s.samples == 0)
    rc = err_set(err, "no full chunk: %" PRIu64 " tokens from %" PRIu64 " lines make no sample of %d tokens", s.tokens, s.lines, opt->seq_len);
  s.seconds = now_monotonic() - t0;
  if (rc == 0) rc = write_manifest(tmp, opt, &s, w.list, err);
  if (rc == 0 && opt->stop && *opt->stop) rc = err_set(err, "stopped by a signal; nothing was written");
  if (rc == 0) rc = commit_set(tmp, dir, opt, w.list, err);
  if (rc == 0 && opt->progress) show_progress(&s, opt, lines.bytes, total_bytes, s.seconds, 1);
  if (rc == 0 && opt->report)
    opt->report(opt->report_ctx, "encoding", (double)lines.bytes, total_bytes ? (double)total_bytes : (double)lines.bytes, "bytes");
  /* A failed run leaves nothing behind: the temporary folder goes, and so do the target's
  ** parents it made; the target is as it was. */
  if (rc != 0) files_remove_flat_dir(tmp);
  if (rc != 0) files_made_dirs_remove(&made);
  else files_made_dirs_keep(&made);
  if (stats_out) *stats_out = s;
  files_lines_free(&lines);
  free(buf);
  free(enc);
  free(tmp);
  free(dir);
  json_decref(w.list);
  return rc;
}
