/* The store's blobs: content-addressed by sha256, written whole or streamed, in
** CHUNK_BYTES chunks, read whole or in place, verified, and collected when nothing
** refers to them (see store.h). */
#include "store/store.h"
#include "store/store_db.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/now.h"
#include "store/sha256.h"

/* ---- blobs ---- */

/* Inserts a blob inside the caller's transaction (no-op when present). */
int sdb_blob_put_tx(Store *s, const void *data, size_t len, const char *hex, Err *err) {
  if ((uint64_t)len > STORE_MAX_BLOB) return err_setk(err, ERR_TOO_LARGE, "store: blob of %zu bytes, more than a blob may hold", len);
  sqlite3_stmt *st = sdb_prep(s, "INSERT OR IGNORE INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)len);
  sqlite3_bind_double(st, 3, now_wall());
  if (sdb_step_done(s, st, err, "blob")) return -1;
  if (sqlite3_changes(s->db) == 0) return 0;   /* the same content is already there */
  const unsigned char *p = data;
  size_t idx = 0, off = 0;
  do {
    size_t n = len - off < CHUNK_BYTES ? len - off : CHUNK_BYTES;
    st = sdb_prep(s, "INSERT INTO blob_chunks(sha256, idx, data) VALUES (?, ?, ?)", err);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)idx);
    sqlite3_bind_blob64(st, 3, n ? p + off : (const void *)"", n, SQLITE_STATIC);
    if (sdb_step_done(s, st, err, "blob chunk")) return -1;
    off += n;
    idx++;
  } while (off < len);
  return 0;
}

/* A streamed blob: chunks are written under a temporary key as the bytes arrive and
** hashed on the way, each chunk in a short write transaction of its own, so that other
** writers (a training's metrics, HTTP writes) wait at most one chunk's insert rather than
** the whole push (a 1.2 GB model held the write lock for 1 min 41 s, and every other
** writer failed after the busy timeout). The push's last transaction moves the rows to
** the real key (sdb_stream_finish_tx); until then nothing refers to them, so a crash
** leaves only the temporary rows, swept later (sdb_sweep_streams). */
struct StoreBlobWriter {
  Store *s;
  StoreSha256 sha;
  unsigned char *buf;     /* one chunk */
  size_t fill, written, len;
  int64_t idx;
  const char *key;
  int failed;
};

/* Inserts chunk idx under the temporary key and marks the stream alive (its row's
** created time, which sdb_sweep_streams reads), in a write transaction of its own. */
static int chunk_insert(Store *s, const char *key, int64_t idx, const void *data, size_t n, Err *err) {
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "UPDATE blobs SET created = ? WHERE sha256 = ?", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_double(st, 1, now_wall());
  sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
  if (sdb_step_done(s, st, err, "blob")) return sdb_rollback(s);
  if (sqlite3_changes(s->db) == 0) {
    sdb_rollback(s);
    return err_set(err, "store: blob stream: its temporary rows were removed while it was written (taken for a dead process's)");
  }
  st = sdb_prep(s, "INSERT INTO blob_chunks(sha256, idx, data) VALUES (?, ?, ?)", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)idx);
  sqlite3_bind_blob64(st, 3, n ? data : (const void *)"", n, SQLITE_STATIC);
  if (sdb_step_done(s, st, err, "blob chunk")) return sdb_rollback(s);
  return sdb_commit(s, err);
}

int store_blob_write(StoreBlobWriter *w, const void *data, size_t n, Err *err) {
  if (w->failed) return err_setk(err, ERR_INVALID, "store: blob stream: write after a failed write");
  if (n > w->len - w->written) {
    w->failed = 1;
    return err_setk(err, ERR_INVALID, "store: blob stream: more than the %zu bytes announced", w->len);
  }
  const unsigned char *p = data;
  store_sha256_update(&w->sha, p, n);
  w->written += n;
  while (n) {
    size_t k = CHUNK_BYTES - w->fill < n ? CHUNK_BYTES - w->fill : n;
    memcpy(w->buf + w->fill, p, k);
    w->fill += k;
    p += k;
    n -= k;
    /* Full chunks go out at once, so the rows match blob_put_tx's chunking. */
    if (w->fill == CHUNK_BYTES) {
      if (chunk_insert(w->s, w->key, w->idx, w->buf, w->fill, err)) { w->failed = 1; return -1; }
      w->idx++;
      w->fill = 0;
    }
  }
  return 0;
}

