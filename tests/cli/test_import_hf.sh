#!/usr/bin/env bash
# maskd import of BERT / RoBERTa weights as the Hub ships them (scripts/hf_layouts.py
# rewrites a small random model folder of scripts/fillmask_reference.py into each layout):
# F16, BF16, sharded safetensors, legacy gamma/beta names with the tied decoder present,
# BertForPreTraining (pooler + NSP kept and listed), pytorch_model.bin (torch.save's zip;
# F16, float64, and non-contiguous views such as .t()).
# Each imported revision answers fill-mask as the reference answers for the original
# folder (the original's numbers are rounded first so that F16 and BF16 hold them
# exactly); export gives back every tensor HF would load (checked in torch). A base
# model (no MLM head, or no prefix) imports, refuses fill-mask over the CLI and HTTP,
# and fine-tunes. A binary classifier as transformers saves its default (no id2label,
# no num_labels) imports and classifies as LABEL_0 / LABEL_1; a classifier is not
# imported into a masked LM's repository, nor the reverse. Symlinks are followed for
# every file: a Hugging Face cache snapshot (all links to ../../blobs) imports and
# answers as the plain folder. Hostile folders are refused with one line and store
# nothing.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" importhf
R=scripts/fillmask_reference.py L=scripts/hf_layouts.py
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

need import_hf_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
need import_hf_setup "$DATA/train.txt missing (MASKD_DATA)" -f "$DATA/train.txt"
$PY -c 'import torch' 2>/dev/null || { fail import_hf_setup "no torch in $PY"; exit 1; }

head -2000 "$DATA/train.txt" > "$T/train.txt"
node tests/hf_tokenize.js train "$T/raw.json" "$T/train.txt" 2>/dev/null &&
  node tests/hf_tokenize.js seed "$T/raw.json" "$T/tok.json" || { fail import_hf_setup "HF tokenizer training failed"; exit 1; }
mkdir -p "$T/m"
$PY $R make-models --tokenizer "$T/tok.json" "$T/m/bert,bert,2,true" "$T/m/roberta,roberta,1,true" ||
  { fail import_hf_setup "make-models failed"; exit 1; }

# hf_layouts.py runs its commands in batches, one python each (torch's import is most of
# a command's time): batch_run NAME runs $T/NAME.cmds (one command a line), and
# batch_result NAME COMMAND says what COMMAND gave, "ok ..." or "error ..." (nothing if
# the batch died before it).
batch_run() { $PY $L batch < "$T/$1.cmds" > "$T/$1.out" 2> "$T/$1.err"; paste "$T/$1.cmds" "$T/$1.out" > "$T/$1.res"; }
batch_result() { awk -F'\t' -v c="$2" '$1 == c { print $2; exit }' "$T/$1.res"; }
batch_ok() { [[ $(batch_result "$1" "$2") == ok* ]]; }
batch_why() { local r; r=$(batch_result "$1" "$2"); echo "${r:-no answer: $(tail -c 200 "$T/$1.err")}"; }

# The reference's check runs `MASKD fill-mask --model-dir DIR ...`: this one answers from
# the store instead, the revision named after DIR.
cat > "$T/maskd-store" <<EOF
#!/usr/bin/env bash
name=\$(basename "\$3"); shift 3
exec "$M" fill-mask --db "$T/s.db" --model "\$name" "\$@"
EOF
chmod +x "$T/maskd-store"

# make test covers each kind once across the two families (F16 in a .bin, BF16, sharded
# safetensors and .bin, legacy names, pretraining, a float64 .bin, a .bin of strided
# views; unit/test_hf_weights reads F16 safetensors); IMPORT_HF_LONG=1
# (tests/long/long_import_hf.sh) runs each family through every layout.
layouts_bert="pretraining bin_f16 sharded bin_f64" layouts_roberta="bf16 legacy bin_sharded bin_views_strided"
if [ "${IMPORT_HF_LONG:-0}" = 1 ]; then
  layouts_bert="f16 bf16 sharded legacy pretraining bin bin_f16 bin_sharded bin_f64 bin_views_strided"
  layouts_roberta="f16 bf16 sharded legacy bin bin_sharded bin_f64 bin_views_strided"
