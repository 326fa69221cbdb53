#!/usr/bin/env bash
# maskd serve --precision / --precision-for (issue 15): one server holding the same
# trained model under two names, one served from bf16 weights; POST /fill-mask answers
# both with the same JSON shape and the same top tokens on a few sentences, the bf16 one
# with its own (bf16) scores; /healthz and the startup line name the precisions (--help
# says which shows what); a
# server whose default is bf16 answers as the bf16-named model does; bad values are
# refused at start, in one line, with exit status 2.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serveprec
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
serve_wrap=(timeout 300)
small_training_setup serve_precision_setup 60000 || exit 1
{ "$M" train --db "$T/p.db" --name prec --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
    --max-steps 30 --batch 8 --lr 3e-3 --threads 1 --seed 4 --quiet &&
  "$M" export --db "$T/p.db" prec "$T/prec-dir" && "$M" import --db "$T/p.db" "$T/prec-dir" prec16; } >"$T/setup.log" 2>&1 ||
  { fail serve_precision_setup "$(tail -2 "$T/setup.log")"; exit 1; }

ask() {  # model, out file: the answers to the sentences, one JSON per line
  local s
  : >"$2"
  for s in "The [MASK] of the city ." "He was [MASK] in 1990 ." "[MASK] is a game of the series ." "It is [MASK] and [MASK] ."; do
    curl -s --max-time 60 -X POST -H 'Content-Type: application/json' \
      --data-binary "$($PY -c 'import json,sys; print(json.dumps({"inputs": sys.argv[1], "model": sys.argv[2], "parameters": {"top_k": 3}}))' "$s" "$1")" \
      "$base/fill-mask" >>"$2"
    echo >>"$2"
  done
}
same_tokens() {  # name, file a, file b, "differ" when the scores must differ (else equal)
  local msg
  msg=$($PY - "$2" "$3" "$4" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
b = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
def flat(x):   # one mask: a list of candidates; several: a list of lists
    return [x] if x and isinstance(x[0], dict) else x
def shape(x):
    return [[sorted(c) for c in cands] for cands in flat(x)]
def tokens(x):
    return [[c["token"] for c in cands] for cands in flat(x)]
problems = []
if len(a) != 4 or len(b) != 4 or not all(isinstance(x, list) for x in a + b): problems.append(f"not 4 answers: {a[:1]} {b[:1]}")
else:
    if [shape(x) for x in a] != [shape(x) for x in b]: problems.append("JSON shapes differ")
    if [tokens(x) for x in a] != [tokens(x) for x in b]: problems.append(f"top tokens differ: {tokens(a[0])} vs {tokens(b[0])}")
    if (sys.argv[3] == "differ") == (a == b): problems.append("scores " + ("equal" if a == b else "differ"))
print("; ".join(problems) or "ok")   # a crash prints nothing: a failure
EOF
)
  [ "$msg" = ok ] && pass "$1" || fail "$1" "${msg:-the check crashed}"
}

serve_start --db "$T/p.db" --quiet --no-worker --precision-for prec16=bf16 || { fail serve_precision_start "$(tail -2 "$T/err")"; exit 1; }
grep -qx 'maskd serve: fill-mask weights fp32 (prec16 bf16)' "$T/out" && pass serve_precision_startup_line ||
  fail serve_precision_startup_line "$(grep -v listening "$T/out")"
ask prec "$T/fp32.txt"
ask prec16 "$T/bf16.txt"
same_tokens serve_precision_bf16_same_shape_and_top_tokens "$T/fp32.txt" "$T/bf16.txt" differ
curl -s "$base/healthz" >"$T/health.json"
msg=$($PY - "$T/health.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))["precision"]["fill_mask"]
# Open without the token: the default only, no repository named (--auth-reads hides them).
print("ok" if p == {"default": "fp32"} else f"healthz precision: {p}")
EOF
)
[ "$msg" = ok ] && pass serve_precision_healthz || fail serve_precision_healthz "${msg:-the check crashed}"
serve_stop

# --precision bf16 for every model: prec is now answered as prec16 was (the same bf16 weights).
serve_start --db "$T/p.db" --quiet --no-worker --precision bf16 || { fail serve_precision_start_bf16 "$(tail -2 "$T/err")"; exit 1; }
grep -qx 'maskd serve: fill-mask weights bf16' "$T/out" && pass serve_precision_startup_line_bf16 ||
  fail serve_precision_startup_line_bf16 "$(grep -v listening "$T/out")"
ask prec "$T/all16.txt"
same_tokens serve_precision_default_bf16_is_bf16 "$T/bf16.txt" "$T/all16.txt" equal
serve_stop

# --help says where the per-repository precisions are shown: the start-up line, not
# /healthz (open without the token, it shows the default only, as checked above).
"$M" serve --help >"$T/help.txt" 2>&1
ok serve_precision_for_help_true bash -c "grep -A2 -- '--precision-for' '$T/help.txt' | grep -q 'start-up line lists them' &&
  ! grep -q '/healthz lists them' '$T/help.txt'"

refuse() {  # name, expected text, serve args...
  local name=$1 want=$2 out rc; shift 2
  out=$(timeout 20 "$M" serve --db "$T/p.db" --port 0 --no-worker "$@" 2>&1); rc=$?
  out=$(grep -v '^maskd: note:' <<<"$out")
  [ $rc = 2 ] && [ "$(wc -l <<<"$out" | tr -d ' ')" = 1 ] && grep -qF -- "$want" <<<"$out" && pass "$name" ||
    fail "$name" "exit $rc: $out"
}
refuse serve_precision_refuses_unknown "--precision: expected one of fp32, bf16, got 'fp16'" --precision fp16
refuse serve_precision_for_refuses_value "--precision-for prec: expected fp32 or bf16, got 'int8'" --precision-for prec=int8
refuse serve_precision_for_refuses_form "--precision-for: expected NAME=fp32|bf16, got 'prec'" --precision-for prec
refuse serve_precision_for_refuses_name "not allowed" --precision-for 'a b=bf16'
