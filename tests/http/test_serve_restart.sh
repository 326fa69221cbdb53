#!/usr/bin/env bash
# maskd serve when the server dies (kill -9) in the middle of a training job: by
# default the job and its run are left "interrupted" and nothing runs again; with
# --on-restart resume (or a job's "on_restart": "resume") the job is queued once
# more as a resume of its run, which then finishes with exactly its step count, as
# one run, with one resume job; a job's "on_restart": "interrupt" wins over the flag.
# A stop (SIGTERM) leaves its job to the next start the same way, requeued once.
# When the server alone is killed, its job's process stops itself (no orphan).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serverestart
MASKD=$M D=$DATA_ROOT
export OMP_NUM_THREADS=1
spid=''
# The server runs under a small reaper (PR_SET_CHILD_SUBREAPER): a real init reaps the
# job process a crashed server leaves behind, but this sandbox's PID 1 does not, and an
# unreaped zombie looks alive to the store's recovery. kill -9 takes the server and its
# job's maskd train together, as a crash of the machine would.
REAP='import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
child = os.fork()
if child == 0: os.execv(sys.argv[1], sys.argv[1:])
rc = 0
while True:
    try: p, st = os.wait()
    except ChildProcessError: break
    if p == child: rc = os.waitstatus_to_exitcode(st)
