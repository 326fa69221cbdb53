#!/usr/bin/env bash
# maskd fill-mask through the store for BERT with a WordPiece tokenizer and RoBERTa with a
# byte-level BPE tokenizer, each folder with tokenizer.json and without it (the legacy
# vocab.txt, or vocab.json + merges.txt, + tokenizer_config.json), against the independent
# reference (scripts/fillmask_reference.py: FillMaskPipeline over the PyTorch model and HF
# tokenizers; for a folder without tokenizer.json, the tokenizer transformers' BertConverter /
# RobertaConverter builds from it). Tokenizers: HF trains them on 2000 lines of WikiText-2
# (tests/hf_tokenize.js train-wordpiece / train-bpe). Folders: make-model writes them as
# transformers saves BertTokenizerFast / RobertaTokenizerFast ([MASK] / <mask> with lstrip,
# RoBERTa's pad 1 and positions after it); `maskd import` takes each into a store and
# `maskd fill-mask --db --model` answers. Cases: one mask, two masks, a list, targets (in
# the vocabulary, not a single token, with a leading space for BPE, unknown; BPE's token of
# the byte 0, whose text holds a NUL that JSON carries as \u0000), accents, CJK.
# Scores within 1e-5 and printed as Python prints the float32 value; everything else identical.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" fillfam
R=scripts/fillmask_reference.py
H=tests/hf_tokenize.js
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

need fillmask_families_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
need fillmask_families_setup "$DATA/train.txt missing (MASKD_DATA)" -f "$DATA/train.txt"
$PY -c 'import torch' 2>/dev/null || { fail fillmask_families_setup "no torch in $PY"; exit 1; }

head -2000 "$DATA/train.txt" > "$T/train.txt"
node $H train-wordpiece "$T/wp.json" "$T/train.txt" --vocab 6000 > /dev/null 2> "$T/train.log" &&
  node $H train-bpe "$T/bpe.json" "$T/train.txt" --vocab 6000 > /dev/null 2>> "$T/train.log" ||
  { fail fillmask_families_setup "HF tokenizer training failed: $(tail -2 "$T/train.log")"; exit 1; }
# bert-json / bert-legacy share a seed (same weights), as do roberta-json / roberta-legacy:
# with and without tokenizer.json must give the same answers.
for spec in "bert-json wp.json bert 21" "bert-legacy wp.json bert 21 --no-tokenizer-json" \
            "roberta-json bpe.json roberta 22" "roberta-legacy bpe.json roberta 22 --no-tokenizer-json"; do
  read -r name tok mt seed extra <<<"$spec"
  # shellcheck disable=SC2086  # $extra is one option or none
  $PY $R make-model --tokenizer "$T/$tok" --out "$T/$name" --model-type "$mt" --seed "$seed" $extra 2> "$T/make.err" ||
    { fail fillmask_families_setup "make-model $name failed: $(tail -2 "$T/make.err")"; exit 1; }
done
# The folders hold what each family's save_pretrained writes, and no tokenizer.json where
# there should be none.
$PY - "$T" <<'PYEOF' && pass fillmask_families_folders || fail fillmask_families_folders "folder contents"
import json, os, sys
t = sys.argv[1]
ls = lambda d: sorted(os.listdir(f"{t}/{d}"))
assert ls("bert-legacy") == ["config.json", "model.safetensors", "special_tokens_map.json", "tokenizer_config.json", "vocab.txt"], ls("bert-legacy")
assert ls("roberta-legacy") == ["config.json", "merges.txt", "model.safetensors", "special_tokens_map.json", "tokenizer_config.json", "vocab.json"], ls("roberta-legacy")
assert "tokenizer.json" in ls("bert-json") and "tokenizer.json" in ls("roberta-json")
b = json.load(open(f"{t}/bert-json/config.json")); r = json.load(open(f"{t}/roberta-json/config.json"))
assert b["pad_token_id"] == 0 and r["pad_token_id"] == 1 and r["bos_token_id"] == 0 and r["eos_token_id"] == 2
assert r["max_position_embeddings"] == 64 + 2 and b["max_position_embeddings"] == 64
bc = json.load(open(f"{t}/bert-json/tokenizer_config.json")); rc = json.load(open(f"{t}/roberta-json/tokenizer_config.json"))
assert bc["do_lower_case"] is True and bc["mask_token"] == "[MASK]" and bc["clean_up_tokenization_spaces"] is True
assert rc["mask_token"] == "<mask>" and rc["added_tokens_decoder"]["5999"]["lstrip"] is True and rc["add_prefix_space"] is False
assert json.load(open(f"{t}/roberta-json/special_tokens_map.json"))["mask_token"]["lstrip"] is True
PYEOF

