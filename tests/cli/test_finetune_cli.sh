#!/usr/bin/env bash
# maskd finetune from the command line: a tiny masked LM trained for a few steps with
# maskd train, then fine-tuned on a slice of BANKING77 (held-out validation, a test set):
# revisions pushed per epoch with a classifier's config.json (id2label, label2id,
# *ForSequenceClassification), the run's config and epochs (F1, confusions) in the store,
# NAME@best and the test metrics, maskd runs / models, --json, --export-plan, and the
# refusals (one line on stderr, non-zero exit, nothing recorded).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" finetunecli "${1:-}"
B=$DATA_ROOT/banking77
[ -f "$DATA/train.txt" ] || { fail finetune_cli_setup "no WikiText-2 at $DATA"; exit 1; }
[ -f "$B/train.csv" ] || { fail finetune_cli_setup "no BANKING77 at $B"; exit 1; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

small_training_setup finetune_cli_setup 120000 || exit 1
"$M" train --db "$T/a.db" --name base --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --batch 8 --max-steps 6 --threads 1 --quiet >/dev/null 2>"$T/train.err" || { fail finetune_cli_setup "$(tail -2 "$T/train.err")"; exit 1; }
# Every 25th training row (all 77 intents, 400 examples) and every 20th test row.
awk 'NR == 1 || NR % 25 == 0' "$B/train.csv" > "$T/tr.csv"
awk 'NR == 1 || NR % 20 == 0' "$B/test.csv" > "$T/te.csv"
base=(--db "$T/a.db" --model base --train "$T/tr.csv" --label-column category --labels "$B/categories.json"
      --max-length 32 --batch 16 --lr 1e-3 --threads 1 --seed 3)

# Refusals: one line naming the problem, non-zero exit, no run recorded.
refuse() {  # name, needle, args...
  local name=$1 needle=$2; shift 2
  local out rc
  out=$("$M" finetune "$@" 2>&1 >/dev/null); rc=$?
  out=$(grep -v '^maskd: note' <<<"$out")
  if [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF -- "$needle" <<<"$out"; then pass "$name"
  else fail "$name" "rc $rc, stderr: $out (wanted $needle)"; fi
}
refuse finetune_cli_refuses_missing_column "text_col" "${base[@]}" --name x --text-column text_col
refuse finetune_cli_refuses_label_column "label" "${base[@]:0:6}" --labels "$B/categories.json" --name x
printf '["card_arrival", "card_linking"]\n' > "$T/two.json"
refuse finetune_cli_refuses_unknown_label "train:" "${base[@]}" --labels "$T/two.json" --name x
refuse finetune_cli_refuses_unknown_model 'nosuch' "${base[@]}" --model nosuch --name x
refuse finetune_cli_refuses_bad_model_name '--model' "${base[@]}" --model 'bad name!' --name x
refuse finetune_cli_refuses_bad_new_name '--name' "${base[@]}" --name 'bad name!'
refuse finetune_cli_refuses_missing_file "nowhere.csv" "${base[@]}" --train "$T/nowhere.csv" --name x
refuse finetune_cli_refuses_bad_lr "--lr: expected" "${base[@]}" --name x --lr -1
refuse finetune_cli_refuses_long_max_length "positions" "${base[@]}" --name x --max-length 4000
refuse finetune_cli_needs_name "--name is required" "${base[@]}"
# A mistyped --db names the missing store, and creates no empty one.
refuse finetune_cli_refuses_no_store "no store at $T/none.db" "${base[@]}" --db "$T/none.db" --name x
if [ -e "$T/none.db" ]; then fail finetune_cli_no_store_left_absent "$T/none.db was created"
else pass finetune_cli_no_store_left_absent; fi
refuse finetune_cli_refuses_base_as_name "--name: base is the repository of the base model" "${base[@]}" --name base
# --job is maskd serve's hand-off: the job's description only, a running text-classification job, no command-only field.
refuse finetune_cli_job_takes_no_options "--job runs the job as it was queued" --db "$T/a.db" --job 1 --work-dir "$T" --model base
refuse finetune_cli_job_not_an_id '--job: "x" is not a job id' --db "$T/a.db" --job x --work-dir "$T"
sqlite3 "$T/a.db" "INSERT INTO jobs(id, kind, status, params, created) VALUES (8, 'train', 'running', '{\"name\": \"q\"}', 0),
  (9, 'train', 'running', '{\"task\": \"text-classification\", \"model\": \"base\", \"train\": \"tr.csv\", \"name\": \"q\", \"export_plan\": \"/tmp/x\"}', 0),
  (10, 'train', 'queued', '{\"task\": \"text-classification\"}', 0)"
refuse finetune_cli_job_not_finetune "job 8 is a training job, not a fine-tuning job" --db "$T/a.db" --job 8 --work-dir "$T/w" --data-dir "$T"
refuse finetune_cli_job_command_field "export_plan is not a job's field" --db "$T/a.db" --job 9 --work-dir "$T/w" --data-dir "$T"
refuse finetune_cli_job_not_claimed "job 10 is queued" --db "$T/a.db" --job 10 --work-dir "$T/w" --data-dir "$T"
n=$(sqlite3 "$T/a.db" "SELECT COUNT(*) FROM runs WHERE config LIKE '%text-classification%'")   # cls, cls2, cls3, cls5, cls6
[ "$n" = 0 ] && pass finetune_cli_refusals_record_nothing || fail finetune_cli_refusals_record_nothing "$n runs recorded"

# A run: 2 epochs, held-out validation, a test set, a JSON summary.
"$M" finetune "${base[@]}" --test "$T/te.csv" --name cls --epochs 2 --json >"$T/sum.json" 2>"$T/a.err"; rc=$?
[ $rc = 0 ] && [ "$(sqlite3 "$T/a.db" "SELECT status FROM runs WHERE name = 'cls'")" = done ] && pass finetune_cli_run_done ||
  fail finetune_cli_run_done "rc $rc: $(tail -3 "$T/a.err")"
grep -q '^epoch 1/2 step 1/[0-9]* loss [0-9.]* [0-9]* ex/s' "$T/a.err" &&
  grep -q '^epoch 2/2: loss [0-9.]* - val_loss [0-9.]* - val_accuracy [0-9.]* - val_macro_f1 [0-9.]* - val_weighted_f1' "$T/a.err" &&
  grep -q '^test (best epoch [12], cls@[12])' "$T/a.err" && pass finetune_cli_progress_lines ||
  fail finetune_cli_progress_lines "$(head -8 "$T/a.err")"
msgs=$(sqlite3 "$T/a.db" "SELECT r.message FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'cls' ORDER BY seq" | tr '\n' '|')
[ "$msgs" = "Training in progress epoch 1|Training in progress epoch 2|" ] && pass finetune_cli_epoch_revisions ||
  fail finetune_cli_epoch_revisions "$msgs"
"$M" export --db "$T/a.db" cls@best "$T/out" >/dev/null 2>"$T/export.err"
$PY - "$T/out/config.json" "$B/categories.json" <<'EOF' && pass finetune_cli_config_id2label || fail finetune_cli_config_id2label "$(cat "$T/export.err") $(head -c 300 "$T/out/config.json")"
import json, sys
c = json.load(open(sys.argv[1])); names = json.load(open(sys.argv[2]))
assert c["architectures"] == ["RobertaForSequenceClassification"], c["architectures"]
assert c["id2label"] == {str(i): n for i, n in enumerate(names)}, "id2label"
assert c["label2id"] == {n: i for i, n in enumerate(names)}, "label2id"
assert c["problem_type"] == "single_label_classification", c.get("problem_type")
EOF
# The exported folder is what transformers loads as RobertaForSequenceClassification: torch's
# own modules (scripts/torch_cls.py) take its tensors by HF name, strictly, and give the
# logits maskd classify gives for the same text (its ids from maskd's tokenizer).
text="I still have not received my new card"
"$M" classify --model-dir "$T/out" --top-k all --function none "$text" >"$T/cls.json" 2>"$T/cls.err" &&
  printf '%s\n' "$text" | "$M" tokenizer encode --tokenizer "$T/out/tokenizer.json" >"$T/ids.txt" 2>>"$T/cls.err"
PYTHONPATH="$PWD/scripts" $PY - "$T/out" "$T/ids.txt" "$T/cls.json" <<'EOF' && pass finetune_cli_export_loads_in_torch || fail finetune_cli_export_loads_in_torch "$(grep -v '^maskd: note' "$T/cls.err")"
import json, os, sys, torch
from torch_cls import TorchCls
from torch_reference import read_safetensors
d = sys.argv[1]
m = TorchCls(json.load(open(os.path.join(d, "config.json"))))
_, sd = read_safetensors(os.path.join(d, "model.safetensors"))
m.load_hf_state_dict({k: v.copy() for k, v in sd.items()}, strict=True)
m.eval()
ids = [int(x) for x in open(sys.argv[2]).read().split()]
with torch.no_grad():
    _, logits = m(torch.tensor([ids]))
got = {e["label"]: e["score"] for e in json.load(open(sys.argv[3]))}
want = {m.cfg.labels[i]: float(v) for i, v in enumerate(logits[0])}
assert set(got) == set(want), "labels differ"
worst = max(abs(got[k] - want[k]) for k in want)
assert worst < 1e-4, f"logits differ by {worst}"
EOF
ntest=$($PY -c 'import csv, sys; print(sum(1 for _ in csv.DictReader(open(sys.argv[1], newline=""))))' "$T/te.csv")
$PY - "$T/a.db" "$T/sum.json" "$ntest" <<'EOF' && pass finetune_cli_store_records || fail finetune_cli_store_records "see above"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1]); s = json.load(open(sys.argv[2])); ntest = int(sys.argv[3])
cfg = json.loads(db.execute("SELECT config FROM runs WHERE name = 'cls'").fetchone()[0])
assert cfg["task"] == "text-classification" and cfg["model"] == "base" and len(cfg["labels"]) == 77, cfg
sp = cfg["split"]
assert sp["seed"] == 3 and sp["fraction"] == 0.1 and sp["validation"] == 40 and sp["train"] == 360 and len(sp["validation_indices_sha256"]) == 64, sp
rows = db.execute("SELECT e.epoch, e.macro_f1, e.weighted_f1, e.confusion FROM epoch_metrics e JOIN runs r ON r.id = e.run_id WHERE r.name = 'cls' ORDER BY e.epoch").fetchall()
assert len(rows) == 2 and all(r[1] is not None and r[2] is not None for r in rows), rows
conf = json.loads(rows[-1][3]); assert isinstance(conf, list) and len(conf) <= 10 and all({"true", "pred", "count"} <= set(c) for c in conf), conf
best = db.execute("SELECT r.seq FROM models m JOIN revisions r ON r.id = m.best_revision WHERE m.name = 'cls'").fetchone()[0]
res = json.loads(db.execute("SELECT results FROM runs WHERE name = 'cls'").fetchone()[0])
assert res["best_revision"] == best and res["test"]["examples"] == ntest and 0 <= res["test"]["accuracy"] <= 1, res
m = json.loads(db.execute("SELECT r.metrics FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'cls' AND r.seq = ?", (best,)).fetchone()[0])
assert "test_macro_f1" in m and "eval_macro_f1" in m, m
assert s["status"] == "done" and s["best"]["revision"] == best and len(s["epochs"]) == 2 and s["test"]["examples"] == ntest, s
EOF
"$M" runs --db "$T/a.db" > "$T/runs.txt" 2>&1 && grep -q 'cls' "$T/runs.txt" && grep -q 'done' "$T/runs.txt" &&
  pass finetune_cli_runs_lists_it || fail finetune_cli_runs_lists_it "$(cat "$T/runs.txt")"

