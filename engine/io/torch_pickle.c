/* torch.save zip archives (engine/io/torch_pickle.h): a zip central-directory reader
** (stored entries only) and a pickle machine that builds values, never calls
** anything: the few callables a state dict names are recognised and interpreted
** here (an OrderedDict, a tensor over a storage), every other global refused. */
#include "engine/io/torch_pickle.h"

#include "engine/core/files.h"
#include "engine/io/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Limits on what a pickle may build: values, memo slots, nesting of marks. */
#define TP_MAX_VALUES 10000000
#define TP_MAX_MEMO 10000000
#define TP_MAX_DEPTH 10000

/* ---- zip ---- */

typedef struct {
  const unsigned char *p;
  size_t len;
} Bytes;

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) { return le16(p) | le16(p + 2) << 16; }

/* A central-directory entry: its name and where the entry starts. */
typedef struct {
  const unsigned char *name;
  uint32_t nl;
  const unsigned char *e;
} ZipEntry;

typedef struct {
  const unsigned char *file;
  size_t len;
  const unsigned char *cd;        /* the central directory */
  size_t cd_len;
  int n;
  ZipEntry *by_name;              /* the n entries sorted by name, then by place: zip_find halves it */
} Zip;

static int cmp_entry(const void *a, const void *b) {
  const ZipEntry *x = a, *y = b;
  int c = memcmp(x->name, y->name, x->nl < y->nl ? x->nl : y->nl);
  if (c) return c;
  if (x->nl != y->nl) return x->nl < y->nl ? -1 : 1;
  return x->e < y->e ? -1 : x->e > y->e;
}

static void zip_close(Zip *z) {
  free(z->by_name);
  z->by_name = NULL;
}

/* Walks the central directory once, each entry checked to fit, into z->by_name (a
** damaged entry refuses the archive, wherever it is). */
static int zip_index(Zip *z, Err *err) {
  if (!(z->by_name = malloc(((size_t)z->n + 1) * sizeof *z->by_name))) return err_setk(err, ERR_NOMEM, "out of memory");
  size_t at = 0;
  for (int i = 0; i < z->n; i++) {
    const unsigned char *e = z->cd + at;
    uint32_t n = 0, x = 0, c = 0;
    if (z->cd_len - at >= 46 && le32(e) == 0x02014b50) n = le16(e + 28), x = le16(e + 30), c = le16(e + 32);
    if (z->cd_len - at < 46 || le32(e) != 0x02014b50 || z->cd_len - at - 46 < (size_t)n + x + c) {
      zip_close(z);
      return err_setk(err, ERR_BAD_INPUT, "zip central directory entry %d is damaged", i);
    }
    z->by_name[i] = (ZipEntry){e + 46, n, e};
    at += 46 + (size_t)n + x + c;
  }
  qsort(z->by_name, (size_t)z->n, sizeof *z->by_name, cmp_entry);
  return 0;
}

static int zip_open(Zip *z, const unsigned char *p, size_t len, Err *err) {
  memset(z, 0, sizeof *z);
  z->file = p;
  z->len = len;
  if (len < 4 || memcmp(p, "PK\3\4", 4)) {
    if (len >= 2 && p[0] == 0x80)
      return err_setk(err, ERR_BAD_INPUT,
                      "not a zip archive: torch.save's legacy (pre-1.6) format is not read; save it again with a current torch, or as safetensors");
    return err_setk(err, ERR_BAD_INPUT, "not a torch.save zip archive (no zip signature)");
  }
  /* The end-of-central-directory record: 22 bytes plus a comment of up to 65535. */
  size_t lo = len > 22 + 65535 ? len - 22 - 65535 : 0;
  for (size_t at = len >= 22 ? len - 22 + 1 : 0; at-- > lo;) {
    if (le32(p + at) != 0x06054b50) continue;
    uint32_t n = le16(p + at + 10), size = le32(p + at + 12), off = le32(p + at + 16);
    if (n == 0xFFFF || size == 0xFFFFFFFFu || off == 0xFFFFFFFFu)
      return err_setk(err, ERR_BAD_INPUT, "a zip64 archive (over 4 GiB) is not supported");
    if ((uint64_t)off + size > at) return err_setk(err, ERR_BAD_INPUT, "zip central directory outside the file");
    z->cd = p + off;
    z->cd_len = size;
    z->n = (int)n;
    return zip_index(z, err);
  }
  return err_setk(err, ERR_BAD_INPUT, "zip end-of-central-directory record not found (file truncated?)");
}

