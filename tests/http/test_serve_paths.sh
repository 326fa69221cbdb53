#!/usr/bin/env bash
# The HTTP API reaches no file it should not (issue 11, finding 1, 3 and 6), tried as
# an attacker would: host paths, "..", symbolic links out of the data folder, NUL
# bytes, "out" fields, flag-shaped values, fields a job does not know or would ignore
# (each refused with 422 naming the field). Each request must be refused with a 4xx,
# queue no job, read nothing (a /dev/zero tokenizer answers at once, with no memory
# growth) and write nothing outside the server's work folder.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serve_paths
serve_kill=KILL

mkdir -p "$T/data/corpus" "$T/outside"
printf 'a small corpus line\nand another one\n' > "$T/data/corpus/train.txt"
echo 'root:secret-hash:19000:0:99999:7:::' > "$T/outside/shadow"
ln -s "$T/outside/shadow" "$T/data/corpus/link-out.txt"
ln -s "$T/outside" "$T/data/dir-out"
printf 'a corpus whose name reads as an option\n' > "$T/data/-x.txt"

serve_start --db "$T/hub.db" --data-dir "$T/data" --quiet || { fail serve_paths_start "$(cat "$T/err")"; exit 1; }

post() {  # path body: the status into $T/status, the body into $T/body
  curl -s --max-time 10 -X POST -H 'Content-Type: application/json' -o "$T/body" -w '%{http_code}' \
    --data-binary "$2" "$base$1" >"$T/status"
}
# refused NAME STATUS [TEXT]: the answer has that status, a JSON error, TEXT in it, and
# nothing from the file outside (the shadow line's hash) in it.
refused() {
  local got; got=$(cat "$T/status")
  if [ "$got" != "$2" ]; then fail "$1" "status $got, not $2: $(head -c 300 "$T/body")"; return; fi
  if grep -q 'secret-hash\|root:' "$T/body"; then fail "$1" "the answer leaks the file: $(head -c 300 "$T/body")"; return; fi
  $PY - "$T/body" "${3:-}" <<'EOF' && pass "$1" || fail "$1" "$(head -c 300 "$T/body")"
import json, sys
b = json.load(open(sys.argv[1]))
assert isinstance(b.get("error"), str) and "detail" in b, b
assert sys.argv[2] in json.dumps(b), (sys.argv[2], b)
EOF
}

# ---- tokenizer jobs ----
post /tokenizers '{"name": "t1", "input": "/etc/passwd", "vocab_size": 100}'
refused tokenizer_absolute_path_refused 422 input
post /tokenizers '{"name": "t1", "input": "../outside/shadow", "vocab_size": 100}'
refused tokenizer_dotdot_refused 422 input
post /tokenizers '{"name": "t1", "input": "corpus/../../outside/shadow", "vocab_size": 100}'
refused tokenizer_inner_dotdot_refused 422 input
post /tokenizers '{"name": "t1", "input": "corpus/link-out.txt", "vocab_size": 100}'
refused tokenizer_symlink_out_refused 422 input
msg_link=$(sed 's/link-out.txt/X/' "$T/body")
post /tokenizers '{"name": "t1", "input": "corpus/missing.txt", "vocab_size": 100}'
msg_missing=$(sed 's/missing.txt/X/' "$T/body")
# A link that leads out and a file that does not exist get the same answer: no oracle.
[ "$msg_link" = "$msg_missing" ] && pass tokenizer_no_existence_oracle || fail tokenizer_no_existence_oracle "$msg_link / $msg_missing"
post /tokenizers '{"name": "t1", "input": "dir-out/shadow", "vocab_size": 100}'
refused tokenizer_dir_symlink_out_refused 422 input
post /tokenizers '{"name": "t1", "input": "corpus/train.txt\u0000/etc/passwd", "vocab_size": 100}'
refused tokenizer_nul_refused 400 u0000   # jansson refuses NUL in strings outright
post /tokenizers '{"name": "t1", "input": "corpus/train.txt", "vocab_size": 100, "out": "/tmp/x.json"}'
refused tokenizer_out_refused 422 out
post /tokenizers '{"name": "../../t1", "input": "corpus/train.txt", "vocab_size": 100}'
refused tokenizer_name_dotdot_refused 422 name
post /tokenizers '{"name": "--help", "input": "corpus/train.txt", "vocab_size": 100}'
refused tokenizer_name_flag_refused 422 name
post /tokenizers '{"name": "t1", "input": "--help", "vocab_size": 100}'
refused tokenizer_input_flag_refused 422 input