# The same seed gives the same weights; --export-plan writes the plan and the initial classifier only.
"$M" finetune "${base[@]}" --name cls2 --epochs 1 --max-steps 4 --quiet 2>/dev/null &&
  "$M" finetune "${base[@]}" --name cls3 --epochs 1 --max-steps 4 --quiet 2>/dev/null
w2=$(sqlite3 "$T/a.db" "SELECT r.weights FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'cls2'")
w3=$(sqlite3 "$T/a.db" "SELECT r.weights FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'cls3'")
[ -n "$w2" ] && [ "$w2" = "$w3" ] && pass finetune_cli_same_seed_same_weights || fail finetune_cli_same_seed_same_weights "$w2 / $w3"
# --dropout-seed: the seed's value gives the seed's weights; another gives others, and the run records it.
"$M" finetune "${base[@]}" --name cls5 --epochs 1 --max-steps 4 --dropout-seed 3 --quiet 2>/dev/null &&
  "$M" finetune "${base[@]}" --name cls6 --epochs 1 --max-steps 4 --dropout-seed 4 --quiet 2>/dev/null
w5=$(sqlite3 "$T/a.db" "SELECT r.weights FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'cls5'")
w6=$(sqlite3 "$T/a.db" "SELECT r.weights FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'cls6'")
ds=$(sqlite3 "$T/a.db" "SELECT json_extract(config, '$.dropout_seed') || ',' || json_extract(config, '$.seed') FROM runs WHERE name = 'cls6'")
[ -n "$w5" ] && [ "$w5" = "$w2" ] && [ -n "$w6" ] && [ "$w6" != "$w2" ] && [ "$ds" = "4,3" ] &&
  pass finetune_cli_dropout_seed || fail finetune_cli_dropout_seed "weights $w5 / $w6 against $w2; recorded dropout_seed,seed: $ds"
