#!/usr/bin/env bash
# maskd serve with a model and jobs, over HTTP with curl: POST /fill-mask against the
# independent pipeline reference (scripts/fillmask_reference.py: PyTorch model + HF
# tokenizers) and its refusals; POST /runs validated, queued, trained by the worker
# with progress, metrics, server-sent events and pushed revisions visible; resolve
# serves the revision's files; cancel stops a running job; fill-mask keeps answering
# while a job trains; a job queued before a restart runs once after it.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" servemodel
MASKD=$M D=$DATA_ROOT
R=scripts/fillmask_reference.py
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
serve_wrap=(timeout 600)

need serve_model_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
need serve_model_setup "$D/wikitext-2/train.txt missing (MASKD_DATA=$D)" -f "$D/wikitext-2/train.txt"

# A HF-trained Unigram tokenizer, a small random RoBERTa with peaked predictions
# (the reference's), and shards for short training runs.
head -2000 "$D/wikitext-2/train.txt" > "$T/train.txt"
head -300 "$D/wikitext-2/valid.txt" > "$T/valid.txt"
{ node tests/hf_tokenize.js train "$T/raw.json" "$T/train.txt" && node tests/hf_tokenize.js seed "$T/raw.json" "$T/tok.json" &&
  $PY $R make-model --tokenizer "$T/tok.json" --out "$T/rob" --seed 5 &&
  "$MASKD" prepare --quiet --tokenizer "$T/tok.json" --input "$T/train.txt" --split train --seq-len 32 --out "$T/shards" &&
  "$MASKD" prepare --quiet --tokenizer "$T/tok.json" --input "$T/valid.txt" --split validation --seq-len 32 --out "$T/vshards" &&
  "$MASKD" import --db "$T/hub.db" "$T/rob" tiny-rob; } >"$T/setup.log" 2>&1 || { fail serve_model_setup "$(tail -3 "$T/setup.log")"; exit 1; }

start() { serve_start --db "$T/hub.db" --data-dir "$T" --token tk --quiet "$@"; }
stop() { serve_stop; }
post() { local p=$1 d=$2; shift 2; call POST "$p" -H 'Authorization: Bearer tk' --data-binary "$d" "$@"; }

# A batching window makes concurrent requests share passes even with this tiny model.
start --batch-window-ms 20 || { fail serve_model_start "$(cat "$T/err")"; exit 1; }
pass serve_model_start

# ---- fill-mask against the reference ----
cat > "$T/cases.json" <<'EOF'
[{"name": "single", "inputs": "The capital of France is [MASK] ."},
 {"name": "multi", "inputs": "The [MASK] of France is [MASK] ."},
 {"name": "list", "inputs": ["The [MASK] of France is [MASK] .", "[MASK] was here .", "A longer sentence about [MASK] , with more words in it ."]},
 {"name": "list_of_one", "inputs": ["It was [MASK] ."]},
 {"name": "targets", "inputs": "He said [MASK] it , didn't he ?", "targets": ["▁the", "▁of", "zzqx", "▁the"], "top_k": 3},
 {"name": "top_k_capped", "inputs": "It [MASK] .", "targets": ["▁the", "▁of"], "top_k": 10},
 {"name": "top_k_1", "inputs": "Où est [MASK] ?", "top_k": 1},
 {"name": "no_mask", "inputs": "There is no mask here ."}]
EOF
if $PY $R run --model-dir "$T/rob" --cases "$T/cases.json" > "$T/expected.jsonl" 2>"$T/ref.err"; then
  $PY - "$T" "$base" <<'EOF'
