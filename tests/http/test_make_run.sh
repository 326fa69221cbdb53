#!/usr/bin/env bash
# `make run` (scripts/run) on an empty store: the server answers at once, the
# demonstration model is trained through the job API (tokenizer, datasets and run
# registered by name), fill-mask answers 503 with Retry-After until the first revision
# is pushed, then answers from it while training goes on, and a request that names no
# revision gets the newest one when another lands (the cache keys models by commit).
. "$(dirname "$0")/../lib.sh" test_make_run
need data_present "WikiText-2 is not in $DATA" -f "$DATA/train.txt"
port=$((20000 + RANDOM % 20000))
api=http://127.0.0.1:$port
export MASKD_DB=$T/store.db PORT=$port MASKD_DATA=$DATA_ROOT DEMO_STEPS=150 DEMO_CHECKPOINT=50 MASKD_TOKEN=secret-token
bash scripts/run >"$T/run.out" 2>&1 &
runner=$!
at_exit 'kill -TERM $runner 2>/dev/null; wait $runner 2>/dev/null'

scores() { jq -c '[.[] | [.token, (.score * 10000 | round)]]'; }
reference() { "$M" fill-mask --db "$MASKD_DB" --model "demo@$1" --threads 1 "The capital of France is [MASK] ." 2>/dev/null | scores; }
ask() { curl -s -o "$T/fill" -w '%{http_code}' -X POST "$api/fill-mask" -H 'Content-Type: application/json' \
          -d '{"inputs":"The capital of France is [MASK] ."}'; }
# Every answer while the demo trains: its status, the run's status, the model's revisions then.
seen_503=0 retry_after=0 answered_running=0 first_answer=
for _ in $(seq 900); do
  code=$(ask)
  if [ "$code" = 503 ]; then
    seen_503=1
    curl -s -D - -o /dev/null -X POST "$api/fill-mask" -H 'Content-Type: application/json' \
      -d '{"inputs":"a [MASK] ."}' | grep -qi '^retry-after: ' && retry_after=1
  elif [ "$code" = 200 ] && [ -z "$first_answer" ]; then
    first_answer=$(cat "$T/fill")
    # The newest revision now, and maskd fill-mask's answer from it (before training
    # goes further and keep-last prunes it).
    first_rev=$(curl -s "$api/models/demo" | jq '.revisions[0].seq')
    first_ref=$(reference "$first_rev")
    status=$(curl -s "$api/runs/1" | jq -r .status)
    [ "$status" = running ] && answered_running=1
  fi
  grep -q "the demonstration model is trained" "$T/run.out" && break
  kill -0 $runner 2>/dev/null || break
  sleep 0.2
done
ok make_run_trains_the_demo grep -q "the demonstration model is trained" "$T/run.out"
ok fill_mask_503_before_the_first_revision test "$seen_503" = 1
ok fill_mask_503_has_retry_after test "$retry_after" = 1
ok fill_mask_answers_while_training_goes_on test "$answered_running" = 1
# The early answer came from the first revision (the newest the store had then), and
# the answer now from the newest: the same numbers as maskd fill-mask at those revisions.
ok early_answer_is_the_first_revision test -n "$first_ref" -a "$(scores <<<"$first_answer")" = "$first_ref" -a "$first_rev" = 1
ask >/dev/null
last=$(curl -s "$api/models/demo" | jq '.revisions[0].seq')
last_ref=$(reference "$last")
ok later_answer_is_the_newest_revision test -n "$last_ref" -a "$(scores <"$T/fill")" = "$last_ref"
ok demo_pushed_a_revision_every_50_steps test "$last" = 3
# What the demo made is registered by name, as the page's dropdowns list it.
ok demo_tokenizer_listed bash -c "curl -s $api/tokenizers | jq -e 'any(.[]; .name == \"demo\")' >/dev/null"
ok demo_datasets_listed bash -c "curl -s $api/datasets | jq -e '[.[].name] | index(\"demo-train\") and index(\"demo-valid\")' >/dev/null"
ok terminal_shows_progress grep -q "step .* of 150" "$T/run.out"
# A second start finds the model and trains nothing.
kill -TERM $runner; wait $runner
bash scripts/run >"$T/run2.out" 2>&1 &
runner=$!
wait_until 100 0.1 grep -q "maskd is serving" "$T/run2.out"
ok second_start_serves_at_once test "$(ask)" = 200
jobs_before=$(curl -s "$api/jobs" | jq length)
sleep 1   # what a second start would submit, it submits right after its banner
ok second_start_trains_nothing test "$(curl -s "$api/jobs" | jq length)" = "$jobs_before" -a "$jobs_before" -gt 0
ok second_start_says_nothing_of_a_demo bash -c "! grep -q 'training a demonstration' '$T/run2.out'"
# However the script ends, the server it started ends with it.
kill -TERM $runner; wait $runner
ok server_stops_with_the_script bash -c "! curl -s -o /dev/null $api/healthz"
