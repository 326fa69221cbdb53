#!/usr/bin/env bash
# The fuzz harnesses (tests/fuzz/fuzz_*.c, one per parser of outside input) in make test:
# each harness, linked to a replaying main (tests/fuzz/replay_main.c) in the gcc
# ASan+UBSan build (make asan builds build-asan/fuzz-replay/), runs every committed
# regression input (tests/fuzz/regress/NAME) and every seed (tests/fuzz/corpus/NAME)
# once, then seeded mutants of them (bit flips, special bytes, cut, repeated and spliced
# ranges) for FUZZ_TEST_SECONDS (2) or FUZZ_TEST_MUTANTS (20000), whichever ends first;
# the mutants repeat from run to run (seed FUZZ_TEST_SEED, 1). A harness's invariant
# failure, a sanitizer report or a leak fails it by name, the failing input kept in
# build-asan/fuzz-crashes/:
#   PASS fuzz_NAME (N inputs and M mutants)    FAIL fuzz_NAME: <the report>; reproduce: <command>
# Fuzzing for new inputs is libFuzzer's, with clang's own build (tests/fuzz/run):
# `make fuzz` runs each harness for FUZZ_SECONDS, tests/long/long_fuzz.sh (make
# test-long) for 85 s. make test used to fuzz each for 1-3 s with that build; its
# clang compile alone took about 100 s of the 15 minutes, for a few seconds of search.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" test_fuzz
R=${MASKD_ASAN_BUILD:-build-asan}/fuzz-replay
if ! make -s -j2 asan >"$T/build.log" 2>&1; then
  fail fuzz_replay_build "make asan failed: $(grep -m3 -E 'error|Error' "$T/build.log" | tr '\n' ' ')"
  exit 1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export OMP_NUM_THREADS=1
crashes=${MASKD_ASAN_BUILD:-build-asan}/fuzz-crashes
mkdir -p "$crashes"
n=0
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c); name=${name#fuzz_}
  bin=$R/fuzz_$name
  n=$((n + 1))
  [ -x "$bin" ] || { fail "fuzz_$name" "$bin was not built (make asan)"; continue; }
  inputs=()
  for d in "tests/fuzz/regress/$name" "tests/fuzz/corpus/$name"; do [ -d "$d" ] && inputs+=("$d"); done
  [ ${#inputs[@]} -gt 0 ] || { fail "fuzz_$name" "no seeds in tests/fuzz/corpus/$name nor regressions"; continue; }
  log=$T/$name.log
  crash=$crashes/$name
  rm -f "$crash"
  if "$bin" -mutants="${FUZZ_TEST_MUTANTS:-20000}" -seconds="${FUZZ_TEST_SECONDS:-2}" -seed="${FUZZ_TEST_SEED:-1}" \
      -artifact="$crash" "${inputs[@]}" >"$T/$name.out" 2>"$log"; then
    pass "fuzz_$name ($(cat "$T/$name.out"))"
  else
    rc=$?
    why=$(grep -m1 -E 'fuzz invariant failed|ERROR: (AddressSanitizer|LeakSanitizer)|runtime error' "$log")
    detail=$(grep -m1 -A1 'fuzz invariant failed' "$log" | tail -1 | sed 's/^ *//')
    input=$(grep '^replay: ' "$log" | tail -1 | sed 's/^replay: //')
    [ -e "$crash" ] && input=$crash
    fail "fuzz_$name" "${why:-exit status $rc}${detail:+ ($detail)} on ${input:-?}; reproduce: $bin $input"
  fi
done
[ "$n" -gt 0 ] || fail fuzz_harnesses "no tests/fuzz/fuzz_*.c found"
