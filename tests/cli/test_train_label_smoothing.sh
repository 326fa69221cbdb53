#!/usr/bin/env bash
# maskd train --label-smoothing X (HF Trainer's label_smoothing_factor on a masked LM): the
# flag is stored with the run, refused outside [0, 1), and reaches the loss of training and
# of evaluation. The loss itself (torch's CrossEntropyLoss(label_smoothing=X)) is checked
# against finite differences and a double-precision formula in test_model_gradcheck
# (a masked LM, smoothed) and test_isa; here, the run: one step whose update is at
# learning rate 0 (the warm-up starts there) leaves the initial weights, so the same
# seed gives the same model and the same masks at every X, and each row's smoothed loss
# (1-X) NLL + X U is a straight line in X. From X = 0, 0.1 and 0.3: the lines' slopes
# agree, and U (the mean over the vocabulary of -log p) sits at log V, as it must for a
# freshly initialised model whose logits are all near 0.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" trainls "${1:-}"
[ -f "$DATA/train.txt" ] || { fail train_ls_setup "no WikiText-2 at $DATA"; exit 1; }

head -c 60000 "$DATA/train.txt" > "$T/tr.txt"
head -c 20000 "$DATA/valid.txt" > "$T/va.txt"
"$M" tokenizer train --input "$T/tr.txt" --vocab-size 300 --out "$T/tok.json" --threads 1 >/dev/null 2>&1 &&
"$M" prepare --tokenizer "$T/tok.json" --input "$T/tr.txt" --split train --seq-len 32 --out "$T/train" --quiet >/dev/null 2>&1 &&
"$M" prepare --tokenizer "$T/tok.json" --input "$T/va.txt" --split validation --seq-len 32 --out "$T/valid" --quiet >/dev/null 2>&1 ||
  { fail train_ls_setup "tokenizer or prepare failed"; exit 1; }
base=(--tokenizer "$T/tok.json" --train "$T/train" --validation "$T/valid" --config tiny --batch 8 --threads 1
      --seed 5 --max-steps 1 --warmup-steps 1 --lr 1e-3 --quiet)

# Refused by name, before any work, nothing recorded.
for bad in 1 -0.1 x; do
  out=$("$M" train --db "$T/r.db" --name bad "${base[@]}" --label-smoothing "$bad" 2>&1 >/dev/null); rc=$?
  out=$(grep -v '^maskd: note' <<<"$out")
  if [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q 'label_smoothing\|label-smoothing' <<<"$out"; then
    pass "train_ls_refuses_$bad"
  else fail "train_ls_refuses_$bad" "rc $rc: $out"; fi
done
n=$(sqlite3 "$T/r.db" "SELECT COUNT(*) FROM runs" 2>/dev/null || echo 0)
[ "$n" = 0 ] && pass train_ls_refusals_record_nothing || fail train_ls_refusals_record_nothing "$n runs recorded"

# Three runs of one step: X = 0 (the flag left out), 0.1, 0.3.
losses=()
for x in 0 0.1 0.3; do
  flag=(); [ "$x" = 0 ] || flag=(--label-smoothing "$x")
  if ! "$M" train --db "$T/r$x.db" --name "ls$x" "${base[@]}" "${flag[@]}" 2>"$T/err$x"; then
    fail train_ls_runs "X = $x: $(tail -2 "$T/err$x")"; exit 1
  fi
  stored=$(sqlite3 "$T/r$x.db" "SELECT json_extract(config, '$.label_smoothing') FROM runs")
  [ "$(python3 -c "print(float('$stored') == float('$x'))")" = True ] && pass "train_ls_stored_$x" ||
    fail "train_ls_stored_$x" "runs.config holds label_smoothing $stored"
  losses+=("$(sqlite3 "$T/r$x.db" "SELECT printf('%.9e', loss) FROM step_metrics WHERE step = 1")")
  losses+=("$(sqlite3 "$T/r$x.db" "SELECT printf('%.9e', eval_loss) FROM epoch_metrics ORDER BY epoch DESC LIMIT 1")")
done
out=$("$PY" - "${losses[@]}" <<'PY'
import math, sys
t0, e0, t1, e1, t3, e3 = map(float, sys.argv[1:])
V = 300
bad = []
for name, l0, l1, l3 in (("train", t0, t1, t3), ("evaluation", e0, e1, e3)):
    if l1 == l0: bad.append(f"{name} loss did not change with X = 0.1 ({l0})")
    s1, s3 = (l1 - l0) / 0.1, (l3 - l0) / 0.3
    if abs(s1 - s3) > 2e-3 * max(abs(s1), 1e-3): bad.append(f"{name}: slopes {s1:.6g} (X 0.1) and {s3:.6g} (X 0.3) differ")
    u = l0 + s1
    if abs(u - math.log(V)) > 0.05: bad.append(f"{name}: U = {u:.6f}, not near log V = {math.log(V):.6f}")
print("; ".join(bad) if bad else "ok")
PY
)
[ "$out" = ok ] && pass train_ls_loss_is_smoothed || fail train_ls_loss_is_smoothed "$out (losses ${losses[*]})"

# The PyTorch side of scripts/compare-train reads the description maskd stores with a run,
# every key of it (it refused "precision" before it knew the key), and smooths as asked.
sqlite3 "$T/r0.1.db" "SELECT config FROM runs" > "$T/run.json"
if "$PY" scripts/torch_train.py --run "$T/run.json" --threads 1 --quiet --json "$T/torch.json" >/dev/null 2>"$T/torch.err"; then
  got=$("$PY" -c "import json, sys; d = json.load(open(sys.argv[1])); print(d['run']['label_smoothing'], len(d['epochs']))" "$T/torch.json")
  [ "$got" = "0.1 1" ] && pass train_ls_torch_reads_the_stored_run || fail train_ls_torch_reads_the_stored_run "summary: $got"
else fail train_ls_torch_reads_the_stored_run "$(tail -1 "$T/torch.err")"; fi
