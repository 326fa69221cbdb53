/* safetensors: round trips, files from an independent writer (Python's json +
** struct + numpy), our files checked by an independent reader (Python, with
** torch's own BF16 rounding), and corruption of every kind refused without a
** crash (every truncation, random header bytes, crafted bad headers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/core/rng.h"
#include "engine/core/bf16.h"
#include "engine/io/safetensors.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char tmpdir[200];

/* The independent side. "write OUT EXP": a file as an outside writer makes it
** (header unpadded, tensors in a shuffled order) and the float32/int64 values
** numpy says its tensors hold. "check FILE": validates our file by the format's
** rules and compares every tensor with the values the C side wrote. */
static const char *PY =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "def f16_cases():\n"
    "    return np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 6.1e-5, 5.96e-8, 3e-6, np.inf, -np.inf, 0.1, 1/3], np.float16)\n"
    "if sys.argv[1] == 'write':\n"
    "    rs = np.random.RandomState(5)\n"
    "    f32 = rs.randn(3, 5).astype(np.float32)\n"
    "    bf_src = rs.randn(7).astype(np.float32)\n"
    "    bf_bits = (bf_src.view(np.uint32) >> 16).astype(np.uint16)\n"
    "    tensors = [\n"
    "        ('z.weight', 'F32', f32.shape, f32.tobytes()),\n"
    "        ('a.f16', 'F16', (12,), f16_cases().tobytes()),\n"
    "        ('m.bf16', 'BF16', (7,), bf_bits.tobytes()),\n"
    "        ('ids', 'I64', (2, 3), np.array([[1, -2, 3], [2**40, -2**62, 0]], np.int64).tobytes()),\n"
    "        ('i32', 'I32', (4,), np.array([7, -8, 2**31 - 1, -2**31], np.int32).tobytes()),\n"
    "        ('flag', 'BOOL', (3,), np.array([True, False, True]).tobytes()),\n"
    "        ('empty', 'F32', (0, 4), b''),\n"
    "        ('scalar', 'F64', (), np.array(2.5, np.float64).tobytes()),\n"
    "    ]\n"
    "    header, data = {'__metadata__': {'format': 'pt', 'origin': 'python'}}, b''\n"
    "    for name, dt, shape, raw in tensors:\n"
    "        header[name] = {'dtype': dt, 'shape': list(shape), 'data_offsets': [len(data), len(data) + len(raw)]}\n"
    "        data += raw\n"
    "    h = json.dumps(header).encode()\n"
    "    open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + data)\n"
    "    exp = np.concatenate([f32.ravel(), f16_cases().astype(np.float32), (bf_bits.astype(np.uint32) << 16).view(np.float32),\n"
    "                          np.array([2.5], np.float32)])\n"
    "    ints = np.concatenate([np.array([[1, -2, 3], [2**40, -2**62, 0]], np.int64).ravel(), np.array([7, -8, 2**31 - 1, -2**31, 1, 0, 1], np.int64)])\n"
    "    open(sys.argv[3], 'wb').write(exp.tobytes() + ints.tobytes())\n"
    "else:\n"
    "    import torch\n"
    "    b = open(sys.argv[2], 'rb').read()\n"
    "    n = struct.unpack('<Q', b[:8])[0]\n"
    "    assert n % 8 == 0, 'header not padded to 8'\n"
    "    text = b[8:8 + n].decode()\n"
    "    assert text.startswith('{') and text.rstrip(' ') == text.rstrip(), 'padding is not spaces'\n"
    "    h = json.loads(text)\n"
    "    assert list(h)[0] == '__metadata__', 'metadata not first'\n"
    "    assert h['__metadata__'] == {'format': 'pt', 'k': 'v', 'odd \"key\"\\n': 'tab\\there'}, h['__metadata__']\n"
    "    del h['__metadata__']\n"
    "    rank = ['BOOL','F4','F6_E2M3','F6_E3M2','U8','I8','F8_E5M2','F8_E4M3','F8_E8M0','F8_E4M3FNUZ','F8_E5M2FNUZ',\n"
    "            'I16','U16','F16','BF16','I32','U32','F32','C64','F64','I64','U64']\n"
    "    names = list(h)\n"
    "    assert names == sorted(names, key=lambda k: (-rank.index(h[k]['dtype']), k)), names\n"
    "    data, end = b[8 + n:], 0\n"
    "    for k in names:\n"
    "        s, e = h[k]['data_offsets']\n"
    "        size = {'I64': 8, 'F32': 4, 'I32': 4, 'BF16': 2, 'U8': 1}[h[k]['dtype']]\n"
    "        assert s == end and (8 + n + s) % size == 0, (k, s, end)\n"
    "        end = e\n"
    "    assert end == len(data), 'buffer not covered'\n"
    "    def arr(k, dt):\n"
    "        s, e = h[k]['data_offsets']\n"
    "        return np.frombuffer(data[s:e], dt).reshape(h[k]['shape'])\n"
    "    w = arr('b.weight', np.float32)\n"
    "    assert w.shape == (3, 4) and (w == (np.arange(12, dtype=np.float32) * 0.25 - 1).reshape(3, 4)).all(), w\n"
    "    assert (arr('a.bias', np.float32) == np.float32(1) / np.arange(1, 6, dtype=np.float32)).all()\n"
    "    assert arr('step', np.int64).shape == () and int(arr('step', np.int64)) == 123456789012\n"
    "    assert (arr('ids', np.int32) == np.array([[0, -1], [2**31 - 1, 5]])).all()\n"
    "    assert (arr('mask', np.uint8) == np.array([1, 0, 1])).all()\n"
    "    assert arr('empty', np.float32).shape == (0,)\n"
    "    src = torch.tensor(np.fromfile(sys.argv[3], np.float32))\n"
    "    # torch's rounding, with subnormals to a signed zero as maskd (and vcvtneps2bf16) round them\n"
    "    src = torch.where(src.abs() < torch.finfo(torch.float32).tiny, src * 0, src)\n"
    "    want = src.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)\n"
    "    got = arr('bf', np.uint16)\n"
    "    assert (got == want).all(), (got, want)\n"
    "print('ok')\n";