/* The data of the entry called name (the first of that name, as a scan would find it):
** 1 found, 0 absent, -1 refused (compressed, out of bounds). */
static int zip_find(const Zip *z, const char *name, Bytes *out, Err *err) {
  size_t nl = strlen(name);
  /* The first entry not before (name, the start of the directory): the lowest bound. */
  ZipEntry key = {(const unsigned char *)name, (uint32_t)nl, z->cd};
  size_t lo = 0, hi = (size_t)z->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cmp_entry(&z->by_name[mid], &key) < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo < (size_t)z->n && z->by_name[lo].nl == nl && !memcmp(z->by_name[lo].name, name, nl)) {
    const unsigned char *e = z->by_name[lo].e;
    uint32_t method = le16(e + 10), csize = le32(e + 20), usize = le32(e + 24), off = le32(e + 42);
    if (method != 0)
      return err_setk(err, ERR_BAD_INPUT, "zip entry %s is compressed (method %u): only stored entries, as torch.save writes them, are read", name, method);
    if (csize != usize || csize == 0xFFFFFFFFu) return err_setk(err, ERR_BAD_INPUT, "zip entry %s: sizes disagree", name);
    if ((uint64_t)off + 30 > z->len || le32(z->file + off) != 0x04034b50)
      return err_setk(err, ERR_BAD_INPUT, "zip entry %s: local header outside the file", name);
    uint64_t data = (uint64_t)off + 30 + le16(z->file + off + 26) + le16(z->file + off + 28);
    if (data + csize > z->len) return err_setk(err, ERR_BAD_INPUT, "zip entry %s: data past the end of the file (truncated?)", name);
    out->p = z->file + data;
    out->len = csize;
    return 1;
  }
  return 0;
}

/* The archive's folder name: the entry ".../data.pkl" (one level, as torch writes). */
static int zip_prefix(const Zip *z, char *prefix, size_t size, Err *err) {
  size_t at = 0;
  for (int i = 0; i < z->n; i++) {
    if (z->cd_len - at < 46 || le32(z->cd + at) != 0x02014b50) break;
    const unsigned char *e = z->cd + at;
    uint32_t n = le16(e + 28), x = le16(e + 30), c = le16(e + 32);
    if (z->cd_len - at - 46 < (size_t)n + x + c) break;
    const char *name = (const char *)e + 46;
    if (n > 9 && n - 9 < size && !memcmp(name + n - 9, "/data.pkl", 9) && !memchr(name, '/', n - 9)) {
      memcpy(prefix, name, n - 9);
      prefix[n - 9] = 0;
      return 0;
    }
    at += 46 + (size_t)n + x + c;
  }
  return err_setk(err, ERR_BAD_INPUT, "no <name>/data.pkl entry: not a torch.save archive");
}

/* ---- pickle values ---- */

typedef enum { V_MARK, V_NONE, V_BOOL, V_INT, V_STR, V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_STORAGE, V_TENSOR } VKind;
typedef enum {
  G_ORDERED_DICT, G_REBUILD_TENSOR, G_REBUILD_PARAMETER, G_FLOAT_STORAGE, G_HALF_STORAGE, G_BF16_STORAGE, G_DOUBLE_STORAGE,
  G_LONG_STORAGE
} GKind;

typedef struct V V;
struct V {
  VKind kind;
  int64_t i;                 /* INT, BOOL; GLOBAL: its GKind */
  char *s;                   /* STR */
  size_t n, cap;             /* TUPLE, LIST, DICT (keys and values interleaved): items */
  V **items;
  /* STORAGE: dtype, bytes; TENSOR: its storage, element offset, shape, strides (in
  ** elements), and whether those are the contiguous ones */
  StDtype dtype;
  Bytes data;
  int64_t numel, offset;
  int ndim;
  int64_t shape[ST_MAX_DIMS], stride[ST_MAX_DIMS];
  int contiguous;
  V *storage;
};

typedef struct {
  const unsigned char *p, *end;
  V **all; size_t n_all, cap_all;        /* every value made, freed at the end */
  V **stack; size_t sp, stack_cap;
  V **memo; size_t memo_cap, memo_n;     /* memo_n: slots set (MEMOIZE's next index) */
  const Zip *zip;
  const char *prefix;
  Err *err;
} Pk;

