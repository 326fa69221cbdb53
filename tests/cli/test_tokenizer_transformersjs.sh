#!/usr/bin/env bash
# Folders maskd writes for a tokenizer (`maskd tokenizer export`: tokenizer.json,
# tokenizer_config.json, special_tokens_map.json, by the function `maskd export` and the
# server's resolve use) loaded by transformers.js (@huggingface/transformers'
# AutoTokenizer, from the folder, no network): the ids of every line of WikiText-2 test
# equal `maskd tokenizer encode`'s on the same folder. transformers.js reads
# tokenizer_config.json too (remove_space: true, AlbertTokenizer's default, would trim and
# collapse each line's spaces before tokenizer.json's own pipeline). Families: a Unigram
# tokenizer maskd trains, HF-trained WordPiece (uncased and cased) and byte-level BPE; and the
# WordPiece and BPE folders as transformers writes them (scripts/fillmask_reference.py
# make-model: BertTokenizerFast's / RobertaTokenizerFast's files, what an import keeps and serves).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" tokjs
need tokjs_setup "tests/node_modules/@huggingface/transformers is missing (run scripts/setup --tests)" -d tests/node_modules/@huggingface/transformers
need tokjs_setup "$DATA/test.txt missing (MASKD_DATA=$DATA_ROOT)" -f "$DATA/test.txt"

head -3000 "$DATA/train.txt" > "$T/train.txt"
{ mkdir -p "$T/unigram" &&
  "$M" tokenizer train --input "$T/train.txt" --vocab-size 2000 --out "$T/unigram/tokenizer.json" --threads 1 &&
  node tests/hf_tokenize.js train-wordpiece "$T/wp.json" "$T/train.txt" --vocab 3000 &&
  node tests/hf_tokenize.js train-wordpiece "$T/wpc.json" "$T/train.txt" --vocab 3000 --cased &&
  node tests/hf_tokenize.js train-bpe "$T/bpe.json" "$T/train.txt" --vocab 3000 &&
  "$M" tokenizer export --tokenizer "$T/wp.json" --out "$T/wordpiece" &&
  "$M" tokenizer export --tokenizer "$T/wpc.json" --out "$T/wordpiece_cased" &&
  "$M" tokenizer export --tokenizer "$T/bpe.json" --out "$T/bpe" &&
  $PY scripts/fillmask_reference.py make-model --tokenizer "$T/wp.json" --out "$T/hf_wordpiece" --model-type bert &&
  $PY scripts/fillmask_reference.py make-model --tokenizer "$T/bpe.json" --out "$T/hf_bpe"; } >"$T/setup.log" 2>&1 ||
  { fail tokjs_setup "$(tail -3 "$T/setup.log")"; exit 1; }

for f in unigram wordpiece wordpiece_cased bpe hf_wordpiece hf_bpe; do
  "$M" tokenizer encode --tokenizer "$T/$f" --input "$DATA/test.txt" >"$T/$f.maskd" 2>"$T/$f.maskd.err"
  node tests/hub_client.mjs encode "$T/$f" "$DATA/test.txt" >"$T/$f.js" 2>"$T/$f.js.err" ||
    { fail "tokjs_$f" "transformers.js failed: $(tail -c 300 "$T/$f.js.err")"; continue; }
  same "tokjs_$f" "$T/$f.js" "$T/$f.maskd"
done

# The Unigram folder's config names AlbertTokenizer with its text options off.
if $PY - "$T/unigram/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["tokenizer_class"] == "AlbertTokenizer"
assert (c["do_lower_case"], c["remove_space"], c["keep_accents"]) == (False, False, True)
PY
then pass tokjs_unigram_config
else fail tokjs_unigram_config "$(tr '\n' ' ' <"$T/unigram/tokenizer_config.json" | cut -c1-300)"
fi
