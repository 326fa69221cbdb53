#!/usr/bin/env bash
# tests/run itself, on a tree of made-up tests beside a copy of it: the summary counts
# every PASS and FAIL line, a test that exits non-zero without a FAIL or prints no check
# counts as one failure, SKIP lines are listed and never counted, the exit status says
# whether anything failed; the same with one lane and with three; lanes run at once; a
# test that sets up namespaces runs alone, after the others; and stopping the runner stops
# the tests it started and removes its folder.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" runner
R=$T/repo
mkdir -p "$R/tests/fake" "$R/tests/fake2"
cp tests/run "$R/tests/run"
fake() {  # name, body
  printf '#!/usr/bin/env bash\n%s\n' "$2" >"$R/tests/fake/test_$1.sh"
}
fake pass 'echo "PASS one"; echo "PASS two"'
fake fail 'echo "PASS three"; echo "FAIL four: it is wrong"'
fake crash 'echo "PASS five"; exit 3'
fake silent 'true'
fake skip 'echo "PASS six"; echo "SKIP seven: this machine cannot"'
fake slow_a 'sleep 3; echo "PASS slow_a"'
fake slow_b 'sleep 3; echo "PASS slow_b"'
# Alone: its name sorts first, yet it must start after the others have ended.
printf '#!/usr/bin/env bash\n# netns_up would be called here\necho "PASS alone"\n' >"$R/tests/fake2/test_0alone.sh"

run_fake() {  # lanes, output file; the runner's status and seconds into $T/status, $T/secs<lanes>
  local t0=$SECONDS
  TEST_LANES=$1 bash "$R/tests/run" >"$2" 2>&1
  echo $? >"$T/status"
  echo $((SECONDS - t0)) >"$T/secs$1"
}

for lanes in 1 3; do
  run_fake "$lanes" "$T/out$lanes"
  out=$(cat "$T/out$lanes")
  ok "runner_summary_lanes_$lanes" grep -qx '8 passed, 3 failed' <<<"$out"
  ok "runner_status_lanes_$lanes" test "$(cat "$T/status")" = 1
  ok "runner_lists_skip_lanes_$lanes" grep -q 'test_skip.sh: seven: this machine cannot' <<<"$out"
  ok "runner_names_failures_lanes_$lanes" grep -q '^failed: .*test_crash.sh' <<<"$out"
  ok "runner_exit_without_fail_lanes_$lanes" grep -q 'FAIL test_crash.sh: exited with status 3' <<<"$out"
  ok "runner_no_check_lanes_$lanes" grep -q 'FAIL test_silent.sh: ran no check' <<<"$out"
  # The alone test's line comes after every other test's line.
  last=$(grep -E '^test_[a-z0-9_]+\.sh +[0-9]+ passed' <<<"$out" | tail -1)
  ok "runner_alone_last_lanes_$lanes" grep -q '^test_0alone.sh' <<<"$last"
done
# The two 3-second tests: at least 6 s one after the other, about 3 s in three lanes.
ok runner_lanes_run_at_once test "$(cat "$T/secs1")" -ge 6 -a "$(cat "$T/secs3")" -le 5
# Only passing tests: status 0.
rm "$R/tests/fake/test_fail.sh" "$R/tests/fake/test_crash.sh" "$R/tests/fake/test_silent.sh"
run_fake 2 "$T/out_clean"
ok runner_all_pass_status_0 test "$(cat "$T/status")" = 0
ok runner_all_pass_summary grep -qx '6 passed, 0 failed' "$T/out_clean"
ok runner_bad_lanes_refused bash -c "! TEST_LANES=x bash '$R/tests/run' >/dev/null 2>&1"

# Stopping the runner stops the test it started and that test's own child (the marker is
# in the test's file name, so in its command line, and in its child's).
marker=runner-stop-$$-$RANDOM
rm -f "$R"/tests/fake/*.sh "$R"/tests/fake2/*.sh
printf '#!/usr/bin/env bash\nbash -c "sleep 60" %s\necho "PASS never"\n' "$marker" >"$R/tests/fake/test_$marker.sh"
find /tmp -maxdepth 1 -name 'maskd-test.*' | sort >"$T/tmp_before"
TEST_LANES=2 bash "$R/tests/run" >"$T/out_stop" 2>&1 &
runner=$!
started=1
running() { [ "$(pgrep -fc "$marker")" -ge 2 ]; }   # the test and its child
wait_until 50 0.1 running && started=0
kill -TERM "$runner"
wait "$runner" 2>/dev/null
stopped=1
for _ in $(seq 50); do pgrep -f "$marker" >/dev/null || { stopped=0; break; }; sleep 0.1; done
ok runner_stop_stops_tests test "$started" = 0 -a "$stopped" = 0
# Its temporary folder goes too (a lane's last write once kept it: seen once, not reproduced).
find /tmp -maxdepth 1 -name 'maskd-test.*' | sort >"$T/tmp_after"
ok runner_stop_removes_its_folder bash -c "[ -z \"\$(comm -13 '$T/tmp_before' '$T/tmp_after')\" ]"
pkill -f "$marker" 2>/dev/null
true