static V *vnew(Pk *k, VKind kind) {
  if (k->n_all >= TP_MAX_VALUES) { err_setk(k->err, ERR_TOO_LARGE, "pickle builds more than %d values", TP_MAX_VALUES); return NULL; }
  if (k->n_all == k->cap_all) {
    size_t cap = k->cap_all ? 2 * k->cap_all : 256;
    V **a = realloc(k->all, cap * sizeof *a);
    if (!a) { err_setk(k->err, ERR_NOMEM, "out of memory"); return NULL; }
    k->all = a;
    k->cap_all = cap;
  }
  V *v = calloc(1, sizeof *v);
  if (!v) { err_setk(k->err, ERR_NOMEM, "out of memory"); return NULL; }
  v->kind = kind;
  k->all[k->n_all++] = v;
  return v;
}

static int push(Pk *k, V *v) {
  if (!v) return -1;
  if (k->sp == k->stack_cap) {
    size_t cap = k->stack_cap ? 2 * k->stack_cap : 64;
    if (cap > TP_MAX_VALUES) return err_setk(k->err, ERR_TOO_LARGE, "pickle stack too deep");
    V **s = realloc(k->stack, cap * sizeof *s);
    if (!s) return err_setk(k->err, ERR_NOMEM, "out of memory");
    k->stack = s;
    k->stack_cap = cap;
  }
  k->stack[k->sp++] = v;
  return 0;
}

static V *pop(Pk *k) {
  if (!k->sp || k->stack[k->sp - 1]->kind == V_MARK) { err_setk(k->err, ERR_BAD_INPUT, "pickle stack underflow"); return NULL; }
  return k->stack[--k->sp];
}

static V *top(Pk *k) {
  if (!k->sp || k->stack[k->sp - 1]->kind == V_MARK) { err_setk(k->err, ERR_BAD_INPUT, "pickle stack underflow"); return NULL; }
  return k->stack[k->sp - 1];
}

/* Index of the topmost mark, or -1 with err set. */
static long find_mark(Pk *k) {
  for (size_t i = k->sp; i-- > 0;)
    if (k->stack[i]->kind == V_MARK) return (long)i;
  err_setk(k->err, ERR_BAD_INPUT, "pickle: no mark on the stack");
  return -1;
}

static int append(Pk *k, V *c, V *x) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    V **a = realloc(c->items, cap * sizeof *a);
    if (!a) return err_setk(k->err, ERR_NOMEM, "out of memory");
    c->items = a;
    c->cap = cap;
  }
  c->items[c->n++] = x;
  return 0;
}

static int need(Pk *k, size_t n) {
  if ((size_t)(k->end - k->p) < n) return err_setk(k->err, ERR_BAD_INPUT, "pickle truncated");
  return 0;
}

static int memo_put(Pk *k, uint64_t idx) {
  V *v = top(k);
  if (!v) return -1;
  if (idx >= TP_MAX_MEMO) return err_setk(k->err, ERR_TOO_LARGE, "pickle memo index %llu too large", (unsigned long long)idx);
  if (idx >= k->memo_cap) {
    size_t cap = k->memo_cap ? k->memo_cap : 64;
    while (cap <= idx) cap *= 2;
    V **m = realloc(k->memo, cap * sizeof *m);
    if (!m) return err_setk(k->err, ERR_NOMEM, "out of memory");
    memset(m + k->memo_cap, 0, (cap - k->memo_cap) * sizeof *m);
    k->memo = m;
    k->memo_cap = cap;
  }
  if (!k->memo[idx]) k->memo_n++;
  k->memo[idx] = v;
  return 0;
}

static int memo_get(Pk *k, uint64_t idx) {
  if (idx >= k->memo_cap || !k->memo[idx]) return err_setk(k->err, ERR_BAD_INPUT, "pickle memo %llu is not set", (unsigned long long)idx);
  return push(k, k->memo[idx]);
}

static int make_str(Pk *k, size_t n) {
  if (need(k, n)) return -1;
  V *v = vnew(k, V_STR);
  if (!v) return -1;
  if (!(v->s = malloc(n + 1))) return err_setk(k->err, ERR_NOMEM, "out of memory");
  memcpy(v->s, k->p, n);
  v->s[n] = 0;
  if (strlen(v->s) != n) return err_setk(k->err, ERR_BAD_INPUT, "pickle string holds a NUL byte");
  k->p += n;
  return push(k, v);
}

