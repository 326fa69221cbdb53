#include "engine/prepare.h"
#include "engine/files.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/platform.h"
#include "engine/shards.h"

int prepare_file_hash(const char *path, char *out, size_t cap, Err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(err, "%s: cannot open: %s", path, strerror(errno));
  unsigned char buf[1 << 16];
  uint64_t h = SHARD_FNV_INIT;
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = shard_fnv1a64(h, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) return err_set(err, "%s: read error", path);
  int k = snprintf(out, cap, "fnv1a64:%016" PRIx64, h);
  if (k < 0 || (size_t)k >= cap) return err_set(err, "hash buffer too small");
  return 0;
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

/* Refuses (or with overwrite, removes) an existing set of this split in dir. The manifest
** goes first, so an interrupted removal never leaves a manifest naming missing shards. */
static int clear_existing(const char *dir, const char *split, int overwrite, Err *err) {
  char path[4096];
  if (path_of(path, sizeof path, dir, "manifest.json", err)) return -1;
  if (access(path, F_OK) == 0) {
    if (!overwrite) return err_set(err, "%s already exists (a prepared set; choose another --out or --overwrite)", path);
    if (unlink(path) != 0) return err_set(err, "%s: cannot remove: %s", path, strerror(errno));
  }
  DIR *d = opendir(dir);
  if (!d) return err_set(err, "%s: cannot open directory: %s", dir, strerror(errno));
  int rc = 0;
  size_t n = strlen(split);
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t split_len;
    if (shard_parse_name(e->d_name, &split_len, NULL, NULL) != 0 || split_len != n || strncmp(e->d_name, split, n) != 0) continue;
    if (!overwrite) { rc = err_set(err, "%s/%s already exists (choose another --out or --overwrite)", dir, e->d_name); break; }
    if (path_of(path, sizeof path, dir, e->d_name, err) || unlink(path) != 0) {
      rc = err_set(err, "%s/%s: cannot remove: %s", dir, e->d_name, strerror(errno));
      break;
    }
  }
  closedir(d);
  return rc;
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
  char path[4096], tmp[4200];
  if (path_of(path, sizeof path, dir, "manifest.json", err)) return -1;
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
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
  int rc = json_dump_file(m, tmp, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(m);
  if (rc != 0) { unlink(tmp); return err_set(err, "%s: cannot write", tmp); }
  if (rename(tmp, path) != 0) { rc = err_set(err, "%s: cannot rename into place: %s", path, strerror(errno)); unlink(tmp); return rc; }
  return 0;
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
  if (files_make_dirs(out_dir, err) || clear_existing(out_dir, opt->split, opt->overwrite, err)) return -1;

  uint64_t L = (uint64_t)opt->seq_len, cap_tokens = L * (uint64_t)opt->shard_size;
  int32_t *buf = malloc((size_t)cap_tokens * sizeof *buf);
  int enc_cap = 4096;
  int32_t *enc = malloc((size_t)enc_cap * sizeof *enc);
  Writer w = {out_dir, opt, json_array(), 0, 0};
  PrepareStats s;
  memset(&s, 0, sizeof s);
  char *line = NULL;
  size_t line_cap = 0;
  int rc = 0;
  if (!buf || !enc || !w.list) rc = err_set(err, "out of memory");

  const char *src = opt->source && *opt->source ? opt->source : "input";
  double t0 = platform_now(), last = t0;
  uint64_t fill = 0, bytes = 0;
  ssize_t got;
  while (rc == 0 && (got = getline(&line, &line_cap, in)) >= 0) {
    bytes += (uint64_t)got;
    s.lines++;
    size_t n = (size_t)got;
    if (n > 0 && line[n - 1] == '\n') n--;
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
    if (opt->progress && rc == 0) {
      double now = platform_now();
      if (now - last >= 1.0) { show_progress(&s, opt, bytes, total_bytes, now - t0, 0); last = now; }
    }
  }
  if (rc == 0 && ferror(in)) rc = err_set(err, "%s: read error after line %" PRIu64 ": %s", src, s.lines, strerror(errno));
  if (rc == 0) {
    s.tokens_dropped += fill % L;
    fill -= fill % L;
    if (fill > 0 && write_shard(&w, buf, fill / L, err)) rc = -1;
  }
  s.samples = w.samples;
  s.shards = w.n_shards;
  if (rc == 0 && s.samples == 0)
    rc = err_set(err, "no full chunk: %" PRIu64 " tokens from %" PRIu64 " lines make no sample of %d tokens", s.tokens, s.lines, opt->seq_len);
  s.seconds = platform_now() - t0;
  if (rc == 0) rc = write_manifest(out_dir, opt, &s, w.list, err);
  if (rc == 0 && opt->progress) show_progress(&s, opt, bytes, total_bytes, s.seconds, 1);
  if (rc != 0) {
    /* A failed run leaves no shard behind, so a directory scan never mistakes a part for a set. */
    char path[4096];
    for (size_t i = 0; i < json_array_size(w.list); i++) {
      const char *name = json_string_value(json_object_get(json_array_get(w.list, i), "file"));
      if (name && path_of(path, sizeof path, out_dir, name, NULL) == 0) unlink(path);
    }
  }
  if (stats_out) *stats_out = s;
  free(line);
  free(buf);
  free(enc);
  json_decref(w.list);
  return rc;
}
