/* POST /corpora?name=NAME: a corpus uploaded as the body (server/app/app.h). The HTTP
** layer has streamed the body to a temporary file in the work root's uploads/ folder
** (HTTP_UPLOAD); this handler reads it once, for its sha256 and to check that it is
** UTF-8 text without NUL bytes (what the tokenizer trainers read), and links it into
** corpora/NAME. link() fails when the name exists, so of two uploads of one name one
** wins and the other gets 409, never a file overwritten; the layer then unlinks the
** temporary name. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/tok/tokenizer.h"
#include "server/app/app.h"
#include "store/sha256.h"

#define READ_CHUNK (1 << 20)

/* How many of the n bytes at p end on a whole character: a read that splits one leaves
** its 1-3 bytes for the next piece. Only the lead byte is looked at; whether the bytes
** make a valid character is tokenizer_utf8_valid's business, and a byte that leads no
** character (0xC0, 0xC1, 0xF5-0xFF) is left to it too, to be named at its offset. */
static size_t whole_characters(const unsigned char *p, size_t n) {
  size_t i = n, tail = 0;
  while (i > 0 && tail < 3 && (p[i - 1] & 0xC0) == 0x80) { i--; tail++; }
  if (i == 0 || p[i - 1] < 0xC2 || p[i - 1] > 0xF4) return n;   /* ASCII, stray continuations, no lead: checked as they are */
  unsigned lead = p[i - 1];
  size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  return n - (i - 1) < need ? i - 1 : n;
}