/* The one set of globals a state dict names; anything else is refused by name. */
static int make_global(Pk *k, const char *mod, const char *name) {
  static const struct { const char *mod, *name; GKind g; } ok[] = {
    {"collections", "OrderedDict", G_ORDERED_DICT},
    {"torch._utils", "_rebuild_tensor_v2", G_REBUILD_TENSOR},
    {"torch._utils", "_rebuild_parameter", G_REBUILD_PARAMETER},
    {"torch", "FloatStorage", G_FLOAT_STORAGE},
    {"torch", "HalfStorage", G_HALF_STORAGE},
    {"torch", "BFloat16Storage", G_BF16_STORAGE},
    {"torch", "DoubleStorage", G_DOUBLE_STORAGE},   /* a float64 state dict: converted as F64 safetensors are */
    {"torch", "LongStorage", G_LONG_STORAGE},   /* position_ids buffers, in files of transformers 4.0-4.30 */
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (!strcmp(mod, ok[i].mod) && !strcmp(name, ok[i].name)) {
      V *v = vnew(k, V_GLOBAL);
      if (!v) return -1;
      v->i = ok[i].g;
      return push(k, v);
    }
  return err_setk(k->err, ERR_BAD_INPUT, "global %.100s.%.100s is not allowed: only a state dict of tensors is read", mod, name);
}

/* GLOBAL's two newline-ended lines. */
static int op_global(Pk *k) {
  char part[2][256];
  for (int j = 0; j < 2; j++) {
    const unsigned char *nl = memchr(k->p, '\n', (size_t)(k->end - k->p));
    if (!nl) return err_setk(k->err, ERR_BAD_INPUT, "pickle truncated in GLOBAL");
    size_t n = (size_t)(nl - k->p);
    if (n >= sizeof part[j]) return err_setk(k->err, ERR_BAD_INPUT, "pickle GLOBAL name too long");
    memcpy(part[j], k->p, n);
    part[j][n] = 0;
    if (strlen(part[j]) != n) return err_setk(k->err, ERR_BAD_INPUT, "pickle GLOBAL name holds a NUL byte");
    k->p = nl + 1;
  }
  return make_global(k, part[0], part[1]);
}

static int is_int(const V *v) { return v->kind == V_INT; }

/* BINPERSID's ('storage', type, key, location, numel): the storage's bytes from the archive. */
static int op_persid(Pk *k) {
  V *t = pop(k);
  if (!t) return -1;
  if (t->kind != V_TUPLE || t->n != 5 || t->items[0]->kind != V_STR || strcmp(t->items[0]->s, "storage") ||
      t->items[1]->kind != V_GLOBAL || t->items[2]->kind != V_STR || !is_int(t->items[4]))
    return err_setk(k->err, ERR_BAD_INPUT, "persistent id is not ('storage', type, key, location, numel)");
  GKind g = (GKind)t->items[1]->i;
  V *s = vnew(k, V_STORAGE);
  if (!s) return -1;
  if (g == G_FLOAT_STORAGE) s->dtype = ST_F32;
  else if (g == G_HALF_STORAGE) s->dtype = ST_F16;
  else if (g == G_BF16_STORAGE) s->dtype = ST_BF16;
  else if (g == G_DOUBLE_STORAGE) s->dtype = ST_F64;
  else if (g == G_LONG_STORAGE) s->dtype = ST_I64;
  else return err_setk(k->err, ERR_BAD_INPUT, "persistent id names a storage type that is not Float, Half, BFloat16, Double or Long");
  s->numel = t->items[4]->i;
  const char *key = t->items[2]->s;
  if (s->numel < 0 || s->numel > (int64_t)1 << 40) return err_setk(k->err, ERR_BAD_INPUT, "storage %.60s: bad size %lld", key, (long long)s->numel);
  if (!*key || strchr(key, '/') || strlen(key) > 64) return err_setk(k->err, ERR_BAD_INPUT, "storage key \"%.60s\" is not a record name", key);
  char name[160];
  snprintf(name, sizeof name, "%s/data/%s", k->prefix, key);
  int found = zip_find(k->zip, name, &s->data, k->err);
  if (found < 0) return -1;
  if (!found) return err_setk(k->err, ERR_BAD_INPUT, "storage %s is not in the archive", name);
  int64_t es = st_dtype_bits(s->dtype) / 8;
  if ((uint64_t)s->data.len != (uint64_t)(s->numel * es))
    return err_setk(k->err, ERR_BAD_INPUT, "storage %s: %zu bytes, %lld elements of %s need %lld", name, s->data.len,
                    (long long)s->numel, st_dtype_name(s->dtype), (long long)(s->numel * es));
  return push(k, s);
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]):
** a view inside its storage, contiguous or strided (torch.save of a transposed or
** sliced tensor keeps the view's strides over the whole storage). Every element it
** reaches must lie inside the storage; strides are non-negative, as torch makes them. */
static V *rebuild_tensor(Pk *k, V *args) {
  if (args->kind != V_TUPLE || args->n < 6 || args->n > 7 || args->items[0]->kind != V_STORAGE || !is_int(args->items[1]) ||
      args->items[2]->kind != V_TUPLE || args->items[3]->kind != V_TUPLE) {
    err_setk(k->err, ERR_BAD_INPUT, "_rebuild_tensor_v2: arguments are not (storage, offset, size, stride, ...)");
    return NULL;
  }
  V *size = args->items[2], *stride = args->items[3];
  if (size->n > ST_MAX_DIMS || stride->n != size->n) { err_setk(k->err, ERR_BAD_INPUT, "_rebuild_tensor_v2: size and stride disagree"); return NULL; }
  V *t = vnew(k, V_TENSOR);
  if (!t) return NULL;
  t->storage = args->items[0];
  t->offset = args->items[1]->i;
  t->ndim = (int)size->n;
  t->numel = 1;
  t->contiguous = 1;
  int64_t want = 1, cap = t->storage->numel;   /* cap <= 2^40 (op_persid) */
  for (int d = t->ndim - 1; d >= 0; d--) {
    V *a = size->items[d], *b = stride->items[d];
    if (!is_int(a) || !is_int(b) || a->i < 0 || a->i > (int64_t)1 << 40) { err_setk(k->err, ERR_BAD_INPUT, "_rebuild_tensor_v2: bad size"); return NULL; }
    if (a->i > 1 && b->i < 0) { err_setk(k->err, ERR_BAD_INPUT, "_rebuild_tensor_v2: a negative stride"); return NULL; }
    if (a->i > 1 && b->i != want) t->contiguous = 0;
    t->shape[d] = a->i;
    t->stride[d] = a->i > 1 ? b->i : 0;   /* a dimension of one element never steps */
    want *= a->i;
    if (want > (int64_t)1 << 40) { err_setk(k->err, ERR_BAD_INPUT, "_rebuild_tensor_v2: size overflows"); return NULL; }
  }
  t->numel = want;
  if (t->offset < 0 || t->offset > cap || (t->contiguous && t->numel > cap - t->offset)) {
    err_setk(k->err, ERR_BAD_INPUT, "a tensor of %lld elements at offset %lld is outside its storage of %lld", (long long)t->numel,
             (long long)t->offset, (long long)cap);
    return NULL;
  }
  if (!t->contiguous && t->numel) {
    /* The last element the view reaches: offset + sum (size - 1) * stride. Each term is
    ** held to the storage's size before it is multiplied, so nothing overflows (8 terms
    ** of at most 2^40). */
    int64_t last = t->offset;
    for (int d = 0; d < t->ndim; d++) {
      if (t->shape[d] > 1 && t->stride[d] > (cap - t->offset) / (t->shape[d] - 1)) { last = cap; break; }
      last += (t->shape[d] - 1) * t->stride[d];
    }
    if (last >= cap) {
      err_setk(k->err, ERR_BAD_INPUT, "a strided tensor of %lld elements at offset %lld reaches past its storage of %lld",
               (long long)t->numel, (long long)t->offset, (long long)cap);
      return NULL;
    }
  }
  return t;
}

static int op_reduce(Pk *k) {
  V *args = pop(k), *f = args ? pop(k) : NULL;
  if (!f) return -1;
  if (f->kind != V_GLOBAL || args->kind != V_TUPLE) return err_setk(k->err, ERR_BAD_INPUT, "REDUCE of something that is not an allowed global");
  V *r = NULL;
  switch ((GKind)f->i) {
    case G_ORDERED_DICT:
      if (args->n) return err_setk(k->err, ERR_BAD_INPUT, "OrderedDict called with arguments");
      r = vnew(k, V_DICT);
      break;
    case G_REBUILD_TENSOR:
      r = rebuild_tensor(k, args);
      break;
    case G_REBUILD_PARAMETER:
      if (args->n < 1 || args->items[0]->kind != V_TENSOR) return err_setk(k->err, ERR_BAD_INPUT, "_rebuild_parameter of something that is not a tensor");
      r = args->items[0];
      break;
    default:
      return err_setk(k->err, ERR_BAD_INPUT, "a storage type called as a function");
  }
  return r ? push(k, r) : -1;
}

static int op_setitems(Pk *k, long mark) {
  if (mark < 1) return err_setk(k->err, ERR_BAD_INPUT, "SETITEMS without a dict");
  V *d = k->stack[mark - 1];
  if (d->kind != V_DICT) return err_setk(k->err, ERR_BAD_INPUT, "SETITEMS on something that is not a dict");
  if ((k->sp - (size_t)mark - 1) % 2) return err_setk(k->err, ERR_BAD_INPUT, "SETITEMS with an odd number of items");
  for (size_t i = (size_t)mark + 1; i < k->sp; i++)
    if (append(k, d, k->stack[i])) return -1;
  k->sp = (size_t)mark;
  return 0;
}

/* Runs the pickle; the state dict is left in *out. */
static int run(Pk *k, V **out) {
  size_t marks = 0;
  while (k->p < k->end) {
    unsigned op = *k->p++;
    long m;
    V *v, *a, *b, *c;
    switch (op) {
      case 0x80:   /* PROTO */
        if (need(k, 1)) return -1;
        if (*k->p < 2 || *k->p > 5) return err_setk(k->err, ERR_BAD_INPUT, "pickle protocol %u is not supported", *k->p);
        k->p++;
        break;
      case 0x95:   /* FRAME: a length hint */
        if (need(k, 8)) return -1;
        k->p += 8;
        break;
      case '(':
        if (++marks > TP_MAX_DEPTH) return err_setk(k->err, ERR_BAD_INPUT, "pickle marks nested too deep");
        if (push(k, vnew(k, V_MARK))) return -1;
        break;
      case '}': if (push(k, vnew(k, V_DICT))) return -1; break;
      case ']': if (push(k, vnew(k, V_LIST))) return -1; break;
      case ')': if (push(k, vnew(k, V_TUPLE))) return -1; break;
      case 'N': if (push(k, vnew(k, V_NONE))) return -1; break;
      case 0x88: case 0x89:
        if (!(v = vnew(k, V_BOOL))) return -1;
        v->i = op == 0x88;
        if (push(k, v)) return -1;
        break;
      case 'X': if (need(k, 4)) return -1; { size_t n = le32(k->p); k->p += 4; if (make_str(k, n)) return -1; } break;
      case 0x8c: if (need(k, 1)) return -1; { size_t n = *k->p++; if (make_str(k, n)) return -1; } break;
      case 'q': if (need(k, 1) || memo_put(k, *k->p++)) return -1; break;
      case 'r': if (need(k, 4) || memo_put(k, le32(k->p))) return -1; k->p += 4; break;
      case 0x94: if (memo_put(k, k->memo_n)) return -1; break;
      case 'h': if (need(k, 1) || memo_get(k, *k->p++)) return -1; break;
      case 'j': if (need(k, 4) || memo_get(k, le32(k->p))) return -1; k->p += 4; break;
      case 'c': if (op_global(k)) return -1; break;
      case 0x93:   /* STACK_GLOBAL */
        if (!(b = pop(k)) || !(a = pop(k))) return -1;
        if (a->kind != V_STR || b->kind != V_STR) return err_setk(k->err, ERR_BAD_INPUT, "STACK_GLOBAL of something that is not a name");
        if (make_global(k, a->s, b->s)) return -1;
        break;
      case 'K': case 'M': case 'J': {
        size_t n = op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (need(k, n) || !(v = vnew(k, V_INT))) return -1;
        v->i = op == 'K' ? k->p[0] : op == 'M' ? (int64_t)le16(k->p) : (int64_t)(int32_t)le32(k->p);
        k->p += n;
        if (push(k, v)) return -1;
        break;
      }
      case 0x8a: {  /* LONG1: n bytes, little-endian two's complement */
        if (need(k, 1)) return -1;
        size_t n = *k->p++;
        if (n > 8) return err_setk(k->err, ERR_BAD_INPUT, "pickle integer of %zu bytes is too large", n);
        if (need(k, n) || !(v = vnew(k, V_INT))) return -1;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++) x |= (uint64_t)k->p[i] << (8 * i);
        if (n && n < 8 && (k->p[n - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * n);
        memcpy(&v->i, &x, sizeof x);
        k->p += n;
        if (push(k, v)) return -1;
        break;
      }
      case 't':
        if ((m = find_mark(k)) < 0 || !(v = vnew(k, V_TUPLE))) return -1;
        for (size_t i = (size_t)m + 1; i < k->sp; i++)
          if (append(k, v, k->stack[i])) return -1;
        k->sp = (size_t)m;
        marks--;
        if (push(k, v)) return -1;
        break;
      case 0x85: case 0x86: case 0x87: {
        size_t n = op - 0x84;
        V *it[3];
        for (size_t i = n; i-- > 0;)
          if (!(it[i] = pop(k))) return -1;
        if (!(v = vnew(k, V_TUPLE))) return -1;
        for (size_t i = 0; i < n; i++)
          if (append(k, v, it[i])) return -1;
        if (push(k, v)) return -1;
        break;
      }
      case 'Q': if (op_persid(k)) return -1; break;
      case 'R': if (op_reduce(k)) return -1; break;
      case 'b':   /* BUILD: an OrderedDict's __dict__ (state_dict's _metadata): not needed */
        if (!(a = pop(k)) || !(b = top(k))) return -1;
        if (b->kind != V_DICT) return err_setk(k->err, ERR_BAD_INPUT, "BUILD on something that is not a dict");
        break;
      case 's':
        if (!(c = pop(k)) || !(b = pop(k)) || !(a = top(k))) return -1;
        if (a->kind != V_DICT) return err_setk(k->err, ERR_BAD_INPUT, "SETITEM on something that is not a dict");
        if (append(k, a, b) || append(k, a, c)) return -1;
        break;
      case 'u':
        if ((m = find_mark(k)) < 0 || op_setitems(k, m)) return -1;
        marks--;
        break;
      case 'a':
        if (!(b = pop(k)) || !(a = top(k))) return -1;
        if (a->kind != V_LIST) return err_setk(k->err, ERR_BAD_INPUT, "APPEND on something that is not a list");
        if (append(k, a, b)) return -1;
        break;
      case 'e':
        if ((m = find_mark(k)) < 0) return -1;
        if (m < 1 || k->stack[m - 1]->kind != V_LIST) return err_setk(k->err, ERR_BAD_INPUT, "APPENDS on something that is not a list");
        for (size_t i = (size_t)m + 1; i < k->sp; i++)
          if (append(k, k->stack[m - 1], k->stack[i])) return -1;
        k->sp = (size_t)m;
        marks--;
        break;
      case '.':
        if (!(v = pop(k))) return -1;
        if (v->kind != V_DICT) return err_setk(k->err, ERR_BAD_INPUT, "the pickle is not a dict of tensors");
        *out = v;
        return 0;
      default:
        if (op >= 0x20 && op < 0x7f)
          return err_setk(k->err, ERR_BAD_INPUT, "pickle opcode '%c' is not allowed: only a state dict of tensors is read", op);
        return err_setk(k->err, ERR_BAD_INPUT, "pickle opcode 0x%02x is not allowed: only a state dict of tensors is read", op);
    }
  }
  return err_setk(k->err, ERR_BAD_INPUT, "pickle ends without STOP (truncated?)");
}

static void pk_free(Pk *k) {
  for (size_t i = 0; i < k->n_all; i++) { free(k->all[i]->s); free(k->all[i]->items); free(k->all[i]); }
  free(k->all);
  free(k->stack);
  free(k->memo);
}

/* n elements of t's storage from element first, converted to float32 into out, through
** a view of the storage's bytes as a safetensors tensor of the same dtype. */
static int convert(Pk *k, const char *name, const V *s, int64_t first, int64_t n, float *out) {
  int es = st_dtype_bits(s->dtype) / 8;
  StTensor view = {.name = name, .dtype = s->dtype, .ndim = 1, .shape = {n}, .numel = n,
                   .data = s->data.p + first * es, .nbytes = (size_t)(n * es)};
  return st_read_f32(&view, out, n, k->err);
}

static int read_contiguous(Pk *k, const char *name, const V *t, float *out) {
  return convert(k, name, t->storage, t->offset, t->numel, out);
}

/* A strided view (rebuild_tensor checked that every element it reaches is inside the
** storage): the span from its first to its last element converted once, then its
** elements gathered in row-major order, as torch's .contiguous() lays them out. */
static int read_strided(Pk *k, const char *name, const V *t, float *out) {
  if (!t->numel) return 0;
  int64_t span = 1;
  for (int d = 0; d < t->ndim; d++) span += (t->shape[d] - 1) * t->stride[d];
  float *all = malloc((size_t)span * sizeof *all);
  if (!all) return err_setk(k->err, ERR_NOMEM, "out of memory for tensor \"%.100s\"", name);
  if (convert(k, name, t->storage, t->offset, span, all)) { free(all); return -1; }
  int64_t idx[ST_MAX_DIMS] = {0}, at = 0;   /* the odometer over the dimensions, and its element */
  for (int64_t i = 0; i < t->numel; i++) {
    out[i] = all[at];
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) { at += t->stride[d]; break; }
      at -= (t->shape[d] - 1) * t->stride[d];
      idx[d] = 0;
    }
  }
  free(all);
  return 0;
}