import json, subprocess, sys
sys.path.insert(0, "scripts")
from fillmask_reference import compare
T, base = sys.argv[1], sys.argv[2]
cases = {c["name"]: c for c in json.load(open(T + "/cases.json"))}
for line in open(T + "/expected.jsonl"):
    exp = json.loads(line)
    c = cases[exp["name"]]
    req = {"inputs": c["inputs"], "model": "tiny-rob"}
    params = {k: c[k] for k in ("top_k", "targets") if k in c}
    if params:
        req["parameters"] = params
    r = subprocess.run(["curl", "-s", "--max-time", "60", "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/json", base + "/fill-mask",
                        "--data-binary", json.dumps(req)], capture_output=True, text=True)
    body, status = r.stdout.rsplit("\n", 1)
    ok = status == "200"
    err = "" if ok else json.loads(body).get("error", "")
    if not ok and not status.startswith("4"):
        print(f"FAIL http_fill_{exp['name']}: status {status}: {body[:200]}")
        continue
    compare(exp, "http_fill_" + exp["name"], 0 if ok else 1, body, err)
    if ok and exp["name"] in ("single", "targets"):
        res = json.loads(body)
        scores = [x["score"] for x in res]
        want = min(c.get("top_k", 5), len(set(c.get("targets", ["x"] * 99))) if "targets" in c else c.get("top_k", 5))
        good = sum(scores) <= 1 + 1e-6 and scores == sorted(scores, reverse=True) and len(res) <= want
        print(("PASS " if good else "FAIL ") + f"http_fill_semantics_{exp['name']}" + ("" if good else f": {res}"))
EOF
else
  fail http_fill_reference "the reference failed: $(tail -2 "$T/ref.err")"
fi

# Concurrent requests share forward passes: each still gets its own answer (the one
# it gets alone), a bad one among them is refused alone.
$PY - "$base" <<'EOF' || fail http_fill_concurrent "see above"
import json, sys, threading, urllib.request, urllib.error
base = sys.argv[1]
reqs = [{"inputs": f"Number {i} is [MASK] ." if i % 3 else [f"It was [MASK] {i} .", "The [MASK] of [MASK] ."],
         "model": "tiny-rob", **({"parameters": {"top_k": 2}} if i % 2 else {})} for i in range(24)]
reqs[5] = {"inputs": "no mask at all", "model": "tiny-rob", "parameters": {"top_k": 2}}
def post(body):
    r = urllib.request.Request(base + "/fill-mask", data=json.dumps(body).encode(), method="POST",
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=120) as f:
            return f.status, json.loads(f.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
alone = [post(b) for b in reqs]
together = [None] * len(reqs)
def worker(i): together[i] = post(reqs[i])
ts = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
[t.start() for t in ts]; [t.join() for t in ts]
def close(a, b):
    if isinstance(a, list): return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict): return isinstance(b, dict) and list(a) == list(b) and all(close(a[k], b[k]) for k in a)
    if isinstance(a, float): return isinstance(b, float) and abs(a - b) <= 1e-6
    return a == b
bad = [i for i in range(len(reqs)) if alone[i][0] != together[i][0] or not close(alone[i][1], together[i][1])]
ok = not bad and alone[5][0] == 400 and all(alone[i][0] == 200 for i in range(len(reqs)) if i != 5)
print(("PASS" if ok else "FAIL") + " http_fill_concurrent" + ("" if ok else f": differ at {bad}, statuses {[a[0] for a in alone]}"))
EOF
call GET /metrics
ok http_fill_batched grep -q '^maskd_fill_mask_batched_requests_total [1-9]' "$T/body"

