#!/usr/bin/env bash
# The libFuzzer harnesses (tests/fuzz/, one per parser of outside input): built with
# clang under ASan+UBSan (make fuzz-build), every regression input in tests/fuzz/regress
# replayed, then each harness fuzzed from its seeds for FUZZ_TEST_SECONDS (default 1; every
# seed still runs first).
# Prints PASS/FAIL fuzz_NAME; a missing clang, libFuzzer or OpenMP for clang is a
# failure that names the package (scripts/setup --tests installs them). `make fuzz`
# runs each for FUZZ_SECONDS, tests/long/long_fuzz.sh longer.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" test_fuzz
bash tests/fuzz/run --seconds "${FUZZ_TEST_SECONDS:-1}" --work "$T"
