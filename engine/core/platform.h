/* Process-level facts about the machine that the numbers depend on. */
#ifndef MASKD_PLATFORM_H
#define MASKD_PLATFORM_H
#include <stddef.h>

/* OpenBLAS picks its kernels when it loads, from OPENBLAS_CORETYPE if set. A
** pre-AVX-512 core type on an AVX-512 CPU halves sgemm speed, so this re-executes
** the program without it (saying so on stderr), unless MASKD_KEEP_OPENBLAS_CORETYPE=1.
** Call first thing in main(); returns only when no re-exec was needed or possible. */
void platform_fix_openblas_env(char **argv);

/* n floats starting on a 64-byte line, or NULL; free() releases them. From
** 2 MiB up they start on a 2 MiB boundary and are offered to the kernel as
** transparent huge pages (madvise): the packing of strided matrix rows and the
** optimizer's streams then miss the TLB far less. */
float *platform_alloc_floats(size_t n);

/* Number of online CPUs (at least 1). */
int platform_cpu_count(void);

/* The system's page size in bytes. */
long platform_page_size(void);

/* Gives the pages of [p, p + bytes) (page-aligned) back to the system: they
** stop counting in the process's memory and read as zeros if touched again. */
void platform_release_pages(void *p, size_t bytes);
/* Asks that [p, p + bytes) (page-aligned) be backed by ordinary pages from now on, not
** transparent huge pages: a buffer touched only here and there then costs the pages
** touched, not 2 MiB each. Advice only. */
void platform_small_pages(void *p, size_t bytes);

/* Binds OpenMP thread t of a `threads`-wide team (the calling thread is t = 0)
** to the t-th CPU this process may use, when there are at least that many and
** MASKD_PIN_THREADS is not "0". Why: on this project's VM the scheduler wakes a
** sleeping OpenMP worker (OMP_WAIT_POLICY=PASSIVE) on its waker's CPU and only
** moves it tens of milliseconds later, so a two-thread product ran at one
** core's speed for its first dozen calls. Returns the number of threads bound. */
int platform_pin_threads(int threads);

#endif
