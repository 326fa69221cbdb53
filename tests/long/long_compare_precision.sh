#!/usr/bin/env bash
# What bf16 costs in quality (issue 15): scripts/compare-precision trains the small preset
# on WikiText-2 (Unigram tokenizer, vocab 8000, seq-len 128) for 3 epochs twice from the
# same seed, `--precision fp32` and `--precision bf16`, and the final validation loss of
# the bf16 run must be within 1% of the fp32 one. The two runs share initial weights, data
# order, masks and dropout, so what separates them is the Linear layers' arithmetic.
# Also: both runs' validation loss falls every epoch (else the comparison says little).
# Slow: the fp32 run is long_train_wikitext.sh's (about 20 min on 2 quiet cores), the bf16
# run about 0.6 of it on a CPU with AVX512-BF16 (slower without: its products are then
# emulated in float).
# Environment: EPOCHS (3), PRESET (small), LR (5e-4), THREADS (2), TRAIN_BYTES (0: all),
# EVAL_BATCHES (0: all), MAX_STEPS (0: all), TOLERANCE (0.01), KEEP=DIR keeps the work.
lib_keep=${KEEP:-}
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" longprec "${1:-}"
ROOT=$PWD
need long_compare_precision_setup "no WikiText-2 at $DATA" -f "$DATA/train.txt"
need long_compare_precision_setup "$M is not built" -x "$M"
/usr/bin/python3 "$ROOT/scripts/compare-precision" --maskd "$M" --data "$DATA" --preset "${PRESET:-small}" \
  --epochs "${EPOCHS:-3}" --lr "${LR:-5e-4}" --train-bytes "${TRAIN_BYTES:-0}" --eval-batches "${EVAL_BATCHES:-0}" \
  --max-steps "${MAX_STEPS:-0}" --threads "${THREADS:-2}" --tolerance "${TOLERANCE:-0.01}" --work "$T/work" \
  --json "$T/out.json" --quiet > "$T/table" 2> "$T/err"
rc=$?
sed 's/^/# /' "$T/table"
case $rc in
  0) pass long_compare_precision_within_tolerance ;;
  1) fail long_compare_precision_within_tolerance "$(grep '^final' "$T/table")" ;;
  *) fail long_compare_precision_runs "rc $rc: $(tail -2 "$T/err" | tr '\n' ' ')"; exit 1 ;;
esac
falls=$(/usr/bin/python3 - "$T/out.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [p for p in ("fp32", "bf16")
       if any(not (b["val_loss"] < a["val_loss"]) for a, b in zip(r[p]["epochs"], r[p]["epochs"][1:]))]
print(",".join(bad) or "ok")
EOF
)
[ "$falls" = ok ] && pass long_compare_precision_val_loss_falls || fail long_compare_precision_val_loss_falls "not every epoch: $falls"