sys.exit(rc if rc >= 0 else 128 - rc)'
serve_wrap=("$PY" -c "$REAP") serve_keep_err=1
killall_() { [ -n "$spid" ] && { kill -9 "$spid" $(pgrep -P "$spid") 2>/dev/null; wait "$pid" 2>/dev/null; }; pid= spid=; }
# On exit SIGTERM goes to the server itself (spid), not to the reaper in pid.
stop_reaped() { [ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null; pid=''; }
at_exit stop_reaped

need serve_restart_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
need serve_restart_setup "$D/wikitext-2/train.txt missing (MASKD_DATA=$D)" -f "$D/wikitext-2/train.txt"
head -2000 "$D/wikitext-2/train.txt" > "$T/train.txt"
head -300 "$D/wikitext-2/valid.txt" > "$T/valid.txt"
{ node tests/hf_tokenize.js train "$T/raw.json" "$T/train.txt" && node tests/hf_tokenize.js seed "$T/raw.json" "$T/tok.json" &&
  "$MASKD" prepare --quiet --tokenizer "$T/tok.json" --input "$T/train.txt" --split train --seq-len 32 --out "$T/shards" &&
  "$MASKD" prepare --quiet --tokenizer "$T/tok.json" --input "$T/valid.txt" --split validation --seq-len 32 --out "$T/vshards"; } \
  >"$T/setup.log" 2>&1 || { fail serve_restart_setup "$(tail -3 "$T/setup.log")"; exit 1; }

start() {
  serve_start --db "$T/hub.db" --data-dir "$T" --quiet "$@"
  spid=$(pgrep -P "$pid")
  [ -n "$base" ] && [ -n "$spid" ]
}
# Checkpoints every 5 steps, so a kill after step 12 leaves one to resume from.
runjson() { printf '{"name":"%s","tokenizer":"%s","train":"%s","validation":"%s","config":"tiny","max_steps":%d,"batch":16,"eval_batches":2,"checkpoint_steps":5,"threads":1%s}' \
  "$1" tok.json shards vshards "$2" "${3:-}"; }
# crash RUN: waits for the run to train past a checkpoint, then kills the server and its child.
crash() { wait_for 120 "/runs/$1" 'b["status"] == "running" and b["step"] >= 12' && killall_; }
# jobs of run NAME (its own and resumes of its id): "status,requeued_from" lines, oldest first.
jobs_of() {
  call GET "/runs/$1"
  local id
  id=$(jget 'b["id"]')
  call GET /jobs
  $PY - "$T/body" "$1" "$id" <<'EOF2'
import json, sys
b, name, rid = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
for j in reversed(b):
    p = j["params"] if isinstance(j["params"], dict) else json.loads(j["params"])
    if p.get("name") == name or p.get("resume") in (name, rid):
        print(f'{j["status"]},{p.get("requeued_from", "-")}')
EOF2
}

# jobs_settled RUN WANT: jobs_of RUN as one line (requeued_from ids as N), once it reads WANT
# or after 10 s; stop_server: SIGTERM to the server, waited for.
jobs_settled() {
  local got
  for _ in $(seq 50); do got=$(jobs_of "$1" | sed 's/,[0-9]*$/,N/' | tr '\n' ' '); [ "$got" = "$2" ] && break; sleep 0.2; done
  echo "$got"
}
stop_server() { kill -TERM "$spid"; wait "$pid"; pid= spid=; }
# train_until RUN STEP [BODY]: posts BODY (a new 60-step run RUN) and waits until RUN runs past STEP.
train_until() {
  call POST /runs --data-binary "${3:-$(runjson "$1" 60)}"
  wait_for 120 "/runs/$1" "b[\"status\"] == \"running\" and b[\"step\"] >= $2" || fail "$1_running" "the run did not reach step $2"
}
finished() { wait_for 240 "/runs/$1" 'b["status"] == "done" and b["step"] == 60'; }

start || { fail serve_restart_start "$(cat "$T/err")"; exit 1; }
call POST /runs --data-binary "$(runjson bad 10 ',"on_restart":"sometimes"')"
ok on_restart_bad_value test "$(cat "$T/status")" = 422
call POST /runs --data-binary "$(runjson bad 10 ',"on_restart":1')"
ok on_restart_bad_type test "$(cat "$T/status")" = 422

# ---- default: interrupted, not run again ----
call POST /runs --data-binary "$(runjson keep 400)"
ok keep_accepted test "$(cat "$T/status")" = 202
crash keep || fail keep_crash "the run did not reach step 12"
start || fail keep_restart "$(cat "$T/err")"
call GET /runs/keep
ok default_run_interrupted test "$(jget 'b["status"]')" = interrupted
sleep 1.5
ok default_job_interrupted_once test "$(jobs_of keep | tr '\n' ' ')" = "interrupted,- "

# ---- --on-restart resume: one resume job finishes the run ----
call POST /runs --data-binary "$(runjson again 60)"
crash again || fail again_crash "the run did not reach step 12"
start --on-restart resume || fail again_restart "$(cat "$T/err")"
ok resumed_run_done wait_for 240 /runs/again 'b["status"] == "done"'
ok resumed_run_steps test "$(jget 'b["step"]')" = 60
# The run is done when its process says so, its job when the worker has seen that process exit.
ok resumed_job_once test "$(jobs_settled again 'interrupted,- done,N ')" = "interrupted,- done,N "
call GET /runs
ok resumed_one_run test "$(jget 'sum(r["name"] == "again" for r in b)')" = 1
ok keep_not_resumed test "$(jobs_of keep | tr '\n' ' ')" = "interrupted,- "

# ---- a job's "on_restart": "interrupt" wins over --on-restart resume ----
call POST /runs --data-binary "$(runjson stay 400 ',"on_restart":"interrupt"')"
ok stay_accepted test "$(cat "$T/status")" = 202
crash stay || fail stay_crash "the run did not reach step 12"
start --on-restart resume || fail stay_restart "$(cat "$T/err")"
sleep 1.5
ok job_policy_wins test "$(jobs_of stay | tr '\n' ' ')" = "interrupted,- "

# ---- a stop (SIGTERM), not a death: the next start with --on-restart resume queues the
# job once more too (it stayed "interrupted", never requeued), and a later start not again ----
train_until calm 12
stop_server
start --on-restart resume || fail calm_restart "$(cat "$T/err")"
ok stopped_run_resumed_done finished calm
ok stopped_job_requeued_once test "$(jobs_settled calm 'interrupted,- done,N ')" = "interrupted,- done,N "
stop_server
start --on-restart resume || fail calm_restart_again "$(cat "$T/err")"
sleep 1.5
ok stopped_job_not_requeued_again test "$(jobs_settled calm 'interrupted,- done,N ')" = "interrupted,- done,N "
ok stay_still_not_requeued test "$(jobs_of stay | tr '\n' ' ')" = "interrupted,- "
# Stopped under the default (interrupt), resumed by hand, stopped again: a start with
# --on-restart resume requeues the run's newest job alone, not the first one too.
stop_server
start || fail twice_start "$(cat "$T/err")"
train_until twice 12
stop_server
start || fail twice_restart "$(cat "$T/err")"
train_until twice 17 '{"resume": "twice"}'
stop_server
start --on-restart resume || fail twice_restart_resume "$(cat "$T/err")"
ok twice_run_done finished twice
ok newest_stopped_job_requeued_alone test "$(jobs_settled twice 'interrupted,- interrupted,- done,N ')" = "interrupted,- interrupted,- done,N "
# A signal to the job's own process (SIGINT): it checkpoints and exits 130, so the job is
# "interrupted" like its run (resumable), not "failed"; not requeued, a person stopped it.
call POST /runs --data-binary "$(runjson nudge 400)"
wait_for 120 /runs/nudge 'b["status"] == "running" and b["step"] >= 12' || fail nudge_running "the run did not reach step 12"
kill -INT "$(pgrep -P "$spid" | head -1)"
for _ in $(seq 100); do [ "$(jobs_of nudge | tr '\n' ' ')" != "running,- " ] && break; sleep 0.2; done
call GET /runs/nudge
nudge_run=$(jget 'b["status"]')
ok signalled_job_interrupted test "$(jobs_of nudge | tr '\n' ' ')|$nudge_run" = "interrupted,- |interrupted"
# Resumed over HTTP: a second resume while the first is queued or running is refused (two
# jobs trained the run twice, and a cancel stopped only one of them); the cancel ends it.
call POST /runs --data-binary '{"resume": "nudge"}'
ok resume_accepted test "$(cat "$T/status")" = 202
call POST /runs --data-binary '{"resume": "nudge"}'
ok second_resume_refused sh -c 'test "$(cat "$1")" = 409 && grep -q "a job already resumes this run" "$2"' _ "$T/status" "$T/body"
wait_for 120 /runs/nudge 'b["status"] == "running"' || fail nudge_resumed "the resumed run did not start"
call POST /runs/nudge/cancel
ok resumed_run_cancel_accepted test "$(cat "$T/status")" = 202
ok resumed_run_cancelled wait_for 120 /runs/nudge 'b["status"] == "cancelled"'
# A run of the command line killed outright (kill -9): the API reports it interrupted, as
# `maskd runs` does, and resumes it (it said "running", its ETA frozen, and refused: 409).
"$MASKD" train --db "$T/hub.db" --name cli --tokenizer "$T/tok.json" --train "$T/shards" --config tiny --max-steps 400 \
  --batch 16 --checkpoint-steps 5 --threads 1 --quiet >/dev/null 2>&1 &
cli=$!
wait_for 120 /runs/cli 'b["status"] == "running" and b["step"] >= 6' || fail cli_running "the run did not reach step 6"
kill -9 "$cli"; wait "$cli" 2>/dev/null
call GET /runs/cli
ok killed_cli_run_interrupted test "$(jget 'b["status"]')" = interrupted
call GET /runs
ok killed_cli_run_listed_interrupted test "$(jget '[r["status"] for r in b if r["name"] == "cli"]')" = "['interrupted']"
call POST /runs --data-binary '{"resume": "cli"}'
ok killed_cli_run_resumed test "$(cat "$T/status")" = 202
wait_for 120 /runs/cli 'b["status"] == "running"' || fail cli_resumed "the resumed run did not start"
call POST /runs/cli/cancel
ok killed_cli_run_cancelled wait_for 120 /runs/cli 'b["status"] == "cancelled"'
# The ETA of a resumed run comes from the steps since it resumed: 40 steps at 1 s before a
# stop of 1000 s, 20 at 1 s after; 140 to go, so 140 s (the rate over the last 50 steps,
# stop included, said 5700 s). A live process (sleep) holds the runs, as maskd train would.
sleep 300 & holder=$!
$PY - "$T/hub.db" "$holder" <<'PYEOF' || fail eta_setup "could not write the run"
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1]); t0 = time.time() - 1100; claimed = t0 + 1040
cur = db.execute("INSERT INTO runs(name, config, status, created, started, claimed, pid, step, total_steps) VALUES"
                 " ('eta', '{}', 'running', ?, ?, ?, ?, 60, 200)", (t0, t0, claimed, int(sys.argv[2])))
