#!/usr/bin/env bash
# The whole pipeline from the web page, in Debian's chromium driven by playwright-core
# (tests/http/pipeline.js): a server on 127.0.0.1 with a token, an empty data folder and
# its own work folder; the page uploads two corpora (the first 4000 lines of WikiText-2's
# training text, the first 500 of its validation text), trains a tokenizer, prepares a
# training and a validation dataset, starts a run from the new-run form's dropdowns,
# watches it end and asks its model to fill a mask. Screenshots in
# build/artifacts/browser-pipeline (or $MASKD_ARTIFACTS).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" browser_pipeline
ART=${MASKD_ARTIFACTS:-$PWD/build/artifacts}/browser-pipeline
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
serve_wrap=(timeout 300)

[ -x /usr/bin/chromium ] || { fail pipeline_setup "/usr/bin/chromium is missing (scripts/setup installs it)"; exit 1; }
[ -d tests/node_modules/playwright-core ] || { fail pipeline_setup "tests/node_modules/playwright-core is missing (run scripts/setup)"; exit 1; }
{ [ -f "$DATA/train.txt" ] && [ -f "$DATA/valid.txt" ]; } || { fail pipeline_setup "$DATA/{train,valid}.txt missing (MASKD_DATA=$DATA_ROOT)"; exit 1; }

mkdir -p "$T/data" "$T/upload"
head -4000 "$DATA/train.txt" > "$T/upload/wiki.txt"
head -500 "$DATA/valid.txt" > "$T/upload/wiki-valid.txt"
printf 'caf\xe9 au lait\n' > "$T/data/broken.txt"   # Latin-1, not UTF-8: a job on it fails
# An upload limit above the corpora's size where the server has one.
up=()
"$M" serve --help 2>&1 | grep -q -- '--max-upload' && up=(--max-upload 67108864)
serve_start --db "$T/hub.db" --data-dir "$T/data" --work-dir "$T/work" --token tk --quiet "${up[@]}" ||
  { fail pipeline_setup "server did not start: $(cat "$T/err")"; exit 1; }
rm -rf "$ART"
timeout 240 node tests/http/pipeline.js "$base" "$ART" tk "$T/upload/wiki.txt" "$T/upload/wiki-valid.txt"
