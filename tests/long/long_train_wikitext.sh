#!/usr/bin/env bash
# The end-to-end run of issue 4 on WikiText-2: a Unigram tokenizer (vocab 8000), seq-len
# 128 shards, the small preset (H256 L4 A4 I1024) for 3 epochs through `maskd train`.
# Checks that validation perplexity falls every epoch; prints the curve, wall time per
# epoch and the final validation loss/accuracy. Slow (tens of minutes on 2 cores).
# Environment: EPOCHS (3), BATCH (16), LR (5e-4), THREADS (all CPUs), KEEP=DIR keeps the work,
# TRAIN_BYTES=N trains on the first N bytes of train.txt only (whole lines; for a quick curve),
# EVAL_BATCHES=N evaluates on the first N validation batches only (0: all).
lib_keep=${KEEP:-}
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" longtrain "${1:-}"
EPOCHS=${EPOCHS:-3} BATCH=${BATCH:-16} LR=${LR:-5e-4} THREADS=${THREADS:-$(nproc)}
[ -f "$DATA/train.txt" ] || { fail long_train_setup "no WikiText-2 at $DATA"; exit 1; }
DATA=$(cd "$DATA" && pwd)

[ -f "$T/tok/tokenizer.json" ] || { mkdir -p "$T/tok" &&
  "$M" tokenizer train --input "$DATA/train.txt" --vocab-size 8000 --out "$T/tok/tokenizer.json" >"$T/tok.log" 2>&1; } ||
  { fail long_train_setup "tokenizer: $(tail -1 "$T/tok.log")"; exit 1; }
TB=${TRAIN_BYTES:-0}
if [ "$TB" -gt 0 ]; then head -c "$TB" "$DATA/train.txt" | sed '$d' > "$T/train-$TB.txt"; else ln -sf "$DATA/train.txt" "$T/train-0.txt"; fi
ln -sf "$DATA/valid.txt" "$T/valid-0.txt"
for s in train-$TB valid-0; do
  split=train; [ $s = valid-0 ] && split=validation
  [ -d "$T/$s" ] || "$M" prepare --tokenizer "$T/tok/tokenizer.json" --input "$T/$s.txt" --split $split --seq-len 128 \
    --out "$T/$s" --quiet >"$T/prep.log" 2>&1 || { fail long_train_setup "prepare $s: $(tail -1 "$T/prep.log")"; exit 1; }
done
rm -f "$T/maskd.db" "$T/maskd.db-wal" "$T/maskd.db-shm"
start=$(date +%s)
"$M" train --db "$T/maskd.db" --name wikitext-small --tokenizer "$T/tok/tokenizer.json" --train "$T/train-$TB" \
  --validation "$T/valid-0" --config small --epochs "$EPOCHS" --batch "$BATCH" --lr "$LR" --threads "$THREADS" \
  --eval-batches "${EVAL_BATCHES:-0}" \
  --out "$T/final" 2> >(tee "$T/train.log" >&2 | grep -E '^(epoch [0-9]+/[0-9]+:|run )' >&2)
rc=$?
wall=$(( $(date +%s) - start ))
[ $rc = 0 ] && pass long_train_runs || { fail long_train_runs "rc $rc: $(tail -2 "$T/train.log")"; exit 1; }
echo "# wall ${wall}s for $EPOCHS epochs (batch $BATCH, lr $LR, threads $THREADS)"
sqlite3 -header -column "$T/maskd.db" "SELECT epoch + 1 AS epoch, printf('%.4f', train_loss) AS loss, printf('%.4f', eval_loss) AS val_loss,
  printf('%.4f', eval_accuracy) AS val_acc, printf('%.2f', perplexity) AS val_ppl FROM epoch_metrics ORDER BY epoch" | sed 's/^/# /'
sqlite3 "$T/maskd.db" "SELECT time FROM epoch_metrics ORDER BY epoch" > "$T/times"
ppl=$(sqlite3 "$T/maskd.db" "SELECT perplexity FROM epoch_metrics ORDER BY epoch" | tr '\n' ' ')
falling=$(awk -v p="$ppl" 'BEGIN { n = split(p, a, " "); ok = n >= 2; for (i = 2; i <= n; i++) if (!(a[i] < a[i-1])) ok = 0; print ok }')
[ "$falling" = 1 ] && pass long_train_perplexity_falls_every_epoch || fail long_train_perplexity_falls_every_epoch "$ppl"
