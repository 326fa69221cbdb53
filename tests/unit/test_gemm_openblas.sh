#!/usr/bin/env bash
# The product tests again with MASKD_GEMM=openblas: the path every product takes
# without AVX-512, and the fallback of a thread that cannot have its packing
# buffers (OpenBLAS, then the bias and the GELU applied over C). Names get an
# "openblas_" prefix.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" gemm_openblas
build=${MASKD_BUILD:-build}
out=$(MASKD_GEMM=openblas "$build/tests/unit/test_gemm" 2>&1); rc=$?
grep -E '^(PASS|FAIL) ' <<<"$out" | sed -E 's/^(PASS|FAIL) /\1 openblas_/'
if ! grep -q 'gemm backend openblas' <<<"$out"; then
  echo "FAIL openblas_backend_chosen: MASKD_GEMM=openblas did not select OpenBLAS ($(grep backend <<<"$out"))"
elif [ $rc -ne 0 ]; then
  echo "FAIL openblas_exit: test_gemm exited $rc"
else
  echo "PASS openblas_backend_chosen"
fi
