#!/usr/bin/env bash
# POST /fill-mask tried as an attacker would (issue 11, finding 4: a 748-byte request
# with 100 masks and a large top_k took 38 s and 2.2 GB for a 561 MB answer). The
# issue's request shapes (100 and 200 masks, a huge top_k, 256 inputs, a long text)
# are refused with 413 naming the limit and its flag, each within a second, and the
# server's peak memory does not move. Each limit (--max-inputs, --max-tokens,
# --max-masks, --max-top-k, --max-answer-bytes) answers a request at its value and
# refuses one past it; /healthz shows the limits in force. A refusal's status comes
# from the problem, not from the input's form: the same too-long text is 400 as a
# string and inside a list, the same over-limit text 413 both ways. maskd fill-mask
# takes the same limits. --request-timeout counts only the wait behind a busy model:
# a cold model's load is not counted, and an idle model answers a request past it.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" fill_limits
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

[ -f "$DATA/valid.txt" ] || { fail fill_limits_setup "$DATA/valid.txt missing (MASKD_DATA)"; exit 1; }
head -300 "$DATA/valid.txt" > "$T/corpus.txt"
{ "$M" tokenizer train --quiet --vocab-size 1000 --input "$T/corpus.txt" --out "$T/tok.json" &&
  "$M" prepare --quiet --tokenizer "$T/tok.json" --input "$T/corpus.txt" --split train --seq-len 32 --out "$T/shards" &&
  "$M" train --quiet --db "$T/hub.db" --name tiny --tokenizer "$T/tok.json" --train "$T/shards" --config tiny \
    --max-steps 1 --batch 4; } >"$T/setup.log" 2>&1 || { fail fill_limits_setup "$(tail -3 "$T/setup.log")"; exit 1; }

start() { serve_start --db "$T/hub.db" --quiet "$@"; }
stop() { serve_stop; }
# fill FILE: POSTs the body in FILE; "STATUS SECONDS" into $T/status, the answer into $T/body.
fill() {
  curl -s --max-time 120 -X POST -H 'Content-Type: application/json' -o "$T/body" -w '%{http_code} %{time_total}' \
    --data-binary "@$1" "$base/fill-mask" >"$T/status" 2>/dev/null
}
# body FILE PYTHON-EXPR: writes json.dumps(EXPR) to FILE.
body() { $PY -c "import json, sys; json.dump($2, open(sys.argv[1], 'w'))" "$1"; }
status_is() { [ "$(cut -d' ' -f1 "$T/status")" = "$1" ]; }
quick() { $PY -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1.0 else 1)" "$(cut -d' ' -f2 "$T/status")"; }
# refused LIMIT MAX GOT: 413, {"error": "... LIMIT ...", "detail": {"limit", "flag", "max", "got"}} (GOT: at least).
refused() {
  status_is 413 && $PY - "$T/body" "$@" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
limit, mx, got = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = b["detail"]
assert isinstance(b["error"], str) and limit in b["error"], b
assert d["limit"] == limit and d["flag"] == "--" + limit.replace("_", "-"), d
assert d["max"] == mx and d["got"] >= got, d
EOF
}
ntokens() { printf '%s\n' "$@" | "$M" tokenizer encode --tokenizer "$T/tok.json" | awk '{n += NF} END {print n}'; }
kb() { awk -v k="$2" '$1 == k ":" {print $2}' "/proc/$1/status"; }

# ---- the defaults, against the issue's requests ----
start || { fail fill_limits_start "$(cat "$T/err")"; exit 1; }
curl -s --max-time 20 "$base/healthz" >"$T/body"
ok healthz_limits $PY -c "
import json, sys
l = json.load(open('$T/body'))['limits']['fill_mask']
assert l == {'max_inputs': 64, 'max_tokens': 256, 'max_masks': 32, 'max_top_k': 100, 'max_answer_bytes': 4194304}, l"
body "$T/ok.json" '{"inputs": "the [MASK] of the city .", "model": "tiny"}'
fill "$T/ok.json"
ok fill_answers status_is 200
hwm0=$(kb "$pid" VmHWM)