static int run_py(const char *args) {
  char script[300], cmd[1024];
  snprintf(script, sizeof script, "%s/st_ref.py", tmpdir);
  FILE *f = fopen(script, "w");
  if (!f) return -1;
  fputs(PY, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s >/dev/null", script, args);
  return system(cmd);
}

static unsigned char *slurp(const char *path, size_t *len) {
  *len = 0;
  return (unsigned char *)files_read_all(path, (size_t)1 << 30, len, NULL);
}

/* Builds a file from a header text and a data block, as a crafted (possibly bad) file. */
static unsigned char *craft(const char *header, size_t header_len_field, size_t data_len, size_t *len) {
  size_t hl = strlen(header);
  *len = 8 + hl + data_len;
  unsigned char *b = calloc(1, *len);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)header_len_field >> (8 * i));
  memcpy(b + 8, header, hl);
  for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (unsigned char)i;
  return b;
}

static void refuse(const char *name, const char *header, size_t data_len, const char *needle) {
  size_t len;
  unsigned char *b = craft(header, strlen(header), data_len, &len);
  Err e = {0};
  StFile *f = st_open_memory(b, len, &e);
  check(!f && strstr(e.msg, needle), name, "opened=%d message \"%s\" lacks \"%s\"", f != NULL, e.msg, needle);
  st_close(f);
  free(b);
}

/* A source over bytes in memory that fails (ERR_IO) for reads reaching past fail_at. */
typedef struct {
  const unsigned char *bytes;
  uint64_t fail_at;
} FailingSource;

static int failing_read(void *ctx, uint64_t offset, void *dst, size_t n, Err *err) {
  const FailingSource *s = ctx;
  if (offset + n > s->fail_at) return err_setk(err, ERR_IO, "disk gone");
  memcpy(dst, s->bytes + offset, n);
  return 0;
}

