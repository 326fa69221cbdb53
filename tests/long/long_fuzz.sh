#!/usr/bin/env bash
# The long fuzzing run (make test-long): every harness for FUZZ_LONG_SECONDS (default
# 85, so the nine fit tests/run's limit of 900 s per test), continuing from the corpora
# earlier runs grew in build-fuzz/work (make fuzz grows the same ones).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_fuzz
bash tests/fuzz/run --seconds "${FUZZ_LONG_SECONDS:-85}"