body "$T/a.json" '{"inputs": " ".join(["[MASK]"] * 100), "parameters": {"top_k": 1000000}}'
ok issue_request_is_748_bytes test "$(wc -c <"$T/a.json")" -le 760
fill "$T/a.json"
ok issue_100_masks_huge_top_k refused max_top_k 100 1000000
ok issue_100_masks_huge_top_k_quick quick
body "$T/b.json" '{"inputs": " ".join(["[MASK]"] * 100), "parameters": {"top_k": 100}}'
fill "$T/b.json"
ok issue_100_masks refused max_masks 32 33
ok issue_100_masks_quick quick
body "$T/c.json" '{"inputs": "a " + " ".join(["[MASK]"] * 200) + " b", "parameters": {"top_k": 50}}'
fill "$T/c.json"
ok issue_200_masks refused max_masks 32 33
ok issue_200_masks_quick quick
body "$T/d.json" '{"inputs": ["the [MASK] ."] * 256}'
fill "$T/d.json"
ok issue_256_inputs refused max_inputs 64 256
ok issue_256_inputs_quick quick
long=$(printf 'the %.0s' $(seq 280))
n_long=$(ntokens "${long}[MASK]")
body "$T/e.json" "{'inputs': '${long}[MASK]'}"
fill "$T/e.json"
ok long_text_max_tokens refused max_tokens 256 "$n_long"
ok long_text_quick quick
hwm1=$(kb "$pid" VmHWM)
ok amplification_no_memory_jump test $((hwm1 - hwm0)) -lt 20480
fill "$T/ok.json"
ok fill_still_answers status_is 200

# One status per problem, whatever the input's form.
toolong=$(printf 'the %.0s' $(seq 600))
body "$T/s.json" "{'inputs': '${toolong}[MASK]'}"
body "$T/l.json" "{'inputs': ['the [MASK] .', '${toolong}[MASK]']}"
fill "$T/s.json"; s1=$(cut -d' ' -f1 "$T/status")
fill "$T/l.json"; s2=$(cut -d' ' -f1 "$T/status")
ok too_long_same_status_in_list test "$s1 $s2" = "400 400"
ok too_long_names_the_input grep -q 'inputs\[1\]: input of .* tokens is longer than the model' "$T/body"
body "$T/s2.json" "{'inputs': '${long}[MASK]'}"
body "$T/l2.json" "{'inputs': ['${long}[MASK]']}"
fill "$T/s2.json"; s1=$(cut -d' ' -f1 "$T/status")
fill "$T/l2.json"; s2=$(cut -d' ' -f1 "$T/status")
ok over_limit_same_status_in_list test "$s1 $s2" = "413 413"
body "$T/k.json" '{"inputs": ["the [MASK] ."], "parameters": {"top_k": "3"}}'
fill "$T/k.json"
ok bad_top_k_422 status_is 422

# ---- each limit at its value and one past it ----
one='the [MASK] of the old city was built in the year .'
two='a [MASK] b c d e f g'
tok=$(ntokens "$one" "$two")
body "$T/tok.json.req" "{'inputs': ['$one', '$two'], 'parameters': {'top_k': 7}}"
body "$T/bytes.req" "{'inputs': 'the [MASK] .', 'parameters': {'top_k': 7}}"
fill "$T/bytes.req"
cp "$T/body" "$T/bytes.answer"
size=$(wc -c <"$T/bytes.answer")
ok answer_size_known test "$size" -gt 100 -a "$tok" -gt 12
stop

start --max-inputs 3 --max-tokens "$tok" --max-masks 4 --max-top-k 7 ||
  { fail fill_limits_start2 "$(cat "$T/err")"; exit 1; }
