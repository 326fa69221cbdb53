/* The store's blobs: content-addressed by sha256, written whole or streamed, in
** CHUNK_BYTES chunks, read whole or in place, verified, and collected when nothing
** refers to them (see store.h). */
#include "store/store.h"
#include "store/store_db.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
** hashed on the way; stream_blob_tx moves them to the real key at the end. */
struct StoreBlobWriter {
  Store *s;
  StoreSha256 sha;
  unsigned char *buf;     /* one chunk */
  size_t fill, written, len;
  int64_t idx;
  const char *key;
  int failed;
};

static int chunk_insert(Store *s, const char *key, int64_t idx, const void *data, size_t n, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "INSERT INTO blob_chunks(sha256, idx, data) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)idx);
  sqlite3_bind_blob64(st, 3, n ? data : (const void *)"", n, SQLITE_STATIC);
  return sdb_step_done(s, st, err, "blob chunk");
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

/* Writes a streamed blob inside the caller's transaction; hex receives its sha256.
** Content already stored is kept once: the temporary rows are dropped. */
int sdb_stream_blob_tx(Store *s, const StoreStream *in, char hex[65], Err *err) {
  if (!in->produce) return err_setk(err, ERR_INVALID, "push: a stream without a producer");
  if (in->len == 0) return err_setk(err, ERR_INVALID, "push: an empty stream");
  if ((uint64_t)in->len > STORE_MAX_BLOB)
    return err_setk(err, ERR_TOO_LARGE, "store: blob of %zu bytes, more than a blob may hold", in->len);
  /* The key must pass CHECK (length = 64) and the foreign key, and can never be a
  ** sha256 ('~' is not hex); the counter keeps two streams of one push apart. */
  char key[65];
  int k = snprintf(key, sizeof key, "~stream-%d-%llu", (int)getpid(), (unsigned long long)++s->streams);
  memset(key + k, '~', 64 - (size_t)k);
  key[64] = '\0';
  sqlite3_stmt *st = sdb_prep(s, "INSERT INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)in->len);
  sqlite3_bind_double(st, 3, now_wall());
  if (sdb_step_done(s, st, err, "blob")) return -1;
  StoreBlobWriter w = {.s = s, .len = in->len, .key = key, .buf = malloc(CHUNK_BYTES)};
  if (!w.buf) return err_setk(err, ERR_NOMEM, "store: out of memory for a blob chunk");
  store_sha256_init(&w.sha);
  int rc = in->produce(in->ctx, &w, err);
  if (rc == 0 && w.failed) rc = err_setk(err, ERR_INVALID, "store: blob stream: the producer ignored a failed write");
  if (rc == 0 && w.written != w.len)
    rc = err_setk(err, ERR_INVALID, "store: blob stream: %zu bytes of the %zu announced", w.written, w.len);
  if (rc == 0 && w.fill) rc = chunk_insert(s, key, w.idx, w.buf, w.fill, err);
  free(w.buf);
  if (rc) return -1;
  unsigned char d[32];
  store_sha256_final(&w.sha, d, hex);
  st = sdb_prep(s, "INSERT OR IGNORE INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)in->len);
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
  if (sdb_exec(s,
           "DELETE FROM blobs WHERE sha256 NOT IN ("
           " SELECT weights FROM revisions"
           " UNION SELECT optimizer FROM revisions WHERE optimizer IS NOT NULL"
           " UNION SELECT tokenizer FROM revisions WHERE tokenizer IS NOT NULL"
           " UNION SELECT blob FROM tokenizers)",
           err))
    return sdb_rollback(s);
  int64_t n = sqlite3_changes(s->db);
  if (sdb_commit(s, err)) return -1;
  /* Give the freed pages back (its own transaction; harmless when there are none). */
  if (n > 0 && sdb_exec(s, "PRAGMA incremental_vacuum", err)) return -1;
  if (removed) *removed = n;
  return 0;
}
