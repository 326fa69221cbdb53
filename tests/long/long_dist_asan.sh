#!/usr/bin/env bash
# The data-parallel tests (tests/cli/test_dist.sh: 2 ranks bit for bit as 1 rank with
# grad-accum 2, SIGKILL of a rank and resume, a rank-count change on resume, the refusals)
# against the ASan+UBSan build, where any rank's or launcher's sanitizer report fails them
# (tests/lib.sh, MASKD_SANITIZER_LOGS). Open MPI's own allocations at exit are suppressed
# (tests/lsan_openmpi.supp), which needs its components kept loaded (tests/no_dlclose.c)
# and the slow unwinder (its libraries keep no frame pointers): about 2 minutes, so not in
# make test. Needs build-asan/maskd (make asan; make test-long builds it).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" distasan "${1:-}"
set -o pipefail
A=$PWD/build-asan/maskd
need long_dist_asan_build "no $A: run make asan first (make test-long does)" -x "$A"
gcc -shared -fPIC -O2 -o "$T/no_dlclose.so" tests/no_dlclose.c || { fail long_dist_asan_shim "gcc failed"; exit 1; }
MASKD=$A MASKD_SANITIZER_LOGS=1 LD_PRELOAD=$T/no_dlclose.so \
  ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS=suppressions=$PWD/tests/lsan_openmpi.supp:print_suppressions=0 \
  bash tests/cli/test_dist.sh "$DATA_ROOT" 2>&1 | sed -E 's/^(PASS|FAIL|SKIP) /\1 asan_/'
