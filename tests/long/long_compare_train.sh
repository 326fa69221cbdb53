#!/usr/bin/env bash
# maskd's training against PyTorch's on the same shards and run description
# (scripts/compare-train): the tiny preset on a cut of WikiText-2, then the issue's
# criterion, the final validation loss of maskd within 2% of PyTorch's; also that both
# sides' validation loss falls every epoch (else the comparison would say nothing).
#
# Why this size, and what it can tell: the two runs share data and hyper-parameters, not
# random numbers (init, shuffling, masking, dropout: each side its own), so their losses
# differ by seed noise even when both are right. Small models first fall from ln(V) = 9
# to the unigram plateau (loss ~6.1 here: predicting each masked token by its frequency;
# compare-train prints that baseline) and stay there for many hundred steps before they
# use the context. At this size (600 KB of train.txt: 1406 samples, 87 steps of 16 per
# epoch, 2 epochs) both sides end on the plateau: measured 6.1248 (maskd) vs 6.1114
# (torch) = 1.002 (and torch alone at lr 2e-3 for 174 steps, on 40 validation batches,
# 6.1107): the spread there is ~0.2%, far inside 2%. What the check catches is therefore what moves the descent and the
# plateau level: the optimizer, schedule, loss scaling, masking proportions and special
# ids, the evaluation's definition (mean over labelled tokens of the whole validation
# set, 2612 samples, ~50k labels, mask noise ~0.3%); not a bug that only hurts the use of
# context (attention), which needs runs past the plateau (thousands of steps: see
# scripts/compare-train --preset small on the whole corpus, BENCHMARKS.md). 71 s in all on the
# 2 cores when they were quiet (maskd 21 s, torch 45 s with evaluations), ~6 min under the
# team's load; set TRAIN_BYTES/EPOCHS/LR/PRESET for longer runs.
# Environment: TRAIN_BYTES (600000), VALID_BYTES (0: all), EPOCHS (2), PRESET (tiny), LR (5e-4),
# TOLERANCE (0.02), THREADS (2), KEEP=DIR keeps the work.
lib_keep=${KEEP:-}
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" longcmp "${1:-}"
ROOT=$PWD
need long_compare_train_setup "no WikiText-2 at $DATA" -f "$DATA/train.txt"
need long_compare_train_setup "$M is not built" -x "$M"
/usr/bin/python3 "$ROOT/scripts/compare-train" --maskd "$M" --data "$DATA" --preset "${PRESET:-tiny}" \
  --epochs "${EPOCHS:-2}" --lr "${LR:-5e-4}" --train-bytes "${TRAIN_BYTES:-600000}" --valid-bytes "${VALID_BYTES:-0}" \
  --threads "${THREADS:-2}" --timing-rounds 0 --tolerance "${TOLERANCE:-0.02}" --work "$T/work" --json "$T/out.json" --quiet \
  > "$T/table" 2> "$T/err"
rc=$?
sed 's/^/# /' "$T/table"
case $rc in
  0) pass long_compare_train_within_tolerance ;;
  1) fail long_compare_train_within_tolerance "$(grep '^final' "$T/table")" ;;
  *) fail long_compare_train_runs "rc $rc: $(tail -2 "$T/err" | tr '\n' ' ')"; exit 1 ;;
esac
falls=$(/usr/bin/python3 - "$T/out.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [side for side in ("maskd", "torch")
       if any(not (b["val_loss"] < a["val_loss"]) for a, b in zip(r[side]["epochs"], r[side]["epochs"][1:]))]
print(",".join(bad) or "ok")
EOF
)
[ "$falls" = ok ] && pass long_compare_train_val_loss_falls || fail long_compare_train_val_loss_falls "not every epoch: $falls"
