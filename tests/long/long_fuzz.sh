#!/usr/bin/env bash
# The long fuzzing run (make test-long): every harness for FUZZ_LONG_SECONDS (default
# 85: the eleven take about 16 minutes), continuing from the corpora
# earlier runs grew in build-fuzz/work (make fuzz grows the same ones).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_fuzz
bash tests/fuzz/run --seconds "${FUZZ_LONG_SECONDS:-85}"