int main(void) {
  if (fixture_tmpdir(tmpdir, sizeof tmpdir, "st")) return 1;
  char cmd[512];
  char path[300], path2[300];
  Err e = {0};

  /* Our writer: round trip and the independent reader. */
  float w[12], bias[5], bf_src[9] = {1.0f, 1.00390625f, 1.01171875f, -3.14159f, 1e-38f, 3.4e38f, 0.0f, -0.0f, 65504.0f};
  for (int i = 0; i < 12; i++) w[i] = i * 0.25f - 1;
  for (int i = 0; i < 5; i++) bias[i] = 1.0f / (float)(i + 1);
  /* Two values exactly halfway between BF16 neighbours test round-to-even both ways. */
  uint32_t halfway_up = 0x3f818000u, halfway_down = 0x3f808000u;
  memcpy(&bf_src[1], &halfway_down, 4);
  memcpy(&bf_src[2], &halfway_up, 4);
  uint16_t bf[9];
  for (int i = 0; i < 9; i++) bf[i] = bf16_from_f32(bf_src[i]);
  int64_t step = 123456789012;
  int32_t ids[4] = {0, -1, 2147483647, 5};
  uint8_t mask[3] = {1, 0, 1};
  StWriteTensor ts[] = {
      {"b.weight", ST_F32, 2, {3, 4}, w},   {"a.bias", ST_F32, 1, {5}, bias}, {"step", ST_I64, 0, {0}, &step},
      {"ids", ST_I32, 2, {2, 2}, ids},      {"mask", ST_U8, 1, {3}, mask},    {"bf", ST_BF16, 1, {9}, bf},
      {"empty", ST_F32, 1, {0}, NULL},
  };
  int nts = (int)(sizeof ts / sizeof ts[0]);
  const char *meta[] = {"k", "v", "odd \"key\"\n", "tab\there"};
  snprintf(path, sizeof path, "%s/ours.safetensors", tmpdir);
  int rc = st_write(path, ts, nts, meta, 2, &e);
  check(rc == 0 && access(path, F_OK) == 0, "st_write", "%s", e.msg);
  char tmp_left[320];
  snprintf(tmp_left, sizeof tmp_left, "%s.tmp", path);
  check(access(tmp_left, F_OK) != 0, "st_write_no_tmp_left", "%s exists", tmp_left);
  StFile *f = st_open(path, &e);
  int ok = f != NULL;
  if (f) {
    ok &= st_count(f) == nts;
    for (int i = 0; i < nts && ok; i++) {
      const StTensor *x = st_find(f, ts[i].name);
      ok &= x && x->dtype == ts[i].dtype && x->ndim == ts[i].ndim;
      int64_t numel = 1;
      for (int d = 0; ok && d < x->ndim; d++) { ok &= x->shape[d] == ts[i].shape[d]; numel *= x->shape[d]; }
      ok &= x && x->numel == numel && x->nbytes == (size_t)(numel * st_dtype_bits(x->dtype) / 8);
      ok &= x && (x->nbytes == 0 || memcmp(x->data, ts[i].data, x->nbytes) == 0);
      ok &= x && ((uintptr_t)x->data % 8 == 0 || st_dtype_bits(x->dtype) < 64);
    }
    ok &= st_find(f, "nope") == NULL;
    ok &= st_metadata(f, "format") && strcmp(st_metadata(f, "format"), "pt") == 0 && st_metadata_count(f) == 3;
    ok &= st_metadata(f, "odd \"key\"\n") && strcmp(st_metadata(f, "odd \"key\"\n"), "tab\there") == 0;
    ok &= st_metadata(f, "nope") == NULL;
    float back[12];
    int64_t sb;
    ok &= st_read_f32(st_find(f, "b.weight"), back, 12, &e) == 0 && memcmp(back, w, sizeof w) == 0;
    ok &= st_read_i64(st_find(f, "step"), &sb, 1, &e) == 0 && sb == step;
    ok &= st_read_f32(st_find(f, "b.weight"), back, 11, &e) == -1 && strstr(e.msg, "b.weight");
    ok &= st_read_f32(st_find(f, "step"), back, 1, &e) == -1 && strstr(e.msg, "I64");
    ok &= st_read_i64(st_find(f, "b.weight"), &sb, 12, &e) == -1 && strstr(e.msg, "F32");
  }
  check(ok, "st_round_trip", "%s", e.msg);
  st_close(f);
  /* The order of the HF writer: I64 (8 bytes) first, then F32 tensors by name, ... */
  f = st_open(path, &e);
  check(f && strcmp(st_tensor(f, 0)->name, "step") == 0 && strcmp(st_tensor(f, 1)->name, "a.bias") == 0 &&
            strcmp(st_tensor(f, 2)->name, "b.weight") == 0 && strcmp(st_tensor(f, 3)->name, "empty") == 0 &&
            strcmp(st_tensor(f, 4)->name, "ids") == 0 && strcmp(st_tensor(f, 5)->name, "bf") == 0,
        "st_writer_order", "first %s", f ? st_tensor(f, 0)->name : e.msg);
  st_close(f);
  snprintf(path2, sizeof path2, "%s/bf_src.f32", tmpdir);
  FILE *bs = fopen(path2, "wb");
  fwrite(bf_src, 4, 9, bs);
  fclose(bs);
  char args[700];
  snprintf(args, sizeof args, "check %s %s", path, path2);
  rc = run_py(args);
  check(rc == 0, "st_independent_reader_python", "python check exited %d", rc);

  /* Same bytes from memory; byte-identical re-serialisation. */
  size_t len, len2;
  unsigned char *bytes = slurp(path, &len), *again = NULL;
  rc = st_serialize(ts, nts, meta, 2, &again, &len2, &e);
  check(rc == 0 && len2 == len && memcmp(bytes, again, len) == 0, "st_serialize_matches_file", "%s", e.msg);
  free(again);

  /* A file from the independent writer. */
  snprintf(path2, sizeof path2, "%s/py.safetensors", tmpdir);
  char expected[300];
  snprintf(expected, sizeof expected, "%s/py.expected", tmpdir);
  snprintf(args, sizeof args, "write %s %s", path2, expected);
  rc = run_py(args);
  check(rc == 0, "st_independent_writer_python", "python exited %d", rc);
  size_t elen;
  unsigned char *exp = slurp(expected, &elen);
  f = st_open(path2, &e);
  ok = f && exp && elen == (15 + 12 + 7 + 1) * 4 + 13 * 8;
  if (ok) {
    float got[35];
    int64_t ints[13];
    ok &= st_read_f32(st_find(f, "z.weight"), got, 15, &e) == 0;
    ok &= st_read_f32(st_find(f, "a.f16"), got + 15, 12, &e) == 0;
    ok &= st_read_f32(st_find(f, "m.bf16"), got + 27, 7, &e) == 0;
    ok &= st_read_f32(st_find(f, "scalar"), got + 34, 1, &e) == 0 && st_find(f, "scalar")->ndim == 0;
    ok &= st_read_i64(st_find(f, "ids"), ints, 6, &e) == 0;
    ok &= st_read_i64(st_find(f, "i32"), ints + 6, 4, &e) == 0;
    ok &= st_read_i64(st_find(f, "flag"), ints + 10, 3, &e) == 0;
    int32_t i32[4], small[3];
    ok &= st_read_i32(st_find(f, "i32"), i32, 4, &e) == 0 && i32[2] == 2147483647 && i32[3] == -2147483647 - 1;
    ok &= st_read_i32(st_find(f, "flag"), small, 3, &e) == 0 && small[0] == 1 && small[1] == 0;
    int32_t six[6];
    ok &= st_read_i32(st_find(f, "ids"), six, 5, &e) == -1 && strstr(e.msg, "elements");
    ok &= st_read_i32(st_find(f, "ids"), six, 6, &e) == -1 && strstr(e.msg, "does not fit");
    ok &= st_read_i32(st_find(f, "z.weight"), six, 15, &e) == -1 && strstr(e.msg, "not an integer");
    ok &= memcmp(got, exp, sizeof got) == 0 && memcmp(ints, exp + sizeof got, sizeof ints) == 0;
    const StTensor *z = st_find(f, "z.weight"), *em = st_find(f, "empty");
    ok &= z->ndim == 2 && z->shape[0] == 3 && z->shape[1] == 5 && em && em->numel == 0 && em->shape[0] == 0;
    ok &= st_metadata(f, "origin") && strcmp(st_metadata(f, "origin"), "python") == 0;
  }
  check(ok, "st_reads_python_file", "%s", f ? e.msg : e.msg);
  st_close(f);
  /* The same file streamed (st_open_stream: the header read, tensors by ranges through
  ** pread): the same table, and ranges in pieces of 2 equal to whole reads of the mapping. */
  {
    StFile *mf = st_open(path2, &e), *sf = st_open_stream(path2, &e);
    int same = mf && sf && st_count(mf) == st_count(sf);
    for (int i = 0; same && i < st_count(mf); i++) {
      const StTensor *a = st_tensor(mf, i), *b = st_tensor(sf, i);
      same &= !strcmp(a->name, b->name) && a->offset == b->offset && a->nbytes == b->nbytes && !b->data && a->numel <= 16;
      if (!same || (a->dtype != ST_F32 && a->dtype != ST_F16 && a->dtype != ST_BF16)) continue;
      float whole[16], part[16];
      uint16_t h1[16], h2[16];
      same &= st_read_f32(a, whole, a->numel, &e) == 0 && st_read_bf16(a, h1, a->numel, &e) == 0;
      for (int64_t at = 0; same && at < a->numel; at += 2) {
        int64_t k = a->numel - at < 2 ? a->numel - at : 2;
        same &= st_read_f32_range(sf, b, at, k, part + at, &e) == 0 && st_read_bf16_range(sf, b, at, k, h2 + at, &e) == 0;
      }
      same &= !memcmp(whole, part, (size_t)a->numel * sizeof *part) && !memcmp(h1, h2, (size_t)a->numel * sizeof *h2);
    }
    check(same, "st_stream_same_as_mapped", "%s", e.msg);
    float buf[16];
    const StTensor *z = sf ? st_find(sf, "z.weight") : NULL;
    check(z && st_read_f32_range(sf, z, 14, 2, buf, &e) == -1 && strstr(e.msg, "outside"), "st_range_refuses_outside", "%s", e.msg);
    check(z && st_read_f32(z, buf, 15, &e) == -1 && strstr(e.msg, "streamed"), "st_stream_whole_read_refused", "%s", e.msg);
    st_close(mf);
    st_close(sf);
  }
  free(exp);

  /* Every truncation of our file is refused, with a message. */
  int all = 1, bad_len = -1;
  for (size_t l = 0; l < len; l++) {
    e.msg[0] = '\0';
    StFile *g = st_open_memory(bytes, l, &e);
    if (g || !e.msg[0]) { all = 0; bad_len = (int)l; }
    st_close(g);
  }
  check(all, "st_every_truncation_refused", "length %d opened or gave no message", bad_len);
  /* Extra bytes after the data are refused too (the buffer must be covered exactly). */
  unsigned char *longer = malloc(len + 4);
  memcpy(longer, bytes, len);
  memset(longer + len, 0, 4);
  f = st_open_memory(longer, len + 4, &e);
  check(!f && strstr(e.msg, "trailing"), "st_trailing_bytes_refused", "%s", e.msg);
  st_close(f);
  free(longer);
  /* Truncated on disk: the message names the file. */
  FILE *tf = fopen(path2, "wb");
  fwrite(bytes, 1, len - 3, tf);
  fclose(tf);
  f = st_open(path2, &e);
  check(!f && strstr(e.msg, path2) && strstr(e.msg, "truncated"), "st_truncated_file_message", "%s", e.msg);
  st_close(f);
  f = st_open_stream(path2, &e);
  check(!f && strstr(e.msg, path2) && strstr(e.msg, "truncated"), "st_stream_truncated_file_message", "%s", e.msg);
  st_close(f);
  /* A source that fails after the header: the file opens, the tensor read fails with the
  ** source's kind, naming the tensor. */
  {
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | bytes[i];
    FailingSource fs = {bytes, 8 + hl};
    StSource src = {failing_read, &fs, len};
    f = st_open_source(&src, &e);
    float one[1];
    const StTensor *ft = NULL;
    for (int i = 0; f && i < st_count(f) && !ft; i++)
      if (st_tensor(f, i)->dtype == ST_F32 && st_tensor(f, i)->numel) ft = st_tensor(f, i);
    rc = ft ? st_read_f32_range(f, ft, 0, 1, one, &e) : 0;
    check(ft && rc == -1 && e.kind == ERR_IO && strstr(e.msg, "disk gone") && strstr(e.msg, ft->name),
          "st_source_read_error_kept", "%s", e.msg);
    st_close(f);
    fs.fail_at = 5;
    f = st_open_source(&src, &e);
    check(!f && e.kind == ERR_IO && strstr(e.msg, "disk gone"), "st_source_header_read_error", "%s", e.msg);
  }

  /* Random byte changes in the header: never a crash; what opens is consistent. */
  uint64_t hn = 0;
  for (int i = 7; i >= 0; i--) hn = hn << 8 | bytes[i];
  Rng r;
  rng_seed(&r, 11);
  int rounds = getenv("MASKD_ASAN") ? 3000 : 20000, opened = 0, consistent = 1, messages = 1;
  unsigned char *mut = malloc(len);
  for (int k = 0; k < rounds; k++) {
    memcpy(mut, bytes, len);
    int flips = 1 + (int)rng_below(&r, 3);
    for (int j = 0; j < flips; j++) {
      size_t at = rng_below(&r, 8) == 0 ? rng_below(&r, 8) : 8 + rng_below(&r, (uint32_t)hn);
      mut[at] = rng_below(&r, 2) ? (unsigned char)rng_below(&r, 256) : (unsigned char)(mut[at] ^ (1u << rng_below(&r, 8)));
    }
    e.msg[0] = '\0';
    StFile *g = st_open_memory(mut, len, &e);
    if (g) {
      opened++;
      uint64_t mn = 0;
      for (int i = 7; i >= 0; i--) mn = mn << 8 | mut[i];
      size_t covered = 0;
      for (int i = 0; i < st_count(g); i++) covered += st_tensor(g, i)->nbytes;
      consistent &= st_count(g) <= nts && covered == len - 8 - mn;
    } else {
      messages &= e.msg[0] != '\0';
    }
    st_close(g);
  }
  free(mut);
  check(consistent && messages, "st_random_header_flips", "%d rounds, %d opened, consistent %d, messages %d", rounds,
        opened, consistent, messages);

  /* Crafted bad files, each refused with the right message. */
  refuse("st_refuse_bad_dtype", "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype");
  refuse("st_refuse_overlap",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "overlaps");
  refuse("st_refuse_hole",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, "hole");
  refuse("st_refuse_out_of_range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "past the data buffer");
  refuse("st_refuse_shape_span_mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "span");
  refuse("st_refuse_reversed_offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, "not ordered");
  refuse("st_refuse_negative_offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[-4,0]}}", 4, "not ordered");
  refuse("st_refuse_offsets_arity", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0]}}", 4, "data_offsets");
  refuse("st_refuse_negative_shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-4],\"data_offsets\":[0,4]}}", 4, "shape[0]");
  refuse("st_refuse_shape_overflow",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, "overflows");
  refuse("st_refuse_too_many_dims", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, "dimensions");
  refuse("st_refuse_missing_dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "dtype");
  refuse("st_refuse_entry_not_object", "{\"a\":[1,2]}", 0, "not an object");
  refuse("st_refuse_metadata_not_string", "{\"__metadata__\":{\"format\":1}}", 0, "__metadata__");
  refuse("st_refuse_metadata_not_object", "{\"__metadata__\":\"pt\"}", 0, "__metadata__");
  refuse("st_refuse_not_object", "[1,2,3]", 0, "start with '{'");
  refuse("st_refuse_bad_json", "{\"a\":{\"dtype\":\"U8\",", 0, "malformed");
  refuse("st_refuse_duplicate_name",
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2,
         "malformed");
  refuse("st_refuse_sub_byte", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "whole bytes");
  refuse("st_refuse_empty_header", "", 0, "start with '{'");
  {
    size_t l;
    unsigned char *b = craft("{}", 1000000000, 0, &l);
    f = st_open_memory(b, l, &e);
    check(!f && strstr(e.msg, "limit"), "st_refuse_huge_header_length", "%s", e.msg);
    st_close(f);
    free(b);
    b = craft("{}      ", 4096, 0, &l);
    f = st_open_memory(b, l, &e);
    check(!f && strstr(e.msg, "past the end"), "st_refuse_header_past_file", "%s", e.msg);
    st_close(f);
    free(b);
    b = craft("{}      ", 8, 0, &l);
    f = st_open_memory(b, l, &e);
    check(f && st_count(f) == 0 && st_metadata(f, "format") == NULL, "st_empty_file_ok", "%s", e.msg);
    st_close(f);
    free(b);
    unsigned char nul[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, ' ', ' ', ' ', ' ', ' '};
    f = st_open_memory(nul, 16, &e);
    check(!f && e.msg[0], "st_refuse_nul_in_header", "opened");
    st_close(f);
  }
  f = st_open("/nonexistent.safetensors", &e);
  check(!f && strstr(e.msg, "/nonexistent.safetensors"), "st_open_missing_file", "%s", e.msg);
  f = st_open(tmpdir, &e);
  check(!f && strstr(e.msg, "regular"), "st_open_directory", "%s", e.msg);

  /* Writer refusals. */
  StWriteTensor dup[] = {{"x", ST_F32, 1, {1}, w}, {"x", ST_I64, 0, {0}, &step}};
  unsigned char *o;
  size_t ol;
  check(st_serialize(dup, 2, NULL, 0, &o, &ol, &e) == -1 && strstr(e.msg, "twice"), "st_write_refuses_duplicate", "%s", e.msg);
  StWriteTensor neg[] = {{"x", ST_F32, 1, {-1}, w}};
  check(st_serialize(neg, 1, NULL, 0, &o, &ol, &e) == -1 && strstr(e.msg, "shape"), "st_write_refuses_bad_shape", "%s", e.msg);
  StWriteTensor nodata[] = {{"x", ST_F32, 1, {2}, NULL}};
  check(st_serialize(nodata, 1, NULL, 0, &o, &ol, &e) == -1 && strstr(e.msg, "no data"), "st_write_refuses_no_data", "%s", e.msg);
  StWriteTensor metaname[] = {{"__metadata__", ST_F32, 1, {1}, w}};
  check(st_serialize(metaname, 1, NULL, 0, &o, &ol, &e) == -1, "st_write_refuses_metadata_name", "accepted");
  const char *dupmeta[] = {"a", "1", "a", "2"};
  check(st_serialize(ts, 1, dupmeta, 2, &o, &ol, &e) == -1 && strstr(e.msg, "twice"), "st_write_refuses_duplicate_metadata", "%s", e.msg);
  const char *fmt[] = {"format", "tf"};
  rc = st_serialize(ts, 1, fmt, 1, &o, &ol, &e);
  f = rc == 0 ? st_open_memory(o, ol, &e) : NULL;
  check(f && strcmp(st_metadata(f, "format"), "tf") == 0 && st_metadata_count(f) == 1, "st_write_caller_format", "%s", e.msg);
  st_close(f);
  if (rc == 0) free(o);
  snprintf(path2, sizeof path2, "%s/no/such/dir/x.safetensors", tmpdir);
  check(st_write(path2, ts, 1, NULL, 0, &e) == -1 && strstr(e.msg, "x.safetensors"), "st_write_bad_path", "%s", e.msg);

  /* Conversions against known bit patterns (IEEE binary16 / bfloat16 definitions). */
  check(st_f16_to_f32(0x3c00) == 1.0f && st_f16_to_f32(0xc000) == -2.0f && st_f16_to_f32(0x0001) == ldexpf(1, -24) &&
            st_f16_to_f32(0x7bff) == 65504.0f && isinf(st_f16_to_f32(0x7c00)) && isnan(st_f16_to_f32(0x7e00)) &&
            signbit(st_f16_to_f32(0x8000)),
        "st_f16_bits", "conversion off");
  check(bf16_to_f32(0x3f80) == 1.0f && bf16_from_f32(1.0f) == 0x3f80 && bf16_from_f32(bf_src[1]) == 0x3f80 &&
            bf16_from_f32(bf_src[2]) == 0x3f82 && isnan(bf16_to_f32(bf16_from_f32(NAN))),
        "st_bf16_bits", "%04x %04x", bf16_from_f32(bf_src[1]), bf16_from_f32(bf_src[2]));
  /* torch's rounding (what export writes): the bits torch's .to(torch.bfloat16) gives for
  ** these (the subnormals too, which the kernels' conversion flushes to zero). */
  {
    static const uint32_t in[] = {0x00000001, 0x007fffff, 0x807fffff, 0x00008000, 0x00018000, 0x7f7fffff,
                                  0x7f7f7fff, 0x7f7f8000, 0xff800000, 0x80000000, 0x3f808000, 0x3f818000};
    static const uint16_t want[] = {0x0000, 0x0080, 0x8080, 0x0000, 0x0002, 0x7f80,
                                    0x7f7f, 0x7f80, 0xff80, 0x8000, 0x3f80, 0x3f82};
    int bad = -1;
    uint16_t got = 0;
    for (int i = 0; i < (int)(sizeof in / sizeof in[0]) && bad < 0; i++) {
      float x;
      memcpy(&x, &in[i], sizeof x);
      if ((got = bf16_from_f32_torch(x)) != want[i]) bad = i;
    }
    uint16_t nan = bf16_from_f32_torch(NAN);
    check(bad < 0 && bf16_from_f32_torch(1e-39f) == 0x000b && bf16_from_f32_torch(-3e-39f) == 0x8021 &&
              isnan(bf16_to_f32(nan)) && (nan & 0x40) && bf16_from_f32(1e-39f) == 0x0000,
          "bf16_torch_bits", "value %d: %04x", bad, (unsigned)got);
  }

  free(bytes);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) return 1;
  return check_exit();
}
