#!/usr/bin/env bash
# maskd's training against PyTorch's on the same shards and run description
# (scripts/compare-train): the tiny preset on a cut of WikiText-2, then the issue's
# criterion, the final validation loss of maskd within 2% of PyTorch's; also that both
# sides' validation loss falls every epoch (else the comparison would say nothing).
#
# Why this size: the two runs share the data and the hyper-parameters, not the random
# numbers (init, shuffling, masking, dropout: each side its own), so their losses differ
# by seed noise even when both are right. Within the first few dozen steps both sit on
# the unigram plateau (loss 7-8), where when each leaves it depends on the seed and the
# gap can pass 2%; evaluation on a small validation cut adds mask noise. About 230 steps
# (600 KB of train.txt: ~1450 samples of 128 tokens, 90 steps of 16 per epoch, 2 epochs...
# see TRAIN_BYTES/EPOCHS) take both past the plateau; evaluated on 2600 validation
# samples (the whole valid.txt, ~50k labelled tokens, mask noise ~0.3%) the seed-to-seed
# spread of torch's own final loss measured at this size is well inside 2% (see
# BENCHMARKS.md). A bug that changes the learning (schedule, decay, masking, a wrong
# gradient) moves the loss by more. A few minutes on 2 idle cores.
# Environment: TRAIN_BYTES (600000), VALID_BYTES (0: all), EPOCHS (2), PRESET (tiny),
# TOLERANCE (0.02), THREADS (2), KEEP=DIR keeps the work.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
M=${MASKD:-$ROOT/build/maskd}
DATA=${1:-${MASKD_DATA:-$ROOT/../shared/data}}/wikitext-2
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
[ -f "$DATA/train.txt" ] || { fail long_compare_train_setup "no WikiText-2 at $DATA"; exit 1; }
[ -x "$M" ] || { fail long_compare_train_setup "$M is not built"; exit 1; }
T=${KEEP:-$(mktemp -d "${MASKD_TMP:-/tmp}/longcmp.XXXXXX")}
mkdir -p "$T"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$ROOT/scripts/compare-train" --maskd "$M" --data "$DATA" --preset "${PRESET:-tiny}" \
  --epochs "${EPOCHS:-2}" --train-bytes "${TRAIN_BYTES:-600000}" --valid-bytes "${VALID_BYTES:-0}" \
  --threads "${THREADS:-2}" --tolerance "${TOLERANCE:-0.02}" --work "$T/work" --json "$T/out.json" --quiet \
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
