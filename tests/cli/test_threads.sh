#!/usr/bin/env bash
# A run's numbers do not depend on its threads: the small preset (wide enough that the
# products, LayerNorms, attention, loss and gradient norm all split their work among
# threads) trained on 1, 2 and 3 threads gives the same bits, every step's loss, lr and
# grad norm, the evaluation and the final weights, in fp32 and in bf16; and a run stopped
# on 1 thread and resumed with `--resume RUN --threads 2` ends as the run never stopped.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" threads "${1:-}"
[ -f "$DATA/train.txt" ] || { fail threads_setup "no WikiText-2 at $DATA"; exit 1; }

small_training_setup threads_setup 200000 || exit 1
# 32 x 32 rows a step: 1024 rows of 256, past team_pays' threshold for the layers.
args=(--tokenizer "$T/tok.json" --train "$T/train" --validation "$T/valid" --config small --batch 32 --lr 1e-3
      --max-steps 8 --warmup-steps 2 --clip-norm 0.5 --eval-batches 2 --seed 7 --quiet)

dump() {  # everything that must match, at full precision
  sqlite3 "$1" "SELECT step, printf('%.17e %.17e %.17e', loss, lr, grad_norm) FROM step_metrics ORDER BY step;
                SELECT epoch, printf('%.17e %.17e %.17e', train_loss, eval_loss, eval_accuracy) FROM epoch_metrics ORDER BY epoch;
                SELECT r.weights FROM revisions r ORDER BY r.id DESC LIMIT 1;"
}

run() {  # db, precision, threads
  "$M" train --db "$T/$1.db" --name r "${args[@]}" --precision "$2" --threads "$3" 2>"$T/$1.err" ||
    { echo "# $1: $(tail -1 "$T/$1.err")"; return 1; }
  dump "$T/$1.db" > "$T/$1.txt"
}

for p in fp32 bf16; do
  run "$p-1" $p 1 && run "$p-2" $p 2 && run "$p-3" $p 3 || { fail "threads_${p}_runs" "a run failed"; continue; }
  lines=$(wc -l < "$T/$p-1.txt")
  if [ "$lines" -ge 10 ] && cmp -s "$T/$p-1.txt" "$T/$p-2.txt" && cmp -s "$T/$p-1.txt" "$T/$p-3.txt"; then
    pass "threads_${p}_same_bits_on_1_2_and_3_threads"
  else
    fail "threads_${p}_same_bits_on_1_2_and_3_threads" "$lines lines; 1 against 2: $(diff "$T/$p-1.txt" "$T/$p-2.txt" | sed -n 2p | cut -c1-120); 1 against 3: $(diff "$T/$p-1.txt" "$T/$p-3.txt" | sed -n 2p | cut -c1-120)"
  fi
done
# Negative control: the dump sees another seed.
if "$M" train --db "$T/ctl.db" --name r "${args[@]}" --seed 8 --threads 2 2>"$T/ctl.err"; then
  dump "$T/ctl.db" > "$T/ctl.txt"
  if [ "$(wc -l < "$T/ctl.txt")" -ge 10 ] && ! cmp -s "$T/fp32-1.txt" "$T/ctl.txt"; then pass threads_control_differs
  else fail threads_control_differs "seed 8 gave the same dump, or a short one"; fi
else
  fail threads_control_differs "the seed 8 run failed: $(tail -1 "$T/ctl.err")"
fi

# Stopped on 1 thread after its first checkpoint (SIGTERM: a checkpoint and "interrupted"),
# resumed on 2, by run (--resume r --threads 2) and by its description (--name r [the run's
# options] --threads 2 --resume): the same end as fp32-1, and the run now says 2 threads.
stop_and_resume() {  # label, resume arguments...
  local db="$T/$1.db" label=$1; shift
  "$M" train --db "$db" --name r "${args[@]}" --threads 1 --checkpoint-steps 3 2>"$db.err" &
  local pid=$! s st th
  for _ in $(seq 600); do
    s=$(sqlite3 "$db" "SELECT COALESCE(MAX(step), 0) FROM revisions" 2>/dev/null || echo 0)
    [ "${s:-0}" -ge 3 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  st=$(sqlite3 "$db" "SELECT status FROM runs")
  if [ "$st" != interrupted ]; then
    fail "threads_${label}_same_bits" "the run was not interrupted (status $st): $(tail -1 "$db.err")"
  elif ! "$M" train --db "$db" "$@" 2>>"$db.err"; then
    fail "threads_${label}_same_bits" "resume failed: $(tail -1 "$db.err")"
  else
    dump "$db" > "$db.txt"
    cmp -s "$T/fp32-1.txt" "$db.txt" && pass "threads_${label}_same_bits" ||
      fail "threads_${label}_same_bits" "first difference: $(diff "$T/fp32-1.txt" "$db.txt" | sed -n 2p | cut -c1-120)"
    th=$(sqlite3 "$db" "SELECT json_extract(config, '$.threads') FROM runs")
    [ "$th" = 2 ] && pass "threads_${label}_records_the_count" || fail "threads_${label}_records_the_count" "stored threads $th"
  fi
}
stop_and_resume resume_by_run --resume r --threads 2 --quiet
stop_and_resume resume_by_description --name r "${args[@]}" --threads 2 --checkpoint-steps 3 --resume
echo '{"threads": 2, "checkpoint_steps": 3}' > "$T/two.json"
stop_and_resume resume_by_run_file --name r "${args[@]}" --run "$T/two.json" --resume