int store_blob_sink(void *w, const void *data, size_t n, Err *err) { return store_blob_write(w, data, n, err); }

/* Temporary keys name the process and a counter shared by all its connections (two
** connections of one process may stream at once now that a stream holds no lock). */
static _Atomic unsigned long long stream_counter;

/* This process's pid namespace (the inode of /proc/self/ns/pid), 0 when unknown: a pid
** means a process only inside its namespace, and kill() answers ESRCH for another's. */
static unsigned long long own_pid_ns(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* Deletes a temporary key's rows (the cascade takes its chunks) in a transaction of its
** own; waits at most wait_ms for the write lock. 0, or -1 when it could not. */
static int stream_drop(Store *s, const char *key, double created, int wait_ms) {
  if (wait_ms >= 0) sqlite3_busy_timeout(s->db, wait_ms);
  int rc = sdb_begin(s, NULL);
  if (wait_ms >= 0) sqlite3_busy_timeout(s->db, s->busy_ms);
  if (rc) return -1;
  /* created > 0: only if the stream has not written since it was found stale or dead. */
  sqlite3_stmt *st = sdb_prep(s, created > 0 ? "DELETE FROM blobs WHERE sha256 = ? AND created = ?" : "DELETE FROM blobs WHERE sha256 = ?", NULL);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  if (created > 0) sqlite3_bind_double(st, 2, created);
  if (sdb_step_done(s, st, NULL, "blob")) return sdb_rollback(s);
  return sdb_commit(s, NULL);
}

int sdb_stream_blob(Store *s, const StoreStream *in, char key[65], char hex[65], Err *err) {
  key[0] = '\0';
  if (!in->produce) return err_setk(err, ERR_INVALID, "push: a stream without a producer");
  if (in->len == 0) return err_setk(err, ERR_INVALID, "push: an empty stream");
  if ((uint64_t)in->len > STORE_MAX_BLOB)
    return err_setk(err, ERR_TOO_LARGE, "store: blob of %zu bytes, more than a blob may hold", in->len);
  /* The key must pass CHECK (length = 64) and the foreign key, and can never be a
  ** sha256 ('~' is not hex). It names the process that writes it for sdb_sweep_streams:
  ** its pid namespace, pid and start time (in a container the pid is the same at every
  ** start, and the counter starts again: a pid alone reused a killed push's key). */
  char k[65];
  int kn = snprintf(k, sizeof k, "~stream-%llx-%d-%llx-%llx", (unsigned long long)own_pid_ns(), (int)getpid(),
                    (unsigned long long)sdb_process_start(getpid()), ++stream_counter);
  if (kn <= 0 || kn > 64) return err_setk(err, ERR_INTERNAL, "store: blob stream: a temporary key of %d bytes", kn);
  memset(k + kn, '~', 64 - (size_t)kn);
  k[64] = '\0';
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "INSERT INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)in->len);
  sqlite3_bind_double(st, 3, now_wall());
  if (sdb_step_done(s, st, err, "blob") || sdb_commit(s, err)) return sdb_rollback(s);
  StoreBlobWriter w = {.s = s, .len = in->len, .key = k, .buf = malloc(CHUNK_BYTES)};
  int rc = w.buf ? 0 : err_setk(err, ERR_NOMEM, "store: out of memory for a blob chunk");
  store_sha256_init(&w.sha);
  if (rc == 0) rc = in->produce(in->ctx, &w, err);
  if (rc == 0 && w.failed) rc = err_setk(err, ERR_INVALID, "store: blob stream: the producer ignored a failed write");
  if (rc == 0 && w.written != w.len)
    rc = err_setk(err, ERR_INVALID, "store: blob stream: %zu bytes of the %zu announced", w.written, w.len);
  if (rc == 0 && w.fill) rc = chunk_insert(s, k, w.idx, w.buf, w.fill, err);
  free(w.buf);
  if (rc) {
    stream_drop(s, k, 0, -1);   /* else the next sweep takes them */
    return -1;
  }
  unsigned char d[32];
  store_sha256_final(&w.sha, d, hex);
  memcpy(key, k, 65);
  return 0;
}

int sdb_stream_finish_tx(Store *s, const char *key, const char *hex, size_t len, Err *err) {
  /* The rows must all still be there: a sweep that took this process for a dead one (a
  ** pid from another pid namespace) or this stream for a stuck one may have removed them. */
  sqlite3_stmt *st = sdb_prep(s, "SELECT count(*), COALESCE(sum(length(data)), -1) FROM blob_chunks WHERE sha256 = ?", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_int64 chunks = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1, bytes = rc == SQLITE_ROW ? sqlite3_column_int64(st, 1) : -1;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return sdb_fail(s, err, "blob chunks");
  if (bytes < 0 || (uint64_t)bytes != len || chunks != (sqlite3_int64)((len + CHUNK_BYTES - 1) / CHUNK_BYTES))
    return err_set(err, "store: blob stream: its temporary rows were removed while it was written (taken for a dead process's)");
  st = sdb_prep(s, "INSERT OR IGNORE INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)len);
  sqlite3_bind_double(st, 3, now_wall());
  if (sdb_step_done(s, st, err, "blob")) return -1;
  if (sqlite3_changes(s->db) == 1) {
    st = sdb_prep(s, "UPDATE blob_chunks SET sha256 = ? WHERE sha256 = ?", err);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if (sdb_step_done(s, st, err, "blob chunks")) return -1;
  }
  /* Cascades to the chunks left under the key when the content was there already. */
  st = sdb_prep(s, "DELETE FROM blobs WHERE sha256 = ?", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  return sdb_step_done(s, st, err, "blob");
}

void sdb_stream_drop(Store *s, const char *key) {
  if (key && key[0]) stream_drop(s, key, 0, -1);
}

/* ---- pins: blobs a download is reading, kept from store_gc ---- */

int store_blob_pin(Store *s, const char *hex, char key[65], Err *err) {
  key[0] = '\0';
  if (!sdb_is_hex(hex, 64, 64)) return err_setk(err, ERR_NOT_FOUND, "store: blob \"%.70s\": not a sha256", hex ? hex : "");
  /* Named as a stream's temporary key is, for sdb_sweep_streams: pid namespace, pid,
  ** start time, counter. */
  char k[65];
  int kn = snprintf(k, sizeof k, "~read-%llx-%d-%llx-%llx", (unsigned long long)own_pid_ns(), (int)getpid(),
                    (unsigned long long)sdb_process_start(getpid()), ++stream_counter);
  if (kn <= 0 || kn >= (int)sizeof k) return err_setk(err, ERR_INTERNAL, "store: blob pin: a key of %d bytes", kn);
  /* A store this process may only read cannot be pinned, nor pruned by it: the download
  ** reads unpinned (key stays empty: nothing to unpin) rather than failing. */
  if (sqlite3_db_readonly(s->db, "main") == 1) return 0;
  /* The blob checked and pinned in one write transaction: gc's delete comes before it
  ** (the blob is gone: not found) or after it (the blob stays). */
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "SELECT 1 FROM blobs WHERE sha256 = ?", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) {
    if (rc == SQLITE_DONE) err_setk(err, ERR_NOT_FOUND, "store: blob %.12s is gone", hex);
    else sdb_fail(s, err, "blob");
    return sdb_rollback(s);
  }
  if (!(st = sdb_prep(s, "INSERT INTO blob_readers(key, sha256, created) VALUES (?, ?, ?)", err))) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, hex, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, now_wall());
  if (sdb_step_done(s, st, err, "blob pin") || sdb_commit(s, err)) return sdb_rollback(s);
  memcpy(key, k, (size_t)kn + 1);
  return 0;
}

void store_blob_unpin(Store *s, const char *key) {
  if (!key || !key[0] || sdb_begin(s, NULL)) return;
  sqlite3_stmt *st = sdb_prep(s, "DELETE FROM blob_readers WHERE key = ?", NULL);
  if (!st) { sdb_rollback(s); return; }
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  if (sdb_step_done(s, st, NULL, "blob pin")) { sdb_rollback(s); return; }
  sdb_commit(s, NULL);
}

/* Pins of processes that are gone (judged as streams are: in this pid namespace only). */
static void sweep_pins(Store *s) {
  sqlite3_stmt *st = sdb_prep(s, "SELECT key FROM blob_readers", NULL);
  if (!st) return;
  char keys[16][65];
  int n = 0;
  while (n < 16 && sqlite3_step(st) == SQLITE_ROW) {
    const char *key = (const char *)sqlite3_column_text(st, 0);
    unsigned long long ns = 0, start = 0;
    int pid = 0;
    if (!key || strlen(key) > 64 || sscanf(key, "~read-%llx-%d-%llx-", &ns, &pid, &start) != 3) continue;
    if (ns != 0 && ns == own_pid_ns() && sdb_pid_gone(pid, (int64_t)start)) memcpy(keys[n++], key, strlen(key) + 1);
  }
  sqlite3_finalize(st);
  for (int i = 0; i < n; i++) {
    /* Never waiting for the lock, as the streams' sweep: a busy store is swept later. */
    sqlite3_busy_timeout(s->db, 0);
    store_blob_unpin(s, keys[i]);
    sqlite3_busy_timeout(s->db, s->busy_ms);
  }
}

/* A stream whose row has not been touched for this long is stuck (or its pid was reused
** by another process): a live stream touches it at every chunk, CHUNK_BYTES apart. */
#define STREAM_STALE_S 3600.0

void sdb_sweep_streams(Store *s) {
  sqlite3_stmt *st = sdb_prep(s, "SELECT sha256, created FROM blobs WHERE sha256 >= '~stream-' AND sha256 < '~stream.'", NULL);
  if (!st) return;
  /* Keys read first, deleted after: never a write under a read statement, nor the write
  ** lock taken when there is nothing to sweep (an open only reads). */
  char keys[16][65];
  double created[16];
  int n = 0;
  double now = now_wall();
  while (n < 16 && sqlite3_step(st) == SQLITE_ROW) {
    const char *key = (const char *)sqlite3_column_text(st, 0);
    double t = sqlite3_column_double(st, 1);
    unsigned long long ns = 0, start = 0;
    int pid = 0;
    if (!key || strlen(key) != 64 || sscanf(key, "~stream-%llx-%d-%llx-", &ns, &pid, &start) != 3) continue;
    /* A stream is gone when its process is: judged by pid and start time in this pid
    ** namespace only (in another, the pid names some other process or none); a live
    ** process's, this one's included, is never taken unless stale. */
    int gone = ns != 0 && ns == own_pid_ns() && sdb_pid_gone(pid, (int64_t)start);
    if (!gone && now - t < STREAM_STALE_S) continue;
    memcpy(keys[n], key, 65);
    created[n++] = t;
  }
  sqlite3_finalize(st);
  /* Best effort, never waiting for the lock: a busy store is swept by a later call. */
  for (int i = 0; i < n; i++)
    if (stream_drop(s, keys[i], created[i], 0)) break;
  sweep_pins(s);
}

int store_blob_put(Store *s, const void *data, size_t len, char hex[65], Err *err) {
  if (!data && len) return err_set(err, "store: blob: no data");
  store_sha256_hex(data ? data : "", len, hex);
  if (sdb_begin(s, err)) return -1;
  if (sdb_blob_put_tx(s, data ? data : "", len, hex, err)) return sdb_rollback(s);
  return sdb_commit(s, err);
}

int sdb_is_hex(const char *h, size_t min, size_t max) {
  size_t n = h ? strlen(h) : 0;
  if (n < min || n > max) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)h[i]) || isupper((unsigned char)h[i])) return 0;
  return 1;
}

