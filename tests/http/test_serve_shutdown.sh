#!/usr/bin/env bash
# SIGTERM to maskd serve while a job runs, for each kind of job (issue 11: "shutdown
# works in every state"): the server exits promptly and cleanly, the job's process is
# stopped (no orphan), the job is marked "interrupted", and nothing half-written stays
# under the work folder (no temporary, no partial output folder). The tokenizer and
# prepare jobs are frozen (SIGSTOP) at the point to test, so the signal lands there
# whatever the machine's speed; a training job checkpoints at its step boundary; a job
# that does not stop within --stop-grace is killed and still marked interrupted.
# While the jobs run, their command lines are checked: every value rides inside its
# flag ("--flag=VALUE"), so no value from a request can become an option.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serve_shutdown
W=$T/hub.db.work
serve_kill=KILL serve_keep_err=1

[ -f "$DATA/train.txt" ] || { fail serve_shutdown_setup "$DATA/train.txt missing (MASKD_DATA)"; exit 1; }
mkdir -p "$T/data"
for _ in 1 2 3; do cat "$DATA/train.txt"; done >"$T/data/big.txt"
head -2000 "$DATA/train.txt" >"$T/data/small.txt"
{ "$M" tokenizer train --quiet --input "$T/data/small.txt" --vocab-size 1000 --out "$T/data/tok.json" &&
  "$M" prepare --quiet --tokenizer "$T/data/tok.json" --input "$T/data/small.txt" --seq-len 32 --out "$T/data/shards"; } \
  >"$T/setup.log" 2>&1 || { fail serve_shutdown_setup "$(tail -2 "$T/setup.log")"; exit 1; }