/* The dict's tensors into sink, converted to float32. Each entry gets a copy of its
** own, and entries may view one storage (tied weights do): their elements together are
** held to the archive's len bytes, which every real state dict keeps (its elements take
** 2 bytes or more each, and its tied copies are fewer than the rest), so that a small
** file repeating a view of one storage cannot ask for memory without end. */
static int take_tensors(Pk *k, const V *d, const TpSink *sink, size_t len) {
  unsigned long long elements = 0;
  for (size_t i = 0; i + 1 < d->n && elements <= len; i += 2) {   /* (each numel <= 2^40: no overflow) */
    const V *t = d->items[i + 1];
    if (t->kind == V_TENSOR && t->storage->dtype != ST_I64) elements += (unsigned long long)t->numel;
  }
  if (elements > len)
    return err_setk(k->err, ERR_BAD_INPUT, "the state dict's tensors hold %llu elements, more than an archive of %zu bytes "
                    "can (entries repeating views of one storage?)", elements, len);
  for (size_t i = 0; i + 1 < d->n; i += 2) {
    const V *key = d->items[i], *t = d->items[i + 1];
    if (key->kind != V_STR) return err_setk(k->err, ERR_BAD_INPUT, "a state-dict key is not a string");
    if (t->kind != V_TENSOR) return err_setk(k->err, ERR_BAD_INPUT, "state-dict entry \"%.100s\" is not a tensor", key->s);
    const V *s = t->storage;
    /* Integer storages hold buffers, which are never loaded. */
    if (s->dtype == ST_I64) {
      if (sink->int64_tensor(sink->ctx, key->s, k->err)) return -1;
      continue;
    }
    float *out = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *out);
    if (!out) return err_setk(k->err, ERR_NOMEM, "out of memory for tensor \"%.100s\"", key->s);
    if (t->contiguous ? read_contiguous(k, key->s, t, out) : read_strided(k, key->s, t, out)) { free(out); return -1; }
    if (sink->tensor(sink->ctx, key->s, t->ndim, t->shape, out, k->err)) return -1;
  }
  return 0;
}

