#!/usr/bin/env bash
# maskd train --config config.json against its tokenizer (engine/train/run_config.h): a
# config.json that leaves out vocab_size, pad_token_id, bos_token_id, eos_token_id or
# max_position_embeddings takes them from the tokenizer (and the shards' length), as
# the Hugging Face TPU guide sets vocab_size from its tokenizer; the revision's
# config.json (maskd export) holds the values used. A stated value that differs is
# refused in one line naming the field and both values: roberta-base's own config.json
# against maskd's Unigram tokenizer (vocab_size, then pad_token_id), positions too few
# for the shards. With HF's tokenizers (tests/node_modules): a BERT config of sizes only
# on a WordPiece tokenizer ([PAD] 0, [CLS] 2, [SEP] 3), and roberta-base's ids without
# vocab_size on a byte-level BPE one (<s> 0, <pad> 1, </s> 2), which agree.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" traincfg "${1:-}"
need train_config_setup "no WikiText-2 at $DATA" -f "$DATA/train.txt"

head -2000 "$DATA/train.txt" > "$T/tr.txt"
"$M" tokenizer train --input "$T/tr.txt" --vocab-size 1000 --out "$T/tok.json" --threads 1 >/dev/null 2>&1 &&
"$M" prepare --tokenizer "$T/tok.json" --input "$T/tr.txt" --split train --seq-len 32 --out "$T/train" --quiet >/dev/null 2>&1 ||
  { fail train_config_setup "tokenizer or prepare failed"; exit 1; }
# The tokenizer's size and ids, read from its tokenizer.json.
tok_ids() {  # tokenizer.json -> "vocab pad cls sep" (the families' names)
  $PY - "$1" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
ids = {a["content"]: a["id"] for a in j["added_tokens"]}
v = j["model"]["vocab"]
ids.update({p[0]: i for i, p in enumerate(v)} if isinstance(v, list) else {k: i for k, i in v.items()})
# Unigram: a list of pieces (added tokens among them); WordPiece / BPE: a token -> id map.
size = max(ids.values()) + 1
pad = ids.get("<pad>", ids.get("[PAD]"))
cls, sep = (ids["<s>"], ids["</s>"]) if "<s>" in ids else (ids["[CLS]"], ids["[SEP]"])
print(size, pad, cls, sep)
EOF
}
read -r V PAD CLS SEP < <(tok_ids "$T/tok.json")
need train_config_setup "tokenizer ids: $V $PAD $CLS $SEP" "$PAD" = 3 -a "$CLS" = 0 -a "$SEP" = 1

SIZES='"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128'
run() {  # db, name, tokenizer, shards, config: a 2-step run
  "$M" train --db "$1" --name "$2" --tokenizer "$3" --train "$4" --config "$5" --batch 4 --max-steps 2 \
    --threads 1 --quiet >"$T/out" 2>"$T/err"
}
# The exported config.json's fields, as "vocab pad bos eos positions model_type".
exported() {  # db, name
  rm -rf "$T/exp"
  "$M" export --db "$1" "$2" "$T/exp" >/dev/null 2>"$T/exp.err" || { echo "export failed: $(tail -1 "$T/exp.err")"; return; }
  $PY -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c["vocab_size"], c["pad_token_id"], c.get("bos_token_id"), c.get("eos_token_id"), c["max_position_embeddings"], c["model_type"])' \
    "$T/exp/config.json"
}
refuse() {  # name, config, needle... (each must be in the one line)
  local name=$1 config=$2 out rc n; shift 2
  out=$("$M" train --db "$T/refused.db" --name r --tokenizer "${tok:-$T/tok.json}" --train "${shards:-$T/train}" \
    --config "$config" --batch 4 --max-steps 2 --threads 1 --quiet 2>&1 >/dev/null); rc=$?
  out=$(grep -v '^maskd: note' <<<"$out")
  for n in "$@"; do grep -qF -- "$n" <<<"$out" || { fail "$name" "rc $rc, stderr: $out (wanted $n)"; return; }; done
  if [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ]; then pass "$name"; else fail "$name" "rc $rc, stderr: $out"; fi
}

# (a) RoBERTa of sizes only: the tokenizer's vocabulary and ids, positions for 32 tokens past pad 3.
echo "{\"model_type\": \"roberta\", $SIZES}" > "$T/rob.json"
run "$T/a.db" rob "$T/tok.json" "$T/train" "$T/rob.json" && pass train_config_sizes_only_trains ||
  fail train_config_sizes_only_trains "$(grep -v '^maskd: note' "$T/err" | tail -2)"
got=$(exported "$T/a.db" rob); want="$V $PAD $CLS $SEP $((32 + PAD + 1)) roberta"
[ "$got" = "$want" ] && pass train_config_sizes_only_exported || fail train_config_sizes_only_exported "got $got, want $want"
# The store's revision holds the same config.json as the export.
sqlite3 "$T/a.db" "SELECT config FROM revisions ORDER BY seq DESC LIMIT 1" 2>/dev/null > "$T/stored.json"
$PY -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' "$T/stored.json" \
  "$T/exp/config.json" 2>/dev/null && pass train_config_revision_matches_export ||
  fail train_config_revision_matches_export "$(head -c 300 "$T/stored.json")"