# --hidden-dropout-prob, --attention-probs-dropout-prob, --classifier-dropout over the base's 0.1
# (from_pretrained's keywords): all three 0 is no dropout, so another --dropout-seed changes
# nothing; the pushed config.json, the run and the plan (the PyTorch side's config) say so.
nod=(--hidden-dropout-prob 0 --attention-probs-dropout-prob 0 --classifier-dropout 0 --epochs 1 --max-steps 4 --quiet)
"$M" finetune "${base[@]}" --name nod1 "${nod[@]}" 2>"$T/nod.err" &&
  "$M" finetune "${base[@]}" --name nod2 "${nod[@]}" --dropout-seed 9 2>>"$T/nod.err" &&
  "$M" finetune "${base[@]}" --export-plan "$T/plan-nod" "${nod[@]}" 2>>"$T/nod.err" &&
  "$M" export --db "$T/a.db" nod1 "$T/out-nod" >/dev/null 2>>"$T/nod.err"
w10=$(sqlite3 "$T/a.db" "SELECT r.weights FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'nod1'")
w11=$(sqlite3 "$T/a.db" "SELECT r.weights FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'nod2'")
$PY - "$T/a.db" "$T/out-nod/config.json" "$T/plan-nod/init/config.json" <<'EOF' && [ -n "$w10" ] && [ "$w10" = "$w11" ] && [ "$w10" != "$w2" ] &&
import json, sqlite3, sys
cfg = json.loads(sqlite3.connect(sys.argv[1]).execute("SELECT config FROM runs WHERE name = 'nod1'").fetchone()[0])
keys = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")
assert [cfg[k] for k in keys] == [0, 0, 0], [cfg.get(k) for k in keys]
for f in sys.argv[2:]:
    c = json.load(open(f)); assert [c[k] for k in keys] == [0, 0, 0], (f, [c.get(k) for k in keys])
EOF
  pass finetune_cli_dropout_options || fail finetune_cli_dropout_options "weights $w10 / $w11 (with dropout $w2): $(tail -2 "$T/nod.err")"
