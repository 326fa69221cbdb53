#!/usr/bin/env bash
# Data-parallel training over MPI (maskd train --ranks, Open MPI's mpirun on this
# machine): 2 ranks of batch 8 give, bit for bit, the run of 1 rank with batch 8 and
# --grad-accum 2 (every step's loss, lr and grad norm, the evaluations, the final
# weights and optimizer state); 1 rank of batch 16 agrees within 1e-5 relative; a run
# killed with SIGKILL (one rank) resumes to the same bits, and so does one resumed with
# 1 rank and --grad-accum 2; a rank that cannot read its shards, reads other ones (other
# counts, or as many samples of other tokens), builds another model from its config.json,
# runs other kernels (MASKD_ISA), or another maskd build (another RunConfig layout), stops the
# run with a message naming it and nothing in the store.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" dist "${1:-}"
[ -f "$DATA/train.txt" ] || { fail dist_setup "no WikiText-2 at $DATA"; exit 1; }
command -v mpirun >/dev/null || { fail dist_setup "mpirun is missing (scripts/setup installs openmpi-bin)"; exit 1; }

small_training_setup dist_setup 200000 || exit 1
args=(--name d --tokenizer "$T/tok.json" --train "$T/train" --validation "$T/valid" --config "$T/cfg.json"
      --epochs 2 --batch 8 --lr 2e-3 --threads 1 --checkpoint-steps 10 --clip-norm 1.0 --seed 11 --quiet)

dump() {  # everything that must match, at full precision
  sqlite3 "$1" "SELECT step, printf('%.17e %.17e %.17e', loss, lr, grad_norm) FROM step_metrics ORDER BY step;
                SELECT epoch, printf('%.17e %.17e %.17e', train_loss, eval_loss, eval_accuracy) FROM epoch_metrics ORDER BY epoch;
                SELECT r.weights FROM revisions r WHERE r.message = 'Training in progress epoch 2';"
}
# (The optimizer files differ in two words: the ranks and grad_accum that wrote them.)

"$M" train --db "$T/one.db" "${args[@]}" --grad-accum 2 2>"$T/one.err" || { fail dist_one_rank "$(tail -1 "$T/one.err")"; exit 1; }
"$M" train --db "$T/two.db" "${args[@]}" --ranks 2 2>"$T/two.err" || { fail dist_two_ranks "$(tail -3 "$T/two.err")"; exit 1; }
total=$(sqlite3 "$T/one.db" "SELECT total_steps FROM runs")
dump "$T/one.db" > "$T/one.txt"; dump "$T/two.db" > "$T/two.txt"
if [ "$(wc -l < "$T/one.txt")" -eq $((total + 3)) ] && cmp -s "$T/one.txt" "$T/two.txt"; then
  pass dist_two_ranks_equal_grad_accum_bits
else
  fail dist_two_ranks_equal_grad_accum_bits "$(diff "$T/one.txt" "$T/two.txt" | head -3 | tr '\n' ' ')"
fi
r=$(sqlite3 "$T/two.db" "SELECT json_extract(config, '$.ranks') FROM runs")
[ "$r" = 2 ] && pass dist_run_records_ranks || fail dist_run_records_ranks "ranks $r"

# Micro-batches without a masked token (one rank's backward does not run, or no rank's): the
# ranks still exchange the same messages (no hang) and keep the one-rank bits.
few=(--name f --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" --max-steps 40 --batch 1
     --mlm-probability 0.01 --lr 2e-3 --threads 1 --seed 3 --quiet)
timeout 120 "$M" train --db "$T/f1.db" "${few[@]}" --grad-accum 2 2>"$T/f1.err" &&
  timeout 120 "$M" train --db "$T/f2.db" "${few[@]}" --ranks 2 2>"$T/f2.err"; rc=$?
empty=$(sqlite3 "$T/f1.db" "SELECT COUNT(*) FROM step_metrics WHERE loss IS NULL")
dump "$T/f1.db" > "$T/f1.txt"; dump "$T/f2.db" > "$T/f2.txt"
[ $rc = 0 ] && [ "${empty:-0}" -gt 0 ] && cmp -s "$T/f1.txt" "$T/f2.txt" && pass dist_steps_without_labels ||
  fail dist_steps_without_labels "rc $rc, $empty steps without labels: $(diff "$T/f1.txt" "$T/f2.txt" | head -2 | tr '\n' ' ') $(tail -2 "$T/f2.err")"

# One rank with the whole batch sums in another order: close, not equal (dropout off:
# its masks are drawn per micro-batch).
sed 's/"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1/"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0/' \
  "$T/cfg.json" > "$T/cfg0.json"