/* The archive's state dict, once z is open (z is the caller's to close). */
static int read_archive(const Zip *z, size_t len, const TpSink *sink, Err *err) {
  Bytes pkl, bo;
  char prefix[128], name[160];
  if (zip_prefix(z, prefix, sizeof prefix, err)) return -1;
  snprintf(name, sizeof name, "%s/byteorder", prefix);
  int found = zip_find(z, name, &bo, err);
  if (found < 0) return -1;
  if (found && (bo.len != 6 || memcmp(bo.p, "little", 6)))
    return err_setk(err, ERR_BAD_INPUT, "byteorder is not \"little\": a big-endian archive is not read");
  snprintf(name, sizeof name, "%s/data.pkl", prefix);
  if ((found = zip_find(z, name, &pkl, err)) <= 0) return found < 0 ? -1 : err_setk(err, ERR_BAD_INPUT, "no %s", name);
  if (pkl.len > TP_MAX_PICKLE) return err_setk(err, ERR_TOO_LARGE, "%s: %zu bytes, more than a state dict's pickle", name, pkl.len);
  Pk k = {.p = pkl.p, .end = pkl.p + pkl.len, .zip = z, .prefix = prefix, .err = err};
  V *d = NULL;
  int rc = run(&k, &d) || take_tensors(&k, d, sink, len) ? -1 : 0;
  pk_free(&k);
  return rc;
}

int tp_read_state_dict_memory(const void *buf, size_t len, const TpSink *sink, Err *err) {
  Zip z;
  if (zip_open(&z, buf, len, err)) return -1;
  int rc = read_archive(&z, len, sink, err);
  zip_close(&z);
  return rc;
}

int tp_read_state_dict(const char *path, const TpSink *sink, Err *err) {
  uint64_t size;
  int fd = files_open_regular(path, &size, err);
  if (fd < 0) return -1;
  if (size > TP_MAX_FILE || size == 0) {
    close(fd);
    return err_setk(err, ERR_BAD_INPUT, "%s: %llu bytes is not the size of a state dict here", path, (unsigned long long)size);
  }
  void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return err_setk(err, ERR_IO, "%s: cannot map the file", path);
  int rc = tp_read_state_dict_memory(p, (size_t)size, sink, err);
  munmap(p, (size_t)size);
  if (rc) err_prefix(err, path);
  return rc;
}
