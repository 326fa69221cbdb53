#!/usr/bin/env bash
# maskd fill-mask --precision bf16 (issue 15): a model trained a few steps answers with
# the same JSON shape and the same top tokens as at fp32, from the store and from a folder (scripts/compare-fill-precision
# on 50 masked WikiText-2 test sentences, the full targets: top-1 >= 99%, top-5 overlap
# >= 4.5); a bad --precision is refused in one line; the weights streamed from the store
# are checked against their sha256 (a changed byte in the stored blob is refused as damage).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" fillprec
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
need fill_precision_setup "$DATA/test.txt missing (MASKD_DATA)" -f "$DATA/test.txt"
small_training_setup fill_precision_setup 60000 || exit 1
"$M" train --db "$T/p.db" --name prec --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --max-steps 30 --batch 8 --lr 3e-3 --threads 1 --seed 4 --quiet 2>"$T/train.err" ||
  { fail fill_precision_train "$(tail -2 "$T/train.err")"; exit 1; }

texts=("The [MASK] of the city ." "He was [MASK] in 1990 ." "[MASK] is a game of the series .")
"$M" fill-mask --db "$T/p.db" --model prec --quiet --top-k 3 "${texts[@]}" > "$T/fp32.json" 2>"$T/fp32.err" &&
  "$M" fill-mask --db "$T/p.db" --model prec --quiet --top-k 3 --precision bf16 "${texts[@]}" > "$T/bf16.json" 2>"$T/bf16.err" ||
  fail fill_precision_runs "$(cat "$T/fp32.err" "$T/bf16.err" | tail -2)"
msg=$($PY - "$T/fp32.json" "$T/bf16.json" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
def shape(x):
    return [[(sorted(c), type(c["score"]).__name__) for c in cands] for cands in x]
problems = []
if shape(a) != shape(b): problems.append(f"shapes differ: {shape(a)[0][:1]} vs {shape(b)[0][:1]}")
elif [[c["token"] for c in x] for x in a] != [[c["token"] for c in x] for x in b]: problems.append("top-3 tokens differ")
elif all(x == y for x, y in zip(a, b)): problems.append("bf16 scores equal fp32's exactly: were the weights kept in bf16?")
print("; ".join(problems) or "ok")   # a crash prints nothing: a failure
EOF
)
[ "$msg" = ok ] && pass fill_precision_bf16_same_shape_and_tokens ||
  fail fill_precision_bf16_same_shape_and_tokens "${msg:-the check crashed}"

$PY scripts/compare-fill-precision --db "$T/p.db" --model prec --data "$DATA/test.txt" --n 50 --window 6 --threads 1 --check \
  --maskd "$M" || fail fill_precision_compare "compare-fill-precision exited $?"
out=$("$M" fill-mask --db "$T/p.db" --model prec --precision fp16 "[MASK] ." 2>&1); rc=$?
[ $rc = 2 ] && [ "$(wc -l <<<"$out" | tr -d ' ')" -le 2 ] && grep -q -- "--precision: expected one of fp32, bf16, got 'fp16'" <<<"$out" &&
  pass fill_precision_refuses_unknown || fail fill_precision_refuses_unknown "exit $rc: $out"

# A folder (--model-dir, read with pread) at bf16 answers as the store's revision does.
"$M" export --db "$T/p.db" prec "$T/dir" >/dev/null 2>&1 &&
  "$M" fill-mask --model-dir "$T/dir" --quiet --top-k 3 --precision bf16 "${texts[@]}" > "$T/dir16.json" 2>"$T/dir16.err" &&
  cmp -s "$T/bf16.json" "$T/dir16.json" && pass fill_precision_bf16_folder_same_as_store ||
  fail fill_precision_bf16_folder_same_as_store "$(head -c 300 "$T/dir16.json") $(tail -1 "$T/dir16.err")"

# A byte changed in the middle of the stored weights: the streamed load notices (sha256).
w=$(sqlite3 "$T/p.db" "SELECT weights FROM revisions LIMIT 1")
sqlite3 "$T/p.db" "UPDATE blob_chunks SET data = CAST(substr(data, 1, length(data) - 100) || X'DEADBEEF' || substr(data, length(data) - 95) AS BLOB) WHERE sha256 = '$w' AND idx = 0"
for p in fp32 bf16; do
  out=$("$M" fill-mask --db "$T/p.db" --model prec --precision $p "[MASK] ." 2>&1); rc=$?
  [ $rc = 1 ] && grep -q "damaged (sha256 differs)" <<<"$out" && pass "fill_precision_damaged_blob_refused_$p" ||
    fail "fill_precision_damaged_blob_refused_$p" "exit $rc: $out"
done
