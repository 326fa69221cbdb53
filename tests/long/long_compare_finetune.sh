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
#   long_compare_finetune_f1_means  with SEEDS=K >= 1 (default 2): each side rerun with K other
#                                   dropout seeds on the same plan; the difference of the two
#                                   sides' mean test macro-F1 within 0.5 point plus 2 standard
#                                   errors of that difference: no difference beyond seed noise
#   long_compare_finetune_no_dropout_losses  the same plan again with dropout off on both sides
#                                   (compare-finetune --no-dropout): nothing random differs, so
#                                   the first 50 steps' losses agree within 1e-5 relative
#                                   (measured: 1e-7). Later the rounding of sums in other orders,
#                                   amplified by training, separates the runs (from about step
#                                   105 of 2256 here), and their test macro-F1 then differ by
#                                   chance too (2.8 points in the run of 2026-11-28): printed,
#                                   not checked.
# The single-seed F1 criterion is the issue's, and it is statistical: the dropout masks differ,
# so the two runs differ by seed noise even when both loops are right, and a weakly pretrained
# tiny model spreads far more across seeds than 0.5 point. Measured on the AMD EPYC family 26
# model 2 (Zen 5, 2 cores), 2026-11-26, the 1000-step tiny checkpoint, 20 epochs, seeds 42-44
# (compare-finetune --epochs 20 --dropout-seeds 2, maskd's two extra seeds run by hand with
# --dropout-seed): test macro-F1 maskd 73.33 / 82.18 / 79.23 (mean 78.25, sd 4.5), torch 75.58 /
# 74.93 / 77.99 (mean 76.17, sd 1.6): seed 42 alone says -2.25 points (FAIL), the means +2.08
# with a standard error of 2.8 (no difference). At 8 epochs (a loaded run): maskd 58.84, torch
# 61.37, torch's other seeds 69.76 and 54.82. So long_compare_finetune_f1 passes or fails by
# chance at this size, and long_compare_finetune_f1_means is the check that can tell a real
# difference; with dropout 0 (compare-finetune --no-dropout, below) the two sides' step losses
# agree to 1e-7 for about 100 steps and then separate by rounding, so their test F1 differ by
# chance as well (2.84 points on 2026-11-28; torch against itself on 1 and 2 threads 1.86).
# This test's own defaults (8 epochs, SEEDS=2), the same CPU, 2026-11-26 23:31-23:41 UTC, quiet:
# maskd 58.84 / 59.62 / 58.79, torch 61.37 / 58.26 / 60.59: seed 42 -2.53 points (FAIL), means
# -0.99 with a standard error of 0.97 (long_compare_finetune_f1_means PASS), 4.37x; 606 s.
# Speed on the quiet host (the same CPU): torch/maskd 4.05x for one epoch (maskd 4.2 s, torch
# 17.1 s), 4.50x over 20 epochs. An earlier 1.35x was measured while other work shared the
# 2 cores (maskd 14 s an epoch then): it measured the load.
# Size and time: 10003 train rows (1000 held out for validation),
# 3080 test rows, 8 epochs of 282 steps, 3 seeds a side; on the 2-core AMD EPYC host, quiet,
# pretraining ~1.5 min, maskd ~5 s and torch ~18 s per epoch: ~10 min, and the run without
# dropout ~3.5 min more (more under load).
# Environment: PRESET (tiny), PRETRAIN_STEPS (1000), EPOCHS (8), LR (1e-3), THREADS (2),
# REPEATS (1: maskd, torch alternated this many times), SEEDS (2), MIN_F1 (0.2), KEEP=DIR keeps the
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
  --threads "${THREADS:-2}" --repeats "${REPEATS:-1}" --dropout-seeds "${SEEDS:-2}" --work "$T/work" --json "$T/out.json" --quiet \
  > "$T/table" 2> "$T/err"
rc=$?
sed 's/^/# /' "$T/table"
if [ "$rc" -ge 2 ] || [ ! -s "$T/out.json" ]; then
  fail long_compare_finetune_runs "rc $rc: $(tail -2 "$T/err" | tr '\n' ' ')"
  exit 1
fi
$PY - "$T/out.json" "${MIN_F1:-0.2}" "${SEEDS:-2}" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
min_f1, seeds = float(sys.argv[2]), int(sys.argv[3])
f1 = r["test_macro_f1"]
def line(ok, name, why):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")
line(r["f1_ok"], "long_compare_finetune_f1",
     f"test macro-F1 maskd {100 * f1['maskd']:.2f}, torch {100 * f1['torch']:.2f}: {r['f1_difference_points']:+.2f} points")
line(r["speed_ok"], "long_compare_finetune_speed", f"torch/maskd seconds per epoch {r['speedup']:.2f}x, not >= 2")
line(min(f1.values()) > min_f1, "long_compare_finetune_learns",
     f"test macro-F1 maskd {f1['maskd']:.3f}, torch {f1['torch']:.3f}: not both above {min_f1}")
means = r.get("dropout_means")
if seeds > 0 and not means:
    line(False, "long_compare_finetune_f1_means", f"compare-finetune --dropout-seeds {seeds} wrote no dropout_means")
elif means:   # compare-finetune --dropout-seeds: each side's mean over the seeds, the difference and its standard error
    dm, se = means["difference_points"], means["standard_error_points"]
    line(abs(dm) <= 0.5 + 2 * se, "long_compare_finetune_f1_means",
         f"mean test macro-F1 over {means['seeds']} dropout seeds: maskd - torch {dm:+.2f} points, beyond 0.5 + 2 x its standard error {se:.2f}")
EOF
# Dropout off on both sides, the checkpoint of the run above.
$PY "$ROOT/scripts/compare-finetune" --maskd "$M" --data "$DATA" --banking77 "$DATA_ROOT/banking77" \
  --preset "${PRESET:-tiny}" --pretrain-steps "${PRETRAIN_STEPS:-1000}" --epochs "${EPOCHS:-8}" --lr "${LR:-1e-3}" \
  --threads "${THREADS:-2}" --no-dropout --work "$T/work" --json "$T/nodrop.json" --quiet > "$T/table0" 2> "$T/err0"
rc=$?
sed 's/^/# /' "$T/table0"
if [ "$rc" -ge 2 ] || [ ! -s "$T/nodrop.json" ]; then
  fail long_compare_finetune_no_dropout_losses "rc $rc: $(tail -2 "$T/err0" | tr '\n' ' ')"
  exit 1
fi
$PY - "$T/nodrop.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
f1 = r["test_macro_f1"]
def line(ok, name, why):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")
line(r["no_dropout"] and r["loss_ok"], "long_compare_finetune_no_dropout_losses",
     f"a step's loss among the first {r['agree_steps']} differs by {r['loss_max_relative_difference']:.2e} relative")
print(f"# without dropout: the runs separate (1e-4) at step {r['separate_step']}; test macro-F1 maskd "
      f"{100 * f1['maskd']:.2f}, torch {100 * f1['torch']:.2f} ({r['f1_difference_points']:+.2f} points)")
EOF
