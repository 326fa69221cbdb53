/* Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c): invariant checks that
** abort (libFuzzer then saves the input as a crash), NUL-terminated copies, and
** the bytes as a file for parsers that only take a path (one memfd, reused, or a
** named file in a private folder that is removed at exit). */
#ifndef MASKD_FUZZ_COMMON_H
#define MASKD_FUZZ_COMMON_H
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* An invariant the parser must keep: a violation is a finding, like a crash. */
#define FUZZ_CHECK(cond, ...)                                                          \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "\nfuzz invariant failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                    \
      fputc('\n', stderr);                                                             \
      abort();                                                                         \
    }                                                                                  \
  } while (0)

/* data[0..n) as a NUL-terminated string (a NUL inside stays: parsers see the prefix). */
static inline char *fuzz_cstr(const uint8_t *data, size_t n) {
  char *s = malloc(n + 1);
  if (!s) abort();
  if (n) memcpy(s, data, n);
  s[n] = 0;
  return s;
}

/* A path whose file holds exactly data[0..n): one memfd, rewritten for each input. */
static inline const char *fuzz_memfd_path(const uint8_t *data, size_t n) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("fuzz-input", 0);
    if (fd < 0) { perror("memfd_create"); abort(); }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0) abort();
  size_t done = 0;
  while (done < n) {
    ssize_t w = pwrite(fd, data + done, n - done, (off_t)done);
    if (w <= 0) { perror("pwrite"); abort(); }
    done += (size_t)w;
  }
  return path;
}

static char fuzz_dir_path[256];
static void fuzz_dir_remove(void) {
  if (fuzz_dir_path[0]) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
  }
}

/* A private folder for this process (in /dev/shm when there is one, else $TMPDIR or
** /tmp), removed at exit. */
static inline const char *fuzz_dir(void) {
  if (!fuzz_dir_path[0]) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/maskd-fuzz.XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) { perror("mkdtemp"); abort(); }
    atexit(fuzz_dir_remove);
  }
  return fuzz_dir_path;
}

/* Writes data[0..n) to path (replacing it); aborts on failure (the harness's own fault). */
static inline void fuzz_write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) { perror(path); abort(); }
}

/* dir/name, for the seed writers (MASKD_FUZZ_SEEDS=dir: a harness writes its seed
** corpus with the project's own writers and exits; tests/fuzz/make_seeds). */
static inline const char *fuzz_seed_path(const char *dir, const char *name) {
  static char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

/* The seed step of every harness's LLVMFuzzerInitialize: with MASKD_FUZZ_SEEDS=dir set,
** write_seeds(dir) writes the harness's seed corpus and the process exits. */
static inline void fuzz_seeds_then_exit(void (*write_seeds)(const char *dir)) {
  const char *seeds = getenv("MASKD_FUZZ_SEEDS");
  if (seeds) { write_seeds(seeds); exit(0); }
}

#endif