# refused_field NAME FIELD: 422 whose detail names FIELD.
refused_field() {
  local got; got=$(cat "$T/status")
  [ "$got" = 422 ] || { fail "$1" "status $got, not 422: $(head -c 300 "$T/body")"; return; }
  $PY - "$T/body" "$2" <<'EOF' && pass "$1" || fail "$1" "$(head -c 300 "$T/body")"
import json, sys
b = json.load(open(sys.argv[1]))
assert isinstance(b.get("error"), str) and b["detail"]["field"] == sys.argv[2], b
EOF
}
post /tokenizers '{"name": "t1", "input": "-x.txt", "vocab_size": 100}'
refused tokenizer_flag_shaped_corpus_refused 422 input
post /tokenizers '{"name": "t1", "input": "corpus/train.txt", "vocab_size": 100, "threads": 4}'
refused_field tokenizer_unknown_field_named threads
post /tokenizers '{"name": "t1", "input": "corpus/train.txt", "vocab_size": 100, "on_restart": "resume"}'
refused_field tokenizer_ignored_field_named on_restart

# ---- dataset jobs ----
post /datasets '{"name": "d1", "tokenizer": "x", "input": "corpus/train.txt", "shard_size": 10}'
refused_field dataset_unknown_field_named shard_size
post /datasets '{"name": "d1", "tokenizer": "x", "input": "-x.txt"}'
refused dataset_flag_shaped_corpus_refused 422 input
post /datasets '{"name": "d1", "tokenizer": "-x.txt", "input": "corpus/train.txt"}'
refused dataset_flag_shaped_tokenizer_refused 422 tokenizer
post /datasets '{"name": "d1", "tokenizer": "x", "input": "corpus/train.txt", "split": "--help"}'
refused dataset_flag_shaped_split_refused 422 split
post /datasets '{"name": "d1", "tokenizer": "/etc/passwd", "input": "corpus/train.txt"}'
refused dataset_tokenizer_path_refused 422 tokenizer
post /datasets '{"name": "d1", "tokenizer": "corpus/link-out.txt", "input": "corpus/train.txt"}'
refused dataset_tokenizer_symlink_refused 422 tokenizer
post /datasets '{"name": "d1", "tokenizer": "x", "input": "corpus/train.txt", "out": "/tmp/evil"}'
refused dataset_out_refused 422 out
post /datasets '{"name": "a/b", "tokenizer": "x", "input": "corpus/train.txt"}'
refused dataset_name_slash_refused 422 name

# ---- runs ----
run() { printf '{"name":"%s","tokenizer":"%s","train":"%s","config":"%s"%s}' "$1" "$2" "$3" "${5:-tiny}" "${4:-}"; }
start=$(date +%s%N)
post /runs "$(run r1 /dev/zero corpus)"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
refused run_dev_zero_refused 422 tokenizer
[ "$ms" -lt 1000 ] && pass run_dev_zero_fast || fail run_dev_zero_fast "${ms} ms"
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
[ "${rss:-999999}" -lt 200000 ] && pass run_dev_zero_no_memory || fail run_dev_zero_no_memory "RSS ${rss} kB"
post /runs "$(run r1 ../outside/shadow corpus)"
refused run_tokenizer_dotdot_refused 422 tokenizer
post /runs "$(run r1 corpus/train.txt /tmp)"
refused run_train_path_refused 422 train
post /runs "$(run r1 corpus/train.txt corpus '' /etc/passwd)"
refused run_config_path_refused 422 config
post /runs "$(run r1 corpus/train.txt corpus ',"out":"/tmp/evil"')"
refused run_out_refused 422 out
post /runs "$(run ../../.. corpus/train.txt corpus)"
refused run_name_dotdot_refused 422 name
post /runs '{"resume": "--help"}'
refused run_resume_flag_refused 422 resume
post /runs "$(run r1 corpus/train.txt corpus ',"learning_rate":0.1')"
refused_field run_unknown_field_named learning_rate
post /runs "$(run r1 corpus/train.txt corpus ',"requeued_from":3')"
refused_field run_queue_field_named requeued_from
post /runs '{"resume": "r1", "lr": 0.5}'
refused_field run_resume_other_field_named lr
post /runs "$(run r1 -x.txt corpus)"
refused run_flag_shaped_tokenizer_refused 422 tokenizer
post /runs '{"resume": "no-such-run"}'
refused run_resume_unknown_refused 422 no-such-run