# One of them alone: the others stay the config's (the classifier's 0.3 over its null).
"$M" finetune "${base[@]}" --name nod3 --classifier-dropout 0.3 --epochs 1 --max-steps 2 --quiet 2>/dev/null
c12=$(sqlite3 "$T/a.db" "SELECT json_extract(config, '$.hidden_dropout_prob') || ',' || json_extract(config, '$.attention_probs_dropout_prob') || ',' || json_extract(config, '$.classifier_dropout') FROM runs WHERE name = 'nod3'")
[ "$c12" = "0.1,0.1,0.3" ] && pass finetune_cli_dropout_option_alone || fail finetune_cli_dropout_option_alone "recorded $c12"
refuse finetune_cli_refuses_dropout_one "--hidden-dropout-prob: expected a number in [0, 1)" "${base[@]}" --name x --hidden-dropout-prob 1
"$M" finetune "${base[@]}" --test "$T/te.csv" --export-plan "$T/plan" --epochs 2 --quiet 2>"$T/plan.err"; rc=$?
split_sha=$(sqlite3 "$T/a.db" "SELECT json_extract(config, '$.split.validation_indices_sha256') FROM runs WHERE name = 'cls2'")
$PY - "$T/plan" "$ntest" "$T/tr.csv" "$split_sha" <<'EOF' && [ $rc = 0 ] && pass finetune_cli_export_plan || fail finetune_cli_export_plan "rc $rc $(cat "$T/plan.err")"
import csv, hashlib, json, os, sys
d = sys.argv[1]; p = json.load(open(os.path.join(d, "plan.json"))); S = p["sets"]
# The held-out split's rows: a partition of the file's rows, the run's recorded split (by its
# hash), each set's labels those of its rows in the file.
sp = p["split"]; rows = list(csv.DictReader(open(sys.argv[3])))
assert sp["seed"] == 3 and sp["fraction"] == 0.1 and len(sp["valid_rows"]) == 40 and len(sp["train_rows"]) == 360, sp["seed"]
assert sorted(sp["train_rows"] + sp["valid_rows"]) == list(range(400)) and sp["valid_rows"] == sorted(sp["valid_rows"])
assert hashlib.sha256(",".join(map(str, sp["valid_rows"])).encode()).hexdigest() == sys.argv[4], sys.argv[4]
for name, key in (("train", "train_rows"), ("valid", "valid_rows")):
    assert S[name]["labels"] == [p["labels"].index(rows[r]["category"]) for r in sp[key]], name
assert p["format"] == "maskd-finetune-plan" and p["version"] == 1 and p["pad_id"] == 3
assert len(p["labels"]) == 77 and len(S["train"]["ids"]) == 360 and len(S["valid"]["ids"]) == 40 and len(S["test"]["ids"]) == int(sys.argv[2])
assert max(len(r) for r in S["train"]["ids"]) <= 32 and len(set(r[0] for r in S["train"]["ids"])) == 1
o = p["order"]; assert len(o) == 2 and all(len(e) == 23 for e in o), [len(e) for e in o]
assert sorted(i for b in o[0] for i in b) == list(range(360)) and o[0] != o[1] and [len(b) for b in o[0]] == [16] * 22 + [8]
h = p["hyper"]; assert h["total_steps"] == 2 * 23 and h["batch"] == 16 and h["lr"] == 1e-3 and h["max_length"] == 32, h
assert os.path.getsize(os.path.join(d, "init", "model.safetensors")) > 0
c = json.load(open(os.path.join(d, "init", "config.json"))); assert len(c["id2label"]) == 77
EOF
"$M" finetune "${base[@]}" --export-plan "$T/plan2" --epochs 3 --max-steps 30 --quiet 2>/dev/null
$PY -c 'import json, sys; o = json.load(open(sys.argv[1]))["order"]; assert [len(e) for e in o] == [23, 7], [len(e) for e in o]' "$T/plan2/plan.json" &&
  pass finetune_cli_export_plan_max_steps || fail finetune_cli_export_plan_max_steps "order not cut at max_steps"
# A given validation file holds nothing out of train: no split in the plan.
"$M" finetune "${base[@]}" --validation "$T/te.csv" --export-plan "$T/plan-v" --max-steps 2 --quiet 2>/dev/null
$PY -c 'import json, sys; p = json.load(open(sys.argv[1])); assert p["split"] is None and len(p["sets"]["train"]["ids"]) == 400' \
  "$T/plan-v/plan.json" && pass finetune_cli_export_plan_no_split || fail finetune_cli_export_plan_no_split "split not null"
# A .json array of records (pandas' to_json(orient="records")) reads as the CSV does.
$PY -c 'import csv, json, sys; json.dump(list(csv.DictReader(open(sys.argv[1], newline=""))), open(sys.argv[2], "w"), indent=1)' \
  "$T/tr.csv" "$T/tr-records.json"
"$M" finetune "${base[@]}" --train "$T/tr-records.json" --export-plan "$T/plan-rec" --max-steps 2 --quiet 2>"$T/rec.err" &&
  "$M" finetune "${base[@]}" --export-plan "$T/plan-csv" --max-steps 2 --quiet 2>>"$T/rec.err" &&
  $PY -c 'import json, sys; a, b = (json.load(open(p))["sets"] for p in sys.argv[1:3]); assert a == b and len(a["train"]["ids"]) == 360' \
    "$T/plan-rec/plan.json" "$T/plan-csv/plan.json" 2>>"$T/rec.err" &&
  pass finetune_cli_json_array_of_records || fail finetune_cli_json_array_of_records "$(tail -1 "$T/rec.err")"
# Beside --labels, a label cell with spaces around it is its label (HF's ClassLabel.str2int strips);
# a cell that is no label is named with its file and line.
tr -d '\r' <"$T/tr.csv" | sed '1!s/,\([^,]*\)$/, \1 /' > "$T/tr-spaced.csv"   # (the file's CRLF ends dropped first)
"$M" finetune "${base[@]}" --train "$T/tr-spaced.csv" --export-plan "$T/plan-sp" --max-steps 2 --quiet 2>"$T/sp.err" &&
  $PY -c 'import json, sys; a, b = (json.load(open(p))["sets"] for p in sys.argv[1:3]); assert a == b' \
    "$T/plan-sp/plan.json" "$T/plan-csv/plan.json" 2>>"$T/sp.err" &&
  pass finetune_cli_spaced_label_cells || fail finetune_cli_spaced_label_cells "$(tail -1 "$T/sp.err")"
