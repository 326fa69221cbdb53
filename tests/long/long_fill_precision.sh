#!/usr/bin/env bash
# Issue 15's targets for serving from bf16 weights, measured:
#   quality  a small-preset model (H256 L4, 8000-piece tokenizer) trained 1000 steps on the
#            first 5 MB of WikiText-2 train, then scripts/compare-fill-precision on 200 masked
#            test sentences: top-1 agreement with fp32 >= 99%, mean top-5 overlap >= 4.5
#   memory   scripts/bench-serve-memory on a base-sized model (V32000 H768 L12): peak RSS of
#            fill-mask and of serve at bf16 <= 0.55x fp32
# Slow (about 15 minutes on 2 cores). KEEP=DIR keeps (and reuses) the work.
lib_keep=${KEEP:-}
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" longfillprec "${1:-}"
[ -f "$DATA/train.txt" ] || { fail long_fill_precision_setup "no WikiText-2 at $DATA"; exit 1; }
if [ ! -f "$T/q.db" ]; then
  head -c 5000000 "$DATA/train.txt" | sed '$d' > "$T/tr.txt"
  { "$M" tokenizer train --input "$T/tr.txt" --vocab-size 8000 --out "$T/tok.json" &&
    "$M" prepare --tokenizer "$T/tok.json" --input "$T/tr.txt" --split train --seq-len 128 --out "$T/train" --quiet &&
    "$M" train --db "$T/q.db.tmp" --name wt-small --tokenizer "$T/tok.json" --train "$T/train" --config small \
      --max-steps 1000 --batch 16 --lr 1e-3 --seed 1 --quiet && mv "$T/q.db.tmp" "$T/q.db"; } >"$T/setup.log" 2>&1 ||
    { fail long_fill_precision_setup "$(tail -2 "$T/setup.log")"; exit 1; }
fi
$PY scripts/compare-fill-precision --db "$T/q.db" --model wt-small --data "$DATA/test.txt" --n 200 --check --prefix long_fill_precision_ --maskd "$M" ||
  fail long_fill_precision_compare "compare-fill-precision exited $?"
$PY scripts/bench-serve-memory --preset base --work "$T/mem" --check --maskd "$M" "$DATA_ROOT"
