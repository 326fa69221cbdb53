#!/usr/bin/env bash
# The operator, not the client, chooses the hosts a training job may start ranks on
# (maskd serve --job-hosts, server/app/job_hosts.h): a run's "hosts" become mpirun's
# --host, which reaches them with ssh. Without the option POST /runs naming any host is
# 403 (this machine only, naming the option) while "ranks" alone is queued; with it,
# listed hosts are queued and a run naming another is 403 naming it and the list; a
# resume of a run whose stored hosts are not listed is 403; a job queued under a wider
# list and run by the worker after a restart with a narrower one fails with the reason
# before mpirun starts, while a listed host (localhost, which mpirun starts without ssh)
# trains. Bad --job-hosts values stop maskd serve with one line. /healthz counts the hosts
# and names none. Fake hosts are never reached: their jobs are queued by a server
# without a worker and cancelled, or refused by maskd train --job before mpirun. A cancel
# of a 2-rank job that lands after its last step leaves the run and the job done.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serve_job_hosts
export OMP_NUM_THREADS=1
need serve_job_hosts_setup "$DATA/train.txt missing (MASKD_DATA)" -f "$DATA/train.txt"
need serve_job_hosts_setup "mpirun is missing (scripts/setup installs openmpi-bin)" -n "$(command -v mpirun)"
mkdir -p "$T/data"
head -c 40000 "$DATA/train.txt" > "$T/tr.txt"
{ "$M" tokenizer train --input "$T/tr.txt" --vocab-size 300 --out "$T/data/tok.json" --threads 1 &&
  "$M" prepare --tokenizer "$T/data/tok.json" --input "$T/tr.txt" --split train --seq-len 32 --out "$T/data/shards" --quiet
} >"$T/setup.log" 2>&1 || { fail serve_job_hosts_setup "$(tail -3 "$T/setup.log")"; exit 1; }

start() { serve_start --db "$T/hub.db" --data-dir "$T/data" --work-dir "$T/work" --quiet --stop-grace 5 "$@"; }
call() {  # METHOD PATH [curl args]: the status into $T/status, the body into $T/body
  local m=$1 p=$2; shift 2
  curl -s --max-time 20 -X "$m" -H 'Content-Type: application/json' -o "$T/body" -w '%{http_code}' "$@" "$base$p" >"$T/status"
}
run_body() {  # NAME HOSTS [more JSON]: a small run description
  printf '{"name":"%s","tokenizer":"tok.json","train":"shards","config":"tiny","max_steps":2,"batch":4,"threads":1%s%s}' \
    "$1" "${2:+,\"hosts\":\"$2\"}" "${3:-}"
}
# holds PYTHON-EXPR: the last answer's JSON (b) and status (s) make it true.
holds() {
  $PY - "$T/body" "$(cat "$T/status")" "$1" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1])); s = int(sys.argv[2])
sys.exit(0 if eval(sys.argv[3]) else 1)
EOF
}
check() { local name=$1; shift; if holds "$1"; then pass "$name"; else fail "$name" "status $(cat "$T/status"): $(head -c 400 "$T/body")"; fi; }
job_params() { $PY -c "import json; b=json.load(open('$T/body')); p=b['params']; p=json.loads(p) if isinstance(p,str) else p; print(p.get('$1'))"; }
job_ended() { call GET "/jobs/$1" && [ "$(jget 'b["status"] not in ("queued", "running")')" = True ]; }

# ---- bad --job-hosts values: one line on stderr, status 2, no server ----
for v in '' '-oProxyCommand=x' 'h1,-x' 'h 1' 'h1;reboot' 'h1:2' 'h1,,h2'; do
  out=$(timeout 20 "$M" serve --db "$T/bad.db" --port 0 --job-hosts="$v" 2>"$T/bad.err"); rc=$?
  lines=$(wc -l <"$T/bad.err")
  if [ "$rc" = 2 ] && [ "$lines" = 1 ] && grep -q '^maskd serve: --job-hosts: ' "$T/bad.err" && ! grep -q listening <<<"$out"; then
    pass "bad_value_refused[$v]"
  else
    fail "bad_value_refused[$v]" "rc $rc, $lines lines: $(head -c 300 "$T/bad.err") $out"
  fi
done

# ---- no --job-hosts: this machine only ----
start --no-worker || { fail no_list_start "$(cat "$T/err")"; exit 1; }
grep -q 'training jobs start ranks on this machine only' "$T/out" && pass no_list_startup_line ||
  fail no_list_startup_line "$(cat "$T/out")"
call GET /healthz
check no_list_healthz_counts_none 's == 200 and b["job_hosts"] == 0'
call POST /runs --data-binary "$(run_body r0 'h1:1')"
check no_list_hosts_refused 's == 403 and "this machine only" in b["error"] and "maskd serve --job-hosts" in b["error"] \
  and "h1" in b["error"] and b["detail"]["host"] == "h1"'