sed '3s/,[^,]*$/,no_such_intent/' "$T/tr.csv" > "$T/tr-bad.csv"
refuse finetune_cli_label_miss_names_file_line "train: $T/tr-bad.csv: line 3 (row 2): label 'no_such_intent' is not one of the 77 labels" \
  "${base[@]}" --train "$T/tr-bad.csv" --name x
# The limits of a classifier's labels (CONFIG_MAX_LABELS, CONFIG_LABEL_BYTES): the message gives the count and the limit.
$PY - "$B/categories.json" "$T" <<'EOF'
import json, sys
names = json.load(open(sys.argv[1]))
json.dump(names + ["extra_%d" % i for i in range(1025 - len(names))], open(sys.argv[2] + "/labels-1025.json", "w"))
json.dump(names + ["x" * 12000 + str(i) for i in range(3)], open(sys.argv[2] + "/labels-long.json", "w"))
EOF
refuse finetune_cli_refuses_too_many_labels "labels: 1025 labels, more than the limit of 1024 labels" "${base[@]}" \
  --labels "$T/labels-1025.json" --name x
refuse finetune_cli_refuses_long_label_names "labels: the 80 label names take 37" "${base[@]}" --labels "$T/labels-long.json" --name x
grep -qF "more than the limit of 32768 bytes" <<<"$("$M" finetune "${base[@]}" --labels "$T/labels-long.json" --name x 2>&1)" &&
  pass finetune_cli_long_label_names_limit || fail finetune_cli_long_label_names_limit "no limit in the message"
# --warmup-steps 0 takes the steps from --warmup-ratio, as transformers' get_warmup_steps
# (warmup_steps if warmup_steps > 0 else math.ceil(num_training_steps * warmup_ratio)).
"$M" finetune "${base[@]}" --export-plan "$T/plan-wu" --max-steps 40 --warmup-steps 0 --warmup-ratio 0.1 --quiet 2>"$T/wu.err" &&
  $PY -c 'import json, math, sys; h = json.load(open(sys.argv[1]))["hyper"]
assert h["total_steps"] == 40 and h["warmup_steps"] == math.ceil(40 * 0.1) == 4, h' "$T/plan-wu/plan.json" 2>>"$T/wu.err" &&
  pass finetune_cli_warmup_steps_zero_takes_ratio || fail finetune_cli_warmup_steps_zero_takes_ratio "$(tail -1 "$T/wu.err")"
n=$(sqlite3 "$T/a.db" "SELECT COUNT(*) FROM runs WHERE config LIKE '%text-classification%'")   # cls, cls2, cls3, cls5, cls6, nod1-3
[ "$n" = 8 ] && pass finetune_cli_export_plan_records_nothing || fail finetune_cli_export_plan_records_nothing "$n runs"

# --validation-fraction 0: no validation, every example trains, the last epoch is NAME@best and scores the test set.
"$M" finetune "${base[@]}" --test "$T/te.csv" --name cls7 --epochs 2 --validation-fraction 0 --json >"$T/all.json" 2>"$T/all.err"; rc=$?
$PY - "$T/a.db" "$T/all.json" "$T/all.err" <<'EOF' && [ $rc = 0 ] && pass finetune_cli_no_validation || fail finetune_cli_no_validation "rc $rc: $(tail -3 "$T/all.err")"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1]); summary = json.load(open(sys.argv[2])); err = open(sys.argv[3]).read()
assert "400 train, no validation" in err and "(no validation)" in err and "val_loss" not in err, err
cfg, res = db.execute("SELECT config, results FROM runs WHERE name = 'cls7'").fetchone()
cfg, res = json.loads(cfg), json.loads(res)
assert cfg["split"] is None and cfg["examples"]["train"] == 400 and cfg["examples"]["validation"] == 0, cfg
assert res["best_epoch"] == 2 and res["best_revision"] == 2 and res["test"]["macro_f1"] is not None, res
assert summary["best"]["epoch"] == 2 and summary["best"]["eval_macro_f1"] is None, summary
best = db.execute("SELECT r.seq FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = 'cls7' AND m.best_revision = r.id").fetchall()
assert best == [(2,)], best
ev = db.execute("SELECT eval_loss, macro_f1 FROM epoch_metrics WHERE run_id = (SELECT id FROM runs WHERE name = 'cls7')").fetchall()
assert len(ev) == 2 and all(v == (None, None) for v in ev), ev
EOF
refuse finetune_cli_refuses_fraction_one "--validation-fraction" "${base[@]}" --name x --validation-fraction 1
# ... and its plan: no valid set (null), which the PyTorch reference reads as "test with the last epoch".
"$M" finetune "${base[@]}" --test "$T/te.csv" --export-plan "$T/plan0" --epochs 2 --max-steps 30 --validation-fraction 0 \
  --quiet 2>"$T/plan0.err" && $PY scripts/torch_finetune.py "$T/plan0" --out "$T/plan0.json" --threads 1 --quiet \
  --test-weights best >"$T/torch0.out" 2>&1; rc=$?
$PY - "$T/plan0" "$T/plan0.json" <<'EOF' && [ $rc = 0 ] && pass finetune_cli_no_validation_plan || fail finetune_cli_no_validation_plan "rc $rc $(tail -2 "$T/plan0.err" "$T/torch0.out")"
import json, os, sys
p = json.load(open(os.path.join(sys.argv[1], "plan.json"))); r = json.load(open(sys.argv[2]))
assert p["sets"]["valid"] is None and len(p["sets"]["train"]["ids"]) == 400, p["sets"].keys()
assert r["valid"] is None and len(r["epochs"]) == 2 and r["test_epoch"] == 1, (r["valid"], r.get("test_epoch"))
EOF

