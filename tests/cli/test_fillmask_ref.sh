#!/usr/bin/env bash
# maskd fill-mask against an independent reference (scripts/fillmask_reference.py:
# transformers' FillMaskPipeline re-implemented over the PyTorch model of
# scripts/torch_mlm.py and HF tokenizers). A Unigram tokenizer trained by HF on
# 2000 lines of WikiText-2 (the seed layout: [CLS] [SEP] <unk> <pad> [MASK]),
# small random RoBERTa and BERT models; single mask, several masks, list inputs
# (batched and padded by maskd, one at a time by the reference), a list of one,
# targets (in the vocabulary, not in it, duplicated, encoding to nothing), top_k
# capped, literal <pad>, non-ASCII text, clean_up_tokenization_spaces false, and
# errors. Scores within 1e-5 and printed as Python prints the float32 value;
# tokens, strings, structure and key order identical.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" fillref
R=scripts/fillmask_reference.py
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

need fillmask_ref_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
need fillmask_ref_setup "$DATA/train.txt missing (MASKD_DATA)" -f "$DATA/train.txt"
$PY -c 'import torch' 2>/dev/null || { fail fillmask_ref_setup "no torch in $PY"; exit 1; }

head -2000 "$DATA/train.txt" > "$T/train.txt"
node tests/hf_tokenize.js train "$T/raw.json" "$T/train.txt" 2>/dev/null &&
  node tests/hf_tokenize.js seed "$T/raw.json" "$T/tok.json" || { fail fillmask_ref_setup "HF tokenizer training failed"; exit 1; }
$PY $R make-models --tokenizer "$T/tok.json" "$T/roberta-1,roberta,1,true" "$T/bert-2,bert,2,true" \
  "$T/roberta-3,roberta,3,false" || { fail fillmask_ref_setup "make-models failed"; exit 1; }

cat > "$T/cases.json" <<'EOF'
[
 {"name": "single", "inputs": "The capital of France is [MASK] ."},
 {"name": "multi", "inputs": "The [MASK] of France is [MASK] ."},
 {"name": "list", "inputs": ["Paris is the [MASK] of France .", "[MASK] [MASK] and [MASK] .",
   "A much longer sentence about the history of the old city , which was founded [MASK] years ago by the river ."]},
 {"name": "list_of_one", "inputs": ["The [MASK] was built in 1850 ."]},
 {"name": "targets", "inputs": "He said [MASK] it , didn't he ?", "targets": ["▁the", "the", "zzqx", "the", "[MASK]", ""], "top_k": 10},
 {"name": "targets_multi_list", "inputs": ["a [MASK] b [MASK]", "[MASK] c"], "targets": ["▁of", "▁and", "▁in"], "top_k": 2},
 {"name": "targets_none_left", "inputs": "The [MASK] .", "targets": [""]},
 {"name": "top_k_1", "inputs": "It was a [MASK] day .", "top_k": 1},
 {"name": "top_k_40", "inputs": "It was a [MASK] day .", "top_k": 40},
 {"name": "no_mask", "inputs": "There is no mask here ."},
 {"name": "no_mask_in_list", "inputs": ["One [MASK] .", "none here"]},
 {"name": "pad_literal", "inputs": "hello <pad> world [MASK] <pad> ."},
 {"name": "non_ascii", "inputs": "Café [MASK] naïve — “quotes” ``x'' 東京 ."},
 {"name": "glued", "inputs": "abc[MASK]def"},
 {"name": "only_mask", "inputs": "[MASK]"}
]
EOF
# clean_up_tokenization_spaces false (roberta-3): the cases where it shows.
$PY -c "import json,sys; c=json.load(open(sys.argv[1])); json.dump([x for x in c if x['name'] in ('single','multi','targets','list')], open(sys.argv[2],'w'))" "$T/cases.json" "$T/cases3.json"
if $PY $R run --job "$T/roberta-1" "$T/cases.json" "$T/exp-roberta-1.jsonl" --job "$T/bert-2" "$T/cases.json" "$T/exp-bert-2.jsonl" \
     --job "$T/roberta-3" "$T/cases3.json" "$T/exp-roberta-3.jsonl" 2> "$T/ref.err"; then
  for d in roberta-1 bert-2 roberta-3; do
    cases="$T/cases.json"; [ "$d" = roberta-3 ] && cases="$T/cases3.json"
    $PY $R check --model-dir "$T/$d" --cases "$cases" --expected "$T/exp-$d.jsonl" --maskd "$M" --prefix "fillmask_ref_${d}_"
  done
else
  fail fillmask_ref_reference "reference failed: $(tail -2 "$T/ref.err")"
fi

# Inputs longer than the model's positions (RoBERTa, max_position_embeddings 64,
# padding_idx 3: 60 tokens) are refused clearly (HF would fail inside the model).
long=$(printf 'word %.0s' $(seq 1 80))
out=$("$M" fill-mask --model-dir "$T/roberta-1" "$long [MASK]" 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "longer than the model's maximum of 60 positions" <<<"$out"; then pass fillmask_ref_too_long
else fail fillmask_ref_too_long "exit $rc: $out"; fi