/* ---- a blob read in place ---- */

/* A reader keeps no transaction between reads: each chunk is read in a short read
** transaction of its own (own_snapshot), looked up by (sha256, idx) each time. A read
** snapshot held for a whole download kept WAL checkpoints from reaching the end of the
** log, and a slow client while training pushed grew the -wal file without bound.
** Blobs are immutable by key, so the bytes read are the same whichever snapshot reads
** them; their rows are not (a blob collected and pushed again gets new rowids), hence
** the lookup by key. */
struct StoreBlobReader {
  Store *s;
  char hex[65];
  uint64_t len;
  int n;                  /* chunks */
  uint64_t *start;        /* chunk i's first byte in the blob; start[n] = len */
  sqlite3_stmt *find;     /* chunk (hex, idx)'s rowid and length; reset after each use */
  StoreSha256 sha;        /* the bytes [0, hashed) so far, hashed as they were read in order */
  uint64_t hashed;
  int own_snapshot;       /* each read takes a read transaction of its own; else reads in the caller's */
};

void store_blob_close(StoreBlobReader *r) {
  if (!r) return;
  sqlite3_finalize(r->find);
  free(r->start);
  free(r);
}

/* store_blob_open() when own_snapshot is set: the chunk list is read in a short read
** transaction of its own. Else the reader reads inside the caller's transaction. */
static StoreBlobReader *reader_open(Store *s, const char *hex, int own_snapshot, uint64_t *len, Err *err) {
  if (!sdb_is_hex(hex, 64, 64)) { err_set(err, "store: blob \"%.70s\": not a sha256", hex ? hex : ""); return NULL; }
  StoreBlobReader *r = calloc(1, sizeof *r);
  if (!r) { err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  /* The size and the chunk list from one snapshot (a writer running meanwhile changes nothing we see). */
  int began = own_snapshot && sqlite3_get_autocommit(s->db);
  if (began && sdb_exec(s, "BEGIN", err)) { free(r); return NULL; }
  r->own_snapshot = own_snapshot;
  r->s = s;
  snprintf(r->hex, sizeof r->hex, "%s", hex);
  store_sha256_init(&r->sha);
  sqlite3_stmt *st =
      sdb_prep(s, "SELECT size, (SELECT count(*) FROM blob_chunks WHERE sha256 = ?1) FROM blobs WHERE sha256 = ?1", err);
  if (!st) goto fail;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) err_set(err, "store: blob %.12s is missing", hex);
    else sdb_fail(s, err, "blob");
    goto fail;
  }
  sqlite3_int64 size = sqlite3_column_int64(st, 0), chunks = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
  /* Chunks are CHUNK_BYTES each: more than one per KiB is damage (and would size the table below). */
  if (size < 0 || (uint64_t)size > STORE_MAX_BLOB || chunks < 0 || chunks > (size / 1024 + 2)) {
    err_set(err, "store: blob %.12s is damaged (its size %lld or %lld chunks are out of range)", hex, (long long)size,
            (long long)chunks);
    goto fail;
  }
  r->len = (uint64_t)size;
  r->start = malloc(((size_t)chunks + 1) * sizeof *r->start);
  if (!r->start) { err_setk(err, ERR_NOMEM, "out of memory"); goto fail; }
  /* length() reads a value's size from its record header, not its bytes. */
  if (!(st = sdb_prep(s, "SELECT idx, length(data) FROM blob_chunks WHERE sha256 = ? ORDER BY idx", err))) goto fail;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  uint64_t at = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && r->n < chunks) {
    sqlite3_int64 n = sqlite3_column_int64(st, 1);
    if (sqlite3_column_int64(st, 0) != r->n || n < 0 || (uint64_t)n > r->len - at) break;
    r->start[r->n++] = at;
    at += (uint64_t)n;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) { sdb_fail(s, err, "blob"); goto fail; }
  if (rc == SQLITE_ROW || r->n != chunks || at != r->len) {
    err_set(err, "store: blob %.12s is damaged (chunks do not add up)", hex);
    goto fail;
  }
  r->start[r->n] = at;
  if (!(r->find = sdb_prep(s, "SELECT id, length(data) FROM blob_chunks WHERE sha256 = ? AND idx = ?", err))) goto fail;
  if (began) sdb_exec(s, "COMMIT", NULL);   /* ends the read transaction */
  *len = r->len;
  return r;
