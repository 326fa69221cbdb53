#!/usr/bin/env bash
# Exact resume: a run killed with SIGKILL at random moments (several times) and resumed
# with `maskd train --resume` ends bit-identical to the same run never stopped: every
# step's loss, lr and grad norm, every epoch's evaluation, and the final weights (the
# sha256 of the last pushed model.safetensors). The store passes PRAGMA integrity_check
# and foreign_key_check after every kill. Fast config: a 16-wide 2-layer model, seq 32.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" resume "${1:-}"
[ -f "$DATA/train.txt" ] || { fail resume_setup "no WikiText-2 at $DATA"; exit 1; }

small_training_setup resume_setup 120000 || exit 1
args=(--name fast --tokenizer "$T/tok.json" --train "$T/train" --validation "$T/valid" --config "$T/cfg.json"
      --epochs 3 --batch 8 --lr 2e-3 --threads 1 --checkpoint-steps 7 --clip-norm 1.0 --seed 11 --quiet)

start=$(date +%s.%N)
"$M" train --db "$T/a.db" "${args[@]}" 2>"$T/a.err" || { fail resume_reference_run "$(tail -1 "$T/a.err")"; exit 1; }
dur=$(echo "$(date +%s.%N) - $start" | bc)
total=$(sqlite3 "$T/a.db" "SELECT total_steps FROM runs")
pass resume_reference_run

dump() {  # everything that must match, at full precision
  sqlite3 "$1" "SELECT step, printf('%.17e %.17e %.17e', loss, lr, grad_norm) FROM step_metrics ORDER BY step;
                SELECT epoch, printf('%.17e %.17e %.17e', train_loss, eval_loss, eval_accuracy) FROM epoch_metrics ORDER BY epoch;
                SELECT r.weights FROM revisions r WHERE r.message = 'Training in progress epoch 3';"
}