call POST /runs --data-binary "$(run_body r0 'localhost:2')"
check no_list_localhost_refused 's == 403 and "maskd serve --job-hosts" in b["error"]'
call POST /runs --data-binary "$(run_body r0 '' ',"ranks":2')"
check no_list_ranks_alone_queued 's == 202 and b["status"] == "queued"'
ranks_job=$(jget 'b["id"]' 2>/dev/null)
call POST "/jobs/$ranks_job/cancel"
check no_list_ranks_job_cancelled 's == 202 and b["status"] == "cancelled"'
# More ranks than this machine's cap (twice its CPUs) are refused now, not as a failed job.
call POST /runs --data-binary "$(run_body r0 '' ',"ranks":4096')"
check too_many_local_ranks_refused 's == 422 and "ranks: 4096 on this machine" in b["detail"] and "at most" in b["detail"]'
# ranks and hosts that disagree are refused as on the command line (1 rank, 2 slots: 2 ran).
call POST /runs --data-binary "$(run_body r0 '' ',"ranks":1,"hosts":"localhost:2"')"
check ranks_hosts_disagreeing_refused 's == 422 and "ranks 1, but hosts localhost:2 has 2 slots" in b["detail"]'
call GET /jobs
check no_list_refusals_queue_nothing 's == 200 and len(b) == 1'
serve_stop

# ---- --job-hosts h1,h2: listed hosts queued, others refused ----
start --no-worker --job-hosts h1,h2 || { fail list_start "$(cat "$T/err")"; exit 1; }
grep -q 'training jobs may start ranks on this machine and h1,h2' "$T/out" && pass list_startup_line ||
  fail list_startup_line "$(cat "$T/out")"
call GET /healthz
check list_healthz_counts_names_none 's == 200 and b["job_hosts"] == 2 and "h1" not in json.dumps(b) and "h2" not in json.dumps(b)'
call POST /runs --data-binary "$(run_body r1 'h1:1,h2:1')"
check listed_hosts_queued 's == 202 and b["status"] == "queued"'
listed_job=$(jget 'b["id"]' 2>/dev/null)
call GET "/jobs/$listed_job"
[ "$(job_params hosts)" = "h1:1,h2:1" ] && [ "$(jget 'b["status"]')" = queued ] && pass listed_job_description ||
  fail listed_job_description "$(head -c 400 "$T/body")"
call POST "/jobs/$listed_job/cancel"
check listed_job_cancelled 's == 202 and b["status"] == "cancelled"'
call POST /runs --data-binary "$(run_body r2 'H2:8,h1')"
check listed_any_case_any_slots_queued 's == 202'
call POST "/jobs/$(jget 'b["id"]' 2>/dev/null)/cancel"
call POST /runs --data-binary "$(run_body r3 'h1:1,h3:1')"
check unlisted_host_refused 's == 403 and "\"h3\" is not one of the hosts" in b["error"] and "h1,h2" in b["error"] \
  and "maskd serve --job-hosts" in b["error"] and b["detail"]["host"] == "h3" and b["detail"]["field"] == "hosts"'
call POST /runs --data-binary "$(run_body r3 'h12:1')"
check longer_name_refused 's == 403 and b["detail"]["host"] == "h12"'
# Queued now, run after a restart with a narrower list (below).
call POST /runs --data-binary "$(run_body narrowed 'h1:1,h2:1')"
check narrowed_job_queued 's == 202'
narrowed_job=$(jget 'b["id"]' 2>/dev/null)
serve_stop

# ---- a narrower list after a restart: the queued job fails before mpirun ----
start --job-hosts h1,localhost || { fail narrower_start "$(cat "$T/err")"; exit 1; }
if wait_until 150 0.2 job_ended "$narrowed_job"; then
  check narrowed_job_fails_with_reason 'b["status"] == "failed" and "\"h2\" is not one of the hosts this server allows (maskd serve --job-hosts)" in b["error"] \
    and "localhost" not in b["error"] and b["run"] is None'
else
  fail narrowed_job_fails_with_reason "job $narrowed_job: $(head -c 400 "$T/body")"
fi
# The job's log holds maskd train's one refusal: mpirun never ran.
log="$T/work/jobs/job-$narrowed_job.log"
[ -f "$log" ] && [ "$(grep -c . "$log")" = 1 ] && grep -q '^maskd train: hosts: "h2"' "$log" && pass narrowed_job_no_mpirun ||
  fail narrowed_job_no_mpirun "$(head -c 400 "$log" 2>/dev/null)"

