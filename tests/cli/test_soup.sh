#!/usr/bin/env bash
# maskd average and maskd evaluate: making a model soup and scoring it.
# maskd average: the uniform weight average of revisions ("model soup") pushed as a new
# repository. Checked against numpy (scripts/average-weights: each element summed in float64
# in the order given, divided, stored as F32) byte for byte on the exported weights, for
# three fine-tuned classifiers of one plan (dropout seeds) and for two epochs of one
# masked-LM run; the other exported files equal the first input's; the average classifies
# and fills masks; NEW@best names it. Refusals (one line, non-zero exit, nothing pushed):
# other labels or dropout (config.json), another tokenizer, one revision twice, a name
# taken, fewer than two, a missing revision, a bad name.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" soup "${1:-}"
B=$DATA_ROOT/banking77
need average_setup "no WikiText-2 at $DATA" -f "$DATA/train.txt"
need average_setup "no BANKING77 at $B" -f "$B/train.csv"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
DB=$T/a.db

small_training_setup average_setup 120000 || exit 1
# Two safetensors files hold the same tensors (names, dtypes, shapes, bytes); their headers'
# layout may differ (numpy's writer is not maskd's).
same_tensors() {  # a, b
  $PY - "$1" "$2" <<'PY'
import json, struct, sys
def read(p):
    d = open(p, "rb").read()
    (n,) = struct.unpack("<Q", d[:8])
    h = json.loads(d[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], d[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
a, b = read(sys.argv[1]), read(sys.argv[2])
if a.keys() != b.keys():
    sys.exit(f"names differ: {sorted(a.keys() ^ b.keys())[:3]}")
bad = [k for k in a if a[k] != b[k]]
if bad:
    sys.exit(f"{len(bad)} of {len(a)} tensors differ, first {bad[0]}")
PY
}
tensors_equal() {  # name, a, b
  local why
  why=$(same_tensors "$2" "$3" 2>&1) && pass "$1" || fail "$1" "${why:-$2 or $3 unreadable}"
}
"$M" train --db "$DB" --name base --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --batch 8 --max-steps 6 --checkpoint-steps 3 --threads 1 --quiet >/dev/null 2>"$T/train.err" ||
  { fail average_setup "$(tail -2 "$T/train.err")"; exit 1; }
# Three intents (about 390 utterances): enough for a tiny model to learn them in 6 epochs.
printf '["card_arrival", "card_linking", "exchange_rate"]\n' > "$T/three.json"
awk -F, 'NR == 1 || $NF ~ /^(card_arrival|card_linking|exchange_rate)\r?$/' "$B/train.csv" > "$T/tr.csv"
awk -F, 'NR == 1 || $NF ~ /^(card_arrival|card_linking|exchange_rate)\r?$/' "$B/test.csv" > "$T/te.csv"
ft=(--db "$DB" --model base --train "$T/tr.csv" --label-column category --labels "$T/three.json"
    --max-length 32 --batch 16 --lr 1e-2 --threads 1 --seed 3 --epochs 6 --quiet)
for s in 1 2 3; do
  "$M" finetune "${ft[@]}" --dropout-seed $s --name "c$s" 2>"$T/ft.err" || { fail average_setup "$(tail -2 "$T/ft.err")"; exit 1; }
done

# Three classifiers: maskd's average against numpy's over the same revisions' exports.
out=$("$M" average --db "$DB" --name soup c1@best c2@best c3@best 2>&1); rc=$?
[ $rc = 0 ] && grep -q '^averaged 3 revisions into soup@' <<<"$out" && pass average_classifiers_pushed ||
  fail average_classifiers_pushed "rc $rc: $out"
for m in c1 c2 c3 soup; do "$M" export --db "$DB" "$m@best" "$T/x-$m" >/dev/null 2>&1 || fail average_export "$m"; done
$PY scripts/average-weights "$T/np-soup" "$T/x-c1" "$T/x-c2" "$T/x-c3" 2>"$T/np.err" || fail average_numpy "$(cat "$T/np.err")"
tensors_equal average_classifiers_equal_numpy "$T/x-soup/model.safetensors" "$T/np-soup/model.safetensors"
diffs=""; for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json; do
  cmp -s "$T/x-soup/$f" "$T/x-c1/$f" || diffs+="$f "; done
[ -z "$diffs" ] && pass average_other_files_first_inputs || fail average_other_files_first_inputs "differ: $diffs"
# Not one of its inputs: the average differs from each.
same=""; for m in c1 c2 c3; do cmp -s "$T/x-soup/model.safetensors" "$T/x-$m/model.safetensors" && same+="$m "; done
[ -z "$same" ] && pass average_differs_from_inputs || fail average_differs_from_inputs "equal to $same"
# Served as a classifier, by NAME@best and NAME.
a=$("$M" classify --db "$DB" --model soup@best "my card has not arrived" 2>"$T/cls.err") &&
  b=$("$M" classify --db "$DB" --model-dir "$T/np-soup" "my card has not arrived" 2>>"$T/cls.err") &&
  [ -n "$a" ] && [ "$a" = "$b" ] && pass average_classifies || fail average_classifies "$a / $b $(tail -1 "$T/cls.err")"
msg=$(sqlite3 "$DB" "SELECT r.message FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'soup'")
grep -q '^Average of c1@best (........), c2@best (........), c3@best (........)$' <<<"$msg" && pass average_message_names_inputs ||
  fail average_message_names_inputs "$msg"

# Many inputs: the default message names as many as a revision's message holds (255 bytes), then how many more.
many=(c1@{1..6} c2@{1..6} c3@{1..6})
"$M" average --db "$DB" --name soup18 "${many[@]}" --quiet 2>"$T/18.err"; rc=$?
msg=$(sqlite3 "$DB" "SELECT r.message FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'soup18'")
[ $rc = 0 ] && [ ${#msg} -le 255 ] && grep -qE '^Average of c1@1 \(........\), .* and [0-9]+ more$' <<<"$msg" &&
  pass "average_many_inputs_message_cut (${#msg} bytes)" || fail average_many_inputs_message_cut "rc $rc: $msg $(cat "$T/18.err")"
# The inputs in another order, against numpy's average in that order too. (Three float32
# values sum exactly in double almost always, so this does not show the order is kept;
# it checks the reversed call and the --json summary.)
"$M" average --db "$DB" --name soup-rev c3@best c2@best c1@best --json >"$T/rev.json" 2>"$T/rev.err" &&
  "$M" export --db "$DB" soup-rev "$T/x-rev" >/dev/null 2>&1 &&
  $PY scripts/average-weights "$T/np-rev" "$T/x-c3" "$T/x-c2" "$T/x-c1" 2>/dev/null
tensors_equal average_reversed_equals_numpy "$T/x-rev/model.safetensors" "$T/np-rev/model.safetensors"
ok average_json_summary $PY -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['model'] == 'soup-rev' and \
d['revision'] == 1 and d['averaged'] == ['c3@best', 'c2@best', 'c1@best'] and len(d['commit']) == 40" "$T/rev.json"

# Two epochs of one masked-LM run (checkpoint averaging): numpy again, and fill-mask answers.
"$M" export --db "$DB" base@1 "$T/x-b1" >/dev/null 2>&1 && "$M" export --db "$DB" base@2 "$T/x-b2" >/dev/null 2>&1 &&
  "$M" average --db "$DB" --name base-avg base@1 base@2 --quiet >"$T/q.out" 2>"$T/mlm.err" &&
  "$M" export --db "$DB" base-avg "$T/x-bavg" >/dev/null 2>&1 &&
  $PY scripts/average-weights "$T/np-bavg" "$T/x-b1" "$T/x-b2" 2>/dev/null
tensors_equal average_mlm_equals_numpy "$T/x-bavg/model.safetensors" "$T/np-bavg/model.safetensors"
[ ! -s "$T/q.out" ] && pass average_quiet_prints_nothing || fail average_quiet_prints_nothing "$(cat "$T/q.out")"
a=$("$M" fill-mask --db "$DB" --model base-avg "the [MASK] of the" 2>&1) &&
  b=$("$M" fill-mask --model-dir "$T/np-bavg" "the [MASK] of the" 2>&1) && [ "$a" = "$b" ] &&
  pass average_mlm_fills_masks || fail average_mlm_fills_masks "$a / $b"

# Refusals: one line naming the problem, status 1 (2 for the command line), nothing pushed.
awk 'NR == 1 || NR % 25 == 0' "$B/train.csv" > "$T/tr77.csv"
"$M" finetune "${ft[@]}" --train "$T/tr77.csv" --labels "$B/categories.json" --epochs 1 --max-steps 2 --name many 2>/dev/null
"$M" finetune "${ft[@]}" --hidden-dropout-prob 0 --name nodrop 2>/dev/null
"$M" finetune "${ft[@]}" --validation "$T/te.csv" --epochs 1 --max-steps 2 --name withval 2>/dev/null
before=$(sqlite3 "$DB" "SELECT COUNT(*) FROM revisions")
refuse() {  # name, wanted status, needle, args... (of maskd $cmd)
  local name=$1 want=$2 needle=$3; shift 3
  local err rc
  err=$("$M" "${cmd:-average}" --db "$DB" "$@" 2>&1 >/dev/null); rc=$?
  err=$(grep -v '^maskd: note' <<<"$err")
  if [ $rc = "$want" ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -qF -- "$needle" <<<"$err"; then pass "$name"
  else fail "$name" "rc $rc (wanted $want), stderr: $err (wanted $needle)"; fi
}
refuse average_refuses_other_labels 1 'c1@best and many@best are not one model: their config.json differ in "id2label"' \
  --name x c1@best many@best
refuse average_refuses_other_dropout 1 'their config.json differ in "hidden_dropout_prob"' --name x c1@best nodrop@best
refuse average_refuses_mlm_with_classifier 1 'are not one model' --name x base@2 c1@best
best1=$(sqlite3 "$DB" "SELECT r.seq FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'c1' AND r.id = m.best_revision")
refuse average_refuses_one_revision_twice 1 "c1@best and c1@$best1 are one revision (c1@$best1)" --name x c1@best "c1@$best1"
refuse average_refuses_taken_name 1 '--name: a repository named soup exists' --name soup c1@best c3@best
sqlite3 "$DB" "INSERT INTO runs(name, config, status, created) VALUES ('queued-run', '{}', 'created', 0)" 2>"$T/sql.err" ||
  fail average_setup_run "$(cat "$T/sql.err")"
refuse average_refuses_a_runs_name 1 '--name: queued-run is a training run' --name queued-run c1@best c3@best
refuse average_refuses_long_message 2 '--message: 1 to 255 bytes, got 256' --name x --message "$(printf 'm%.0s' $(seq 256))" c1@best c2@best
"$M" export --db "$DB" c1@1 "$T/x-c1-1" >/dev/null 2>&1 && "$M" import --db "$DB" "$T/x-c1-1" twin1 >/dev/null 2>&1 &&
  "$M" import --db "$DB" "$T/x-c1-1" twin2 >/dev/null 2>&1 || fail average_setup_twins "import failed"
refuse average_refuses_the_same_weights_twice 1 'twin1 and twin2 hold the same weights; give each once' --name x twin1 twin2
refuse average_refuses_missing_revision 1 'c1@9' --name x c1@9 c2@best
refuse average_refuses_missing_model 1 'nosuch' --name x nosuch c2@best
refuse average_refuses_one_input 2 'expected two or more revisions' --name x c1@best
refuse average_needs_name 2 '--name is required' c1@best c2@best
refuse average_refuses_bad_name 2 '--name' --name 'bad name!' c1@best c2@best
refuse average_refuses_no_store 1 'no store at' --db "$T/none.db" --name x c1@best c2@best
[ ! -e "$T/none.db" ] && pass average_no_store_made || fail average_no_store_made "a store was created"
# Another tokenizer: a second base trained on its own tokenizer, fine-tuned the same way.
tail -c 120000 "$DATA/train.txt" > "$T/tr2.txt"
"$M" tokenizer train --input "$T/tr2.txt" --vocab-size 300 --out "$T/tok2.json" --threads 1 >/dev/null 2>&1 &&
  "$M" prepare --tokenizer "$T/tok2.json" --input "$T/tr2.txt" --split train --seq-len 32 --out "$T/train2" --quiet >/dev/null 2>&1 &&
  "$M" train --db "$DB" --name base2 --tokenizer "$T/tok2.json" --train "$T/train2" --config "$T/cfg.json" \
    --batch 8 --max-steps 2 --threads 1 --quiet >/dev/null 2>"$T/b2.err" || fail average_setup_base2 "$(tail -2 "$T/b2.err")"
refuse average_refuses_other_tokenizer 1 'base@2 and base2@1 are not one model: their tokenizer.json differ' --name x base@2 base2@1
before2=$(sqlite3 "$DB" "SELECT COUNT(*) FROM revisions")
left=$(sqlite3 "$DB" "SELECT (SELECT COUNT(*) FROM blob_readers) + (SELECT COUNT(*) FROM blob_chunks WHERE sha256 LIKE '~%')")
[ "$left" = 0 ] && pass average_refusals_leave_no_pin_or_stream || fail average_refusals_leave_no_pin_or_stream "$left rows left"
[ "$before2" = $((before + 3)) ] && [ "$(sqlite3 "$DB" "SELECT COUNT(*) FROM models WHERE name = 'x'")" = 0 ] &&
  pass average_refusals_push_nothing || fail average_refusals_push_nothing "revisions $before -> $before2 (1 trained, 2 imported)"

# Memory: the weights stream through the store's 16 MB chunks (a reader's, the writer's), so
# averaging two 100 MB revisions peaks well below one of them (about 50 MB, whatever the size).
# The two are HF folders of the tiny masked LM's layout widened (H 512, I 2048, 8 layers),
# random numbers, imported.
make_big() {
$PY - "$T/x-b1" "$T/big1" "$T/big2" <<'PY'
import json, os, re, shutil, struct, sys
import numpy as np
src, outs = sys.argv[1], sys.argv[2:]
d = open(os.path.join(src, "model.safetensors"), "rb").read()
(n,) = struct.unpack("<Q", d[:8])
head = json.loads(d[8:8 + n]); head.pop("__metadata__", None)
cfg = json.load(open(os.path.join(src, "config.json")))
cfg.update(hidden_size=512, intermediate_size=2048, num_attention_heads=8, num_hidden_layers=8)
dims = {16: 512, 32: 2048}
tensors = {}
for name, v in head.items():
    shape = [dims.get(x, x) for x in v["shape"]]
    m = re.match(r"(.*\.layer\.)(\d+)(\..*)", name)
    for k in (range(8) if m else [None]):
        if m and m.group(2) != "0":
            break
        tensors[f"{m.group(1)}{k}{m.group(3)}" if m else name] = shape
for seed, out in enumerate(outs):
    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if f not in ("model.safetensors", "config.json"):
            shutil.copy(os.path.join(src, f), out)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    h, blobs, at = {}, [], 0
    for name in sorted(tensors):
        b = (rng.standard_normal(tensors[name], dtype=np.float32) * 0.02).tobytes()
        h[name] = {"dtype": "F32", "shape": tensors[name], "data_offsets": [at, at + len(b)]}
        blobs.append(b); at += len(b)
    text = json.dumps(h).encode(); text += b" " * (-len(text) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs: f.write(b)
PY
}
if [ "${MASKD_SANITIZER_LOGS:-}" = 1 ]; then
  echo "SKIP average_streams_weights: the peak counts ASan's quarantine in the sanitizer build"
elif make_big && "$M" import --db "$DB" "$T/big1" big1 >/dev/null 2>"$T/big.err" && "$M" import --db "$DB" "$T/big2" big2 >/dev/null 2>>"$T/big.err"; then
  size=$(sqlite3 "$DB" "SELECT b.size FROM blobs b JOIN revisions r ON r.weights = b.sha256 JOIN models m ON m.id = r.model_id
                        WHERE m.name = 'big1'")
  /usr/bin/time -o "$T/peak" -f %M "$M" average --db "$DB" --name big-avg big1 big2 --quiet >/dev/null 2>"$T/avg.err"; rc=$?
  peak=$(tail -1 "$T/peak")
  made=$(sqlite3 "$DB" "SELECT COUNT(*) FROM models WHERE name = 'big-avg'")
  if [ $rc = 0 ] && [ "$made" = 1 ] && [ -n "$peak" ] && [ "${size:-0}" -gt 90000000 ] && [ $((peak * 1024)) -lt $((size * 3 / 4)) ]; then
    pass "average_streams_weights (peak RSS $peak kB, weights $size bytes)"
  else fail average_streams_weights "rc $rc, big-avg made: $made, peak RSS ${peak:-?} kB against weights of ${size:-?} bytes $(tail -1 "$T/avg.err")"; fi
else fail average_streams_weights "importing the 100 MB models failed: $(tail -2 "$T/big.err")"; fi

# ---- maskd evaluate ----
# A run's own best revision on the rows it held out gives the figures the run recorded for it
# (the same rows, rebuilt from the split's seed and checked by their hash; the same evaluation).
for m in c1 c2 c3; do
  "$M" evaluate --db "$DB" --model "$m@best" --held-out-of "$m" --json >"$T/ev-$m.json" 2>"$T/ev.err"
  rec=$(sqlite3 "$DB" "SELECT r.metrics FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = '$m' AND r.id = m.best_revision")
  ok "evaluate_held_out_equals_run_$m" $PY -c "
import json, sys
e = json.load(open(sys.argv[1])); r = json.loads(sys.argv[2])
assert e['examples'] == 40 and e['held_out_of'] == sys.argv[3], e
for k in ('loss', 'accuracy', 'macro_f1', 'weighted_f1'):
    assert abs(e[k] - r['eval_' + k]) <= 1e-7 * max(1, abs(r['eval_' + k])), (k, e[k], r['eval_' + k])
assert r['eval_macro_f1'] > 0.4, r   # a model that learnt (a constant guess scores 0.17), so the check can fail
" "$T/ev-$m.json" "$rec" "$m"
done
# A run trained with bf16 products is scored with them (the run's precision), to its recorded figures.
"$M" finetune "${ft[@]}" --precision bf16 --epochs 2 --name c16 2>"$T/ft.err" || fail evaluate_setup_bf16 "$(tail -1 "$T/ft.err")"
"$M" evaluate --db "$DB" --model c16@best --held-out-of c16 --json >"$T/ev-c16.json" 2>"$T/ev.err"
rec=$(sqlite3 "$DB" "SELECT r.metrics FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'c16' AND r.id = m.best_revision")
ok evaluate_held_out_bf16_run $PY -c "
import json, sys
e = json.load(open(sys.argv[1])); r = json.loads(sys.argv[2])
assert abs(e['loss'] - r['eval_loss']) <= 1e-7 * abs(r['eval_loss']) and abs(e['macro_f1'] - r['eval_macro_f1']) <= 1e-7, (e, r)
" "$T/ev-c16.json" "$rec"
# The soup on the same rows: its own figure (the runs differ only in dropout, so it is near theirs).
"$M" evaluate --db "$DB" --model soup --held-out-of c1 >"$T/ev-soup.txt" 2>"$T/ev.err" &&
  grep -q '^soup@1 on 40 examples of .*tr.csv held out by c1: loss [0-9.]* - accuracy 0\.[0-9]* - macro_f1 ' "$T/ev-soup.txt" &&
  pass evaluate_soup_held_out || fail evaluate_soup_held_out "$(cat "$T/ev-soup.txt" "$T/ev.err")"
# --data: accuracy and F1 against scikit-learn over maskd classify's predictions of the same texts.
"$M" evaluate --db "$DB" --model c2@best --data "$T/te.csv" --label-column category --json >"$T/ev-te.json" 2>"$T/ev.err" ||
  fail evaluate_data "$(cat "$T/ev.err")"
$PY - "$T/te.csv" "$M" "$DB" > "$T/sk.json" <<'PY'
import csv, json, subprocess, sys
from sklearn.metrics import accuracy_score, f1_score
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
out = subprocess.run([sys.argv[2], "classify", "--db", sys.argv[3], "--model", "c2@best", "--truncation", "--list", "--threads", "1", "--max-inputs", "0",
                      "--"] + [r["text"] for r in rows], capture_output=True, text=True, check=True)
pred = [x["label"] for x in json.loads(out.stdout)]
gold = [r["category"] for r in rows]
print(json.dumps({"n": len(rows), "accuracy": accuracy_score(gold, pred), "macro_f1": f1_score(gold, pred, average="macro"),
                  "weighted_f1": f1_score(gold, pred, average="weighted")}))
PY
ok evaluate_data_equals_sklearn $PY -c "
import json, sys
e = json.load(open(sys.argv[1])); k = json.load(open(sys.argv[2]))
assert e['examples'] == k['n'] and k['macro_f1'] > 0.4, (e, k)
for m in ('accuracy', 'macro_f1', 'weighted_f1'):
    assert abs(e[m] - k[m]) < 1e-12, (m, e[m], k[m])
" "$T/ev-te.json" "$T/sk.json"
# Integer labels that are not 0..n-1 (star ratings 1, 5, 10), fine-tuned without a labels file:
# the run names its labels after the cells ("1", "10", "5" by value: ids 0, 2, 1), and evaluate
# reads the same cells by those names, on the run's held-out rows and on another file, where
# every cell is both a name and an integer (an id past the end, or another label's).
for f in tr te; do
  awk -F, 'BEGIN { OFS = "," } NR == 1 { print; next }
           { sub(/\r$/, ""); $NF = $NF == "card_arrival" ? 1 : $NF == "card_linking" ? 5 : 10; print }' \
    "$T/$f.csv" > "$T/$f-stars.csv"
done
"$M" finetune --db "$DB" --model base --train "$T/tr-stars.csv" --label-column category --max-length 32 --batch 16 \
  --lr 1e-2 --threads 1 --seed 3 --epochs 2 --quiet --name stars 2>"$T/ft.err" ||
  fail evaluate_setup_stars "$(tail -1 "$T/ft.err")"
"$M" evaluate --db "$DB" --model stars@best --held-out-of stars --json >"$T/ev-stars.json" 2>"$T/ev.err"
rec=$(sqlite3 "$DB" "SELECT r.metrics FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'stars' AND r.id = m.best_revision")
ok evaluate_integer_names_held_out $PY -c "
import json, sys
e = json.load(open(sys.argv[1])); r = json.loads(sys.argv[2])
assert e['examples'] == 40 and abs(e['macro_f1'] - r['eval_macro_f1']) <= 1e-7 and abs(e['loss'] - r['eval_loss']) <= 1e-7 * r['eval_loss'], (e, r)
" "$T/ev-stars.json" "$rec"
"$M" evaluate --db "$DB" --model stars@best --data "$T/te-stars.csv" --label-column category --json >"$T/ev-st.json" 2>"$T/ev.err"
ok evaluate_integer_names_data $PY -c "
import json, sys
e = json.load(open(sys.argv[1]))
assert e['examples'] == sum(1 for _ in open(sys.argv[2])) - 1, e
" "$T/ev-st.json" "$T/te-stars.csv"
# Refusals: one line, status 1 (2 for the command line).
cmd=evaluate
refuse evaluate_needs_model 2 '--model is required' --data "$T/te.csv"
refuse evaluate_needs_one_source 2 'give one of --data FILE and --held-out-of RUN' --model c1
refuse evaluate_not_both_sources 2 'give one of --data FILE and --held-out-of RUN' --model c1 --data "$T/te.csv" --held-out-of c1
refuse evaluate_train_needs_held_out 2 '--train goes with --held-out-of' --model c1 --data "$T/te.csv" --train "$T/tr.csv"
refuse evaluate_refuses_bad_precision 2 "--precision: expected fp32 or bf16, got 'fp8'" --model c1 --data "$T/te.csv" --precision fp8
refuse evaluate_refuses_mlm 1 'base is a fill-mask model; evaluate scores text classifiers' --model base --data "$T/te.csv"
refuse evaluate_refuses_missing_model 1 'nosuch' --model nosuch --data "$T/te.csv"
refuse evaluate_refuses_missing_run 1 '--held-out-of' --model c1 --held-out-of nosuch
refuse evaluate_refuses_changed_train_file 1 'is not the training file run c1 split' --model c1 --held-out-of c1 --train "$T/te.csv"
# The same rows shuffled split into the same indices: the rows there are other ones (most of
# them trained on), which the code before scored as c1's held-out rows.
$PY - "$T/tr.csv" "$T/tr_shuffled.csv" <<'PY'
import random, sys
lines = open(sys.argv[1], newline="").read().splitlines(True)
body = lines[1:]
random.Random(3).shuffle(body)
open(sys.argv[2], "w", newline="").writelines(lines[:1] + body)
PY
refuse evaluate_refuses_shuffled_train_file 1 "is not the training file run c1 split: its 40 held-out rows (texts and labels) differ" \
  --model c1 --held-out-of c1 --train "$T/tr_shuffled.csv"
refuse evaluate_refuses_run_with_validation_file 1 'run withval held nothing out of its training file (it had a validation file)' \
  --model c1 --held-out-of withval
line=$(awk -F, 'NR > 1 && $NF !~ /^(card_arrival|card_linking|exchange_rate)\r?$/ {print NR; exit}' "$T/tr77.csv")
refuse evaluate_refuses_unknown_label 1 "tr77.csv: line $line (row $((line - 1))): label" --model c1 \
  --data "$T/tr77.csv" --label-column category
refuse evaluate_refuses_long_max_length 1 "--max-length: 500 is more than the model's" --model c1 --data "$T/te.csv" \
  --label-column category --max-length 500
refuse evaluate_refuses_missing_file 1 'nowhere.csv' --model c1 --data "$T/nowhere.csv"