curl -s --max-time 20 "$base/healthz" >"$T/body"
ok healthz_limits_flags $PY -c "
import json
l = json.load(open('$T/body'))['limits']['fill_mask']
assert l == {'max_inputs': 3, 'max_tokens': $tok, 'max_masks': 4, 'max_top_k': 7, 'max_answer_bytes': 4194304}, l"
body "$T/r.json" '{"inputs": ["[MASK] ."] * 3}'
fill "$T/r.json"; ok max_inputs_at status_is 200
body "$T/r.json" '{"inputs": ["[MASK] ."] * 4}'
fill "$T/r.json"; ok max_inputs_past refused max_inputs 3 4
body "$T/r.json" '{"inputs": "[MASK] [MASK] [MASK] [MASK]"}'
fill "$T/r.json"; ok max_masks_at status_is 200
body "$T/r.json" '{"inputs": ["[MASK] [MASK] [MASK]", "[MASK] [MASK]"]}'
fill "$T/r.json"; ok max_masks_past refused max_masks 4 5
body "$T/r.json" '{"inputs": "[MASK] .", "parameters": {"top_k": 7}}'
fill "$T/r.json"; ok max_top_k_at status_is 200
body "$T/r.json" '{"inputs": "[MASK] .", "parameters": {"top_k": 8}}'
fill "$T/r.json"; ok max_top_k_past refused max_top_k 7 8
fill "$T/tok.json.req"; ok max_tokens_at status_is 200
stop
start --max-tokens $((tok - 1)) --max-answer-bytes "$size" || { fail fill_limits_start3 "$(cat "$T/err")"; exit 1; }
fill "$T/tok.json.req"; ok max_tokens_past refused max_tokens $((tok - 1)) "$tok"
fill "$T/bytes.req"
ok max_answer_bytes_at status_is 200
ok max_answer_bytes_at_same_answer cmp -s "$T/body" "$T/bytes.answer"
stop
start --max-answer-bytes $((size - 1)) || { fail fill_limits_start4 "$(cat "$T/err")"; exit 1; }
fill "$T/bytes.req"; ok max_answer_bytes_past refused max_answer_bytes $((size - 1)) "$size"
stop

# ---- --request-timeout counts the wait behind a busy model, not its loading ----
# A limit shorter than any load: the cold model's first request and the idle model's
# next ones are answered (each was refused 503 "busy" when the clock started before
# the model was loaded, or ran out before the idle runner took the job).
start --request-timeout 0.001 || { fail fill_limits_start5 "$(cat "$T/err")"; exit 1; }
fill "$T/ok.json"; ok request_timeout_cold_model status_is 200
n=0
for _ in 1 2 3 4 5; do fill "$T/ok.json"; status_is 200 && n=$((n + 1)); done
ok request_timeout_idle_model test "$n" = 5
stop

# ---- the command line: maskd fill-mask and maskd serve take the same flags ----
"$M" fill-mask --db "$T/hub.db" --model tiny --max-masks 2 "[MASK] [MASK] [MASK]" >"$T/body" 2>"$T/err"; rc=$?
ok cli_limit_refused test "$rc" -ne 0 -a -n "$(grep 'max_masks' "$T/err")"
"$M" fill-mask --db "$T/hub.db" --model tiny --max-masks 3 --max-top-k 0 --top-k 200 "[MASK] [MASK] [MASK]" >"$T/body" 2>"$T/err"
ok cli_limit_at $PY -c "import json; r = json.load(open('$T/body')); assert len(r) == 3 and len(r[0]) == 200, len(r)"
"$M" fill-mask --db "$T/hub.db" --model tiny --max-masks -1 "[MASK]" >/dev/null 2>"$T/err"; rc=$?
ok cli_limit_bad_value test "$rc" -eq 2 -a -n "$(grep -- '--max-masks' "$T/err")"
"$M" serve --max-top-k x --db "$T/hub.db" >/dev/null 2>"$T/err"; rc=$?
ok serve_limit_bad_value test "$rc" -eq 2 -a -n "$(grep -- '--max-top-k' "$T/err")"
"$M" serve --help >"$T/body"
ok serve_help_limits grep -q -- '--max-answer-bytes' "$T/body"