a0=(--name z --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg0.json" --max-steps 50 --lr 2e-3 --threads 1 --seed 11 --quiet)
"$M" train --db "$T/z2.db" "${a0[@]}" --batch 8 --ranks 2 2>"$T/z2.err" || fail dist_two_ranks_nodrop "$(tail -1 "$T/z2.err")"
"$M" train --db "$T/big.db" "${a0[@]}" --batch 16 2>"$T/big.err" || fail dist_big_batch "$(tail -1 "$T/big.err")"
worst=$(sqlite3 "$T/z2.db" "ATTACH '$T/big.db' AS b;
  SELECT MAX(ABS(a.loss - c.loss) / c.loss) FROM step_metrics a JOIN b.step_metrics c USING (step) WHERE a.step <= 50;")
awk -v w="$worst" 'BEGIN { exit !(w < 1e-5) }' && pass dist_close_to_one_big_batch ||
  fail dist_close_to_one_big_batch "max relative loss difference $worst over 50 steps"

# SIGKILL one rank mid-run, resume with 2 ranks: the same bits as never stopped.
wait_steps() {  # db, n: until the run has recorded n steps (30 s at most)
  local s
  for _ in $(seq 1500); do
    s=$(sqlite3 "$1" "SELECT COALESCE(MAX(step), 0) FROM step_metrics" 2>/dev/null || echo 0)
    [ "${s:-0}" -ge "$2" ] && return 0
    sleep 0.02
  done
  return 1
}
killed_rank_pid() {  # the pid of rank $2 of the run writing to db $1
  local p
  for p in $(pgrep -f "maskd train --db $1"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}
kill_after_checkpoint() {  # db, then what to kill: a rank number or "mpirun"
  local db=$1 what=$2 pid=$3 p
  for _ in $(seq 1500); do
    s=$(sqlite3 "$db" "SELECT COALESCE(MAX(step), 0) FROM revisions" 2>/dev/null || echo 0)
    [ "${s:-0}" -ge 10 ] && break
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.02
  done
  if [ "$what" = mpirun ]; then kill -9 "$pid"; else p=$(killed_rank_pid "$db" "$what"); [ -n "$p" ] && kill -9 "$p"; fi
  wait "$pid" 2>/dev/null
  pkill -9 -f "maskd train --db $db" 2>/dev/null
  for _ in $(seq 100); do pgrep -f "maskd train --db $db" >/dev/null || break; sleep 0.05; done
  return 0
}
"$M" train --db "$T/k.db" "${args[@]}" --ranks 2 2>"$T/k.err" &
kill_after_checkpoint "$T/k.db" 1 $! && pass dist_killed_one_rank || fail dist_killed_one_rank "the run ended before a checkpoint"
st=$(sqlite3 "$T/k.db" "SELECT status FROM runs")
grep -q 'ranks of run "d" ended with status .* maskd train --resume d' "$T/k.err" && [ "$st" = interrupted ] &&
  pass dist_dead_rank_reported || fail dist_dead_rank_reported "status $st: $(grep maskd "$T/k.err" | tail -2)"
"$M" train --db "$T/k.db" --resume d --ranks 2 --quiet 2>>"$T/k.err" || fail dist_resume_after_kill "$(tail -2 "$T/k.err")"
dump "$T/k.db" > "$T/k.txt"
cmp -s "$T/one.txt" "$T/k.txt" && pass dist_resume_after_sigkill_bit_identical ||
  fail dist_resume_after_sigkill_bit_identical "$(diff "$T/one.txt" "$T/k.txt" | head -3 | tr '\n' ' ')"

# Kill mpirun itself, then resume on 1 rank with --grad-accum 2: still the same bits.
"$M" train --db "$T/m.db" "${args[@]}" --ranks 2 2>"$T/m.err" &
kill_after_checkpoint "$T/m.db" mpirun $! || fail dist_killed_mpirun "the run ended before a checkpoint"
"$M" train --db "$T/m.db" --resume d --ranks 1 --grad-accum 2 --quiet 2>>"$T/m.err" || fail dist_resume_fewer_ranks "$(tail -2 "$T/m.err")"
dump "$T/m.db" > "$T/m.txt"
cmp -s "$T/one.txt" "$T/m.txt" && pass dist_resume_with_one_rank_bit_identical ||
  fail dist_resume_with_one_rank_bit_identical "$(diff "$T/one.txt" "$T/m.txt" | head -3 | tr '\n' ' ')"
desc=$(sqlite3 "$T/m.db" "SELECT json_extract(config, '$.ranks') || ' ' || json_extract(config, '$.grad_accum') FROM runs")
[ "$desc" = "1 2" ] && pass dist_resume_describes_the_run_as_it_now_runs ||
  fail dist_resume_describes_the_run_as_it_now_runs "stored ranks and grad_accum: $desc (want 1 2)"
out=$("$M" train --db "$T/m.db" --resume d --ranks 1 --grad-accum 3 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "ranks x grad_accum\|already done" <<<"$out" && pass dist_resume_refuses_other_global_batch ||
  fail dist_resume_refuses_other_global_batch "rc $rc: $out"

# SIGTERM to `maskd train --hosts localhost:2` (as the server's cancel sends it): the ranks
# stop at a step boundary with a checkpoint, the run is "interrupted", exit 130; resuming
# with --ranks 1 (the stored hosts are left: 1 rank on this machine) ends with the
# uninterrupted run's bits.
"$M" train --db "$T/s.db" "${args[@]}" --hosts localhost:2 2>"$T/s.err" &
pid=$!
wait_steps "$T/s.db" 5
kill -TERM "$pid"; wait "$pid"; rc=$?
st=$(sqlite3 "$T/s.db" "SELECT status || ': ' || error FROM runs"); msg=$(sqlite3 "$T/s.db" "SELECT message FROM revisions ORDER BY seq DESC LIMIT 1")
[ $rc = 130 ] && [ "$st" = "interrupted: stopped by SIGTERM" ] && grep -q "^Interrupted at step" <<<"$msg" && pass dist_sigterm_stops_with_checkpoint ||
  fail dist_sigterm_stops_with_checkpoint "rc $rc, status $st, last revision '$msg': $(grep maskd "$T/s.err" | tail -2)"
# A resume that changes the global batch is refused naming both products and the fix,
# and leaves the run interrupted (it was marked failed).
out=$("$M" train --db "$T/s.db" --resume d --ranks 1 2>&1); rc=$?
st=$(sqlite3 "$T/s.db" "SELECT status FROM runs")
[ $rc -ne 0 ] && [ "$st" = interrupted ] && [ "$(grep -c . <<<"$out")" = 1 ] &&
  grep -q "the run's global batch is 2 ranks x 8 batch x 1 grad_accum = 16 sequences; this resume gives 1 x 8 x 1 = 8: give --grad-accum 2" <<<"$out" &&
  pass dist_refused_resume_names_the_global_batch_and_stays_interrupted ||
  fail dist_refused_resume_names_the_global_batch_and_stays_interrupted "rc $rc, status $st: $out"
"$M" train --db "$T/s.db" --resume d --ranks 1 --grad-accum 2 --quiet 2>>"$T/s.err" || fail dist_resume_after_sigterm "$(tail -2 "$T/s.err")"
dump "$T/s.db" > "$T/s.txt"
cmp -s "$T/one.txt" "$T/s.txt" && pass dist_resume_after_sigterm_bit_identical ||
  fail dist_resume_after_sigterm_bit_identical "$(diff "$T/one.txt" "$T/s.txt" | head -3 | tr '\n' ' ')"
desc=$(sqlite3 "$T/s.db" "SELECT json_extract(config, '$.ranks') || ' ' || json_extract(config, '$.hosts') || ' ' || json_extract(dist, '$.ranks') FROM runs")
[ "$desc" = "1  1" ] && pass dist_resume_ranks_override_stored_hosts ||
  fail dist_resume_ranks_override_stored_hosts "stored ranks, hosts, ranks that ran: $desc (want 1, none, 1)"
# --ranks and --hosts that disagree: refused, not one of them silently.
out=$("$M" train --db "$T/n.db" "${args[@]}" --ranks 1 --hosts localhost:2 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "^maskd train: --ranks 1, but --hosts localhost:2 has 2 slots" <<<"$out" && [ "$(grep -c . <<<"$out")" = 1 ] &&
  pass dist_ranks_and_hosts_disagreeing_refused || fail dist_ranks_and_hosts_disagreeing_refused "rc $rc: $out"

# SIGKILL to the launcher itself (nothing relays a stop): mpirun and the ranks do not live
# on as orphans writing to the store; they stop as on SIGTERM, with a checkpoint, within
# seconds, and the run resumes (here on 1 rank) to the uninterrupted run's bits.
"$M" train --db "$T/p.db" "${args[@]}" --ranks 2 2>"$T/p.err" &
pid=$!
wait_steps "$T/p.db" 5
kill -9 "$pid"; wait "$pid" 2>/dev/null
wait_until 100 0.1 eval '! pgrep -f "maskd train --db $T/p.db" >/dev/null'; left=$(pgrep -f "maskd train --db $T/p.db" | wc -l)
pkill -9 -f "maskd train --db $T/p.db" 2>/dev/null
st=$(sqlite3 "$T/p.db" "SELECT status FROM runs")
[ "$left" = 0 ] && [ "$st" = interrupted ] && pass dist_killed_launcher_leaves_no_ranks ||
  fail dist_killed_launcher_leaves_no_ranks "$left processes left after 10 s, status $st"
"$M" train --db "$T/p.db" --resume d --ranks 1 --grad-accum 2 --quiet 2>>"$T/p.err" || fail dist_resume_after_killed_launcher "$(tail -2 "$T/p.err")"
dump "$T/p.db" > "$T/p.txt"
cmp -s "$T/one.txt" "$T/p.txt" && pass dist_resume_after_killed_launcher_bit_identical ||
  fail dist_resume_after_killed_launcher_bit_identical "$(diff "$T/one.txt" "$T/p.txt" | head -3 | tr '\n' ' ')"

# A stop while the ranks are starting (held in cmd_train: rank 0 waits for the store's
# write lock, which a helper takes as soon as the ranks exist) is an orderly one: the run
# ends before the store hears of it, exit 130; mpirun's SIGUSR1 killed them (status 138).
cat > "$T/hold.py" <<'PY'
# Holds the store's write lock from the moment the ranks of `maskd train --db DB` exist, for SECONDS.
import os, sqlite3, sys, time
db, secs = sys.argv[1], float(sys.argv[2])
def ranks():
    n = 0
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            cmd = open(f'/proc/{p}/cmdline', 'rb').read()
            env = open(f'/proc/{p}/environ', 'rb').read()
        except OSError: continue
        if b'train\0--db\0' + db.encode() in cmd and b'OMPI_COMM_WORLD_RANK=' in env: n += 1
    return n
end = time.time() + 20
while ranks() < 2 and time.time() < end: time.sleep(0.005)
c = sqlite3.connect(db, timeout=30, isolation_level=None)
c.execute('BEGIN EXCLUSIVE')
print('held', flush=True)
time.sleep(secs)
c.execute('COMMIT')
PY
"$M" train --db "$T/e.db" "${args[@]}" --ranks 2 2>"$T/e.err" &
pid=$!
$PY "$T/hold.py" "$T/e.db" 2 > "$T/hold.out" &
wait_until 500 0.01 grep -q held "$T/hold.out"
sleep 0.5
kill -TERM "$pid"; wait "$pid"; rc=$?
runs=$(sqlite3 "$T/e.db" "SELECT COUNT(*) FROM runs" 2>/dev/null)
st=$(sqlite3 "$T/e.db" "SELECT status || ' ' || step FROM runs" 2>/dev/null)
# Where the stop lands depends on how far rank 0 got: still starting (nothing recorded), or
# waiting under the held lock to record its run, which the first step boundary then stops.
# The store's open no longer waits on a writer, so both happen; both are orderly.
if [ $rc = 130 ] && [ "$(grep -c . "$T/e.err")" = 1 ] &&
   { { [ "$runs" = 0 ] && grep -q "stopped by SIGTERM before the run began" "$T/e.err"; } ||
     { [ "$runs" = 1 ] && [ "$st" = "interrupted 0" ] && grep -q "run 1 interrupted at step 0 (checkpoint saved" "$T/e.err"; }; }; then
  pass dist_stop_while_ranks_start_is_orderly
else fail dist_stop_while_ranks_start_is_orderly "rc $rc, $runs runs ($st): $(head -c 300 "$T/e.err")"; fi
wait
# A step's sequences are every rank's: the refusal counts them all.
out=$("$M" train --db "$T/n.db" "${args[@]}" --batch 1000 --grad-accum 2 --ranks 2 2>&1); rc=$?
grep -q "3406 samples make no step of 2 ranks x batch 1000 x grad_accum 2 = 4000 sequences" <<<"$out" && [ $rc -ne 0 ] &&
  pass dist_no_step_counts_the_ranks || fail dist_no_step_counts_the_ranks "rc $rc: $out"

# two_dirs_refused NAME PATTERN: rank 0 in $T/a and rank 1 in $T/b (mpirun's two
# contexts), each reading its own folder: the run is refused with PATTERN in its output,
# and the store holds no run.
two_dirs_refused() {
  local out rc runs
  out=$(mpirun "${root[@]}" --oversubscribe -np 1 -wdir "$T/a" "$M" train --db "$T/r.db" "${rel[@]}" : \
        -np 1 -wdir "$T/b" "$M" train --db "$T/r.db" "${rel[@]}" 2>&1); rc=$?
  runs=$(sqlite3 "$T/r.db" "SELECT COUNT(*) FROM runs" 2>/dev/null || echo 0)
  [ $rc -ne 0 ] && grep -q "$2" <<<"$out" && [ "$runs" = 0 ] && pass "$1" ||
    fail "$1" "rc $rc, runs $runs: $(grep maskd <<<"$out" | head -2)"
}

# A rank that cannot read its shards: rank 1 runs in a folder without them (mpirun's
# MPMD form, relative paths). Clear error naming the rank; nothing in the store.
mkdir -p "$T/a" "$T/b"
cp -r "$T/train" "$T/valid" "$T/tok.json" "$T/cfg.json" "$T/a/"
rel=(--name r --tokenizer tok.json --train train --validation valid --config cfg.json --epochs 1 --batch 8 --threads 1 --quiet)
root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
two_dirs_refused dist_rank_without_shards_fails_clearly "rank 1 on .*cannot open"
# ... or reads other shards than rank 0's (fewer samples).
cp "$T/tok.json" "$T/cfg.json" "$T/b/"
head -c 100000 "$T/tr.txt" > "$T/tr2.txt"
"$M" prepare --tokenizer "$T/tok.json" --input "$T/tr2.txt" --split train --seq-len 32 --out "$T/b/train" --quiet >/dev/null 2>&1
cp -r "$T/valid" "$T/b/"
two_dirs_refused dist_rank_with_other_shards_fails_clearly "rank 1 on .* reads other shards"
# ... or other shards of as many samples (the lines in reverse order): the counts agree,
# the tokens do not, and the run trained on two data sets as if one.
tac "$T/tr.txt" > "$T/tr3.txt"
rm -rf "$T/b/train"
"$M" prepare --tokenizer "$T/tok.json" --input "$T/tr3.txt" --split train --seq-len 32 --out "$T/b/train" --quiet >/dev/null 2>&1
need dist_rank_with_other_tokens_setup "the reversed text should give as many samples" \
  "$(jq .total_samples "$T/b/train/manifest.json")" = "$(jq .total_samples "$T/a/train/manifest.json")"
two_dirs_refused dist_rank_with_other_tokens_fails_clearly "rank 1 on .* reads other shards than rank 0 (the train set: as many samples, other tokens"
# ... or builds another model from its own config.json (only the dropout differs: it
# trained silently; another width broke the gradient exchange).
rm -rf "$T/b/train"; cp -r "$T/train" "$T/b/"
sed 's/"hidden_dropout_prob": 0.1/"hidden_dropout_prob": 0.3/' "$T/cfg.json" > "$T/b/cfg.json"
two_dirs_refused dist_rank_with_other_model_config_fails_clearly "rank 1 on .* builds another model than rank 0: its config's hidden_dropout_prob is 0.3 (rank 0: 0.1)"
cp "$T/cfg.json" "$T/b/"
# ... or runs other kernels than rank 0 (MASKD_ISA per rank): replicas summing at other
# vector widths would drift apart, so the run stops naming the rank, host and levels.
best=$("$M" version | sed -n 's/.*(best \([a-z0-9]*\),.*/\1/p')
if [ "${best:-generic}" = generic ]; then
  echo "SKIP dist_ranks_with_other_kernels_fail_clearly: this CPU runs only the generic kernels"
else
  out=$(mpirun "${root[@]}" --oversubscribe -np 1 -x MASKD_ISA="$best" -wdir "$T/a" "$M" train --db "$T/r.db" "${rel[@]}" : \
        -np 1 -x MASKD_ISA=generic -wdir "$T/a" "$M" train --db "$T/r.db" "${rel[@]}" 2>&1); rc=$?
  runs=$(sqlite3 "$T/r.db" "SELECT COUNT(*) FROM runs" 2>/dev/null || echo 0)
  [ $rc -ne 0 ] && grep -q "rank 1 on .* runs the generic kernels, rank 0 on .* the $best ones: set MASKD_ISA=generic for the run" <<<"$out" &&
    [ "$runs" = 0 ] && pass dist_ranks_with_other_kernels_fail_clearly ||
    fail dist_ranks_with_other_kernels_fail_clearly "rc $rc, runs $runs: $(grep maskd <<<"$out" | head -2)"
fi

# ... or runs another maskd build whose RunConfig is laid out otherwise (built here from this
# tree with -DRUN_PATH_MAX=1000): refused naming the rank, its host and both builds, before
# any message of a build's own size (it aborted inside MPI with MPI_ERR_TRUNCATE).
if make -s -j2 B="$T/other" OPT="-O0 -DRUN_PATH_MAX=1000" WARN=-w "$T/other/maskd" >"$T/other.log" 2>&1; then
  out=$(mpirun "${root[@]}" --oversubscribe -np 1 -wdir "$T/a" "$M" train --db "$T/r.db" "${rel[@]}" : \
        -np 1 -wdir "$T/a" "$T/other/maskd" train --db "$T/r.db" "${rel[@]}" 2>&1); rc=$?
  runs=$(sqlite3 "$T/r.db" "SELECT COUNT(*) FROM runs" 2>/dev/null || echo 0)
  [ $rc -ne 0 ] && [ "$runs" = 0 ] && ! grep -q MPI_ERR_TRUNCATE <<<"$out" &&
    grep -q "^maskd train: the ranks run different maskd builds: rank 1 on .* runs sha256 [0-9a-f]\{12\} (layout [0-9a-f]\{8\}), rank 0 on .*: install the same maskd on every host" <<<"$out" &&
    pass dist_rank_of_another_build_fails_clearly ||
    fail dist_rank_of_another_build_fails_clearly "rc $rc, runs $runs: $(grep -v '^-*$' <<<"$out" | head -3 | tr '\n' ' ')"
  # bench comm between the two builds: refused the same way, before it measures anything.
  out=$(mpirun "${root[@]}" --oversubscribe -np 1 "$M" bench comm --config tiny --reps 1 : \
        -np 1 "$T/other/maskd" bench comm --config tiny --reps 1 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -q "^maskd bench comm: the ranks run different maskd builds" <<<"$out" &&
    pass dist_bench_comm_of_another_build_refused ||
    fail dist_bench_comm_of_another_build_refused "rc $rc: $(grep -v '^-*$' <<<"$out" | head -3 | tr '\n' ' ')"
else
  fail dist_rank_of_another_build_fails_clearly "could not build the other maskd: $(tail -3 "$T/other.log")"
fi

# MASKD_ISA set for `--ranks` reaches every rank (mpirun -x): the run agrees and records that level.
MASKD_ISA=generic timeout 120 "$M" train --db "$T/g.db" "${few[@]}" --name g --max-steps 3 --ranks 2 2>"$T/g.err"; rc=$?
isa=$(sqlite3 "$T/g.db" "SELECT json_extract(dist, '$.isa') FROM runs" 2>/dev/null)
[ $rc = 0 ] && [ "$isa" = generic ] && pass dist_ranks_share_the_chosen_kernels ||
  fail dist_ranks_share_the_chosen_kernels "rc $rc, recorded '$isa': $(tail -2 "$T/g.err")"

# The same run as a job over HTTP with "ranks": 2: the worker's maskd train starts mpirun.
mkdir -p "$T/data"; cp -r "$T/train" "$T/valid" "$T/tok.json" "$T/cfg.json" "$T/data/"
serve_start --db "$T/hub.db" --data-dir "$T/data" --token tk --quiet || { fail dist_http_start "$(cat "$T/err")"; exit 1; }
at_exit 'serve_stop >/dev/null 2>&1'
curl -s --max-time 20 -H 'Authorization: Bearer tk' -H 'Content-Type: application/json' -X POST "$base/runs" -o "$T/post" \
  --data-binary '{"name":"d","tokenizer":"tok.json","train":"train","validation":"valid","config":"cfg.json","epochs":2,
  "batch":8,"lr":0.002,"threads":1,"checkpoint_steps":10,"clip_norm":1.0,"seed":11,"ranks":2}'
for _ in $(seq 600); do
  curl -s --max-time 5 -H 'Authorization: Bearer tk' "$base/runs/d" > "$T/run.json"
  grep -q '"status":"\(done\|failed\)"' "$T/run.json" && break
  sleep 0.1
done
st=$(jq -r '.status' "$T/run.json" 2>/dev/null || grep -o '"status":"[a-z]*"' "$T/run.json")
dump "$T/hub.db" > "$T/hub.txt"
grep -q done <<<"$st" && cmp -s "$T/one.txt" "$T/hub.txt" && grep -q '"ranks":2' "$T/run.json" && pass dist_http_job_two_ranks ||
  fail dist_http_job_two_ranks "status $st: $(head -c 300 "$T/post") $(diff "$T/one.txt" "$T/hub.txt" | head -2 | tr '\n' ' ')"
# The run shows its ranks, their hosts, each rank's tokens/s and the global rate.
# (A failure names the assertion and the run's "dist", not the run's opening bytes.)
if out=$(python3 - "$T/run.json" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["dist"]
assert d["ranks"] == 2 and len(d["hosts"]) == 2 and len(d["tokens_per_s"]) == 2, d
assert all(t > 0 for t in d["tokens_per_s"]) and d["global_tokens_per_s"] > max(d["tokens_per_s"]), d
assert d["comm_exchange_s"] > 0 and 0 <= d["comm_hidden"] <= 1, d
PY
); then pass dist_http_run_shows_ranks; else fail dist_http_run_shows_ranks "$(tail -c 700 <<<"$out")"; fi

# maskd bench comm: what MPI moves between two ranks, beside memcpy; refused without mpirun.
out=$("$M" bench comm --config tiny 2>&1); rc=$?
[ $rc = 2 ] && grep -q "mpirun" <<<"$out" && pass dist_bench_comm_needs_mpirun || fail dist_bench_comm_needs_mpirun "rc $rc: $out"
out=$(mpirun "${root[@]}" --oversubscribe -np 2 "$M" bench comm --config tiny --reps 3 --json 2>&1); rc=$?
python3 - "$out" <<'PY' && [ $rc = 0 ] && pass dist_bench_comm || fail dist_bench_comm "rc $rc: $out"
import json, sys
d = json.loads(sys.argv[1].strip().splitlines()[-1])
assert d["floats"] == 1511488 and min(d["memcpy_gb_s"], d["send_gb_s"], d["exchange_gb_s_each_way"]) > 0.05, d
PY

# What may start processes is bounded and cannot become an mpirun option.
out=$("$M" train --db "$T/n.db" "${args[@]}" --ranks 64 2>&1); rc=$?
[ $rc = 2 ] && grep -q "at most" <<<"$out" && pass dist_too_many_local_ranks_refused || fail dist_too_many_local_ranks_refused "rc $rc: $out"
out=$("$M" train --db "$T/n.db" "${args[@]}" --hosts=-x:1 2>&1); rc=$?
[ $rc = 2 ] && grep -q "starts with '-'" <<<"$out" && ! grep -q ORTE <<<"$out" && pass dist_host_option_refused ||
  fail dist_host_option_refused "rc $rc: $(head -2 <<<"$out")"
# mpirun's own launch error (a hostfile with fewer slots than --ranks) is one line, with
# --quiet too: under mpirun's -q it was no line at all, exit 1.
printf 'localhost slots=2\n' > "$T/hf2"
out=$("$M" train --db "$T/n.db" "${args[@]}" --ranks 4 --hostfile "$T/hf2" 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(grep -c . <<<"$out")" = 1 ] &&
  grep -q "^maskd train: mpirun could not start 4 ranks: there are not enough slots" <<<"$out" &&
  pass dist_mpirun_launch_error_is_one_line || fail dist_mpirun_launch_error_is_one_line "rc $rc: $(head -c 400 <<<"$out")"
# --ranks N with a hostfile is N ranks (--ranks 1 ran the file's 2 slots); the hostfile alone runs its slots.
"$M" train --db "$T/hf1.db" "${few[@]}" --max-steps 3 --ranks 1 --hostfile "$T/hf2" 2>"$T/hf1.err"; rc=$?
"$M" train --db "$T/hfs.db" "${few[@]}" --max-steps 3 --hostfile "$T/hf2" 2>"$T/hfs.err"; rc2=$?
got=$(sqlite3 "$T/hf1.db" "SELECT json_extract(dist, '$.ranks') FROM runs" 2>/dev/null)/$(sqlite3 "$T/hfs.db" "SELECT json_extract(dist, '$.ranks') FROM runs" 2>/dev/null)
[ $rc = 0 ] && [ $rc2 = 0 ] && [ "$got" = 1/2 ] && pass dist_ranks_with_hostfile_is_the_rank_count ||
  fail dist_ranks_with_hostfile_is_the_rank_count "rc $rc/$rc2, ranks that ran (--ranks 1 / none) $got, want 1/2: $(tail -1 "$T/hf1.err")"
# Slot counts are ranks: checked as --ranks is, and capped on this machine as --ranks is.
for h in localhost:0 localhost:x localhost:-1 localhost:99999999999999999999 localhost:4096; do
  out=$("$M" train --db "$T/n.db" "${args[@]}" --hosts "$h" 2>&1); rc=$?
  [ $rc -ne 0 ] && [ "$(grep -c . <<<"$out")" = 1 ] && grep -qE "^maskd train: (--hosts: expected a host list|hosts: )" <<<"$out" &&
    pass "dist_host_slots_refused[$h]" ||
    fail "dist_host_slots_refused[$h]" "rc $rc: $(head -c 300 <<<"$out")"
done
# A failing or stopped run shows maskd's one line, not mpirun's blocks after it naming another rank.
# It comes as soon as mpirun ends (about 2 s here): the launcher looked for a run to recover
# for 5 s more though rank 0 had recorded none.
t0=$(date +%s%N)
out=$("$M" train --db "$T/n.db" "${args[@]}" --batch 4000 --ranks 2 2>&1); rc=$?
took=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 1 ] && [ "$(grep -c . <<<"$out")" = 1 ] && grep -q "^maskd train: .*make no full batch of 4000 x 2 ranks" <<<"$out" &&
  pass dist_failure_is_one_line || fail dist_failure_is_one_line "rc $rc: $(head -c 400 <<<"$out")"
[ "$took" -lt 5500 ] && pass dist_refused_run_answers_without_waiting ||
  fail dist_refused_run_answers_without_waiting "the refusal took $took ms (the launcher waits for a run to recover?)"
! grep -q "Primary job\|mpirun detected\|Forwarding signal" "$T/s.err" && pass dist_stop_is_one_line ||
  fail dist_stop_is_one_line "$(grep -v '^-*$' "$T/s.err" | head -3 | tr '\n' ' ')"

# Ctrl-C (SIGINT to the launcher) is recorded as the user's signal: the launcher relayed
# every stop as SIGUSR1, and the run said "stopped by SIGTERM".
"$M" train --db "$T/ci.db" "${args[@]}" --ranks 2 2>"$T/ci.err" &
lpid=$!
wait_steps "$T/ci.db" 5
kill -INT "$lpid"; wait "$lpid"; rc=$?
st=$(sqlite3 "$T/ci.db" "SELECT status || ': ' || error FROM runs")
[ $rc = 130 ] && [ "$st" = "interrupted: stopped by SIGINT" ] && pass dist_ctrl_c_recorded_as_sigint ||
  fail dist_ctrl_c_recorded_as_sigint "rc $rc, run '$st': $(tail -1 "$T/ci.err")"

# (The launcher's pid is lpid: pid holds the server the http checks above started, which
# lib.sh's clean-up stops.)
# A second stop (Ctrl-C twice) ends the ranks at once: mpirun exits 1 with its own words
# quiet, and the run stayed "running" (a dead rank's pid) with no message. Now one line,
# exit 130, the run interrupted. Steps are made slow (a wider model, batch 64) so that the
# second signal comes while the first stop is still on its way.
sed 's/"hidden_size": 16/"hidden_size": 256/; s/"intermediate_size": 32/"intermediate_size": 1024/; s/"num_attention_heads": 2/"num_attention_heads": 4/' \
  "$T/cfg.json" > "$T/cfgbig.json"
long=(--name L --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfgbig.json" --epochs 50 --batch 64 --lr 2e-3 --threads 1
      --checkpoint-steps 1000 --seed 11 --quiet)
"$M" train --db "$T/i2.db" "${long[@]}" --ranks 2 2>"$T/i2.err" &
lpid=$!
wait_steps "$T/i2.db" 1
kill -INT "$lpid"; sleep 0.1; kill -INT "$lpid"
timeout 60 tail --pid="$lpid" -f /dev/null; wait "$lpid"; rc=$?
st=$(sqlite3 "$T/i2.db" "SELECT status FROM runs")
[ $rc = 130 ] && [ "$st" = interrupted ] && [ "$(grep -c . "$T/i2.err")" -le 2 ] && grep -q "^maskd train: " "$T/i2.err" &&
  pass dist_second_stop_ends_at_once_run_interrupted ||
  fail dist_second_stop_ends_at_once_run_interrupted "rc $rc, status $st: $(head -c 300 "$T/i2.err")"
# Ctrl-Z (SIGTSTP to the launcher, which has the terminal; mpirun has a process group of its
# own) stops the ranks too, and SIGCONT (fg) continues them: the launcher stopped alone and
# the ranks trained on. The run then ends as if never stopped.
tz=(--name Z --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfgbig.json" --max-steps 200 --batch 8 --lr 2e-3
    --threads 1 --seed 11 --quiet)
"$M" train --db "$T/tz.db" "${tz[@]}" --ranks 2 2>"$T/tz.err" &
lpid=$!
wait_until 600 0.05 eval '[ "$(sqlite3 "$T/tz.db" "SELECT status FROM runs" 2>/dev/null)" = running ]'
kill -TSTP "$lpid"; sleep 1
states=$(for p in $(pgrep -f "maskd train --db $T/tz.db"); do
           tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=' && awk '{print $3}' "/proc/$p/stat"
         done | sort | tr '\n' ' ')
kill -CONT "$lpid"
timeout 120 tail --pid="$lpid" -f /dev/null; wait "$lpid"; rc=$?
st=$(sqlite3 "$T/tz.db" "SELECT status || ' ' || step FROM runs")
[ "$states" = "T T " ] && [ $rc = 0 ] && [ "$st" = "done 200" ] && pass dist_ctrl_z_stops_the_ranks_and_fg_continues ||
  fail dist_ctrl_z_stops_the_ranks_and_fg_continues "ranks' states after SIGTSTP '$states' (want T T), rc $rc, run '$st': $(tail -2 "$T/tz.err")"
# A stop while mpirun starts its ranks (its SIGUSR1 went to no rank and was lost: the run
# trained on) is asked again until it is heard: every try ends, exit 130, nothing running.
quick=(--name Q --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" --epochs 400 --batch 8 --lr 2e-3 --threads 1
       --checkpoint-steps 1000 --seed 11 --quiet)
early_ok=1
for d in 0.05 0.15 0.25 0.35; do
  "$M" train --db "$T/e$d.db" "${quick[@]}" --ranks 2 2>"$T/e$d.err" &
  lpid=$!
  sleep "$d"; kill -TERM "$lpid"
  timeout 60 tail --pid="$lpid" -f /dev/null || { early_ok=0; echo "# stop after ${d}s: still running 60 s later"; pkill -9 -f "maskd train --db $T/e$d.db"; }
  wait "$lpid"; rc=$?
  st=$(sqlite3 "$T/e$d.db" "SELECT status FROM runs" 2>/dev/null)
  # Killed by the signal's default action (143) is right only before maskd could catch it:
  # bash's child not yet maskd, or maskd re-executing itself (platform.c, on an AVX-512 CPU
  # with OPENBLAS_CORETYPE set); then no run exists and no process of it is left.
  left=$(pgrep -f "maskd train --db $T/e$d.db" | tr '\n' ' ')
  { { [ $rc = 130 ] && [ "$st" != running ]; } || { [ $rc = 143 ] && [ -z "$st" ]; }; } && [ -z "$left" ] ||
    { early_ok=0; echo "# stop after ${d}s: rc $rc, run '$st', processes left '$left': $(tail -1 "$T/e$d.err")"; }
done
[ $early_ok = 1 ] && pass dist_stop_while_ranks_start_is_heard || fail dist_stop_while_ranks_start_is_heard "see above"

# A run whose weights stop being finite stops on every rank at once, with one line and nothing
# saved: at the second step's NaN (lr 1e30), and at the checkpoint after an update that
# overflowed on a finite gradient (lr 1e300): every rank holds the same weights, so every rank
# refuses together and none waits for the others.
for c in "1e30 4 at step 2" "1e300 1 by step 1"; do
  read -r lr steps said <<<"$c"
  timeout 120 "$M" train --db "$T/dv.db" "${args[@]}" --name dv --lr "$lr" --max-steps "$steps" --warmup-steps 0 --ranks 2 \
    2>"$T/dv.err"; rc=$?
  out=$(grep -v '^maskd: note' "$T/dv.err")
  res=$(sqlite3 "$T/dv.db" "SELECT status FROM runs ORDER BY id DESC LIMIT 1")"|"$(sqlite3 "$T/dv.db" "SELECT COUNT(*) FROM revisions")
  if [ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "training diverged $said" <<<"$out" && [ "$res" = "failed|0" ]; then
    pass "dist_diverged_ranks_stop_together_lr_$lr"
  else
    fail "dist_diverged_ranks_stop_together_lr_$lr" "rc $rc, $res: $(head -c 300 <<<"$out")"
  fi
done