# Refusals: each a 4xx with a JSON error naming the problem.
call POST /fill-mask --data-binary '{"inputs": 5}'
ok fill_inputs_wrong_type error_is 422 inputs
call POST /fill-mask --data-binary '{"parameters": {}}'
ok fill_inputs_missing error_is 422 inputs
call POST /fill-mask --data-binary '{"inputs": ["ok [MASK]", 3]}'
ok fill_inputs_item_wrong_type error_is 422 'inputs[1]'
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "parameters": [1]}'
ok fill_parameters_wrong_type error_is 422 parameters
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "parameters": {"top_k": 0}}'
ok fill_top_k_zero error_is 422 top_k
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "parameters": {"top_k": "2"}}'
ok fill_top_k_string error_is 422 top_k
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "parameters": {"tops": 2}}'
ok fill_unknown_parameter error_is 422 tops
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "parameters": {"targets": 7}}'
ok fill_targets_wrong_type error_is 422 targets
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "model": 3}'
ok fill_model_wrong_type error_is 422 model
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "extra": 1}'
ok fill_unknown_field error_is 422 extra
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "model": "nosuch"}'
ok fill_unknown_model error_is 404 nosuch
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "model": "tiny-rob@999"}'
ok fill_unknown_revision error_is 404 'tiny-rob@999'
# A name no model can have names nothing: 404 like an unknown one (the store's lookup says "not found").
call POST /fill-mask --data-binary '{"inputs": "a [MASK]", "model": "bad name!@zz"}'
ok fill_malformed_model_404 error_is 404 'bad name'
call POST /fill-mask --data-binary '{"inputs": ""}'
ok fill_empty_input error_is 400 mask
call POST /fill-mask --data-binary "{\"inputs\": \"$(printf 'word %.0s' $(seq 200))[MASK]\"}"
ok fill_too_long error_is 400 'maximum'
call POST /fill-mask --data-binary '{"inputs": "a [MASK]'
ok fill_malformed error_is 400 'malformed'
call POST /fill-mask --data-binary '{"inputs": "It [MASK] ."}'
ok fill_default_model status_is 200

# ---- a training job ----
runjson() { printf '{"name":"%s","tokenizer":"%s","train":"%s","validation":"%s","config":"tiny","max_steps":%d,"batch":16,"eval_batches":4%s}' \
  "$1" tok.json shards vshards "$2" "${3:-}"; }
call POST /runs --data-binary "$(runjson demo 30)"
ok runs_needs_token error_is 401
post /runs '{"name": "x"}'
ok runs_invalid_description error_is 422 tokenizer
post /runs "$(runjson demo 30 ',"learning_rate":1')"
ok runs_unknown_key error_is 422 learning_rate
post /runs "$(runjson demo 30 ',"epochs":"2"')"
ok runs_wrong_type error_is 422 epochs
post /runs "$(runjson demo 30 ',"precision":"fp16"')"
ok runs_unknown_precision error_is 422 'precision: \"fp16\" must be fp32 or bf16'
post /runs "$(runjson demo 30)"
ok runs_accepted status_is 202
job=$(jget 'b["id"]')
ok job_runs_to_done wait_for 120 "/jobs/$job" 'b["status"] == "done"'
call GET /runs/demo
ok run_done_progress test "$(jget 'b["status"], b["step"], b["total_steps"], b["model"]')" = 'done 30 30 tiny'
ok run_has_loss_and_throughput test "$(jget 'b["loss"] > 0 and b["tokens_per_s"] > 0 and b["duration_s"] > 0 and b["config"]["max_steps"] == 30 and b["config"]["precision"] == "fp32"')" = True
ok run_has_revision test "$(jget 'len(b["revisions"]) >= 1 and b["revisions"][0]["message"].startswith("Training")')" = True
call GET /runs
ok runs_list test "$(jget '[r["name"] for r in b] == ["demo"] and b[0]["best_eval_loss"] > 0')" = True
call GET '/runs/demo/metrics'
ok run_metrics test "$(jget 'len(b["steps"]) == 30 and b["steps"][0]["step"] == 1 and len(b["epochs"]) == 1 and b["epochs"][0]["eval_accuracy"] >= 0')" = True
call GET '/runs/demo/metrics?since=25'
ok run_metrics_since test "$(jget '[s["step"] for s in b["steps"]] == [26, 27, 28, 29, 30]')" = True
call GET '/runs/demo/metrics?since=x'
ok run_metrics_bad_since error_is 400 since
call GET '/runs/demo/metrics?since=99999999999999999999'   # past INT64_MAX: no step number
ok run_metrics_since_past_int64 error_is 400 since
call GET /jobs/99999999999999999999
ok job_id_past_int64_404 error_is 404 '"job": "99999999999999999999"'
ok job_id_past_int64_not_renamed sh -c '! grep -q 9223372036854775807 "$1"' _ "$T/body"   # INT64_MAX was named
call GET /runs/nosuch
ok run_unknown error_is 404 nosuch
call GET /runs/demo/events --max-time 10
ok run_events grep -q '^event: end' "$T/body"
ok run_events_progress grep -q '^data: {.*"status": *"done"' "$T/body"
ok run_events_metrics grep -q '^event: metrics' "$T/body"
# HEAD answers GET's headers: a stream of unknown length (chunked), not an empty body.
curl -s --max-time 10 -D "$T/get-h" -o /dev/null "$base/runs/demo/events"
curl -s --max-time 10 -I "$base/runs/demo/events" >"$T/head-h"
ok run_events_head_as_get sh -c 'grep -qi "^transfer-encoding: chunked" "$1" && grep -qi "^transfer-encoding: chunked" "$2" &&
  ! grep -qi "^content-length" "$2" && grep -qi "^content-type: text/event-stream" "$2"' _ "$T/get-h" "$T/head-h"