fi
# Every folder the test imports, made in one batch: the layouts, the base models, the
# hostile folders (refuse, below).
base_specs="bert,nohead bert,noprefix roberta,noprefix"
hostile="shard_escape shard_absolute shard_wrong missing unknown bin_evil bin_legacy bin_deflate bin_views nan bin_inf"
mkdir -p "$T/h"
{
  echo "round $T/m/bert"; echo "round $T/m/roberta"
  for fam in bert roberta; do
    eval "layouts=\$layouts_$fam"
    for k in $layouts; do echo "make $T/m/$fam $T/$fam-$k $k"; done
  done
  for spec in $base_specs; do echo "make $T/m/${spec%,*} $T/${spec%,*}-${spec#*,} ${spec#*,}"; done
  for k in $hostile; do echo "make $T/m/bert $T/h/$k $k"; done
  echo "make $T/m/roberta $T/roberta-cls_default cls_default"
  echo "make $T/m/roberta $T/roberta-hf_cache hf_cache"; echo "make $T/m/bert $T/bert-shard_symlink shard_symlink"
} > "$T/make.cmds"
batch_run make
batch_ok make "round $T/m/bert" && batch_ok make "round $T/m/roberta" ||
  { fail import_hf_setup "rounding failed: $(batch_why make "round $T/m/bert")"; exit 1; }

cat > "$T/cases.json" <<'EOF'
[
 {"name": "single", "inputs": "The capital of France is [MASK] ."},
 {"name": "multi", "inputs": "The [MASK] of France is [MASK] ."},
 {"name": "list", "inputs": ["Paris is the [MASK] of France .", "[MASK] [MASK] and [MASK] ."]},
 {"name": "targets", "inputs": "He said [MASK] it , didn't he ?", "targets": ["▁the", "the", "▁of"], "top_k": 3}
]
EOF
$PY $R run --job "$T/m/bert" "$T/cases.json" "$T/exp-bert.jsonl" --job "$T/m/roberta" "$T/cases.json" "$T/exp-roberta.jsonl" \
  2> "$T/ref.err" || { fail import_hf_reference "reference failed: $(tail -2 "$T/ref.err")"; exit 1; }

# Each layout imported, answering as the reference, exported; the exports compared in one batch.
: > "$T/compare.cmds"
for fam in bert roberta; do
  eval "layouts=\$layouts_$fam"
  for k in $layouts; do
    d="$T/$fam-$k"
    batch_ok make "make $T/m/$fam $d $k" ||
      { fail "import_hf_${fam}_${k}_make" "hf_layouts.py failed: $(batch_why make "make $T/m/$fam $d $k")"; continue; }
    if "$M" import --db "$T/s.db" "$d" "$fam-$k" > "$T/imp.out" 2> "$T/imp.err"; then pass "import_hf_${fam}_${k}"
    else fail "import_hf_${fam}_${k}" "$(head -c 300 "$T/imp.err")"; continue; fi
    $PY $R check --model-dir "$d" --cases "$T/cases.json" --expected "$T/exp-$fam.jsonl" --maskd "$T/maskd-store" \
      --prefix "import_hf_${fam}_${k}_fill_"
    if "$M" export --db "$T/s.db" "$fam-$k" "$T/out-$fam-$k" >/dev/null 2>"$T/exp-$fam-$k.err"; then
      echo "compare $d $T/out-$fam-$k" >> "$T/compare.cmds"
    else fail "import_hf_${fam}_${k}_export_equal" "$(head -c 200 "$T/exp-$fam-$k.err")"; fi
  done
done

# What the import lists: the unused tensors it kept, the ones the name rules dropped.
"$M" import --db "$T/s.db" "$T/bert-pretraining" listing > "$T/list.out" 2>&1
if grep -q "not used by BertForMaskedLM (kept): bert.pooler.dense.bias, bert.pooler.dense.weight, cls.seq_relationship.bias, cls.seq_relationship.weight" "$T/list.out"
then pass import_hf_lists_kept; else fail import_hf_lists_kept "$(cat "$T/list.out")"; fi
"$M" import --db "$T/s.db" "$T/roberta-legacy" listing2 > "$T/list.out" 2>&1
if grep -q "ignored: lm_head.decoder.weight (tied to roberta.embeddings.word_embeddings.weight)" "$T/list.out"
then pass import_hf_lists_ignored; else fail import_hf_lists_ignored "$(cat "$T/list.out")"; fi
# BF16 export: every tensor is the source's rounded as torch rounds it.
if "$M" export --db "$T/s.db" --dtype bf16 bert-pretraining "$T/out-bf16" >/dev/null 2>"$T/exp-bf16.err"; then
  echo "compare $T/bert-pretraining $T/out-bf16 bf16" >> "$T/compare.cmds"
else fail import_hf_export_bf16 "$(head -c 200 "$T/exp-bf16.err")"; fi