# --label-smoothing (HF Trainer's label_smoothing_factor): recorded in the run and the plan, and
# the run's losses are PyTorch's with cross_entropy(label_smoothing=0.2) on the same plan. With
# dropout 0 (a base model whose config has none) both sides take the same steps from the same
# weights, so each epoch's training and validation loss and the best epoch's test loss agree
# (the issue's 1e-4 + 1e-3 relative). The same run without smoothing must give other losses.
sed 's/"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1/"hidden_dropout_prob": 0, "attention_probs_dropout_prob": 0/' \
  "$T/cfg.json" > "$T/cfg0.json"
# Three intents of the 77 (their rows of train and test): enough for the tiny encoder to move its
# logits far from uniform, where smoothing changes the loss.
for f in tr te; do awk -F, '{ c = $NF; sub(/\r$/, "", c) } NR == 1 || c == "card_arrival" || c == "exchange_rate" || c == "pin_blocked"' \
  "$B/$([ $f = tr ] && echo train || echo test).csv" > "$T/${f}3.csv"; done
ls=(--model base0 --train "$T/tr3.csv" --test "$T/te3.csv" --epochs 2 --lr 3e-3)
"$M" train --db "$T/a.db" --name base0 --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg0.json" \
  --batch 8 --max-steps 6 --threads 1 --quiet >/dev/null 2>"$T/ls.err" &&
  "$M" finetune "${base[@]}" "${ls[@]}" --name cls8 --label-smoothing 0.2 --json >"$T/ls.json" 2>>"$T/ls.err" &&
  "$M" finetune "${base[@]}" "${ls[@]}" --name cls9 --json >"$T/ls0.json" 2>>"$T/ls.err" &&
  "$M" finetune "${base[@]}" "${ls[@]}" --label-smoothing 0.2 --export-plan "$T/planls" --quiet 2>>"$T/ls.err" &&
  $PY scripts/torch_finetune.py "$T/planls" --out "$T/planls.json" --threads 1 --quiet --test-weights best \
    >"$T/torchls.out" 2>&1; rc=$?
$PY - "$T/a.db" "$T/ls.json" "$T/ls0.json" "$T/planls" "$T/planls.json" <<'EOF' && [ $rc = 0 ] &&
import json, os, sqlite3, sys
db = sqlite3.connect(sys.argv[1]); m, m0 = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
plan = json.load(open(os.path.join(sys.argv[4], "plan.json"))); t = json.load(open(sys.argv[5]))
cfg = json.loads(db.execute("SELECT config FROM runs WHERE name = 'cls8'").fetchone()[0])
assert cfg["label_smoothing"] == 0.2 and plan["hyper"]["label_smoothing"] == 0.2, (cfg.get("label_smoothing"), plan["hyper"])
close = lambda a, b: abs(a - b) <= 1e-4 + 1e-3 * abs(b)
assert len(m["epochs"]) == len(t["epochs"]) == 2 and m["best"]["epoch"] == t["test_epoch"] + 1, (m["best"], t["test_epoch"])
pairs = {f"{k} {e + 1}": (mk(m["epochs"][e]), tk(t["epochs"][e]), mk(m0["epochs"][e])) for e in range(2)
         for k, mk, tk in (("train", lambda x: x["train_loss"], lambda x: x["train_loss"]),
                           ("validation", lambda x: x["eval_loss"], lambda x: x["valid"]["loss"]))}
pairs["test"] = (m["test"]["loss"], t["test"]["loss"], m0["test"]["loss"])
for k, (a, b, plain) in pairs.items():
    assert close(a, b), f"{k} loss maskd {a} torch {b}"
    assert abs(a - plain) > 0.01 * a, f"{k} loss smoothed {a} unsmoothed {plain}"
print("# label smoothing 0.2, maskd / torch / maskd unsmoothed: " +
      ", ".join(f"{k} {a:.6f} / {b:.6f} / {p:.6f}" for k, (a, b, p) in pairs.items()))
EOF
  pass finetune_cli_label_smoothing_as_torch || fail finetune_cli_label_smoothing_as_torch "rc $rc $(tail -n 2 "$T/ls.err" "$T/torchls.out")"
refuse finetune_cli_refuses_label_smoothing_one "--label-smoothing" "${base[@]}" --name x --label-smoothing 1

# Ctrl-C stops at a step boundary: the run is interrupted, exit 130.
"$M" finetune "${base[@]}" --name cls4 --epochs 200 --quiet --json >"$T/int.json" 2>"$T/int.err" & fp=$!
sleep 1.5; kill -INT $fp; wait $fp; rc=$?
st=$(sqlite3 "$T/a.db" "SELECT status FROM runs WHERE name = 'cls4'")
[ $rc = 130 ] && [ "$st" = interrupted ] && pass finetune_cli_sigint || fail finetune_cli_sigint "rc $rc status $st: $(tail -2 "$T/int.err")"
# --json after the stop reports the steps done (the last stored step metric), not the plan's.
done_steps=$(sqlite3 "$T/a.db" "SELECT COALESCE(MAX(step), 0) FROM step_metrics WHERE run_id = (SELECT id FROM runs WHERE name = 'cls4')")
$PY -c 'import json, sys; j = json.load(open(sys.argv[1]))
assert j["status"] == "interrupted" and j["stopped_by"] == "SIGINT" and j["steps"] == int(sys.argv[2]) < j["total_steps"] == 200 * 23, j' \
  "$T/int.json" "$done_steps" 2>"$T/int-json.err" && pass finetune_cli_sigint_json_steps_done ||
  fail finetune_cli_sigint_json_steps_done "$(tail -1 "$T/int-json.err") (steps stored: $done_steps)"