# Models: revisions and the Hub's resolve URLs.
call GET /models/demo
ok model_revisions test "$(jget 'len(b["revisions"]) >= 1 and len(b["revisions"][0]["commit"]) == 40')" = True
commit=$(jget 'b["revisions"][0]["commit"]')
call GET "/models/demo/resolve/main/config.json"
ok resolve_config test "$(jget 'b["model_type"] in ("roberta", "bert") and b["hidden_size"] == 128')" = True
call GET "/models/demo/resolve/$commit/model.safetensors"
ok resolve_weights $PY - "$T/body" <<'EOF'
import json, struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
assert h["__metadata__"]["format"] == "pt", h.get("__metadata__")
end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
assert len(d) == 8 + n + end, (len(d), n, end)
EOF
call GET "/models/demo/resolve/main/tokenizer.json"
ok resolve_tokenizer test "$(jget 'b["model"]["type"]')" = Unigram
# The generated tokenizer files are byte for byte what `maskd export` writes.
"$MASKD" export --db "$T/hub.db" "demo@$commit" "$T/exported" >/dev/null 2>"$T/export.err" || fail resolve_export "$(cat "$T/export.err")"
for f in tokenizer_config.json special_tokens_map.json tokenizer.json config.json; do
  call GET "/models/demo/resolve/$commit/$f"
  ok "resolve_${f%.json}_as_export" cmp -s "$T/body" "$T/exported/$f"
done
call GET "/models/demo/resolve/main/special_tokens_map.json"
ok resolve_special_tokens_map test "$(jget '(b["mask_token"]["content"] if isinstance(b["mask_token"], dict) else b["mask_token"]) == "[MASK]"')" = True
call GET "/models/demo/resolve/main/secrets.txt"
ok resolve_unknown_file error_is 404 secrets
call GET "/models/demo/resolve/ffff0000/config.json"
ok resolve_unknown_revision error_is 404
call GET /models
ok models_list test "$(jget 'sorted(m["name"] for m in b)')" = "['demo', 'tiny-rob']"
call POST /fill-mask --data-binary '{"inputs": "It [MASK] .", "model": "demo@main"}'
ok fill_trained_model status_is 200

# ---- cancel a running job; fill-mask keeps answering while it trains ----
# The long run trains in bf16: the precision travels through the job to the child's run.
post /runs "$(runjson long 100000 ',"precision":"bf16"')"
ok long_accepted status_is 202
ok long_running wait_for 60 /runs/long 'b["status"] == "running" and b["step"] >= 2'
burst=()
for i in $(seq 8); do
  curl -s --max-time 60 -o /dev/null -w '%{http_code}\n' -X POST -H 'Content-Type: application/json' "$base/fill-mask" --data-binary '{"inputs": "It [MASK] .", "model": "tiny-rob"}' >"$T/burst.$i" &
  burst+=($!)