# ---- base models: no MLM head ----
msg="has no masked-LM head (a BertModel checkpoint): fine-tune it with maskd finetune; fill-mask needs a *ForMaskedLM model"
for spec in $base_specs; do
  fam=${spec%,*} k=${spec#*,} d="$T/$fam-$k"
  batch_ok make "make $T/m/$fam $d $k" ||
    { fail "import_hf_${fam}_${k}_make" "hf_layouts.py failed: $(batch_why make "make $T/m/$fam $d $k")"; continue; }
  if "$M" import --db "$T/s.db" "$d" "$fam-$k" > "$T/imp.out" 2>"$T/imp.err" && grep -q "no masked-LM head" "$T/imp.out"
  then pass "import_hf_${fam}_${k}"; else fail "import_hf_${fam}_${k}" "$(cat "$T/imp.out" "$T/imp.err" | head -c 300)"; fi
  out=$("$M" fill-mask --db "$T/s.db" --model "$fam-$k" "a [MASK] ." 2>&1); rc=$?
  want=${msg/BertModel/$([ "$fam" = bert ] && echo BertModel || echo RobertaModel)}
  if [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF "$fam-$k@1 $want" <<<"$out"; then pass "import_hf_${fam}_${k}_fillmask_refused"
  else fail "import_hf_${fam}_${k}_fillmask_refused" "exit $rc: $out"; fi
  if "$M" export --db "$T/s.db" "$fam-$k" "$T/out-$fam-$k" >/dev/null 2>"$T/exp-$fam-$k.err"; then
    echo "compare $d $T/out-$fam-$k" >> "$T/compare.cmds"
  else fail "import_hf_${fam}_${k}_export_equal" "$(head -c 200 "$T/exp-$fam-$k.err")"; fi
done

# The exports against their sources, in one batch; a base model's export is a *Model.
batch_run compare
while read -r _ d out bf16; do
  name=import_hf_${d##*/}_export_equal
  name=${name/-/_}
  [ -n "$bf16" ] && name=import_hf_export_bf16
  r=$(batch_why compare "compare $d $out${bf16:+ $bf16}")
  arch_ok=1
  case $d in
    */bert-nohead|*/bert-noprefix) grep -q '"BertModel"' "$out/config.json" || arch_ok=0 ;;
    */roberta-noprefix) grep -q '"RobertaModel"' "$out/config.json" || arch_ok=0 ;;
  esac
  if [[ $r == ok* ]] && [ "$arch_ok" = 1 ]; then pass "$name (${r#ok })"
  else fail "$name" "$r$([ "$arch_ok" = 1 ] || echo "; config.json's architectures: $(grep -o '"architectures"[^]]*]' "$out/config.json")")"; fi
done < "$T/compare.cmds"
B=$DATA_ROOT/banking77
if [ -f "$B/train.csv" ]; then
  awk 'NR == 1 || NR % 50 == 0' "$B/train.csv" > "$T/tr.csv"
  for m in bert-nohead roberta-noprefix; do
    if "$M" finetune --db "$T/s.db" --model "$m" --train "$T/tr.csv" --label-column category --labels "$B/categories.json" \
         --max-length 32 --batch 16 --lr 1e-3 --threads 1 --seed 3 --max-steps 3 --name "ft-$m" --quiet >/dev/null 2>"$T/ft.err" &&
       "$M" classify --db "$T/s.db" --model "ft-$m" "card arrived?" >/dev/null 2>>"$T/ft.err"
    then pass "import_hf_finetune_$m"; else fail "import_hf_finetune_$m" "$(tail -c 300 "$T/ft.err")"; fi
  done
else
  fail import_hf_finetune "no BANKING77 at $B"
