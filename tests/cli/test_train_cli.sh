#!/usr/bin/env bash
# maskd train / runs / models from the command line: refusals before any work (one line
# naming the field, non-zero exit, no run recorded), progress and Keras-style epoch lines,
# revisions pushed per epoch, keep-last-N plus best, --out, SIGINT and SIGTERM (checkpoint,
# "interrupted", exit 130) and resume to the same end as an uninterrupted run.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" traincli "${1:-}"
[ -f "$DATA/train.txt" ] || { fail train_cli_setup "no WikiText-2 at $DATA"; exit 1; }

head -c 120000 "$DATA/train.txt" > "$T/tr.txt"
head -c 30000 "$DATA/valid.txt" > "$T/va.txt"
"$M" tokenizer train --input "$T/tr.txt" --vocab-size 300 --out "$T/tok.json" --threads 1 >/dev/null 2>&1 &&
"$M" tokenizer train --input "$T/tr.txt" --vocab-size 280 --out "$T/tok280.json" --threads 1 >/dev/null 2>&1 &&
"$M" prepare --tokenizer "$T/tok.json" --input "$T/tr.txt" --split train --seq-len 32 --out "$T/train" --quiet >/dev/null 2>&1 &&
"$M" prepare --tokenizer "$T/tok.json" --input "$T/va.txt" --split validation --seq-len 32 --out "$T/valid" --quiet >/dev/null 2>&1 ||
  { fail train_cli_setup "tokenizer or prepare failed"; exit 1; }
cfg() {  # vocab size, positions
  cat <<JSON
{"model_type": "roberta", "vocab_size": $1, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": $2, "type_vocab_size": 1, "pad_token_id": 3, "bos_token_id": 0,
 "eos_token_id": 1, "layer_norm_eps": 1e-5, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "initializer_range": 0.02}
JSON
}
cfg 300 40 > "$T/cfg.json"; cfg 301 40 > "$T/cfg301.json"; cfg 300 30 > "$T/cfgshort.json"
base=(--name cli --tokenizer "$T/tok.json" --train "$T/train" --validation "$T/valid" --config "$T/cfg.json"
      --batch 8 --lr 2e-3 --threads 1 --seed 5)