# SIGKILL leaves no word: maskd runs finds the process gone and says interrupted, not running.
# A live run of another process (cls11, still going) stays running.
"$M" finetune "${base[@]}" --name cls10 --epochs 200 --quiet 2>/dev/null & kp=$!
"$M" finetune "${base[@]}" --name cls11 --epochs 200 --quiet 2>/dev/null & lp=$!
wait_until 100 0.1 sh -c "[ \"\$(sqlite3 '$T/a.db' \"SELECT COUNT(*) FROM runs WHERE name IN ('cls10', 'cls11') AND status = 'running'\")\" = 2 ]"
kill -KILL $kp; wait $kp 2>/dev/null
"$M" runs --db "$T/a.db" > "$T/runs-k.txt" 2>&1; rc=$?
kill -INT $lp; wait $lp 2>/dev/null
st=$(sqlite3 "$T/a.db" "SELECT status FROM runs WHERE name = 'cls10'")
[ $rc = 0 ] && grep -Eq '^[0-9]+ +cls10 +interrupted ' "$T/runs-k.txt" && grep -Eq '^[0-9]+ +cls11 +running ' "$T/runs-k.txt" &&
  [ "$st" = interrupted ] && pass finetune_cli_runs_after_sigkill ||
  fail finetune_cli_runs_after_sigkill "rc $rc, stored status $st: $(grep -E 'cls1[01] ' "$T/runs-k.txt")"

# Fine-tuning a classifier again: its output layer (a row per label) is kept only where the
# rows mean the new labels. The same labels in the same order (categories.json): kept as it
# is; the same labels sorted by name (no --labels): each row follows its label to the new
# id; 77 other names (the same shape, which cannot tell): the layer starts as a new one, the
# one fine-tuning the masked LM with the same seed gets. The initial weights from
# --export-plan; the line saying so from a one-step run.
sed '1!s/,\([^,]*\)$/,x_\1/' "$T/tr.csv" > "$T/tr-renamed.csv"
opts=(--db "$T/a.db" --label-column category --max-length 32 --batch 16 --threads 1 --seed 3)
again=("${opts[@]}" --model cls@best --train "$T/tr.csv")
"$M" finetune "${again[@]}" --labels "$B/categories.json" --export-plan "$T/h-same" --quiet 2>"$T/h.err" &&
  "$M" finetune "${again[@]}" --export-plan "$T/h-sorted" --quiet 2>>"$T/h.err" &&
  "$M" finetune "${again[@]}" --train "$T/tr-renamed.csv" --export-plan "$T/h-other" --quiet 2>>"$T/h.err" &&
  "$M" finetune "${opts[@]}" --model base --train "$T/tr-renamed.csv" --export-plan "$T/h-new" --quiet 2>>"$T/h.err" &&
  "$M" export --db "$T/a.db" cls@best "$T/h-base" >/dev/null 2>>"$T/h.err"
PYTHONPATH="$PWD/scripts" $PY - "$T" <<'EOF' && pass finetune_cli_head_rows_follow_labels || fail finetune_cli_head_rows_follow_labels "$(tail -3 "$T/h.err")"
import json, os, sys
import numpy as np
from torch_reference import read_safetensors
T = sys.argv[1]
def load(d):
    _, sd = read_safetensors(os.path.join(d, "model.safetensors"))
    cfg = json.load(open(os.path.join(d, "config.json")))
    return [cfg["id2label"][str(i)] for i in range(len(cfg["id2label"]))], sd
base_labels, base = load(T + "/h-base")
W, b = "classifier.out_proj.weight", "classifier.out_proj.bias"
labels, same = load(T + "/h-same/init")
assert labels == base_labels and np.array_equal(same[W], base[W]) and np.array_equal(same[b], base[b]), "same labels: rows kept"
labels, srt = load(T + "/h-sorted/init")
assert labels == sorted(base_labels) and labels != base_labels
for i, name in enumerate(labels):
    j = base_labels.index(name)
    assert np.array_equal(srt[W][i], base[W][j]) and srt[b][i] == base[b][j], f"row of {name}"
labels, other = load(T + "/h-other/init")
_, new = load(T + "/h-new/init")
assert all(l.startswith("x_") for l in labels) and len(labels) == 77
assert np.array_equal(other[W], new[W]) and np.array_equal(other[b], new[b]), "other labels: a new layer"
assert not np.array_equal(other[W], base[W])
# The rest of the head (classifier.dense) and the encoder come from the base either way.
for k in ("classifier.dense.weight", "roberta.encoder.layer.0.attention.self.query.weight"):
    assert np.array_equal(other[k], base[k]) and np.array_equal(srt[k], base[k]), k
EOF
"$M" finetune "${again[@]}" --name again-sorted --epochs 1 --max-steps 1 2>"$T/h1.err" >/dev/null &&
  "$M" finetune "${again[@]}" --train "$T/tr-renamed.csv" --name again-other --epochs 1 --max-steps 1 2>"$T/h2.err" >/dev/null
grep -q "which has the same labels in another order: its output rows follow the new ids" "$T/h1.err" &&
  grep -q "comes from cls@[0-9]* but for its output layer, which is new: cls has other labels (77 of them)" "$T/h2.err" &&
  ! grep -q "which has the same labels" "$T/h2.err" && pass finetune_cli_head_origin_lines ||
  fail finetune_cli_head_origin_lines "$(grep -h 'head\|classifier' "$T/h1.err" "$T/h2.err")"