# Kill run B with SIGKILL at random moments, checking the store each time, then resume to the end.
kills=0 integrity_ok=1 statuses_ok=1
"$M" train --db "$T/b.db" "${args[@]}" 2>>"$T/b.err" &
pid=$!
for round in 1 2 3; do
  # Kill once the run has passed a random step (seen through its pushed checkpoints),
  # a random few milliseconds later: mid-step, mid-push or mid-evaluation alike.
  k=$(( round * total / 4 + RANDOM % (total / 5) ))
  for _ in $(seq 600); do
    s=$(sqlite3 "$T/b.db" "SELECT COALESCE(MAX(step), 0) FROM revisions" 2>/dev/null || echo 0)
    [ "${s:-0}" -ge "$k" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  sleep "0.0$((RANDOM % 10))"
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"; wait "$pid" 2>/dev/null; kills=$((kills + 1))
    ic=$(sqlite3 "$T/b.db" "PRAGMA integrity_check; PRAGMA foreign_key_check;")
    [ "$ic" = "ok" ] || { integrity_ok=0; echo "# after kill $kills: $ic"; }
    echo "# kill $kills at step $(sqlite3 "$T/b.db" "SELECT COALESCE(MAX(step),0) FROM step_metrics") of $total" >&2
  else
    wait "$pid"   # it finished: the loop ends below
  fi
  # The dead run is still "running" in the store until maskd notices its pid is gone.
  rc=0
  [ "$(sqlite3 "$T/b.db" "SELECT status FROM runs")" = done ] && break   # finished before this kill
  "$M" train --db "$T/b.db" --resume fast --quiet 2>>"$T/b.err" &
  pid=$!
done
kill -0 "$pid" 2>/dev/null && { wait "$pid"; rc=$?; }
st=$(sqlite3 "$T/b.db" "SELECT status FROM runs")
[ $rc = 0 ] && [ "$st" = done ] || statuses_ok=0
[ $integrity_ok = 1 ] && pass resume_integrity_after_kills || fail resume_integrity_after_kills "integrity_check failed"
[ $statuses_ok = 1 ] && pass resume_finishes || fail resume_finishes "rc $rc, status $st: $(tail -2 "$T/b.err")"
[ "$kills" -ge 2 ] && pass resume_was_killed || fail resume_was_killed "only $kills kills landed (run took ${dur}s)"
n=$(sqlite3 "$T/b.db" "SELECT COUNT(*) FROM runs")
[ "$n" = 1 ] && pass resume_same_run || fail resume_same_run "$n runs"

dump "$T/a.db" > "$T/a.txt"; dump "$T/b.db" > "$T/b.txt"
lines=$(wc -l < "$T/a.txt")
if [ "$lines" -eq $((total + 4)) ] && cmp -s "$T/a.txt" "$T/b.txt"; then
  pass resume_bit_identical
else
  fail resume_bit_identical "$lines lines (want $((total + 4))); first difference: $(diff "$T/a.txt" "$T/b.txt" | head -3 | tr '\n' ' ')"
fi
# Negative control: another seed gives other numbers, so the comparison can see a difference.
"$M" train --db "$T/c.db" "${args[@]}" --seed 12 2>/dev/null
dump "$T/c.db" > "$T/c.txt"
cmp -s "$T/a.txt" "$T/c.txt" && fail resume_control_differs "seed 12 gave the same dump" || pass resume_control_differs

# Two resumes of one stopped run started together: one trains, the other is refused (the
# store's claim is atomic; a status check before it let both train and push). A writer
# holds the database while both start, so both have read the run as stopped before either
# can claim it.
"$M" train --db "$T/d.db" "${args[@]}" 2>"$T/d.err" &
pid=$!
for _ in $(seq 600); do
  [ "$(sqlite3 "$T/d.db" "SELECT COUNT(*) FROM revisions" 2>/dev/null || echo 0)" -ge 1 ] && break
  sleep 0.02
done
kill -TERM "$pid"; wait "$pid"; pid=
st=$(sqlite3 "$T/d.db" "SELECT status FROM runs")
if [ "$st" != interrupted ]; then
  fail resume_twice_one_refused "the run to resume is $st, not interrupted: $(tail -1 "$T/d.err")"
else
  $PY -c 'import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
db.execute("BEGIN IMMEDIATE"); print("locked", flush=True); time.sleep(2); db.execute("COMMIT")' "$T/d.db" >"$T/lock.out" &
  lpid=$!
  for _ in $(seq 200); do grep -q locked "$T/lock.out" && break; sleep 0.02; done
  "$M" train --db "$T/d.db" --resume fast --quiet 2>"$T/r1.err" & r1=$!
  "$M" train --db "$T/d.db" --resume fast --quiet 2>"$T/r2.err" & r2=$!
  wait "$lpid"
  # The refused one exits at once; the other is stopped once that is seen (or after 20 s).
  for _ in $(seq 200); do kill -0 "$r1" 2>/dev/null && kill -0 "$r2" 2>/dev/null || break; sleep 0.1; done
  kill -TERM "$r1" "$r2" 2>/dev/null
  wait "$r1"; rc1=$?; wait "$r2"; rc2=$?
  refused=$(grep -l "already running\|still running" "$T/r1.err" "$T/r2.err" | wc -l)
  if [ $((rc1 == 1)) -ne $((rc2 == 1)) ] && [ "$refused" = 1 ]; then
    pass resume_twice_one_refused
  else
    fail resume_twice_one_refused "exit statuses $rc1 and $rc2, $refused refused: $(tail -1 "$T/r1.err") / $(tail -1 "$T/r2.err")"
  fi
fi

# A run killed in a container resumes in the next one. In a pid namespace maskd is pid 1
# at every start, so the killed run's pid named the resuming process itself and the run
# read as "still running" for ever; its start time tells the two apart.
if ! unshare -pf --mount-proc true 2>/dev/null; then
  echo "SKIP resume_in_a_new_pid_namespace: no pid namespace here (unshare -pf, as root)"
else
  unshare -pf --mount-proc "$M" train --db "$T/e.db" "${args[@]}" 2>"$T/e.err" &
  upid=$!
  for _ in $(seq 600); do
    [ "$(sqlite3 "$T/e.db" "SELECT COUNT(*) FROM revisions" 2>/dev/null || echo 0)" -ge 1 ] && break
    sleep 0.02
  done
  inner=$(pgrep -P "$upid" | head -1)
  epid=$(sqlite3 "$T/e.db" "SELECT pid FROM runs")
  [ -n "$inner" ] && kill -9 "$inner"
  wait "$upid" 2>/dev/null
  if [ "$epid" != 1 ] || [ "$(sqlite3 "$T/e.db" "SELECT status FROM runs")" != running ]; then
    fail resume_in_a_new_pid_namespace "setup: the run's pid is $epid, status $(sqlite3 "$T/e.db" "SELECT status FROM runs")"
  else
    timeout -k 5 300 unshare -pf --mount-proc "$M" train --db "$T/e.db" --resume fast --quiet 2>>"$T/e.err"; rc=$?
    st=$(sqlite3 "$T/e.db" "SELECT status FROM runs")
    [ $rc = 0 ] && [ "$st" = done ] && pass resume_in_a_new_pid_namespace ||
      fail resume_in_a_new_pid_namespace "rc $rc, status $st: $(tail -1 "$T/e.err")"
  fi
fi