# Refusals: exit non-zero, one line naming the field, nothing recorded in the store.
refuse() {  # name, needle, args...
  local name=$1 needle=$2; shift 2
  local out rc
  out=$("$M" train --db "$T/r.db" "$@" 2>&1 >/dev/null); rc=$?
  out=$(grep -v '^maskd: note' <<<"$out")
  if [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF -- "$needle" <<<"$out"; then pass "$name"
  else fail "$name" "rc $rc, stderr: $out (wanted $needle)"; fi
}
refuse train_cli_refuses_negative_lr "maskd train: --lr: expected a number >= 0, got '-1e-3'" "${base[@]}" --lr -1e-3
refuse train_cli_refuses_unknown_flag "unknown option --learning-rate" "${base[@]}" --learning-rate 1
refuse train_cli_refuses_missing_shards "train: $T/nowhere does not exist" "${base[@]}" --train "$T/nowhere"
refuse train_cli_refuses_missing_validation "validation:" "${base[@]}" --validation "$T/nowhere"
refuse train_cli_refuses_config_vocab "config: vocab_size 301" "${base[@]}" --config "$T/cfg301.json"
refuse train_cli_refuses_tokenizer_vocab "train: shards have vocabulary size 300 but the tokenizer has 280" "${base[@]}" --tokenizer "$T/tok280.json" --config tiny
refuse train_cli_refuses_positions "max_position_embeddings" "${base[@]}" --config "$T/cfgshort.json"
echo '{"name": "x", "learning_rate": 0.1}' > "$T/bad.json"
refuse train_cli_refuses_unknown_key 'unknown key "learning_rate"' --run "$T/bad.json"
echo '{"name": "x", "epochs": -2}' > "$T/neg.json"
refuse train_cli_refuses_json_epochs "epochs: -2 must be in [1, 1000000]" --run "$T/neg.json" "${base[@]:2}"
refuse train_cli_refuses_resume_unknown "run" --resume nosuchrun
# A value is never taken for an option nor an option for a value; --key=VALUE takes any value.
refuse train_cli_option_not_a_value "--tokenizer needs a value, not the option --quiet" "${base[@]}" --tokenizer --quiet
refuse train_cli_equals_form "maskd train: --lr: expected a number >= 0, got '-1e-3'" "${base[@]}" --lr=-1e-3
refuse train_cli_resume_equals_empty "--resume= needs a run id or name" --resume=
# --job is maskd serve's hand-off: the job's description, nothing else; a job must be a queued training job the worker claimed.
refuse train_cli_job_takes_no_run_options "--job runs the training job as it was queued" --job 1 --work-dir "$T" "${base[@]}"
refuse train_cli_job_folders_need_job "--data-dir, --work-dir and --job-hosts go with --job" --work-dir "$T" "${base[@]}"
refuse train_cli_job_hosts_needs_job "--data-dir, --work-dir and --job-hosts go with --job" --job-hosts h1 "${base[@]}"
refuse train_cli_job_not_an_id '--job: "x" is not a job id' --job x --work-dir "$T"
refuse train_cli_job_unknown "job 7 does not exist" --job 7 --work-dir "$T"
sqlite3 "$T/r.db" "INSERT INTO jobs(id, kind, status, params, created) VALUES (8, 'train', 'queued', '{\"name\": \"q\"}', 0), (9, 'prepare', 'running', '{}', 0)"
refuse train_cli_job_not_claimed "job 8 is queued" --job 8 --work-dir "$T"
refuse train_cli_job_not_training "job 9 is a prepare job" --job 9 --work-dir "$T"
refuse train_cli_refuses_huge_epochs "--epochs: expected an integer in [1, 1000000], got '1000000000'" "${base[@]}" --epochs 1000000000
refuse train_cli_refuses_huge_max_steps "--max-steps: expected an integer in [0, 1000000000] (0: epochs x steps per epoch), got '1000000000000000'" "${base[@]}" --max-steps 1000000000000000
# A run option's bad value reads as every command's flags do, with exit status 2 (it said
# 'batch: "x" is not a whole number' with status 1); a --run file's keeps the key's name.
bad_flags=(--batch --threads --precision --label-smoothing --hosts)
bad_values=(x -1 fp16 1 a:0)
bad_wants=("an integer in [1, 65536]" "an integer in [0, 1024] (0: all CPUs)" "fp32 or bf16" "a number in [0, 1)"
           "a host list name:slots,name:slots (slots in [1, 4096], at most 4096 in all); a: slots 0 must be in [1, 4096]")
for i in "${!bad_flags[@]}"; do
  flag=${bad_flags[$i]} val=${bad_values[$i]}
  out=$("$M" train --db "$T/r.db" "${base[@]}" "$flag" "$val" 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] && [ "$out" = "maskd train: $flag: expected ${bad_wants[$i]}, got '$val'" ] &&
    pass "train_cli_bad_value_format_${flag#--}" || fail "train_cli_bad_value_format_${flag#--}" "rc $rc: $out"
done
# A FIFO as --hostfile is refused before mpirun starts (mpirun blocked opening it, and no
# stop reached it).
mkfifo "$T/hosts.fifo"
out=$(timeout -k 5 30 "$M" train --db "$T/r.db" "${base[@]}" --ranks 2 --hostfile "$T/hosts.fifo" 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF "maskd train: --hostfile: $T/hosts.fifo" <<<"$out" &&
  pass train_cli_hostfile_fifo_refused || fail train_cli_hostfile_fifo_refused "rc $rc: $out"
# --out is written when the run ends: a file in its place is refused before the first step.
touch "$T/a-file"
refuse train_cli_refuses_out_not_a_directory "--out: $T/a-file: not a directory" "${base[@]}" --out "$T/a-file"
n=$(sqlite3 "$T/r.db" "SELECT COUNT(*) FROM runs" 2>/dev/null || echo 0)
[ "$n" = 0 ] && pass train_cli_refusals_record_nothing || fail train_cli_refusals_record_nothing "$n runs recorded"

# A file that is not a maskd store is never written into: another program's SQLite
# database is refused before any pragma (the code before filled it with maskd's tables
# and left it in WAL mode), by training and by the listings; an empty file is no store to
# a listing (the code before made one there).
sqlite3 "$T/notes.db" "CREATE TABLE notes(x); INSERT INTO notes VALUES ('mine')"
cp "$T/notes.db" "$T/notes0.db"
out=$("$M" train --db "$T/notes.db" "${base[@]}" 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -q "notes.db is an SQLite database without maskd's schema" <<<"$out" && cmp -s "$T/notes.db" "$T/notes0.db" &&
  [ ! -e "$T/notes.db-wal" ] && pass train_cli_refuses_foreign_database || fail train_cli_refuses_foreign_database "rc $rc: $out"
out=$("$M" runs --db "$T/notes.db" 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -q "without maskd's schema" <<<"$out" && cmp -s "$T/notes.db" "$T/notes0.db" &&
  pass runs_cli_refuses_foreign_database || fail runs_cli_refuses_foreign_database "rc $rc: $out"
: > "$T/empty.db"
out=$("$M" models --db "$T/empty.db" 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -q "no store at $T/empty.db" <<<"$out" && [ ! -s "$T/empty.db" ] &&
  pass models_cli_empty_file_is_no_store || fail models_cli_empty_file_is_no_store "rc $rc, $(stat -c %s "$T/empty.db") bytes: $out"

# A run from a JSON description plus flags; plain progress lines on a pipe; revisions per epoch.
cat > "$T/run.json" <<JSON
{"name": "cli", "tokenizer": "$T/tok.json", "train": "$T/train", "validation": "$T/valid", "config": "$T/cfg.json",
 "batch": 8, "lr": 0.002, "threads": 1, "seed": 5, "epochs": 2, "checkpoint_steps": 25, "keep_last": 1}
JSON
"$M" train --db "$T/a.db" --run "$T/run.json" --out "$T/final" 2>"$T/a.err"; rc=$?
[ $rc = 0 ] && [ "$(sqlite3 "$T/a.db" "SELECT status FROM runs")" = done ] && pass train_cli_run_done ||
  fail train_cli_run_done "rc $rc: $(tail -2 "$T/a.err")"
# --out holds the model now: another run's --out there is refused before it starts (the
# code before overwrote it when the run ended), and the folder is left as it was.
sum0=$(sha256sum "$T/final/model.safetensors" 2>/dev/null)
out=$("$M" train --db "$T/a.db" "${base[@]}" --name other --max-steps 1 --out "$T/final" 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -q "^maskd train: --out: $T/final/config.json exists: a model is there already" <<<"$out" &&
  [ -n "$sum0" ] && [ "$(sha256sum "$T/final/model.safetensors")" = "$sum0" ] &&
  pass train_cli_out_not_overwritten || fail train_cli_out_not_overwritten "rc $rc: $out"
grep -q '^epoch 2/2: loss [0-9.]* - val_loss [0-9.]* - val_accuracy [0-9.]* - val_perplexity [0-9.]*' "$T/a.err" &&
  grep -q '^epoch 1/2 step 1/[0-9]* loss' "$T/a.err" && ! grep -q $'\r' "$T/a.err" &&
  pass train_cli_progress_lines || fail train_cli_progress_lines "$(head -5 "$T/a.err")"
msgs=$(sqlite3 "$T/a.db" "SELECT message FROM revisions WHERE message LIKE 'Training in progress epoch%' ORDER BY seq" | tr '\n' '|')
[ "$msgs" = "Training in progress epoch 1|Training in progress epoch 2|" ] && pass train_cli_epoch_revisions ||
  fail train_cli_epoch_revisions "$msgs"
# keep_last 1 plus best: at most two revisions hold optimizer state, no step checkpoint but the newest survives.
nopt=$(sqlite3 "$T/a.db" "SELECT COUNT(*) FROM revisions WHERE optimizer IS NOT NULL")
nstep=$(sqlite3 "$T/a.db" "SELECT COUNT(*) FROM revisions WHERE message LIKE '%step%'")
orphans=$(sqlite3 "$T/a.db" "SELECT COUNT(*) FROM blobs WHERE sha256 NOT IN (SELECT weights FROM revisions UNION SELECT optimizer FROM revisions WHERE optimizer IS NOT NULL UNION SELECT tokenizer FROM revisions WHERE tokenizer IS NOT NULL UNION SELECT blob FROM tokenizers)")
[ "$nopt" -ge 1 ] && [ "$nopt" -le 2 ] && [ "$nstep" = 0 ] && [ "$orphans" = 0 ] && pass train_cli_keep_last_plus_best ||
  fail train_cli_keep_last_plus_best "$nopt with optimizer, $nstep step revisions, $orphans orphan blobs"
# The dropped checkpoints' pages stayed free for the next ones while the run went on and
# went back to the file system when it ended (store_compact), said on stderr.
free=$(sqlite3 "$T/a.db" "PRAGMA freelist_count")
[ "$free" = 0 ] && grep -q "MB of dropped checkpoints returned to the file system" "$T/a.err" &&
  pass train_cli_store_compacted_at_the_end || fail train_cli_store_compacted_at_the_end "$free free pages; $(tail -3 "$T/a.err")"
w=$(sqlite3 "$T/a.db" "SELECT weights FROM revisions ORDER BY seq DESC LIMIT 1")
[ -f "$T/final/config.json" ] && [ -f "$T/final/tokenizer.json" ] && [ "$(sha256sum < "$T/final/model.safetensors" | cut -c1-64)" = "$w" ] &&
  pass train_cli_out_folder_is_last_revision || fail train_cli_out_folder_is_last_revision "weights $w"
"$M" runs --db "$T/a.db" | grep -q '^1 *cli *done *[0-9]*/[0-9]* *2 ' &&
  "$M" models --db "$T/a.db" cli | grep -q 'Training in progress epoch 2' && "$M" runs --db "$T/a.db" --json | grep -q '"status": "done"' &&
  pass train_cli_runs_models || fail train_cli_runs_models "$("$M" runs --db "$T/a.db"; "$M" models --db "$T/a.db" cli)"
# A run killed during its last push's keep-last prune (or whose last prune met a download's
# pin) ends with more checkpoints than it keeps, and orphan blobs; its resume, at the last
# step, goes straight to done, which now prunes and collects (the code before left them:
# here 4 revisions with optimizer state and 9 blobs instead of 1 and 3). The state is made
# by a run that kept 4, then told it keeps 1 and was interrupted.
"$M" train --db "$T/kp.db" --name kp --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" --max-steps 20 \
  --checkpoint-steps 5 --keep-last 4 --batch 8 --threads 1 --quiet >"$T/kp.log" 2>&1 &&
  sqlite3 "$T/kp.db" "UPDATE runs SET status = 'interrupted', config = json_set(config, '$.keep_last', 1)" &&
  "$M" train --db "$T/kp.db" --resume 1 --threads 1 >>"$T/kp.log" 2>&1; rc=$?
kp=$(sqlite3 "$T/kp.db" "SELECT (SELECT COUNT(*) FROM revisions WHERE optimizer IS NOT NULL) || ' ' || (SELECT COUNT(*) FROM blobs) || ' ' || (SELECT status FROM runs)")
[ $rc = 0 ] && [ "$kp" = "1 3 done" ] && pass train_cli_done_prunes_and_collects ||
  fail train_cli_done_prunes_and_collects "rc $rc, optimizer states, blobs, status: $kp; $(tail -2 "$T/kp.log")"
# Output that cannot be written (a full disk: /dev/full) is an error, not a silent success.
for c in "runs --db $T/a.db" "models --db $T/a.db" "--help" "version" "tokenizer encode --tokenizer $T/tok.json --input $T/va.txt"; do
  out=$("$M" $c 2>&1 >/dev/full); rc=$?
  [ $rc = 1 ] && grep -q "the output could not be written" <<<"$out" &&
    pass "cli_full_disk_fails_${c%% *}" || fail "cli_full_disk_fails_${c%% *}" "rc $rc: $out"
done
# --threads is capped at 1024 as train's (the code before took 1000000000 silently and,
# under ASan, died allocating scratch for them).
for c in fill-mask classify; do
  out=$("$M" $c --db "$T/a.db" --model cli --threads 100000 "a <mask> b" 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] && grep -q "^maskd $c: --threads: expected an integer in \[1, 1024\], got '100000'" <<<"$out" &&
    pass "${c}_cli_refuses_huge_threads" || fail "${c}_cli_refuses_huge_threads" "rc $rc: $out"
done
out=$("$M" train --db "$T/a.db" --resume cli 2>&1); rc=$?
[ $rc != 0 ] && grep -q "already done" <<<"$out" && pass train_cli_refuses_resume_done || fail train_cli_refuses_resume_done "rc $rc: $out"

# SIGINT, then SIGTERM: checkpoint at a step boundary, "interrupted", exit 130; resume ends as run a.
dump() {
  sqlite3 "$1" "SELECT step, printf('%.17e %.17e', loss, grad_norm) FROM step_metrics ORDER BY step;
                SELECT epoch, printf('%.17e', eval_loss) FROM epoch_metrics ORDER BY epoch;
                SELECT weights FROM revisions WHERE message = 'Training in progress epoch 2';"
}
sig_ok=1 prev=0
"$M" train --db "$T/b.db" --run "$T/run.json" 2>"$T/b.err" &
pid=$!
for sig in INT TERM; do
  # Signal only once this process has pushed a checkpoint of its own (it is training).
  for _ in $(seq 200); do
    s=$(sqlite3 "$T/b.db" "SELECT COALESCE(MAX(step), 0) FROM revisions" 2>/dev/null || echo 0)
    [ "${s:-0}" -gt "$prev" ] && break; sleep 0.02
  done
  kill -$sig "$pid"; wait "$pid"; rc=$?
  st=$(sqlite3 "$T/b.db" "SELECT status || ' ' || COALESCE(error, '') FROM runs")
  last=$(sqlite3 "$T/b.db" "SELECT message || ' ' || (optimizer IS NOT NULL) FROM revisions ORDER BY seq DESC LIMIT 1")
  if [ $rc = 130 ] && [ "$st" = "interrupted stopped by SIG$sig" ] && [[ "$last" == "Interrupted at step "*" 1" ]]; then :
  else sig_ok=0; echo "# SIG$sig: rc $rc, status '$st', last revision '$last': $(tail -1 "$T/b.err")"; fi
  if [ $sig = INT ]; then
    "$M" train --db "$T/b.db" --resume cli 2>>"$T/b.err" &
  else
    # The DESIGN spelling: the run's own options and a bare --resume; they must match the stored run.
    out=$("$M" train --db "$T/b.db" --run "$T/run.json" --lr 1e-3 --resume 2>&1); rc=$?
    [ $rc != 0 ] && grep -q "lr: differs from the stored run" <<<"$out" && pass train_cli_resume_refuses_changed_options ||
      fail train_cli_resume_refuses_changed_options "rc $rc: $out"
    "$M" train --db "$T/b.db" --run "$T/run.json" --resume 2>>"$T/b.err" &
  fi
  pid=$!
  prev=$(sqlite3 "$T/b.db" "SELECT MAX(step) FROM revisions")
done
wait "$pid"; rc=$?
[ $sig_ok = 1 ] && pass train_cli_signals_checkpoint_and_interrupt || fail train_cli_signals_checkpoint_and_interrupt "see above"
[ $rc = 0 ] && [ "$(sqlite3 "$T/b.db" "SELECT status FROM runs")" = done ] && cmp -s <(dump "$T/a.db") <(dump "$T/b.db") &&
  pass train_cli_signal_resume_identical || fail train_cli_signal_resume_identical "rc $rc: $(diff <(dump "$T/a.db") <(dump "$T/b.db") | head -3 | tr '\n' ' ')"

# ---- numbers that are not finite, and steps without a loss ----
# A run that diverges (lr 100): its validation loss passes 709.78 and exp() overflows. The
# perplexity is inf, as HF's run_mlm reports it, printed as such and stored as null; the
# run ends done with its revision (it failed at the epoch's push: "malformed JSON ... 'inf'").
head -c 400 "$DATA/valid.txt" | head -5 > "$T/v1.txt"
"$M" prepare --tokenizer "$T/tok.json" --input "$T/v1.txt" --split validation --seq-len 32 --out "$T/v1" --quiet >/dev/null 2>&1 ||
  fail train_cli_tiny_valid_setup "prepare failed"
"$M" train --db "$T/big.db" --name big --tokenizer "$T/tok.json" --train "$T/train" --validation "$T/v1" --config "$T/cfg.json" \
  --batch 8 --lr 100 --threads 1 --seed 5 --max-steps 30 --warmup-steps 0 >"$T/big.out" 2>&1; rc=$?
res=$(sqlite3 "$T/big.db" "SELECT status, (SELECT COUNT(*) FROM revisions), (SELECT metrics FROM revisions ORDER BY seq DESC LIMIT 1) FROM runs")
if [ $rc = 0 ] && [[ "$res" == "done|1|"* ]] && $PY -c '
import json, sys
m = json.loads(sys.argv[1].split("|", 2)[2])
assert m["perplexity"] is None and m["eval_loss"] > 709.78, m' "$res" && grep -q 'val_perplexity inf' "$T/big.out"; then
  pass train_cli_diverged_run_perplexity_inf
else
  fail train_cli_diverged_run_perplexity_inf "rc $rc, $res: $(grep -v '^epoch .* step' "$T/big.out" | tail -2 | tr '\n' ' ')"
fi
# With a masking rate so low that some steps draw no masked token (no loss), the epoch's
# train loss is the mean of the steps that have one (it divided by every step: 2.27 for 5.68).
"$M" train --db "$T/lp.db" --name lp --tokenizer "$T/tok.json" --train "$T/train" --validation "$T/v1" --config "$T/cfg.json" \
  --batch 8 --lr 2e-3 --threads 1 --seed 5 --max-steps 20 --mlm-probability 0.002 --eval-seed 5 >"$T/lp.out" 2>&1; rc=$?
lp=$(sqlite3 "$T/lp.db" "SELECT COUNT(*) - COUNT(loss), printf('%.6f', AVG(loss)), (SELECT printf('%.6f', train_loss) FROM epoch_metrics) FROM step_metrics")
IFS='|' read -r nolabel mean stored <<<"$lp"
[ $rc = 0 ] && [ "${nolabel:-0}" -gt 0 ] && [ -n "$mean" ] && [ "$mean" = "$stored" ] && pass train_cli_train_loss_over_steps_with_a_loss ||
  fail train_cli_train_loss_over_steps_with_a_loss "rc $rc: steps without a loss, mean of the others, stored: $lp"
# The same run's validation (5 lines, 0.2% masked) draws no masked token: said as such, not
# "no validation set".
grep -q 'no validation metrics: the validation set drew no masked token' "$T/lp.out" && ! grep -q 'no validation set' "$T/lp.out" &&
  pass train_cli_validation_without_masked_tokens_said || fail train_cli_validation_without_masked_tokens_said "$(grep '^epoch 1/1:' "$T/lp.out")"
# A run whose weights stop being finite ends failed with one line saying so, and saves nothing:
# the repository's newest revision stays the last finite one (a revision of NaN weights became
# the model's main, and every fill-mask of it a 500). lr 1e30: the second step's loss is NaN;
# lr 1e300: the first update already overflows, caught before the checkpoint saves it.
"$M" train --db "$T/dv.db" "${base[@]}" --name dv --max-steps 2 --quiet >/dev/null 2>&1
for c in "1e30 4 at step 2" "1e300 1 by step 1"; do
  read -r lr steps said <<<"$c"
  "$M" train --db "$T/dv.db" "${base[@]}" --name dv --lr "$lr" --max-steps "$steps" --warmup-steps 0 --quiet >"$T/dv.out" 2>&1; rc=$?
  out=$(grep -v '^maskd: note' "$T/dv.out")
  res=$(sqlite3 "$T/dv.db" "SELECT status FROM runs ORDER BY id DESC LIMIT 1")"|"$(sqlite3 "$T/dv.db" "SELECT COUNT(*) FROM revisions")
  if [ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "training diverged $said" <<<"$out" && [ "$res" = "failed|1" ]; then
    pass "train_cli_diverged_weights_not_saved_lr_$lr"
  else
    fail "train_cli_diverged_weights_not_saved_lr_$lr" "rc $rc, $res: $out"
  fi
  # Its steps up to the one that diverged are recorded, and its progress with them (they
  # were lost when the run failed between two flushes of the buffered metrics).
  rec=$(sqlite3 "$T/dv.db" "SELECT step || '|' || (SELECT MAX(step) FROM step_metrics WHERE run_id = runs.id) FROM runs ORDER BY id DESC LIMIT 1")
  want=${said##* }
  [ "$rec" = "$want|$want" ] && pass "train_cli_diverged_steps_recorded_lr_$lr" ||
    fail "train_cli_diverged_steps_recorded_lr_$lr" "run step | last step metric: $rec, not $want|$want"
done