fi
# Over HTTP: POST /fill-mask on a base model is a 4xx JSON error with the message.
if serve_start --db "$T/s.db" --quiet; then
  code=$(curl -s -o "$T/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d '{"model": "bert-nohead", "inputs": "a [MASK] ."}' "$base/fill-mask")
  if [[ $code == 4* ]] && $PY -c 'import json,sys; e=json.load(open(sys.argv[1])); s=json.dumps(e); assert "has no masked-LM head" in s, s' "$T/body" 2>/dev/null
  then pass "import_hf_http_fillmask_refused ($code)"; else fail import_hf_http_fillmask_refused "status $code: $(head -c 300 "$T/body")"; fi
  serve_stop
else
  fail import_hf_http_fillmask_refused "serve did not start: $(tail -2 "$T/err")"
fi

# ---- transformers' default binary classifier: no id2label, no num_labels (2 labels) ----
d=$T/roberta-cls_default
if ! batch_ok make "make $T/m/roberta $d cls_default"; then
  fail import_hf_cls_default "hf_layouts.py failed: $(batch_why make "make $T/m/roberta $d cls_default")"
else
  labels='"LABEL_0","LABEL_1"'
  out=$("$M" classify --model-dir "$d" --top-k all "a b" 2>&1); rc=$?
  got=$(grep -o '"label": *"[^"]*"' <<<"$out" | sed 's/"label": *//' | sort | paste -sd,)
  if [ $rc = 0 ] && [ "$got" = "$labels" ]; then pass import_hf_cls_default_model_dir
  else fail import_hf_cls_default_model_dir "exit $rc: $(head -c 300 <<<"$out")"; fi
  out=$("$M" import --db "$T/s.db" "$d" cls-default 2>&1 &&
        "$M" classify --db "$T/s.db" --model cls-default --top-k all "a b" 2>&1); rc=$?
  got=$(grep -o '"label": *"[^"]*"' <<<"$out" | sed 's/"label": *//' | sort | paste -sd,)
  if [ $rc = 0 ] && [ "$got" = "$labels" ]; then pass import_hf_cls_default
  else fail import_hf_cls_default "exit $rc: $(head -c 300 <<<"$out")"; fi
  # One repository, one pipeline: a classifier is not imported over a masked LM's
  # revisions, nor the reverse (one line, nothing pushed); a base model joins a masked LM's.
  revs() { "$M" models --db "$T/s.db" "$1" 2>/dev/null | tail -n +2 | wc -l; }
  repo_refused() {  # name, folder, repository, what it holds
    local before out rc
    before=$(revs "$3")
    out=$("$M" import --db "$T/s.db" "$2" "$3" 2>&1); rc=$?
    if [ $rc != 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF "model repository \"$3\" holds a $4" <<<"$out" &&
       [ "$(revs "$3")" = "$before" ] && [ "$before" -ge 1 ]
    then pass "$1"; else fail "$1" "exit $rc, revisions $before -> $(revs "$3"): $out"; fi
  }
  repo_refused import_hf_refuses_classifier_over_mlm "$d" listing2 RobertaForMaskedLM
  repo_refused import_hf_refuses_mlm_over_classifier "$T/m/roberta" cls-default RobertaForSequenceClassification
  if "$M" import --db "$T/s.db" "$T/roberta-noprefix" listing2 >/dev/null 2>"$T/imp.err" && [ "$(revs listing2)" = 2 ]
  then pass import_hf_base_model_over_mlm; else fail import_hf_base_model_over_mlm "$(head -c 300 "$T/imp.err")"; fi
fi

# ---- symlinks: followed for every file, as config.json and the tokenizer always were ----
# A Hugging Face cache (blobs/<sha256>, snapshots/abc/FILE -> ../../blobs/<sha256>: config,
# tokenizer files, weights) imports, answers fill-mask as the plain folder does, and
# exports what HF would load; so does the snapshot read directly (fill-mask --model-dir).
# A shard linked to a file outside the folder is followed too (it was refused, "a symlink
# leaving the folder", while config.json beside it was followed); names inside an index
# stay plain file names (shard_escape, shard_absolute below).
snap=$T/roberta-hf_cache/snapshots/abc
if ! batch_ok make "make $T/m/roberta $T/roberta-hf_cache hf_cache"; then
  fail import_hf_hf_cache "hf_layouts.py failed: $(batch_why make "make $T/m/roberta $T/roberta-hf_cache hf_cache")"
elif out=$("$M" import --db "$T/s.db" "$snap" roberta-hf_cache 2>&1); then
  pass import_hf_hf_cache
  texts=("The capital of France is [MASK] ." "The [MASK] of France is [MASK] ." "a [MASK]")
  "$M" fill-mask --model-dir "$T/m/roberta" --top-k 8 "${texts[@]}" > "$T/plain.json" 2>&1
  "$M" fill-mask --db "$T/s.db" --model roberta-hf_cache --top-k 8 "${texts[@]}" > "$T/cache.json" 2>&1
  "$M" fill-mask --model-dir "$snap" --top-k 8 "${texts[@]}" > "$T/snap.json" 2>&1
  if grep -q '"score"' "$T/plain.json" && cmp -s "$T/plain.json" "$T/cache.json"; then pass import_hf_hf_cache_fillmask_same
  else fail import_hf_hf_cache_fillmask_same "$(head -c 200 "$T/cache.json") vs the plain folder's $(head -c 200 "$T/plain.json")"; fi
  if cmp -s "$T/plain.json" "$T/snap.json"; then pass import_hf_hf_cache_model_dir_same
  else fail import_hf_hf_cache_model_dir_same "$(head -c 300 "$T/snap.json")"; fi
  if "$M" export --db "$T/s.db" roberta-hf_cache "$T/out-hf_cache" >/dev/null 2>"$T/exp-hf_cache.err"; then
    r=$($PY $L compare "$snap" "$T/out-hf_cache" 2>&1) && pass "import_hf_hf_cache_export_equal ($r)" ||
      fail import_hf_hf_cache_export_equal "$r"
  else fail import_hf_hf_cache_export_equal "$(head -c 200 "$T/exp-hf_cache.err")"; fi
else
  fail import_hf_hf_cache "$out"
fi
if ! batch_ok make "make $T/m/bert $T/bert-shard_symlink shard_symlink"; then
  fail import_hf_shard_symlink "hf_layouts.py failed: $(batch_why make "make $T/m/bert $T/bert-shard_symlink shard_symlink")"
elif out=$("$M" import --db "$T/s.db" "$T/bert-shard_symlink" bert-shard_symlink 2>&1) &&
     "$M" fill-mask --db "$T/s.db" --model bert-shard_symlink "a [MASK] ." > "$T/link.json" 2>&1 &&
     "$M" fill-mask --model-dir "$T/m/bert" "a [MASK] ." > "$T/plain.json" 2>&1 && cmp -s "$T/plain.json" "$T/link.json"; then
  pass import_hf_shard_symlink_followed
else
  fail import_hf_shard_symlink_followed "$out $(head -c 200 "$T/link.json" 2>/dev/null)"
fi

# ---- hostile folders: one line, non-zero exit, nothing stored ----
refuse() {  # layout, needle
  local k=$1 needle=$2 d="$T/h/$1" out rc
  batch_ok make "make $T/m/bert $d $k" || { fail "import_hf_refuses_$k" "hf_layouts.py failed: $(batch_why make "make $T/m/bert $d $k")"; return; }
  out=$("$M" import --db "$T/s.db" "$d" "h-$k" 2>&1); rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF -- "$needle" <<<"$out" &&
     ! "$M" models --db "$T/s.db" 2>/dev/null | grep -q "^h-$k "
  then pass "import_hf_refuses_$k"; else fail "import_hf_refuses_$k" "exit $rc: $out"; fi
}
refuse shard_escape 'shard "../model-00003-of-00003.safetensors" is not a file name inside the folder'
refuse shard_wrong 'is in this shard but the index maps it to model-00002-of-00003.safetensors'
refuse shard_absolute 'shard "/etc/passwd" is not a file name inside the folder'
refuse missing '1 tensor the BertForMaskedLM needs is missing: bert.encoder.layer.1.output.dense.bias'
refuse unknown 'tensor "bert.encoder.layer.9.extra.weight" is not part of a BertForMaskedLM model'
refuse bin_evil 'global os.system is not allowed: only a state dict of tensors is read'
refuse bin_legacy "torch.save's legacy (pre-1.6) format"
refuse bin_deflate 'compressed'
refuse bin_views 'entries repeating views of one storage?'
# A NaN or an infinity in a weight (every fill-mask score would be NaN): the tensor and
# the element named. fill-mask --model-dir reads the folder's model.safetensors without
# import: its scores are refused as not finite (they were "not valid UTF-8").
refuse nan 'tensor "bert.embeddings.word_embeddings.weight": element 123 [3, 27] is NaN'
refuse bin_inf 'tensor "bert.embeddings.LayerNorm.weight": element 5 is +Inf'
out=$("$M" fill-mask --model-dir "$T/h/nan" "a [MASK] ." 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "score for token [0-9]* is not finite" <<<"$out"
then pass import_hf_nan_fillmask_not_finite; else fail import_hf_nan_fillmask_not_finite "exit $rc: $out"; fi
if [ -e /tmp/pwned ] && [ /tmp/pwned -nt "$T/tok.json" ]; then fail import_hf_evil_not_run "/tmp/pwned was created"
else pass import_hf_evil_not_run; fi
cp -r "$T/m/bert" "$T/h/untied"
$PY -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); c["tie_word_embeddings"]=False; json.dump(c,open(p,"w"))' "$T/h/untied/config.json"
out=$("$M" import --db "$T/s.db" "$T/h/untied" h-untied 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "tie_word_embeddings: false is not supported" <<<"$out"; then pass import_hf_refuses_untied
else fail import_hf_refuses_untied "exit $rc: $out"; fi