rows = [(cur.lastrowid, s, 2.0, 1.0, t0 + s if s <= 40 else claimed + (s - 40)) for s in range(1, 61)]
db.executemany("INSERT INTO step_metrics(run_id, step, loss, tokens_per_s, time) VALUES (?, ?, ?, 100.0, ?)", [(r, s, l, t) for r, s, l, _, t in rows])
db.commit()
PYEOF
# And metrics written in blocks of 10 steps that share their last step's time (1 s a step):
# the rate runs from the end of the window's first block (from its first row it said 114 s).
$PY - "$T/hub.db" "$holder" <<'PYEOF' || fail eta_setup "could not write the run"
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1]); t0 = time.time() - 70
cur = db.execute("INSERT INTO runs(name, config, status, created, started, claimed, pid, step, total_steps) VALUES"
                 " ('eta-blocks', '{}', 'running', ?, ?, ?, ?, 60, 200)", (t0, t0, t0, int(sys.argv[2])))
db.executemany("INSERT INTO step_metrics(run_id, step, loss, tokens_per_s, time) VALUES (?, ?, 2.0, 100.0, ?)",
               [(cur.lastrowid, s, t0 + 10 * ((s + 9) // 10)) for s in range(1, 61)])
db.commit()
PYEOF
# A fast run (10 steps a second) whose metrics come in blocks of 64 steps: 1360 to go, 136 s
# (a window of 50 steps, one block, said 1741 s); and a run killed at step 100 after its
# checkpoint at 80, resumed to step 90: its steps 91-100 from before stay in the store with
# their old times; 110 to go at 1 s, 110 s (it had no ETA).
$PY - "$T/hub.db" "$holder" <<'PYEOF' || fail eta_setup "could not write the runs"
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1]); now = time.time()
def run(name, step, total, started, claimed, rows):
    cur = db.execute("INSERT INTO runs(name, config, status, created, started, claimed, pid, step, total_steps) VALUES"
                     " (?, '{}', 'running', ?, ?, ?, ?, ?, ?)", (name, started, started, claimed, int(sys.argv[2]), step, total))
    db.executemany("INSERT INTO step_metrics(run_id, step, loss, tokens_per_s, time) VALUES (?, ?, 2.0, 100.0, ?)",
                   [(cur.lastrowid, s, t) for s, t in rows])
t0 = now - 70
run("eta-fast", 640, 2000, t0, t0, [(s, t0 + 6.4 * ((s + 63) // 64)) for s in range(1, 641)])
t0 = now - 1100; claimed = t0 + 1090
run("eta-stale", 90, 200, t0, claimed, [(s, claimed + (s - 80) if 80 < s <= 90 else t0 + s) for s in range(1, 101)])
db.commit()
PYEOF
call GET /runs/eta
ok resumed_run_eta test "$(jget 'round(b["eta_s"]) if b.get("eta_s") is not None else None')" = 140
call GET /runs
ok resumed_run_eta_listed test "$(jget '[round(r["eta_s"]) for r in b if r["name"] == "eta"]')" = "[140]"
ok run_claim_not_listed test "$(jget 'any("claimed" in r for r in b)')" = False
call GET /runs/eta-fast
ok fast_run_eta test "$(jget 'round(b["eta_s"]) if b.get("eta_s") is not None else None')" = 136
call GET /runs/eta-stale
ok resumed_run_eta_past_stale_steps test "$(jget 'round(b["eta_s"]) if b.get("eta_s") is not None else None')" = 110
call GET /runs/eta-blocks
ok run_eta_from_block_ends test "$(jget 'round(b["eta_s"]) if b.get("eta_s") is not None else None')" = 140
ok run_claim_not_shown test "$(jget '"claimed" in b')" = False
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# ---- the server alone killed (kill -9): its job's process gets SIGTERM and stops (no
# orphan training on that nothing can cancel), checkpointing; the run is interrupted by
# that process itself and a restarted server resumes it ----
kill -TERM "$spid"; wait "$pid"; pid= spid=
start || fail orphan_start "$(cat "$T/err")"
call POST /runs --data-binary "$(runjson orphan 60)"
ok orphan_accepted test "$(cat "$T/status")" = 202
wait_for 120 /runs/orphan 'b["status"] == "running" and b["step"] >= 12' || fail orphan_running "the run did not reach step 12"
child=$(pgrep -P "$spid" | head -1)
kill -9 "$spid"
for _ in $(seq 100); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$child" 2>/dev/null; then
  fail orphan_job_process_stops "pid $child ($(tr '\0' ' ' <"/proc/$child/cmdline" 2>/dev/null)) still runs 10 s after the server's kill -9"
  kill -9 "$child"
else
  pass orphan_job_process_stops
fi
wait "$pid"; pid= spid=
orphan_run=$($PY -c "import sqlite3,sys; print('%s: %s' % sqlite3.connect(sys.argv[1]).execute('SELECT status, error FROM runs WHERE name=?', ('orphan',)).fetchone())" "$T/hub.db")
[ "$orphan_run" = "interrupted: stopped by SIGTERM" ] && pass orphan_run_interrupted_by_its_process ||
  fail orphan_run_interrupted_by_its_process "the run is $orphan_run"
start || fail orphan_restart "$(cat "$T/err")"
call POST /runs --data-binary '{"resume": "orphan"}'
ok orphan_resume_accepted test "$(cat "$T/status")" = 202
ok orphan_resumed_run_done wait_for 240 /runs/orphan 'b["status"] == "done" and b["step"] == 60'
kill -TERM "$spid"; wait "$pid"; ok server_stops test $? = 0; pid= spid=

# ---- the server killed outright and started again at once, with --on-restart resume,
# while its job's process still checkpoints on its SIGTERM (held here with SIGSTOP, so
# the order is certain): the run still says "running" at the start. The resume is queued
# all the same and waits for that process to end, then finishes the run (it had stayed
# interrupted, nothing resuming it) ----
start --on-restart resume || fail race_start "$(cat "$T/err")"
call POST /runs --data-binary "$(runjson race 60)"
ok race_accepted test "$(cat "$T/status")" = 202
wait_for 120 /runs/race 'b["status"] == "running" and b["step"] >= 12' || fail race_running "the run did not reach step 12"
child=$(pgrep -P "$spid" | head -1)
at_exit '[ -n "$child" ] && kill -CONT "$child" 2>/dev/null'
# Held where it holds no write transaction (stopped inside one, it kept the store's write
# lock, and the restarted server's recovery waited out the busy timeout: a failed start
# under load, not what a crash leaves, where the lock dies with its process).
lock_free() { $PY -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
c.execute('BEGIN IMMEDIATE'); c.execute('ROLLBACK')" "$T/hub.db" 2>/dev/null; }
for _ in $(seq 100); do kill -STOP "$child"; lock_free && break; kill -CONT "$child"; sleep 0.03; done
kill -9 "$spid"; old_reaper=$pid; pid= spid=
start --on-restart resume || fail race_restart "$(cat "$T/err")"
call GET /runs/race
ok race_run_running_at_restart test "$(jget 'b["status"]')" = running
sleep 1   # the resume job is claimed and waits; the old process has not moved
call GET /runs/race
ok race_old_process_left_alone test "$(jget 'b["status"]')" = running
kill -CONT "$child"
wait "$old_reaper"; child=
ok race_resumed_run_done wait_for 240 /runs/race 'b["status"] == "done" and b["step"] == 60'
race_jobs() { jobs_of race | sed 's/,[0-9]*$/,N/' | tr '\n' ' '; }
for _ in $(seq 50); do [ "$(race_jobs)" = "interrupted,- done,N " ] && break; sleep 0.2; done
ok race_resumed_once test "$(race_jobs)" = "interrupted,- done,N "
grep -q "waits for run [0-9]*'s process to stop" "$T/err"; ok race_wait_said test $? = 0
kill -TERM "$spid"; wait "$pid"; ok race_server_stops test $? = 0; pid= spid=
