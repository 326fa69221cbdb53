#!/usr/bin/env bash
# Fine-tuning over HTTP: POST /runs {"task": "text-classification", ...} checked field by
# field (422 naming the field; the model must be in the store, the files under --data-dir),
# queued, run by the worker as maskd finetune --job, and its run visible: GET /runs/{id}
# with the config's task, GET /runs/{id}/metrics with eval_macro_f1, eval_weighted_f1 and
# the confusion list per epoch, and the best revision's files (NAME@best).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" servefinetune "${1:-}"
B=$DATA_ROOT/banking77
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
serve_wrap=(timeout 300)
need serve_finetune_setup "no WikiText-2 at $DATA" -f "$DATA/train.txt"
need serve_finetune_setup "no BANKING77 at $B" -f "$B/train.csv"

small_training_setup serve_finetune_setup 120000 || exit 1
"$M" train --db "$T/hub.db" --name base --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --batch 8 --max-steps 6 --threads 1 --quiet >/dev/null 2>"$T/train.err" || { fail serve_finetune_setup "$(tail -2 "$T/train.err")"; exit 1; }
# A second masked LM's repository, which a classifier may not be pushed into.
"$M" train --db "$T/hub.db" --name mlm2 --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --batch 8 --max-steps 1 --threads 1 --quiet >/dev/null 2>"$T/train.err" || { fail serve_finetune_setup "$(tail -2 "$T/train.err")"; exit 1; }
mkdir -p "$T/data/banking77"
awk 'NR == 1 || NR % 25 == 0' "$B/train.csv" > "$T/data/banking77/train.csv"
awk 'NR == 1 || NR % 20 == 0' "$B/test.csv" > "$T/data/banking77/test.csv"
cp "$B/categories.json" "$T/data/banking77/"

post() { call POST "$1" -H 'Authorization: Bearer tk' --data-binary "$2"; }

serve_start --db "$T/hub.db" --data-dir "$T/data" --token tk --quiet || { fail serve_finetune_start "$(cat "$T/err")"; exit 1; }
pass serve_finetune_start

# job JSON [EXTRA]: a fine-tuning description (EXTRA: more fields, starting with a comma).
job() {
  printf '{"task": "text-classification", "model": "base", "train": "banking77/train.csv", "test": "banking77/test.csv",
 "label_column": "category", "labels": "banking77/categories.json", "name": "%s", "epochs": 2, "batch": 16,
 "max_length": 32, "lr": 0.001, "threads": 1%s}' "$1" "${2:-}"
}
post /runs '{"task": "summarization", "name": "x"}'
ok finetune_unknown_task error_is 422 task
post /runs "$(job cls ',"learning_rate": 1')"
ok finetune_unknown_field error_is 422 learning_rate
post /runs "$(job cls ',"eval_batch": "2"')"
ok finetune_wrong_type error_is 422 eval_batch
post /runs "$(job cls ',"weight_decay": -1')"
ok finetune_out_of_range error_is 422 weight_decay
post /runs "$(job cls ',"validation_fraction": 1')"
ok finetune_fraction_open error_is 422 validation_fraction
post /runs "$(job cls ',"label_smoothing": 1')"
ok finetune_label_smoothing_open error_is 422 label_smoothing
post /runs "$(job cls | sed 's/"model": "base"/"model": "nosuch"/')"
ok finetune_unknown_model error_is 422 nosuch
post /runs "$(job cls | sed 's|banking77/train.csv|../etc/passwd|')"
ok finetune_path_refused error_is 422 train
post /runs "$(job cls | sed 's|banking77/train.csv|banking77/none.csv|')"
ok finetune_missing_file error_is 422 train
post /runs "$(job 'bad name!')"
ok finetune_bad_name error_is 422 name
post /runs "$(job 2024)"
ok finetune_all_digit_name error_is 422 "all digits"
post /runs '{"task": "text-classification", "model": "base", "name": "x"}'
ok finetune_needs_train error_is 422 train
post /runs "$(job cls ',"on_restart": "resume"')"
ok finetune_not_resumed error_is 422 on_restart
# What the worker's maskd finetune would refuse (store_finetune_check) is refused here, not
# accepted to fail later: the base's own repository as the name, a masked LM's repository,
# max_length past the base's positions (cfg.json's 40, less RoBERTa's offset: 36).
post /runs "$(job 'a\u0000b')"
ok finetune_nul_in_body_said_plainly error_is 400 'a NUL character (\\u0000) in a string is not allowed'
post /runs "$(job base)"
ok finetune_base_repository_as_name error_is 422 '"field": "name", "why": "base is the repository of the base model'
post /runs "$(job mlm2)"
ok finetune_mlm_repository_as_name error_is 422 '"field": "name", "why": "model repository \"mlm2\" holds a RobertaForMaskedLM'
post /runs "$(job cls | sed 's/"max_length": 32/"max_length": 37/')"
ok finetune_max_length_past_positions error_is 422 '"field": "max_length", "why": "37 is more than the 36 positions of base@1'
post /runs "$(job len36 | sed 's/"max_length": 32/"max_length": 36/' | sed 's/"epochs": 2/"max_steps": 1/')"
ok finetune_max_length_at_positions status_is 202