cat > "$T/cases-bert.json" <<'JSON'
[
 {"name": "single", "inputs": "The capital of France is [MASK] ."},
 {"name": "multi", "inputs": "The [MASK] of France is [MASK] ."},
 {"name": "list", "inputs": ["Paris is the [MASK] of France .", "[MASK] [MASK] and [MASK] ."]},
 {"name": "targets", "inputs": "He said [MASK] it , didn't he ?", "targets": ["the", "The", "new york", "zzqx", "##s", "[MASK]"], "top_k": 10},
 {"name": "accents", "inputs": "Café [MASK] naïve résumé Ñandú ."},
 {"name": "cjk", "inputs": "東京 is the [MASK] of 日本 ."},
 {"name": "glued", "inputs": "abc[MASK]def"},
 {"name": "top_k_1", "inputs": "It was a [MASK] day .", "top_k": 1}
]
JSON
cat > "$T/cases-roberta.json" <<'JSON'
[
 {"name": "single", "inputs": "The capital of France is <mask>."},
 {"name": "multi", "inputs": "The <mask> of France is <mask>."},
 {"name": "list", "inputs": ["Paris is the <mask> of France.", "<mask> <mask> and <mask>."]},
 {"name": "targets", "inputs": "He said <mask> it, didn't he?", "targets": [" the", "the", "Ġof", " New York", "zzqx", " zzqx", "<mask>"], "top_k": 10},
 {"name": "accents", "inputs": "Café <mask> naïve résumé Ñandú."},
 {"name": "cjk", "inputs": "東京 is the <mask> of 日本 😀."},
 {"name": "glued", "inputs": "abc<mask>def"},
 {"name": "no_space_before", "inputs": "The city of<mask>."},
 {"name": "top_k_1", "inputs": "It was a <mask> day.", "top_k": 1},
 {"name": "nul_byte", "inputs": "Hello <mask> world.", "targets": ["Ā", "Ċ"]}
]
JSON
jobs=()
for name in bert-json bert-legacy roberta-json roberta-legacy; do
  jobs+=(--job "$T/$name" "$T/cases-${name%%-*}.json" "$T/exp-$name.jsonl")
done
if ! $PY $R run "${jobs[@]}" 2> "$T/ref.err"; then
  fail fillmask_families_reference "reference failed: $(tail -2 "$T/ref.err")"; exit 1
fi
# The reference itself: the folder without tokenizer.json answers as the one with it.
for m in bert roberta; do
  if cmp -s "$T/exp-$m-json.jsonl" "$T/exp-$m-legacy.jsonl"; then pass "fillmask_families_reference_${m}_legacy_as_json"
  else fail "fillmask_families_reference_${m}_legacy_as_json" "$(diff "$T/exp-$m-json.jsonl" "$T/exp-$m-legacy.jsonl" | head -3 | cut -c1-200)"; fi
done

for name in bert-json bert-legacy roberta-json roberta-legacy; do
  if out=$("$M" import --db "$T/db" "$T/$name" "$name" 2>&1); then
    pass "fillmask_families_import_$name"
    $PY $R check --model-dir "$T/$name" --db "$T/db" --model "$name" --cases "$T/cases-${name%%-*}.json" \
      --expected "$T/exp-$name.jsonl" --maskd "$M" --prefix "fillmask_families_${name}_"
  else
    fail "fillmask_families_import_$name" "$(grep -v '^maskd: note' <<<"$out" | head -c 300)"
  fi
done
# The legacy folders read directly too (--model-dir), not only through the store.
for name in bert-legacy roberta-legacy; do
  $PY $R check --model-dir "$T/$name" --cases "$T/cases-${name%%-*}.json" \
    --expected "$T/exp-$name.jsonl" --maskd "$M" --prefix "fillmask_families_dir_${name}_"
done
# Over HTTP: the service answers fill-mask on an imported RoBERTa model with the pipeline's JSON
# (the reference's answer for the same case), and serves the import's own side files.
if serve_start --db "$T/db"; then
  for name in bert-json roberta-json; do
    for f in tokenizer_config.json special_tokens_map.json; do
      if curl -s --max-time 30 -o "$T/got" "$base/models/$name/resolve/main/$f" && cmp -s "$T/got" "$T/$name/$f"; then
        pass "fillmask_families_http_${name}_$f"
      else fail "fillmask_families_http_${name}_$f" "served $(head -c 200 "$T/got")"; fi
    done
  done
  mask='<mask>'
  curl -s --max-time 60 -H 'Content-Type: application/json' -o "$T/http.json" \
    --data-binary "{\"inputs\": \"The capital of France is $mask.\", \"model\": \"roberta-json\"}" "$base/fill-mask"
  if $PY - "$T/http.json" "$T/exp-roberta-json.jsonl" <<'PYEOF'
import json, sys
got = json.load(open(sys.argv[1]))
exp = [json.loads(l) for l in open(sys.argv[2])]
want = next(e["result"] for e in exp if e["name"] == "single")
assert [(g["token"], g["token_str"], g["sequence"]) for g in got] == [(w["token"], w["token_str"], w["sequence"]) for w in want], (got, want)
assert all(abs(g["score"] - w["score"]) <= 1e-5 for g, w in zip(got, want))
PYEOF
  then pass fillmask_families_http_roberta; else fail fillmask_families_http_roberta "$(head -c 300 "$T/http.json")"; fi
  serve_stop
else
  fail fillmask_families_http_serve "maskd serve did not start: $(tail -c 300 "$T/err")"
fi
# Round trip: maskd export writes a folder (tokenizer.json of the family, the side files as
# imported) whose answers, read as a folder, are the reference's for the source.
for name in bert-json bert-legacy roberta-json roberta-legacy; do
  if "$M" export --db "$T/db" "$name" "$T/out-$name" > /dev/null 2> "$T/export.err"; then
    $PY $R check --model-dir "$T/out-$name" --cases "$T/cases-${name%%-*}.json" \
      --expected "$T/exp-$name.jsonl" --maskd "$M" --prefix "fillmask_families_export_${name}_"
    if cmp -s "$T/$name/tokenizer_config.json" "$T/out-$name/tokenizer_config.json" &&
       cmp -s "$T/$name/special_tokens_map.json" "$T/out-$name/special_tokens_map.json"; then
      pass "fillmask_families_export_${name}_side_files"
    else fail "fillmask_families_export_${name}_side_files" "tokenizer_config.json or special_tokens_map.json changed"; fi
  else
    fail "fillmask_families_export_$name" "$(head -c 300 "$T/export.err")"
  fi
done
exit 0
