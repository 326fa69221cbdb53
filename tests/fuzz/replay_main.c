/* The libFuzzer harnesses (tests/fuzz/fuzz_*.c) without libFuzzer: a main that hands
** each input file to LLVMFuzzerTestOneInput once, as `fuzzer -runs=1 FILES` does, then
** (with -mutants=N) N seeded mutants of those inputs: bit flips, special bytes, cut,
** repeated and spliced ranges, no coverage guidance. Linked with the gcc ASan+UBSan
** build (make asan), it is make test's fuzzing (tests/fuzz/test_fuzz.sh) without
** clang's separate build; coverage-guided search stays libFuzzer's (make fuzz,
** tests/long/long_fuzz.sh).
**
**   fuzz_NAME [-mutants=N] [-seconds=S] [-seed=X] [-artifact=FILE] FILE|DIR...
**
** Inputs: each file, and each regular file of each folder, in name order. Mutants are
** drawn from -seed (1) alone, so a run repeats exactly; -seconds (0: none) stops them
** early. Exit 0 after the last; a finding (a failed invariant aborts; ASan or UBSan
** reports) ends the process, the input that caused it written to -artifact first
** (when given) and its origin printed on stderr. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

typedef struct Input { uint8_t *p; size_t n; } Input;
static Input *inputs;
static size_t n_inputs, cap_inputs;

/* The input being run, for the death callback: written whole to the artifact path. */
static const uint8_t *current;
static size_t current_n;
static const char *artifact;

static void save_current(void) {
  if (!artifact || !current) return;
  int fd = open(artifact, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  for (size_t done = 0; done < current_n;) {
    ssize_t w = write(fd, current + done, current_n - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  close(fd);
}

static void on_abort(int sig) {
  save_current();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void run_one(const uint8_t *p, size_t n) {
  /* The harness sees exactly these bytes: a copy of that size, so ASan catches a read past them. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) { fprintf(stderr, "replay: out of memory\n"); exit(1); }
  if (n) memcpy(exact, p, n);
  current = exact;
  current_n = n;
  LLVMFuzzerTestOneInput(exact, n);
  current = NULL;
  free(exact);
}

/* Reads path whole into the inputs; -1 when it cannot be read. */
static int load_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); return -1; }
  size_t cap = 1 << 12, n = 0;
  uint8_t *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      uint8_t *bigger = realloc(buf, cap *= 2);
      if (!bigger) { free(buf); buf = NULL; }
      buf = bigger;
    }
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) { fprintf(stderr, "%s: cannot be read\n", path); free(buf); return -1; }
  if (n_inputs == cap_inputs) {
    Input *more = realloc(inputs, (cap_inputs = cap_inputs ? 2 * cap_inputs : 64) * sizeof *inputs);
    if (!more) { free(buf); return -1; }
    inputs = more;
  }
  inputs[n_inputs++] = (Input){buf, n};
  fprintf(stderr, "replay: %s\n", path);
  run_one(buf, n);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int load_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) { perror(path); return -1; }
  if (!S_ISDIR(st.st_mode)) return load_file(path);
  struct dirent **names;
  int n = scandir(path, &names, NULL, by_name), rc = n < 0 ? -1 : 0;
  if (n < 0) perror(path);
  for (int i = 0; i < n; i++) {
    char child[4096];
    snprintf(child, sizeof child, "%s/%s", path, names[i]->d_name);
    struct stat cs;
    if (rc == 0 && names[i]->d_name[0] != '.' && stat(child, &cs) == 0 && S_ISREG(cs.st_mode)) rc = load_file(child);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* splitmix64: the mutants' only source of randomness. */
static uint64_t rng_state;
static uint64_t next_u64(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(next_u64() % n) : 0; }

/* Bytes parsers treat specially: ends of ranges, signs, JSON and CSV punctuation, digits. */
static const uint8_t special[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, '"', '\\', '{', '}', '[', ']', ',', ':',
                                  '\n', '\r', '-', '.', 'e', '0', '9', ' ', 0xc3, 0xe2};

/* One to four edits of dst[0..n) in place, within cap; returns the new length. */
static size_t mutate(uint8_t *dst, size_t n, size_t cap) {
  int edits = 1 + (int)below(4);
  for (int e = 0; e < edits; e++) {
    switch (below(6)) {
      case 0: if (n) dst[below(n)] ^= (uint8_t)(1u << below(8)); break;
      case 1: if (n) dst[below(n)] = special[below(sizeof special)]; break;
      case 2: if (n) n = below(n + 1); break;                               /* truncate */
      case 3: if (n) { size_t at = below(n), len = 1 + below(n - at);        /* cut a range */
                       memmove(dst + at, dst + at + len, n - at - len); n -= len; } break;
      case 4: if (n && n < cap) { size_t from = below(n), len = 1 + below(n - from), at = below(n + 1);  /* repeat one */
                       if (len > cap - n) len = cap - n;
                       uint8_t tmp[256];
                       if (len > sizeof tmp) len = sizeof tmp;
                       memcpy(tmp, dst + from, len);
                       memmove(dst + at + len, dst + at, n - at);
                       memcpy(dst + at, tmp, len); n += len; } break;
      default: { const Input *o = &inputs[below(n_inputs)];                   /* splice another input's range */
                 if (!o->n || n >= cap) break;
                 size_t from = below(o->n), len = 1 + below(o->n - from), at = below(n + 1);
                 if (len > cap - n) len = cap - n;
                 memmove(dst + at + len, dst + at, n - at);
                 memcpy(dst + at, o->p + from, len); n += len; }
    }
  }
  return n;
}

int main(int argc, char **argv) {
  long mutants = 0;
  double seconds = 0;
  rng_state = 1;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    const char *a = argv[first];
    if (!strncmp(a, "-mutants=", 9)) mutants = atol(a + 9);
    else if (!strncmp(a, "-seconds=", 9)) seconds = atof(a + 9);
    else if (!strncmp(a, "-seed=", 6)) rng_state = strtoull(a + 6, NULL, 10);
    else if (!strncmp(a, "-artifact=", 10)) artifact = a + 10;
    else { fprintf(stderr, "%s: unknown option %s\n", argv[0], a); return 2; }
  }
  if (first == argc) {
    fprintf(stderr, "usage: %s [-mutants=N] [-seconds=S] [-seed=X] [-artifact=FILE] FILE|DIR...\n", argv[0]);
    return 2;
  }
  signal(SIGABRT, on_abort);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_current);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = first; i < argc; i++)
    if (load_path(argv[i])) return 1;
  long done = 0;
  if (mutants > 0 && n_inputs > 0) {
    size_t cap = 64;
    for (size_t i = 0; i < n_inputs; i++) if (2 * inputs[i].n + 64 > cap) cap = 2 * inputs[i].n + 64;
    uint8_t *buf = malloc(cap);
    if (!buf) return 1;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fprintf(stderr, "replay: %ld mutants from seed %llu (-artifact keeps the one that fails)\n", mutants,
            (unsigned long long)rng_state);
    for (; done < mutants; done++) {
      const Input *in = &inputs[below(n_inputs)];
      memcpy(buf, in->p, in->n);
      run_one(buf, mutate(buf, in->n, cap));
      clock_gettime(CLOCK_MONOTONIC, &t);
      if (seconds > 0 && (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > seconds) { done++; break; }
    }
    free(buf);
  }
  printf("%zu inputs and %ld mutants\n", n_inputs, done);
  for (size_t i = 0; i < n_inputs; i++) free(inputs[i].p);
  free(inputs);
  return 0;
}