post /runs "$(job cls)"
ok finetune_accepted status_is 202
jobid=$(jget 'b["id"]')
ok finetune_job_done wait_for 120 "/jobs/$jobid" 'b["status"] in ("done", "failed")'
ok finetune_job_succeeded test "$(jget 'b["status"]') $(jget 'b["error"]')" = "done None"
call GET /runs/cls
ok finetune_run_record test "$(jget 'b["status"] == "done" and b["config"]["task"] == "text-classification" and b["config"]["model"] == "base" and len(b["config"]["labels"]) == 77 and b["results"]["test"]["accuracy"] >= 0 and b["config"]["train"] == "banking77/train.csv"')" = True
call GET /runs
ok finetune_runs_list test "$(jget '[(r["name"], r.get("task"), r.get("model")) for r in b if r["name"] == "cls"] == [("cls", "text-classification", "base")]')" = True
call GET /runs/cls/metrics
ok finetune_run_metrics test "$(jget 'len(b["epochs"]) == 2 and all(0 <= e["eval_macro_f1"] <= 1 and 0 <= e["eval_weighted_f1"] <= 1 and isinstance(e["confusion"], list) and len(e["confusion"]) <= 10 and all(set(c) == {"true", "pred", "count"} for c in e["confusion"]) for e in b["epochs"]) and len(b["steps"]) > 0')" = True
call GET /models/cls/resolve/best/config.json
ok finetune_best_config test "$(jget 'b["architectures"] == ["RobertaForSequenceClassification"] and len(b["id2label"]) == 77')" = True
# A masked LM's training into the classifier's repository is refused before it is queued (the
# job's maskd train refused it at its start, after a 202).
post /runs '{"name": "cls", "tokenizer": "tok.json", "train": "shards", "config": "tiny", "max_steps": 1}'
ok train_into_classifier_repository_refused error_is 422 '"field": "name", "why": "model repository \"cls\" holds a RobertaForSequenceClassification'
# A second job with a bad column fails with the command's one line as its error.
post /runs "$(job cls2 ',"text_column": "nope"')"
jobid=$(jget 'b["id"]')
ok finetune_job_fails_cleanly wait_for 60 "/jobs/$jobid" 'b["status"] == "failed" and "nope" in b["error"] and "banking77/train.csv:" in b["error"] and "'"$T"'" not in b["error"]'
# "validation_fraction": 0 trains on all of train, with no validation; its last epoch is the best.
post /runs "$(job all ',"validation_fraction": 0' | sed 's/"epochs": 2/"epochs": 1/')"
ok finetune_no_validation_accepted status_is 202
ok finetune_no_validation_done wait_for 60 /runs/all 'b["status"] == "done" and b["config"]["split"] is None and b["config"]["examples"]["train"] == 400 and b["config"]["examples"]["validation"] == 0 and b["results"]["best_epoch"] == 1'
# "label_smoothing" reaches the job (the CLI's test holds its losses against PyTorch).
post /runs "$(job smooth ',"label_smoothing": 0.1' | sed 's/"epochs": 2/"epochs": 1/')"
ok finetune_label_smoothing_accepted status_is 202
ok finetune_label_smoothing_done wait_for 60 /runs/smooth 'b["status"] == "done" and b["config"]["label_smoothing"] == 0.1'
# "dropout_seed", as --dropout-seed, reaches the run's config (it was an unknown field).
post /runs "$(job dseed ',"dropout_seed": 5, "max_steps": 2' | sed 's/"epochs": 2/"epochs": 1/')"
ok finetune_dropout_seed_accepted status_is 202
ok finetune_dropout_seed_done wait_for 60 /runs/dseed 'b["status"] == "done" and b["config"]["dropout_seed"] == 5 and b["config"]["seed"] != 5'
# The dropout fields, as from_pretrained's keywords, reach the run and the pushed config.json; 1 is refused.
post /runs "$(job nodrop ',"hidden_dropout_prob": 0, "attention_probs_dropout_prob": 0, "classifier_dropout": 0.25, "max_steps": 2' | sed 's/"epochs": 2/"epochs": 1/')"
ok finetune_dropout_fields_accepted status_is 202
ok finetune_dropout_fields_done wait_for 60 /runs/nodrop 'b["status"] == "done" and b["config"]["hidden_dropout_prob"] == 0 and b["config"]["attention_probs_dropout_prob"] == 0 and b["config"]["classifier_dropout"] == 0.25'
call GET /models/nodrop/resolve/main/config.json
ok finetune_dropout_fields_in_config test "$(jget 'b["hidden_dropout_prob"] == 0 and b["attention_probs_dropout_prob"] == 0 and b["classifier_dropout"] == 0.25')" = True
post /runs "$(job baddrop ',"hidden_dropout_prob": 1')"
ok finetune_dropout_field_refused test "$(status_is 422 && jget 'b["detail"]["field"] == "hidden_dropout_prob"' 2>/dev/null)" = True
# Cancel stops a running fine-tuning job at a step boundary; its run is "cancelled".
post /runs "$(job long | sed 's/"epochs": 2/"epochs": 5000/')"
ok finetune_long_running wait_for 60 /runs/long 'b["status"] == "running" and b["step"] >= 2'
post /runs/long/cancel ''
ok finetune_cancel_accepted status_is 202
ok finetune_cancel_done wait_for 60 /runs/long 'b["status"] == "cancelled"'
serve_stop