done
wait "${burst[@]}"
ok fill_during_training test "$(cat "$T"/burst.* | grep -c '^200$')" -eq 8
call GET /runs/long
ok run_eta test "$(jget 'b["eta_s"] is not None and b["eta_s"] > 0')" = True
ok run_precision_bf16 test "$(jget 'b["config"]["precision"]')" = bf16
call POST /runs/long/cancel
ok cancel_needs_token error_is 401
post /runs/long/cancel ''
ok cancel_accepted status_is 202
ok cancel_done wait_for 60 /runs/long 'b["status"] == "cancelled" and b["step"] < 100000'
call GET /jobs
ok cancel_job_status test "$(jget '[j["status"] for j in b]')" = "['cancelled', 'done']"
post /runs/long/cancel ''
ok cancel_twice error_is 409
post /runs/demo/cancel ''
ok cancel_finished error_is 409

# Resume the cancelled run from its checkpoint; it goes on past where it stopped.
stopped=$(call GET /runs/long && jget 'b["step"]')
post /runs '{"resume": 5}'
ok resume_wrong_type error_is 422 resume
post /runs '{"resume": "long"}'
ok resume_accepted status_is 202
ok resume_runs_on wait_for 60 /runs/long "b['status'] == 'running' and b['step'] > $stopped"
post /runs/long/cancel ''
ok resume_cancel status_is 202
ok resume_cancelled wait_for 60 /runs/long 'b["status"] == "cancelled"'

# ---- tokenizer and dataset jobs: inputs named inside --data-dir, outputs named ----
W="$T/hub.db.work"
post /tokenizers '{"name": "tok2", "input": "nonexistent/file.txt", "vocab_size": 500}'
ok tokenizer_job_missing_input error_is 422 nonexistent
post /tokenizers '{"name": "tok2", "input": ["valid.txt"], "vocab_size": "500"}'
ok tokenizer_job_wrong_type error_is 422 vocab_size
post /tokenizers '{"name": "tok2", "input": ["valid.txt"], "vocab_size": 600, "x": 1}'
ok tokenizer_job_unknown_field error_is 422 '"x"'
post /tokenizers '{"input": ["valid.txt"], "vocab_size": 600}'
ok tokenizer_job_needs_name error_is 422 '"name"'
post /tokenizers '{"name": "tok2", "input": ["valid.txt"], "vocab_size": 600}'
ok tokenizer_job_accepted status_is 202
job=$(jget 'b["id"]')
ok tokenizer_job_done wait_for 120 "/jobs/$job" 'b["status"] == "done"'
ok tokenizer_job_output $PY -c "import json; t = json.load(open('$W/tokenizers/tok2/tokenizer.json')); assert t['model']['type'] == 'Unigram' and len(t['model']['vocab']) == 600, len(t['model']['vocab'])"
post /tokenizers '{"name": "tok2", "input": ["valid.txt"], "vocab_size": 600}'
ok tokenizer_job_name_taken error_is 409 tok2
call GET /tokenizers
ok tokenizers_listed test "$(jget '[t["name"] for t in b]')" = "['tok2']"
call GET /corpora
ok corpora_listed $PY -c "import json, sys; n = [c['name'] for c in json.load(open('$T/body'))]; assert 'valid.txt' in n and 'tok.json' in n, n"
post /datasets '{"name": "ds2", "tokenizer": "tok2", "input": "valid.txt", "split": "validation", "seq_len": 4}'
ok dataset_job_bad_seq_len error_is 422 seq_len
post /datasets '{"name": "ds2", "tokenizer": "nosuch", "input": "valid.txt", "split": "validation", "seq_len": 32}'
ok dataset_job_unknown_tokenizer error_is 422 nosuch
post /datasets '{"name": "ds2", "tokenizer": "tok2", "input": "valid.txt", "split": "validation", "seq_len": 32}'
ok dataset_job_accepted status_is 202
job=$(jget 'b["id"]')
ok dataset_job_done wait_for 60 "/jobs/$job" 'b["status"] == "done"'
ok dataset_job_output test -f "$W/datasets/ds2/manifest.json"
call GET /datasets
ok datasets_listed test "$(jget '[t["name"] for t in b]')" = "['ds2']"
# Fails when it runs (no full chunk of 65536 tokens); its half-made folder goes, so the name is free again.
post /datasets '{"name": "ds3", "tokenizer": "tok2", "input": "valid.txt", "split": "validation", "seq_len": 65536}'
job=$(jget 'b["id"]')
ok dataset_job_failure_reported wait_for 60 "/jobs/$job" 'b["status"] == "failed" and "no full chunk" in (b["error"] or "")'
ok dataset_job_failure_cleaned test ! -e "$W/datasets/ds3"