fail:
  if (began) sdb_exec(s, "COMMIT", NULL);
  store_blob_close(r);
  return NULL;
}

StoreBlobReader *store_blob_open(Store *s, const char *hex, uint64_t *len, Err *err) { return reader_open(s, hex, 1, len, err); }

/* k bytes of chunk c from byte at of the chunk, in a read transaction of its own (unless the
** caller holds one): the chunk found by key and index, then read through incremental blob I/O,
** whose handle is closed before the transaction ends. */
static int chunk_read(StoreBlobReader *r, int c, uint64_t at, unsigned char *dst, size_t k, Err *err) {
  Store *s = r->s;
  int began = r->own_snapshot && sqlite3_get_autocommit(s->db);
  if (began && sdb_exec(s, "BEGIN", err)) return -1;
  sqlite3_bind_text(r->find, 1, r->hex, -1, SQLITE_STATIC);
  sqlite3_bind_int64(r->find, 2, c);
  int rc = sqlite3_step(r->find), ok = -1;
  if (rc == SQLITE_ROW) {
    sqlite3_int64 id = sqlite3_column_int64(r->find, 0), n = sqlite3_column_int64(r->find, 1);
    sqlite3_reset(r->find);
    sqlite3_blob *b = NULL;
    if (n < 0 || (uint64_t)n != r->start[c + 1] - r->start[c])
      err_set(err, "store: blob %.12s is damaged (chunk %d changed size while it was read)", r->hex, c);
    else if (sqlite3_blob_open(s->db, "main", "blob_chunks", "data", id, 0, &b) != SQLITE_OK ||
             sqlite3_blob_read(b, dst, (int)k, (int)at) != SQLITE_OK)
      sdb_fail(s, err, "blob chunk");
    else
      ok = 0;
    sqlite3_blob_close(b);
  } else {
    sqlite3_reset(r->find);
    if (rc == SQLITE_DONE)
      err_setk(err, ERR_NOT_FOUND, "store: blob %.12s was deleted while it was read (chunk %d is gone)", r->hex, c);
    else
      sdb_fail(s, err, "blob chunk");
  }
  if (began) sdb_exec(s, "COMMIT", NULL);
  return ok;
}

