#!/usr/bin/env bash
# The web page in Debian's chromium driven by playwright-core (tests/http/browser.js):
# a server on 127.0.0.1 with a free port, a small run trained first so the table
# and charts have data, and a text-classification run fine-tuned from it; screenshots
# in build/artifacts/browser (or $MASKD_ARTIFACTS).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" browser
MASKD=$M D=$DATA_ROOT
ART=${MASKD_ARTIFACTS:-$PWD/build/artifacts}/browser
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
serve_wrap=(timeout 600)

[ -x /usr/bin/chromium ] || { fail browser_setup "/usr/bin/chromium is missing (scripts/setup installs it)"; exit 1; }
[ -d tests/node_modules/playwright-core ] || { fail browser_setup "tests/node_modules/playwright-core is missing (run scripts/setup)"; exit 1; }
[ -f "$D/wikitext-2/train.txt" ] || { fail browser_setup "$D/wikitext-2/train.txt missing (MASKD_DATA=$D)"; exit 1; }
B=$D/banking77
[ -f "$B/train.csv" ] || { fail browser_setup "$B/train.csv missing (MASKD_DATA=$D)"; exit 1; }

head -2000 "$D/wikitext-2/train.txt" > "$T/train.txt"
head -300 "$D/wikitext-2/valid.txt" > "$T/valid.txt"
{ node tests/hf_tokenize.js train "$T/raw.json" "$T/train.txt" && node tests/hf_tokenize.js seed "$T/raw.json" "$T/tok.json" &&
  "$MASKD" prepare --quiet --tokenizer "$T/tok.json" --input "$T/train.txt" --split train --seq-len 32 --out "$T/shards" &&
  "$MASKD" prepare --quiet --tokenizer "$T/tok.json" --input "$T/valid.txt" --split validation --seq-len 32 --out "$T/vshards"; } \
  >"$T/setup.log" 2>&1 || { fail browser_setup "$(tail -3 "$T/setup.log")"; exit 1; }

# Another web app's origin, which the server allows (--allowed-origin): a page of it uses
# the API from the browser (CORS). Python serves it on a free port.
mkdir -p "$T/app" && printf '<!doctype html><title>another app</title>\n' > "$T/app/index.html"
$PY -u -m http.server 0 --bind 127.0.0.1 --directory "$T/app" >"$T/app.log" 2>&1 &
app_pid=$!
at_exit "kill $app_pid 2>/dev/null"
wait_until 100 0.1 grep -q ' port [0-9]' "$T/app.log" || { fail browser_setup "the other app's server: $(cat "$T/app.log")"; exit 1; }
app=http://127.0.0.1:$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$T/app.log" | head -1)

serve_start --db "$T/hub.db" --data-dir "$T" --token tk --quiet --allowed-origin "$app" || { fail browser_setup "server did not start: $(cat "$T/err")"; exit 1; }

# A finished run for the table, the charts and the playground.
curl -s --max-time 20 -H 'Authorization: Bearer tk' -H 'Content-Type: application/json' -X POST "$base/runs" --data-binary \
  "{\"name\":\"seed-run\",\"tokenizer\":\"tok.json\",\"train\":\"shards\",\"validation\":\"vshards\",\"config\":\"tiny\",\"max_steps\":20,\"batch\":8,\"ranks\":2,\"threads\":1,\"eval_batches\":4,\"lr\":0.001}" >/dev/null
for _ in $(seq 300); do
  curl -s --max-time 5 "$base/runs/seed-run" | grep -q '"status":"done"' && break
  sleep 0.2
done
# A text-classification run fine-tuned from it by the command line: 3 epochs on four of
# BANKING77's intents (their 400 training rows; it learns: macro-F1 about 0.6), a test set.
# Its F1 curves, confusions, best revision and test results are what the page shows; the
# files stay in the data folder for the form's own fine-tuning job.
mkdir -p "$T/banking77"
four='^(card_arrival|exchange_rate|lost_or_stolen_card|top_up_limits)\r?$'
awk -F, -v p="$four" 'NR == 1 || $NF ~ p' "$B/train.csv" > "$T/banking77/train.csv"
awk -F, -v p="$four" 'NR == 1 || $NF ~ p' "$B/test.csv" > "$T/banking77/test.csv"
"$MASKD" finetune --db "$T/hub.db" --model seed-run --name cls-run --train "$T/banking77/train.csv" --test "$T/banking77/test.csv" \
  --label-column category --epochs 3 --max-length 32 --batch 16 --lr 1e-3 --threads 1 --seed 3 --quiet >"$T/finetune.log" 2>&1 ||
  { fail browser_setup "maskd finetune: $(tail -3 "$T/finetune.log")"; exit 1; }
# A finished fine-tuning run without a test file (it stores no results).
"$MASKD" finetune --db "$T/hub.db" --model seed-run --name cls-notest --train "$T/banking77/train.csv" \
  --label-column category --epochs 1 --max-steps 3 --max-length 32 --batch 16 --threads 1 --quiet >"$T/finetune2.log" 2>&1 ||
  { fail browser_setup "maskd finetune: $(tail -3 "$T/finetune2.log")"; exit 1; }
# A run of 150,000 steps, as a long pretraining records them: 2 steps trained, the rest of
# its step metrics written into the store over them (training them takes minutes).
"$MASKD" train --db "$T/hub.db" --name long-run --tokenizer "$T/tok.json" --train "$T/shards" --config tiny --max-steps 2 \
  --batch 8 --threads 1 --quiet >"$T/long.log" 2>&1 &&
  $PY -c '
import math, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
run = db.execute("SELECT id FROM runs WHERE name = ?", ("long-run",)).fetchone()[0]
db.executemany("INSERT OR REPLACE INTO step_metrics(run_id, step, epoch, loss, lr, grad_norm, tokens_per_s, time) VALUES (?,?,?,?,?,?,?,?)",
               ((run, s, s / 1000, 2 + math.sin(s / 5000) + 8 * math.exp(-s / 20000), 1e-4, 1.0, 1000.0, 1.7e9 + s)
                for s in range(1, 150001)))
db.commit()' "$T/hub.db" >>"$T/long.log" 2>&1 || { fail browser_setup "long-run: $(tail -3 "$T/long.log")"; exit 1; }
rm -rf "$ART"
timeout 300 node tests/http/browser.js "$base" "$ART" tk tok.json shards vshards cls-run long-run "$app"
