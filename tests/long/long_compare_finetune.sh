#!/usr/bin/env bash
# Issue 16's proof (scripts/compare-finetune): a masked LM pretrained here (the tiny
# preset, a short run on the first 2 MB of WikiText-2) fine-tuned on all of BANKING77 by
# maskd and by PyTorch (scripts/torch_finetune.py) on the same plan: the same initial
# classifier, held-out split, batches in the same order, schedule, clipping and seed;
# dropout masks from each side's own RNG. Checks:
#   long_compare_finetune_f1        |test macro-F1 maskd - torch| <= 0.5 point, each side
#                                   scoring test with its best epoch by validation macro-F1
#   long_compare_finetune_speed     torch's seconds per epoch >= 2x maskd's (train part, same threads)
#   long_compare_finetune_learns    both sides' test macro-F1 above MIN_F1 (default 0.2):
#                                   the agreement of two models that learnt nothing says nothing
# The F1 criterion is statistical: the dropout masks differ, so the two runs differ by seed
# noise even when both loops are right; a weakly pretrained tiny model spreads more across
# seeds than a good one. Measured at these settings (2026-11-26, 2 cores under a load of
# 6-8): maskd 58.84, torch 61.37 (-2.53 points: FAIL); torch alone on the same plan with
# dropout seeds 1 and 2: 69.76 and 54.82. The noise (range ~15 points) is 30x the 0.5-point
# tolerance, so this check fails or passes by chance at this size; with dropout 0 (the base
# revision's config edited in a copy of the store) the two sides' losses agree to 1e-4 over
# 114 steps and their test F1 exactly (the loops are the same). SEEDS=K adds K torch runs
# with other dropout seeds (compare-finetune --dropout-seeds; maskd with --dropout-seed) to show the spread.
# Speed: in that loaded run torch/maskd was 2.09x (maskd 25.8 s, torch 54.1 s per epoch),
# but alternated repeats on a quieter host (load ~2.5) gave 1.35x (tiny: maskd 14.5/14.0 s,
# torch 19.6/18.7 s for the full epoch) and 1.22-2.2x (small, 3000 rows: maskd 24.4/24.6 s,
# torch 29.9/53.6 s): torch slows more under load; on a quiet host maskd is not 2x here.
# Size and time: 10003 train rows (1000 held out for validation),
# 3080 test rows, 8 epochs of 282 steps; on the 2-core AMD EPYC host, quiet, pretraining
# ~1.5 min, maskd ~20 s and torch ~70 s per epoch: ~15 min in all (much more under load).
# Environment: PRESET (tiny), PRETRAIN_STEPS (1000), EPOCHS (8), LR (1e-3), THREADS (2),
# REPEATS (1: maskd, torch alternated this many times), SEEDS (0), MIN_F1 (0.2), KEEP=DIR keeps the
# work (and reuses the checkpoint made there).
lib_keep=${KEEP:-}
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" longcmpft "${1:-}"
ROOT=$PWD
need long_compare_finetune_setup "no WikiText-2 at $DATA" -f "$DATA/train.txt"
need long_compare_finetune_setup "no BANKING77 at $DATA_ROOT/banking77" -f "$DATA_ROOT/banking77/train.csv"
need long_compare_finetune_setup "$M is not built" -x "$M"
$PY "$ROOT/scripts/compare-finetune" --maskd "$M" --data "$DATA" --banking77 "$DATA_ROOT/banking77" \
  --preset "${PRESET:-tiny}" --pretrain-steps "${PRETRAIN_STEPS:-1000}" --epochs "${EPOCHS:-8}" --lr "${LR:-1e-3}" \
  --threads "${THREADS:-2}" --repeats "${REPEATS:-1}" --dropout-seeds "${SEEDS:-0}" --work "$T/work" --json "$T/out.json" --quiet \
  > "$T/table" 2> "$T/err"
rc=$?
sed 's/^/# /' "$T/table"
if [ "$rc" -ge 2 ] || [ ! -s "$T/out.json" ]; then
  fail long_compare_finetune_runs "rc $rc: $(tail -2 "$T/err" | tr '\n' ' ')"
  exit 1
fi
$PY - "$T/out.json" "${MIN_F1:-0.2}" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
min_f1 = float(sys.argv[2])
f1 = r["test_macro_f1"]
def line(ok, name, why):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")
line(r["f1_ok"], "long_compare_finetune_f1",
     f"test macro-F1 maskd {100 * f1['maskd']:.2f}, torch {100 * f1['torch']:.2f}: {r['f1_difference_points']:+.2f} points")
line(r["speed_ok"], "long_compare_finetune_speed", f"torch/maskd seconds per epoch {r['speedup']:.2f}x, not >= 2")
line(min(f1.values()) > min_f1, "long_compare_finetune_learns",
     f"test macro-F1 maskd {f1['maskd']:.3f}, torch {f1['torch']:.3f}: not both above {min_f1}")
EOF