int store_blob_read(StoreBlobReader *r, uint64_t offset, void *dst, size_t n, Err *err) {
  if (offset > r->len || n > r->len - offset)
    return err_setk(err, ERR_INVALID, "store: blob %.12s: bytes [%llu, +%zu) past its %llu", r->hex, (unsigned long long)offset, n,
                    (unsigned long long)r->len);
  unsigned char *p = dst;
  uint64_t at = offset;
  size_t left = n;
  int c = 0;
  while (left) {
    /* The chunk holding byte at: the next one, or a binary search. */
    if (at < r->start[c] || at >= r->start[c + 1]) {
      int lo = 0, hi = r->n - 1;
      while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (r->start[mid] <= at) lo = mid; else hi = mid - 1;
      }
      c = lo;
    }
    size_t k = (size_t)(r->start[c + 1] - at) < left ? (size_t)(r->start[c + 1] - at) : left;
    if (chunk_read(r, c, at - r->start[c], p, k, err)) return -1;
    p += k;
    at += k;
    left -= k;
  }
  /* Reads that continue the hashed prefix extend it: a front-to-back reader gets the check for free. */
  if (offset <= r->hashed && offset + n > r->hashed) {
    store_sha256_update(&r->sha, (const unsigned char *)dst + (r->hashed - offset), (size_t)(offset + n - r->hashed));
    r->hashed = offset + n;
  }
  return 0;
}