# ---- nothing was queued, read or written ----
curl -s --max-time 10 "$base/jobs" >"$T/jobs"
[ "$(cat "$T/jobs")" = "[]" ] && pass no_job_queued || fail no_job_queued "$(head -c 300 "$T/jobs")"
[ ! -e /tmp/evil ] && [ ! -e /tmp/x.json ] && pass nothing_written_outside || fail nothing_written_outside "found /tmp/evil or /tmp/x.json"
left=$(find "$T" -mindepth 1 -newer "$T/out" -not -path "$T/hub.db*" -not -name status -not -name body -not -name jobs | head -3)
[ -z "$left" ] && pass only_work_folder_written || fail only_work_folder_written "$left"

# ---- a server without --data-dir names no corpus ----
serve_stop
serve_start --db "$T/hub2.db" --quiet
post /tokenizers '{"name": "t1", "input": "corpus/train.txt", "vocab_size": 100}'
refused no_data_dir_no_corpus 422 data-dir
curl -s --max-time 10 "$base/corpora" >"$T/body"
[ "$(cat "$T/body")" = "[]" ] && pass no_data_dir_lists_nothing || fail no_data_dir_lists_nothing "$(cat "$T/body")"
serve_stop && pass serve_paths_stop || fail serve_paths_stop "exit status $?"

# ---- a job whose output name was taken after it was queued fails and removes nothing ----
# Both jobs are queued before the worker runs (--no-worker); the first makes tokenizers/dup,
# the second finds the name taken when it runs: it fails, and the first's output stays.
for i in $(seq 200); do echo "line $i of a corpus with some words in it, words and more words"; done >"$T/data/corpus/words.txt"
start_server() { serve_start --db "$T/hub3.db" --data-dir "$T/data" --quiet "$@"; }
start_server --no-worker
post /tokenizers '{"name": "dup", "input": "corpus/words.txt", "vocab_size": 40}'
first=$(cat "$T/status")
post /tokenizers '{"name": "dup", "input": "corpus/words.txt", "vocab_size": 40}'
serve_stop
start_server
for _ in $(seq 300); do
  curl -s --max-time 10 "$base/jobs" >"$T/jobs"
  $PY -c 'import json,sys; sys.exit(0 if all(j["status"] not in ("queued", "running") for j in json.load(open(sys.argv[1]))) else 1)' "$T/jobs" && break
  sleep 0.1
done
$PY - "$T/jobs" "$first" "$(cat "$T/status")" "$T/hub3.db.work/tokenizers/dup/tokenizer.json" <<'EOF' && pass taken_name_job_keeps_the_first_output || fail taken_name_job_keeps_the_first_output "$(head -c 600 "$T/jobs")"
import json, os, sys
jobs = sorted(json.load(open(sys.argv[1])), key=lambda j: j["id"])
assert sys.argv[2] == sys.argv[3] == "202", sys.argv[2:4]
assert [j["status"] for j in jobs] == ["done", "failed"], jobs
assert "already exists" in jobs[1]["error"], jobs[1]
assert os.path.isfile(sys.argv[4]), "the first job's tokenizer.json is gone"
EOF
serve_stop