# (b) roberta-base's own config.json against maskd's Unigram tokenizer: refused by vocab_size, then by pad_token_id.
rb='"architectures": ["RobertaForMaskedLM"], "attention_probs_dropout_prob": 0.1, "bos_token_id": 0, "eos_token_id": 2,
 "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
 "intermediate_size": 3072, "layer_norm_eps": 1e-05, "max_position_embeddings": 514, "model_type": "roberta",
 "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 1, "type_vocab_size": 1'
echo "{$rb, \"vocab_size\": 50265}" > "$T/roberta-base.json"
echo "{$rb}" > "$T/roberta-novocab.json"
refuse train_config_refuses_roberta_base_vocab "$T/roberta-base.json" "config: vocab_size 50265" "the tokenizer's $V"
refuse train_config_refuses_roberta_base_pad "$T/roberta-novocab.json" \
  "config: pad_token_id 1 in $T/roberta-novocab.json is not the tokenizer's pad id 3 (<pad>)"
# ... and with pad 3 stated, by its bos / eos (roberta-base's 0 and 2; the tokenizer's [SEP] is 1).
echo "{$rb}" | sed 's/"pad_token_id": 1/"pad_token_id": 3/' > "$T/roberta-pad3.json"
refuse train_config_refuses_stated_eos "$T/roberta-pad3.json" "config: eos_token_id 2" "is not the tokenizer's [SEP] id 1"

# (d) Positions too few for the shards: refused naming both.
echo "{\"model_type\": \"roberta\", $SIZES, \"max_position_embeddings\": 20}" > "$T/short.json"
refuse train_config_refuses_short_positions "$T/short.json" "config: max_position_embeddings 20 holds 16 tokens, the shards have 32"
n=$("$M" runs --db "$T/refused.db" --json | jq length)
[ "$n" = 0 ] && pass train_config_refusals_record_nothing || fail train_config_refusals_record_nothing "$n runs recorded"

# (c) HF's own tokenizer families (trained by HF tokenizers on the same lines).
if [ ! -d tests/node_modules/tokenizers ]; then
  echo "SKIP train_config_wordpiece_bpe: tests/node_modules/tokenizers is missing (run scripts/setup)"
  exit 0
fi
node tests/hf_tokenize.js train-wordpiece "$T/wp.json" "$T/tr.txt" --vocab 1000 >/dev/null 2>"$T/hf.err" &&
  node tests/hf_tokenize.js train-bpe "$T/bpe.json" "$T/tr.txt" --vocab 1000 >/dev/null 2>>"$T/hf.err" &&
  "$M" prepare --tokenizer "$T/wp.json" --input "$T/tr.txt" --split train --seq-len 32 --out "$T/wp-train" --quiet >/dev/null 2>&1 &&
  "$M" prepare --tokenizer "$T/bpe.json" --input "$T/tr.txt" --split train --seq-len 32 --out "$T/bpe-train" --quiet >/dev/null 2>&1 ||
  { fail train_config_families_setup "HF training or prepare failed: $(tail -2 "$T/hf.err")"; exit 1; }
# BERT of sizes only on WordPiece: [PAD], [CLS], [SEP]; BERT's positions are the shards' 32.
read -r WV WPAD WCLS WSEP < <(tok_ids "$T/wp.json")
echo "{\"model_type\": \"bert\", $SIZES}" > "$T/bert.json"
run "$T/c.db" bert "$T/wp.json" "$T/wp-train" "$T/bert.json" && pass train_config_bert_wordpiece_trains ||
  fail train_config_bert_wordpiece_trains "$(grep -v '^maskd: note' "$T/err" | tail -2)"
got=$(exported "$T/c.db" bert); want="$WV $WPAD $WCLS $WSEP 32 bert"
[ "$got" = "$want" ] && [ "$WPAD $WCLS $WSEP" = "0 2 3" ] && pass train_config_bert_wordpiece_exported ||
  fail train_config_bert_wordpiece_exported "got $got, want $want (pad cls sep 0 2 3)"
# roberta-base's ids (pad 1, bos 0, eos 2, 514 positions) with small sizes and no vocab_size: they agree with RoBERTa's BPE.
read -r BV BPAD BCLS BSEP < <(tok_ids "$T/bpe.json")
echo "{$rb}" | sed 's/"hidden_size": 768/"hidden_size": 64/; s/"intermediate_size": 3072/"intermediate_size": 128/;
  s/"num_attention_heads": 12/"num_attention_heads": 2/; s/"num_hidden_layers": 12/"num_hidden_layers": 2/' > "$T/rob-small.json"
run "$T/d.db" robbpe "$T/bpe.json" "$T/bpe-train" "$T/rob-small.json" && pass train_config_roberta_bpe_trains ||
  fail train_config_roberta_bpe_trains "$(grep -v '^maskd: note' "$T/err" | tail -2)"
got=$(exported "$T/d.db" robbpe); want="$BV 1 0 2 514 roberta"
[ "$got" = "$want" ] && [ "$BPAD $BCLS $BSEP" = "1 0 2" ] && pass train_config_roberta_bpe_exported ||
  fail train_config_roberta_bpe_exported "got $got, want $want (tokenizer pad cls sep $BPAD $BCLS $BSEP)"
# The full roberta-base config (vocab_size 50265) is refused on this tokenizer by its vocabulary alone.
tok=$T/bpe.json shards=$T/bpe-train refuse train_config_refuses_roberta_base_on_bpe "$T/roberta-base.json" \
  "config: vocab_size 50265" "the tokenizer's $BV"
