#!/usr/bin/env bash
# The registry over HTTP: a tokenizer job and a dataset job register what they made in
# the store, with where it came from (the corpora's and the tokenizer's sha256, checked
# here against sha256sum of the files), and GET /tokenizers, /datasets and each by name
# answer from it with no host path; a run names them; a finished job keeps its last
# progress; a job whose output cannot be registered (its name taken in the store, or a
# corpus changed while it ran) fails and leaves nothing; at start-up an output folder the store does not know (an older
# server's, or made by the command line) is registered with source null.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serve_registry
serve_wrap=(timeout 300)
need serve_registry_setup "$DATA/train.txt missing (MASKD_DATA=$DATA_ROOT)" -f "$DATA/train.txt"

mkdir -p "$T/data/wiki"
head -3000 "$DATA/train.txt" > "$T/data/wiki/train.txt"
head -400 "$DATA/valid.txt" > "$T/data/wiki/valid.txt"
W="$T/hub.db.work"

post() { call POST "$1" --data-binary "$2"; }
# no_host_path: the last answer names no folder of this machine's ($T).
no_host_path() { ! grep -q "$T" "$T/body" && ! grep -q "$(dirname "$T")/" "$T/body"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

serve_start --db "$T/hub.db" --data-dir "$T/data" --quiet || { fail serve_registry_start "$(cat "$T/err")"; exit 1; }

# ---- a tokenizer job ----
post /tokenizers '{"name": "wiki-tok", "input": ["wiki/train.txt"], "vocab_size": 400}'
ok tokenizer_job_accepted status_is 202
tjob=$(jget 'b["id"]')
ok tokenizer_job_done wait_for 120 "/jobs/$tjob" 'b["status"] in ("done", "failed")'
ok tokenizer_job_succeeded test "$(jget 'b["status"]')" = "done"
ok tokenizer_job_progress_kept $PY -c "
import json; p = json.load(open('$T/body'))['progress']
assert isinstance(p, dict) and p['phase'] and isinstance(p['done'], (int, float)) and p['unit'], p
assert set(p) == {'phase', 'done', 'total', 'unit', 'rate', 'eta_s'}, p"
call GET /tokenizers
ok tokenizers_listed $PY - "$T/body" "$(sha "$W/tokenizers/wiki-tok/tokenizer.json")" "$(sha "$T/data/wiki/train.txt")" \
  "$(stat -c %s "$T/data/wiki/train.txt")" "$tjob" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
assert [t["name"] for t in b] == ["wiki-tok"], b
t = b[0]
assert t["vocab_size"] == 400 and t["sha256"] == sys.argv[2] and t["job"] == int(sys.argv[5]), t
assert isinstance(t["created"], (int, float)), t
assert t["source"] == {"corpora": [{"name": "wiki/train.txt", "bytes": int(sys.argv[4]), "sha256": sys.argv[3]}]}, t
PY
ok tokenizers_no_host_path no_host_path
call GET /tokenizers/wiki-tok
ok tokenizer_by_name $PY -c "import json; t = json.load(open('$T/body')); assert t['name'] == 'wiki-tok' and t['vocab_size'] == 400, t"
call GET /tokenizers/nosuch
ok tokenizer_by_name_missing_404 $PY -c "import json; t = json.load(open('$T/body')); assert isinstance(t['error'], str), t"
ok tokenizer_by_name_missing_status status_is 404

# ---- a dataset job ----
post /datasets '{"name": "wiki-train", "tokenizer": "wiki-tok", "input": "wiki/train.txt", "split": "train", "seq_len": 32}'
ok dataset_job_accepted status_is 202
djob=$(jget 'b["id"]')
ok dataset_job_done wait_for 120 "/jobs/$djob" 'b["status"] in ("done", "failed")'
ok dataset_job_succeeded test "$(jget 'b["status"]')" = "done"
ok dataset_job_progress_kept $PY -c "
import json; p = json.load(open('$T/body'))['progress']
assert p['phase'] == 'encoding' and p['unit'] == 'bytes' and p['done'] == p['total'] > 0, p"
post /datasets '{"name": "wiki-valid", "tokenizer": "wiki-tok", "input": "wiki/valid.txt", "split": "validation", "seq_len": 32}'
vjob=$(jget 'b["id"]')
ok dataset_job2_done wait_for 120 "/jobs/$vjob" 'b["status"] == "done"'
call GET /datasets
ok datasets_listed $PY - "$T/body" "$W/datasets/wiki-train/manifest.json" "$(sha "$T/data/wiki/train.txt")" \
  "$(sha "$W/tokenizers/wiki-tok/tokenizer.json")" "$djob" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
m = json.load(open(sys.argv[2]))
assert [d["name"] for d in b] == ["wiki-train", "wiki-valid"], b
d = b[0]
assert d["tokenizer"] == "wiki-tok" and d["split"] == "train" and d["seq_len"] == 32, d
assert d["samples"] == m["total_samples"] and d["shards"] == len(m["shards"]) and d["job"] == int(sys.argv[5]), d
assert d["source"]["corpora"][0]["sha256"] == sys.argv[3] and d["source"]["corpora"][0]["name"] == "wiki/train.txt", d
assert d["source"]["tokenizer"] == {"name": "wiki-tok", "sha256": sys.argv[4]}, d
assert b[1]["split"] == "validation", b[1]
PY
ok datasets_no_host_path no_host_path
call GET /datasets/wiki-train
ok dataset_by_name $PY -c "
import json; d = json.load(open('$T/body'))
assert d['name'] == 'wiki-train' and all('/' not in f['file'] for f in d['files']) and len(d['files']) == d['shards'], d"
ok dataset_by_name_no_host_path no_host_path
call GET /datasets/nosuch
ok dataset_by_name_missing_404 status_is 404
call GET "/jobs/$djob"
ok job_no_host_path no_host_path

# ---- a run names them ----
cat > "$T/data/tiny.json" <<'JSON'
{"model_type": "roberta", "vocab_size": 400, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 40, "type_vocab_size": 1, "pad_token_id": 3, "bos_token_id": 0,
 "eos_token_id": 1, "layer_norm_eps": 1e-5, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "initializer_range": 0.02}
JSON
post /runs '{"name": "reg-run", "tokenizer": "wiki-tok", "train": "wiki-train", "validation": "wiki-valid", "config": "tiny.json", "max_steps": 2, "batch": 4}'
ok run_names_registry status_is 202
ok run_done wait_for 120 /runs/reg-run 'b["status"] in ("done", "failed")'
ok run_succeeded test "$(jget 'b["status"]')" = "done"
# The run's description holds the resolved files; its answers name them inside the roots.
ok run_no_host_path no_host_path
ok run_config_names_inside_roots $PY -c "
import json; c = json.load(open('$T/body'))['config']
assert c['tokenizer'] == 'tokenizers/wiki-tok/tokenizer.json' and c['config'] == 'tiny.json', c"
call GET /runs;        ok runs_no_host_path no_host_path
call GET /jobs;        ok jobs_no_host_path no_host_path

# ---- a name the store has is refused at submission, even when its folder is gone ----
# (A job that gets as far as registering a taken name fails and leaves nothing:
# tests/unit/test_registry.c.)
mv "$W/tokenizers/wiki-tok" "$T/wiki-tok.kept"
post /tokenizers '{"name": "wiki-tok", "input": "wiki/valid.txt", "vocab_size": 300}'
ok dup_name_refused_409 status_is 409
ok dup_name_says_registered test "$(jget 'b["error"]')" = "a tokenizer of this name is registered"
ok dup_job_no_host_path no_host_path
ok dup_job_made_nothing test ! -e "$W/tokenizers/wiki-tok"
call GET /tokenizers
ok dup_job_registers_nothing test "$(jget '[(t["name"], t["job"]) for t in b]')" = "[('wiki-tok', $tjob)]"
mv "$T/wiki-tok.kept" "$W/tokenizers/wiki-tok"
post /datasets '{"name": "wiki-train", "tokenizer": "wiki-tok", "input": "wiki/train.txt"}'
ok dup_dataset_name_409 status_is 409

# A corpus that changes while the job reads it fails the job. The worker hashes it before
# it starts the job's process: once that process exists, it is held (SIGSTOP) while a
# line is added, then let go.
head -12000 "$DATA/train.txt" > "$T/data/wiki/big.txt"
post /tokenizers '{"name": "moving", "input": "wiki/big.txt", "vocab_size": 1000}'
mjob=$(jget 'b["id"]')
child=
server=$(pgrep -P "$pid" -x maskd | head -1)   # $pid is timeout's (serve_wrap)
for _ in $(seq 400); do
  child=$(pgrep -P "${server:-0}" -f "tokenizer train" | head -1)
  [ -n "$child" ] && break
  sleep 0.02
done
if [ -n "$child" ] && kill -STOP "$child" 2>/dev/null; then
  echo 'a line added while the job reads' >> "$T/data/wiki/big.txt"
  kill -CONT "$child"
  ok changed_corpus_fails_job wait_for 120 "/jobs/$mjob" 'b["status"] == "failed" and b["error"] == "corpus wiki/big.txt changed while the job read it"'
  ok changed_corpus_output_removed test ! -e "$W/tokenizers/moving"
  call GET /tokenizers/moving
  ok changed_corpus_not_registered status_is 404
else
  fail changed_corpus_fails_job "the job's process was not seen running"
fi
serve_stop

# ---- folders the store does not know are registered at start-up ----
mkdir -p "$W/tokenizers/cli-tok"
"$M" tokenizer train --input "$T/data/wiki/valid.txt" --vocab-size 300 --out "$W/tokenizers/cli-tok/tokenizer.json" --threads 1 >/dev/null 2>&1
"$M" prepare --quiet --tokenizer "$W/tokenizers/cli-tok/tokenizer.json" --input "$T/data/wiki/valid.txt" --split validation \
  --seq-len 16 --out "$W/datasets/cli-ds" >/dev/null 2>&1
need legacy_setup "the command line made no tokenizer or dataset" -f "$W/datasets/cli-ds/manifest.json"
serve_start --db "$T/hub.db" --data-dir "$T/data" --quiet || { fail serve_registry_restart "$(cat "$T/err")"; exit 1; }
call GET /tokenizers
ok legacy_tokenizer_registered $PY -c "
import json; b = {t['name']: t for t in json.load(open('$T/body'))}
assert list(b) == ['wiki-tok', 'cli-tok'] and b['cli-tok']['source'] is None and b['cli-tok']['job'] is None, b
assert b['cli-tok']['vocab_size'] == 300, b['cli-tok']"
call GET /datasets/cli-ds
ok legacy_dataset_registered $PY -c "
import json; d = json.load(open('$T/body'))
assert d['source'] is None and d['tokenizer'] == 'cli-tok' and d['split'] == 'validation' and d['seq_len'] == 16, d"
ok legacy_no_host_path no_host_path
serve_stop
ok clean_stop test $? -eq 0