/* Reads the file once: its sha256 into hex, checked as UTF-8 text without NUL bytes
** (tokenizer_utf8_valid, what the tokenizers accept) of the expected size. 0, or -1
** having answered (422 naming the offset, or 500). */
static int check_text(const char *path, unsigned long long bytes, char hex[65], HttpRes *rs) {
  int fd = open(path, O_RDONLY | O_CLOEXEC), open_errno = errno;
  unsigned char *buf = fd >= 0 ? malloc(READ_CHUNK + 4) : NULL;
  if (!buf) {
    if (fd >= 0) close(fd);
    http_error(rs, 500, "cannot read the upload back", json_pack("{s:s}", "why", fd >= 0 ? "out of memory" : strerror(open_errno)));
    return -1;
  }
  StoreSha256 h;
  store_sha256_init(&h);
  unsigned long long total = 0, at = 0;   /* bytes read; the file offset of buf[0] */
  size_t carry = 0;                       /* a split character's bytes, kept at buf[0] */
  int r = 0;
  for (;;) {
    ssize_t n = read(fd, buf + carry, READ_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { http_error(rs, 500, "cannot read the upload back", json_pack("{s:s}", "why", strerror(errno))); r = -1; break; }
    if (n == 0) {
      if (carry)
        r = (http_error(rs, 422, "the body is not UTF-8 text: it ends inside a character", json_pack("{s:I}", "offset", (json_int_t)at)), -1);
      break;
    }
    store_sha256_update(&h, buf + carry, (size_t)n);
    total += (unsigned long long)n;
    size_t have = carry + (size_t)n, whole = whole_characters(buf, have), bad = 0;
    const unsigned char *nul = memchr(buf, 0, have);
    if (nul) {
      http_error(rs, 422, "the body is not text: it holds a NUL byte", json_pack("{s:I}", "offset", (json_int_t)(at + (size_t)(nul - buf))));
      r = -1;
      break;
    }
    if (!tokenizer_utf8_valid((const char *)buf, whole, &bad)) {
      http_error(rs, 422, "the body is not UTF-8 text", json_pack("{s:I}", "offset", (json_int_t)(at + bad)));
      r = -1;
      break;
    }
    carry = have - whole;
    memmove(buf, buf + whole, carry);
    at += whole;
  }
  if (!r && total != bytes) { http_error(rs, 500, "the upload changed while it was read back", NULL); r = -1; }
  /* Durable before it is named: a crash after the 201 must not leave an empty corpus. */
  if (!r && fsync(fd)) { http_error(rs, 500, "cannot store the upload", json_pack("{s:s}", "why", strerror(errno))); r = -1; }
  unsigned char digest[32];
  if (!r) store_sha256_final(&h, digest, hex);
  close(fd);
  free(buf);
  return r;
}

/* work_root/corpora/.NAME.sha256: an uploaded corpus's sha256, written once it is stored. */
static int sidecar(const App *a, const char *name, char *path, size_t cap) {
  return (size_t)snprintf(path, cap, "%s/corpora/.%s.sha256", a->ws.work_root, name) < cap ? 0 : -1;
}

void route_corpus(void *app, HttpReq *rq, HttpRes *rs) {
  App *a = app;
  const char *name = rq->params[0];
  char path[WORKSPACE_PATH_MAX], dir[WORKSPACE_PATH_MAX + 16];
  Err e = {0};
  if (workspace_corpus(&a->ws, "name", name, path, sizeof path, &e)) {
    http_error(rs, 404, "no such corpus", json_pack("{s:o}", "name", http_json_text(name)));
    return;
  }
  struct stat st;
  if (stat(path, &st)) { http_error(rs, 404, "no such corpus", json_pack("{s:o}", "name", http_json_text(name))); return; }
  snprintf(dir, sizeof dir, "%s/corpora/", a->ws.work_root);
  int uploaded = !strncmp(path, dir, strlen(dir));
  json_t *o = json_pack("{s:s, s:I, s:b}", "name", name, "bytes", (json_int_t)st.st_size, "uploaded", uploaded);
  if (uploaded) {
    /* The sha256 the upload answered, if it was kept (null otherwise: not read again here). */
    char side[WORKSPACE_PATH_MAX + 16], hex[65] = "";
    size_t n = 0;
    char *text = sidecar(a, name, side, sizeof side) == 0 ? files_read_all(side, 64, &n, &e) : NULL;
    if (text && n == 64) memcpy(hex, text, 64);
    free(text);
    json_object_set_new(o, "sha256", hex[0] ? json_string(hex) : json_null());
  }
  http_json(rs, 200, o);
}

void route_upload_corpus(void *app, HttpReq *rq, HttpRes *rs) {
  App *a = app;
  const char *name = http_query(rq, "name");
  if (!name || !*name) {
    http_error(rs, 422, "name: missing: POST /corpora?name=NAME (letters, digits, - _ ., at most 64)",
               json_pack("{s:s}", "field", "name"));
    return;
  }
  char path[WORKSPACE_PATH_MAX];
  Err e = {0};
  if (workspace_corpus_upload(&a->ws, name, path, sizeof path, &e)) {
    http_error_from(rs, &e, NULL, json_pack("{s:s}", "field", "name"));
    return;
  }
  if (!rq->upload_path) { http_error(rs, 500, "internal error: the upload has no file", NULL); return; }
  if (rq->upload_bytes == 0) {
    http_error(rs, 422, "the body is empty: a corpus is a text file's bytes", NULL);
    return;
  }
  char hex[65];
  if (check_text(rq->upload_path, rq->upload_bytes, hex, rs)) return;
  /* link, not rename: it never replaces a corpus that took the name meanwhile. */
  if (link(rq->upload_path, path)) {
    if (errno == EEXIST)
      http_error(rs, 409, "name: a corpus of that name was uploaded meanwhile", json_pack("{s:s}", "field", "name"));
    else
      http_error(rs, 500, "cannot store the corpus", json_pack("{s:s}", "why", strerror(errno)));
    return;
  }
  /* The name durable too; the corpus is stored even if this fails, so it is not an error. */
  files_sync_parent(path, &e);
  /* Its sha256 beside it, for GET /corpora/NAME (a dot name: never a corpus's). */
  char side[WORKSPACE_PATH_MAX + 16];
  if (sidecar(a, name, side, sizeof side) == 0) files_write_atomic(side, hex, 64, &e);
  snprintf(rs->location, sizeof rs->location, "/corpora/%s", name);
  http_json(rs, 201, json_pack("{s:s, s:I, s:s, s:b}", "name", name, "bytes", (json_int_t)rq->upload_bytes, "sha256", hex,
                               "uploaded", 1));
}