# ---- a job queued before a restart runs once after it ----
stop
start --no-worker || fail restart_start "$(cat "$T/err")"
post /runs "$(runjson later 5)"
ok queued_without_worker status_is 202
sleep 1
call GET /jobs
ok still_queued test "$(jget 'b[0]["status"]')" = queued
stop
start || fail restart_start2 "$(cat "$T/err")"
ok queued_job_runs_after_restart wait_for 120 /runs/later 'b["status"] == "done"'
# The run is done when its process says so; its job when the worker has seen that process exit.
ok no_job_lost_or_duplicated wait_for 10 /jobs '[j["status"] for j in b] == ["done", "failed", "done", "done", "cancelled", "cancelled", "done"]'
# A run into demo whose weights overflow (lr 1e300) fails, saying so, and pushes nothing: demo's
# newest revision, what a request naming no revision gets, stays the last finite one (it became
# the NaN one, and every fill-mask of demo answered 500).
post /runs "$(runjson demo 1 ',"lr":1e300,"warmup_steps":0')"
ok diverged_run_accepted status_is 202
jid=$(jget 'b["id"]')
ok diverged_run_fails_saying_so wait_for 60 "/jobs/$jid" 'b["status"] == "failed" and "training diverged by step 1" in b["error"]'
call POST /fill-mask --data-binary '{"inputs": "It [MASK] .", "model": "demo"}'
ok diverged_run_left_demo_serving status_is 200
call POST /fill-mask --data-binary '{"inputs": "It [MASK] ."}'
call GET /metrics
ok metrics_jobs grep -q '^maskd_jobs{state="done"} 4$' "$T/body"
ok metrics_fill_count grep -q '^maskd_fill_mask_duration_seconds_count [1-9]' "$T/body"
stop
ok clean_stop test $? -eq 0

# ---- --request-timeout: a request still queued behind a pass past its limit answers 503 ----
"$MASKD" serve --request-timeout 0 --db "$T/hub.db" >/dev/null 2>"$T/body"
ok request_timeout_bad_value test $? -eq 2
# A 1 s batching window keeps the first request's pass busy; the second waits behind it.
start --batch-window-ms 1000 --request-timeout 0.3 || fail timeout_start "$(cat "$T/err")"
curl -s --max-time 60 -o "$T/first" -w '%{http_code}' -X POST -H 'Content-Type: application/json' "$base/fill-mask" \
  --data-binary '{"inputs": "It [MASK] .", "model": "tiny-rob"}' >"$T/first.status" &
first=$!
# Give the first request time to arrive and open its window even on a loaded
# machine: arriving first, the second would lead its own batch and pass (a flake seen once).
sleep 0.4
t0=$(date +%s.%N)
call POST /fill-mask --data-binary '{"inputs": "The [MASK] .", "model": "tiny-rob", "parameters": {"top_k": 2}}'
t1=$(date +%s.%N)
ok request_timeout_503 error_is 503 timeout_s
ok request_timeout_prompt test "$($PY -c "print($t1 - $t0 < 0.8)")" = True
wait "$first"
ok request_timeout_first_answered test "$(cat "$T/first.status")" = 200
call POST /fill-mask --data-binary '{"inputs": "It [MASK] .", "model": "tiny-rob"}'
ok request_timeout_alone_ok status_is 200
stop
ok timeout_clean_stop test $? -eq 0