start() { serve_start --db "$T/hub.db" --data-dir "$T/data" --quiet "$@"; }
post() { curl -s --max-time 10 -X POST -H 'Content-Type: application/json' -o "$T/body" -w '%{http_code}' --data-binary "$2" "$base$1"; }
# The job's process once it runs the command named (a spawned child shows the server's
# command line until it has exec'd): its pid on stdout.
job_child() {
  local c
  for _ in $(seq 400); do
    c=$(pgrep -P "$pid" | head -1)
    [ -n "$c" ] && tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null | grep -q "maskd $1" && { echo "$c"; return 0; }
    sleep 0.025
  done
  return 1
}
# Every argument after the command's name is a bare option or --flag=VALUE.
flags_carry_values() {
  tr '\0' '\n' <"/proc/$1/cmdline" | tail -n +3 | grep -v '^train$' | grep -qv -e '^--[a-z-]*$' -e '^--[a-z-]*=.' && return 1
  return 0
}
# stop_server NAME: SIGTERM, then (when given) SIGCONT to a frozen child; the server must exit 0 within 20 s.
stop_server() {
  local t0=$SECONDS rc
  kill -TERM "$pid"
  [ -n "${2:-}" ] && { sleep 0.3; kill -CONT "$2"; }
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then fail "$1_server_exits" "still running after 20 s"; kill -9 "$pid"; wait "$pid"; pid=; return; fi
  wait "$pid"; rc=$?; pid=
  [ $rc = 0 ] && pass "$1_server_exits" || fail "$1_server_exits" "exit status $rc after $((SECONDS - t0)) s: $(tail -2 "$T/err")"
}
job_status() { $PY -c "import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute('SELECT status, COALESCE(error, \"\") FROM jobs WHERE id=?', (int(sys.argv[2]),)).fetchone(); print(r[0] + ': ' + r[1])" "$T/hub.db" "$1"; }
run_status() { $PY -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT status FROM runs WHERE name=?', (sys.argv[2],)).fetchone()[0])" "$T/hub.db" "$1"; }
# after NAME CHILD JOB: the job's process is gone, the job interrupted, no temporary in the work folder.
after() {
  ! kill -0 "$2" 2>/dev/null && pass "$1_process_stopped" || fail "$1_process_stopped" "pid $2 still exists"
  local st; st=$(job_status "$3")
  [[ "$st" == interrupted:* ]] && pass "$1_job_interrupted" || fail "$1_job_interrupted" "$st"
  local left; left=$(find "$W" -name '.*.tmp-*' | head -3)
  [ -z "$left" ] && pass "$1_no_temporary" || fail "$1_no_temporary" "$left"
}

# ---- a tokenizer job, stopped while it trains ----
start || { fail serve_shutdown_start "$(cat "$T/err")"; exit 1; }
[ "$(post /tokenizers '{"name": "tk", "input": "big.txt", "vocab_size": 8000}')" = 202 ] || fail tokenizer_job_accepted "$(cat "$T/body")"
child=$(job_child "tokenizer train") && kill -STOP "$child" || { fail tokenizer_job_started "no child process"; exit 1; }
flags_carry_values "$child" && pass tokenizer_job_values_inside_flags || fail tokenizer_job_values_inside_flags "$(tr '\0' ' ' <"/proc/$child/cmdline")"
stop_server tokenizer "$child"
after tokenizer "$child" 1
[ ! -e "$W/tokenizers/tk" ] && pass tokenizer_no_output_folder || fail tokenizer_no_output_folder "$(ls -A "$W/tokenizers/tk")"

# ---- a prepare job, stopped with shards written into its temporary folder ----
start || fail prepare_restart "$(cat "$T/err")"
[ "$(post /datasets '{"name": "ds", "tokenizer": "tok.json", "input": "big.txt", "seq_len": 64}')" = 202 ] || fail prepare_job_accepted "$(cat "$T/body")"
child=$(job_child prepare) || { fail prepare_job_started "no child process"; exit 1; }
for _ in $(seq 1000); do ls "$W"/datasets/.ds.tmp-*/*.shard >/dev/null 2>&1 && break; sleep 0.01; done
kill -STOP "$child"
ls "$W"/datasets/.ds.tmp-*/*.shard >/dev/null 2>&1 && [ ! -e "$W/datasets/ds/manifest.json" ] && pass prepare_caught_mid_set ||
  fail prepare_caught_mid_set "$(ls -A "$W/datasets" "$W/datasets/ds" 2>&1 | tr '\n' ' ')"
flags_carry_values "$child" && pass prepare_job_values_inside_flags || fail prepare_job_values_inside_flags "$(tr '\0' ' ' <"/proc/$child/cmdline")"
stop_server prepare "$child"
after prepare "$child" 2
[ -z "$(ls -A "$W/datasets")" ] && pass prepare_no_output_folder || fail prepare_no_output_folder "$(ls -A "$W/datasets")"

# ---- a training job: it checkpoints at its step boundary and says so ----
start || fail train_restart "$(cat "$T/err")"
[ "$(post /runs '{"name": "tr", "tokenizer": "tok.json", "train": "shards", "config": "tiny", "max_steps": 100000, "batch": 8, "threads": 1}')" = 202 ] ||
  fail train_job_accepted "$(cat "$T/body")"
child=$(job_child train) || { fail train_job_started "no child process"; exit 1; }
flags_carry_values "$child" && pass train_job_values_inside_flags || fail train_job_values_inside_flags "$(tr '\0' ' ' <"/proc/$child/cmdline")"
for _ in $(seq 300); do
  curl -s --max-time 5 "$base/runs/tr" | $PY -c 'import json,sys; b=json.load(sys.stdin); sys.exit(0 if b.get("step", 0) >= 2 else 1)' 2>/dev/null && break
  sleep 0.1
done
stop_server train
after train "$child" 3
[ "$(run_status tr)" = interrupted ] && pass train_run_interrupted || fail train_run_interrupted "$(run_status tr)"

# ---- a job that does not stop: killed after --stop-grace, still marked interrupted ----
start --stop-grace 0.5 || fail grace_restart "$(cat "$T/err")"
[ "$(post /runs '{"resume": "tr"}')" = 202 ] || fail grace_job_accepted "$(cat "$T/body")"
child=$(job_child train) || { fail grace_job_started "no child process"; exit 1; }
# A training job is handed over by its id (--job=N); the resume job's description in the
# store names the run by its id, never by a name.
resumed=$($PY -c "import json,sqlite3,sys; print(json.loads(sqlite3.connect(sys.argv[1]).execute('SELECT params FROM jobs ORDER BY id DESC LIMIT 1').fetchone()[0]).get('resume', ''))" "$T/hub.db")
flags_carry_values "$child" && grep -qx -- '--job=[0-9]*' < <(tr '\0' '\n' <"/proc/$child/cmdline") && [[ "$resumed" =~ ^[0-9]+$ ]] &&
  pass resume_job_values_inside_flags ||
  fail resume_job_values_inside_flags "$(tr '\0' ' ' <"/proc/$child/cmdline") (resume: $resumed)"
for _ in $(seq 300); do [ "$(run_status tr)" = running ] && break; sleep 0.1; done
kill -STOP "$child"   # a job stuck where it cannot see the signal
stop_server grace
after grace "$child" 4
[[ "$(job_status 4)" == *"killed after the grace period"* ]] && pass grace_job_says_killed || fail grace_job_says_killed "$(job_status 4)"
[ "$(run_status tr)" = interrupted ] && pass grace_run_interrupted || fail grace_run_interrupted "$(run_status tr)"

# ---- a training job's process killed by someone else (the OOM killer, a kill -9) ----
# The server, still up, marks the run interrupted (it stayed "running", refusing cancel
# and resume, until a restart), and the job's error names the signal, not a progress line.
start || fail killed_restart "$(cat "$T/err")"
[ "$(post /runs '{"resume": "tr"}')" = 202 ] || fail killed_job_accepted "$(cat "$T/body")"
child=$(job_child train) || { fail killed_job_started "no child process"; exit 1; }
for _ in $(seq 300); do [ "$(run_status tr)" = running ] && break; sleep 0.1; done
kill -9 "$child"
for _ in $(seq 100); do [[ "$(job_status 5)" == failed:* ]] && break; sleep 0.1; done
st=$(job_status 5)
[[ "$st" == "failed: the job's process was killed by signal 9 (Killed)" ]] && pass killed_job_names_signal || fail killed_job_names_signal "$st"
[ "$(run_status tr)" = interrupted ] && pass killed_run_interrupted || fail killed_run_interrupted "$(run_status tr)"
[ "$(post /runs '{"resume": "tr"}')" = 202 ] && pass killed_run_resumes || fail killed_run_resumes "$(cat "$T/body")"
stop_server killed