int store_blob_verify(StoreBlobReader *r, Err *err) {
  unsigned char *buf = malloc(1 << 20);
  if (!buf) return err_setk(err, ERR_NOMEM, "out of memory");
  while (r->hashed < r->len) {
    size_t k = r->len - r->hashed < (1u << 20) ? (size_t)(r->len - r->hashed) : (size_t)1 << 20;
    if (store_blob_read(r, r->hashed, buf, k, err)) { free(buf); return -1; }
  }
  free(buf);
  unsigned char digest[32];
  char got[65];
  StoreSha256 sha = r->sha;
  store_sha256_final(&sha, digest, got);
  if (strcmp(got, r->hex) != 0) return err_set(err, "store: blob %.12s is damaged (sha256 differs)", r->hex);
  return 0;
}

/* Reads a blob inside the caller's read snapshot: a reader's checks, read whole. */
int sdb_blob_get_tx(Store *s, const char *hex, void **data, size_t *len, Err *err) {
  *data = NULL;
  *len = 0;
  uint64_t size;
  StoreBlobReader *r = reader_open(s, hex, 0, &size, err);
  if (!r) return -1;
  unsigned char *buf = malloc((size_t)size + 1);
  int rc = -1;
  if (!buf) err_setk(err, ERR_NOMEM, "store: out of memory for a blob of %lld bytes", (long long)size);
  else if (store_blob_read(r, 0, buf, (size_t)size, err) == 0 && store_blob_verify(r, err) == 0) rc = 0;
  store_blob_close(r);
  if (rc) { free(buf); return -1; }
  buf[size] = '\0';   /* text blobs (tokenizer.json) can be used as C strings */
  *data = buf;
  *len = (size_t)size;
  return 0;
}