# One repository, one pipeline: a classifier is not pushed over a masked LM's revisions, nor
# a masked LM over a classifier's (re-fine-tuning into a classifier's own repository is fine).
refuse finetune_cli_refuses_mlm_repository "--name: model repository \"base0\" holds a RobertaForMaskedLM" "${base[@]}" --name base0
out=$("$M" train --db "$T/a.db" --name cls --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" --max-steps 1 \
  --threads 1 --quiet 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -qF -- '--name: model repository "cls" holds a RobertaForSequenceClassification' <<<"$out" &&
  [ "$(sqlite3 "$T/a.db" "SELECT COUNT(*) FROM runs WHERE name = 'cls'")" = 1 ] && pass finetune_cli_train_refuses_classifier_repository ||
  fail finetune_cli_train_refuses_classifier_repository "rc $rc: $out"
# Without --max-length: 128, or the model's positions where it has fewer (cfg.json's 40, less
# RoBERTa's offset of pad + 1: 36), not a refusal of a value the user never gave.
"$M" finetune --db "$T/a.db" --model base --train "$T/tr.csv" --label-column category --threads 1 --export-plan "$T/h-len" --quiet 2>"$T/len.err" &&
  $PY -c 'import json, sys; h = json.load(open(sys.argv[1]))["hyper"]; assert h["max_length"] == 36, h' "$T/h-len/plan.json" &&
  pass finetune_cli_default_max_length_fits_model || fail finetune_cli_default_max_length_fits_model "$(cat "$T/len.err")"
# maskd train --resume of a fine-tuning run (cls4, interrupted above) says what it is.
out=$("$M" train --db "$T/a.db" --resume cls4 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -qF "run cls4 is a fine-tuning run, which is not resumed: run maskd finetune again" <<<"$out" &&
  pass finetune_cli_train_resume_refused || fail finetune_cli_train_resume_refused "rc $rc: $out"
# Integer labels beside the names file (HF datasets' CSV export of a ClassLabel column): the
# integer is the id, so the plan's examples carry the ids the names give.
$PY - "$T/tr.csv" "$B/categories.json" "$T/tr-ids.csv" <<'EOF'
import csv, json, sys
names = json.load(open(sys.argv[2])); rows = list(csv.DictReader(open(sys.argv[1], newline="")))
with open(sys.argv[3], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["text", "label"]); w.writeheader()
    for r in rows: w.writerow({"text": r["text"], "label": names.index(r["category"])})
EOF
ids_opts=(--db "$T/a.db" --model base --labels "$B/categories.json" --max-length 32 --threads 1 --seed 3 --quiet)
"$M" finetune "${ids_opts[@]}" --train "$T/tr.csv" --label-column category --export-plan "$T/p-names" 2>"$T/ids.err" &&
  "$M" finetune "${ids_opts[@]}" --train "$T/tr-ids.csv" --label-column label --export-plan "$T/p-ids" 2>>"$T/ids.err" &&
  $PY -c '
import json, sys
a, b = (json.load(open(p))["sets"] for p in sys.argv[1:3])
assert a["train"]["labels"] == b["train"]["labels"] and a["valid"]["labels"] == b["valid"]["labels"], "ids differ"
assert len(set(a["train"]["labels"])) > 50' "$T/p-names/plan.json" "$T/p-ids/plan.json" &&
  pass finetune_cli_integer_labels_with_names || fail finetune_cli_integer_labels_with_names "$(cat "$T/ids.err")"
# One reading for the run's files: names "1".."5" (stars) and a train file holding a 0 are
# ids, and so is a test file whose cells (1..4) happen all to be names: its 1 is train's 1.
# Cells that are all names and all ids, the two readings differing, are refused.
$PY - "$T/tr.csv" "$T" <<'EOF2'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))[:200]
json.dump(["1", "2", "3", "4", "5"], open(sys.argv[2] + "/stars.json", "w"))
for name, labels in (("st-train.csv", [i % 5 for i in range(200)]), ("st-test.csv", [1 + i % 4 for i in range(40)])):
    with open(sys.argv[2] + "/" + name, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["text", "label"]); w.writeheader()
        for r, l in zip(rows, labels): w.writerow({"text": r["text"], "label": l})
EOF2
st_opts=(--db "$T/a.db" --model base --labels "$T/stars.json" --max-length 32 --threads 1 --quiet --validation-fraction 0)
"$M" finetune "${st_opts[@]}" --train "$T/st-train.csv" --test "$T/st-test.csv" --export-plan "$T/p-st" 2>"$T/st.err" &&
  $PY -c '
import json, sys
sets = json.load(open(sys.argv[1]))["sets"]
assert sets["train"]["labels"][:5] == [0, 1, 2, 3, 4], sets["train"]["labels"][:5]
assert sets["test"]["labels"][:4] == [1, 2, 3, 4], sets["test"]["labels"][:4]' "$T/p-st/plan.json" 2>>"$T/st.err" &&
  pass finetune_cli_one_label_reading_for_all_files || fail finetune_cli_one_label_reading_for_all_files "$(cat "$T/st.err")"
refuse finetune_cli_label_both_name_and_id "train: $T/st-test.csv: line 2 (row 1): label 1 is both a name in the labels file (id 0) and an id into it" \
  --db "$T/a.db" --model base --labels "$T/stars.json" --train "$T/st-test.csv" --test "$T/st-test.csv" --validation-fraction 0 --name x