# ---- a listed host trains: localhost, through mpirun's --host ----
call POST /runs --data-binary "$(run_body local 'localhost:1')"
check local_job_queued 's == 202'
local_job=$(jget 'b["id"]' 2>/dev/null)
if wait_until 300 0.2 job_ended "$local_job" && [ "$(jget 'b["status"]')" = "done" ]; then pass local_job_done
else fail local_job_done "$(head -c 300 "$T/body"): $(tail -3 "$T/work/jobs/job-$local_job.log" 2>/dev/null)"; fi
call GET /runs/local
check local_run_stores_hosts 's == 200 and b["config"]["hosts"] == "localhost:1" and b["status"] == "done"'
serve_stop

# ---- resume: the run's stored hosts against today's list ----
# Only a stopped run resumes (a done one answers 409, below): "local" is marked interrupted,
# as a server killed during its run leaves it.
$PY -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE runs SET status='interrupted' WHERE name='local'\"); c.commit()" "$T/hub.db"
start --no-worker --job-hosts h1,h2 || { fail resume_start "$(cat "$T/err")"; exit 1; }
call POST /runs --data-binary '{"resume":"local"}'
check resume_unlisted_stored_hosts_refused 's == 403 and "\"localhost\" is not one of the hosts" in b["error"] \
  and "resume" in b["error"] and b["detail"]["field"] == "resume" and b["detail"]["host"] == "localhost"'
call GET /jobs
check refused_resume_queues_nothing 's == 200 and not any(isinstance(j["params"], str) and "resume" in j["params"] \
  or isinstance(j["params"], dict) and "resume" in j["params"] for j in b)'
serve_stop
start --no-worker || { fail resume_no_list_start "$(cat "$T/err")"; exit 1; }
call POST /runs --data-binary '{"resume":"local"}'
check resume_no_list_refused 's == 403 and "this machine only" in b["error"] and b["detail"]["host"] == "localhost"'
serve_stop
start --no-worker --job-hosts LOCALHOST || { fail resume_listed_start "$(cat "$T/err")"; exit 1; }
call POST /runs --data-binary '{"resume":"local"}'
check resume_listed_queued 's == 202'
call POST "/jobs/$(jget 'b["id"]' 2>/dev/null)/cancel"
# A done run is refused at once, not queued to fail in its job.
$PY -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE runs SET status='done' WHERE name='local'\"); c.commit()" "$T/hub.db"
call POST /runs --data-binary '{"resume":"local"}'
check resume_done_run_refused 's == 409 and "already done" in b["error"] and b["detail"]["status"] == "done" and b["detail"]["field"] == "resume"'
serve_stop

# ---- a cancel that lands after the last step: the run is done and stays done ----
# As soon as the store has the last step's checkpoint, the job's maskd train (the
# worker's child, the ranks' launcher) is held with SIGSTOP, so it is still ending when
# the cancel comes and the worker sends its SIGTERM; then it goes on. (On 1 rank the
# worker's code is the same, but the process ends too soon after its last step to hold.) That used to mark the finished run and its job
# "cancelled", and the run could then be "resumed". A job that ended before it could be
# held is tried again with another run.
start || { fail late_cancel_start "$(cat "$T/err")"; exit 1; }
late_cancel() {  # PREFIX RANKS: 0 once a cancel reached the job after its run (named in $name) was done
  local tries job child
  for tries in 1 2 3; do
    name=$1$tries
    call POST /runs --data-binary "$(run_body "$name" '' ",\"ranks\":$2")"
    job=$(jget 'b["id"]' 2>/dev/null)
    wait_until 1500 0.01 eval '[ "$(sqlite3 "$T/hub.db" "SELECT total_steps > 0 AND step = total_steps FROM runs WHERE name = '"'$name'"'" 2>/dev/null)" = 1 ]'
    child=$(pgrep -P "$pid" -f "maskd train")
    if [ -z "$child" ] || ! kill -STOP "$child" 2>/dev/null; then wait_until 150 0.2 job_ended "$job"; continue; fi
    call POST "/runs/$name/cancel"
    sleep 0.5   # the worker's poll: its SIGTERM waits in the held process
    kill -CONT "$child"
    wait_until 150 0.2 job_ended "$job"
    return 0
  done
  return 1
}
name=
for ranks in 2; do
  if late_cancel "late$ranks-" "$ranks"; then
    check "late_cancel_job_done[ranks $ranks]" 'b["status"] == "done" and b.get("error") is None'
    call GET "/runs/$name"
    check "late_cancel_run_stays_done[ranks $ranks]" 's == 200 and b["status"] == "done" and b["step"] == b["total_steps"]'
    call POST /runs --data-binary "{\"resume\":\"$name\"}"
    check "late_cancel_run_not_resumed[ranks $ranks]" 's == 409 and "already done" in b["error"]'
  else
    fail "late_cancel_job_done[ranks $ranks]" "no job could be held after its run was done in 3 tries"
  fi
done
serve_stop