int store_blob_get(Store *s, const char *hex, void **data, size_t *len, Err *err) {
  /* A read transaction: the chunks come from one snapshot even if a writer runs. */
  if (sdb_exec(s, "BEGIN", err)) return -1;
  int rc = sdb_blob_get_tx(s, hex, data, len, err);
  sdb_exec(s, "COMMIT", NULL);
  return rc;
}

int store_gc(Store *s, int64_t *removed, Err *err) {
  if (sdb_begin(s, err)) return -1;
  /* A stream's temporary rows are referred to by nothing until its push ends: another
  ** process's live stream must stay; dead ones are sdb_sweep_streams's. */
  if (sdb_exec(s,
           "DELETE FROM blobs WHERE sha256 NOT GLOB '~stream-*' AND sha256 NOT IN ("
           " SELECT weights FROM revisions"
           " UNION SELECT optimizer FROM revisions WHERE optimizer IS NOT NULL"
           " UNION SELECT tokenizer FROM revisions WHERE tokenizer IS NOT NULL"
           " UNION SELECT blob FROM tokenizers"
           " UNION SELECT sha256 FROM blob_readers)",
           err))
    return sdb_rollback(s);
  int64_t n = sqlite3_changes(s->db);
  if (sdb_commit(s, err)) return -1;
  sdb_sweep_streams(s);
  if (removed) *removed = n;
  return 0;
}

/* Pages an incremental_vacuum step moves or frees: 4 MiB (of 4 KiB pages), tens of
** milliseconds of the write lock; and the pause after each, in which a writer waiting on
** the busy handler (it retries every few to 100 ms) can take the lock. */
enum { COMPACT_STEP_PAGES = 1024, COMPACT_PAUSE_US = 20000 };

/* The one integer a PRAGMA answers, -1 (err set) when it cannot be read. */
static int64_t pragma_int(Store *s, const char *sql, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, sql, err);
  if (!st) return -1;
  int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (v < 0) sdb_fail(s, err, sql);
  return v;
}

int store_compact(Store *s, int64_t *freed, Err *err) {
  int64_t total = 0, page = pragma_int(s, "PRAGMA page_size", err), mode = pragma_int(s, "PRAGMA auto_vacuum", err);
  if (page <= 0 || mode < 0) return -1;
  if (freed) *freed = 0;
  /* A file made before the store set incremental auto-vacuum (mode 2) cannot give pages
  ** back this way: incremental_vacuum does nothing there, and they stay for reuse. */
  if (mode != 2) return 0;
  int64_t first = -1;
  for (int64_t before = -1;;) {
    int64_t left = pragma_int(s, "PRAGMA freelist_count", err);
    if (left < 0) return -1;
    if (first < 0) first = left;
    total = (first - left) * page;
    if (left == 0 || left == before) break;   /* (no progress: never loop on it) */
    before = left;
    /* Each step its own write transaction (autocommit): the whole vacuum of a dropped
    ** base optimizer state (880 MB) in one held the lock 10-20 s. */
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA incremental_vacuum(%d)", COMPACT_STEP_PAGES);
    if (sdb_exec(s, sql, err)) return -1;
    usleep(COMPACT_PAUSE_US);
  }
  if (freed) *freed = total;
  return 0;
}
