#!/usr/bin/env bash
# maskd prepare --tokenizer on real text against Hugging Face tokenizers (npm, the reference):
# a Unigram tokenizer trained by HF on WikiText-2 valid, given the seed's special tokens and
# [CLS] $A [SEP] template; HF's ids of every non-blank line, concatenated and cut into 128-token
# chunks by Python, must equal the shards maskd writes (read by scripts/shards.py).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" prepare_tok
MASKD=$M
TEXT=${PREPARE_TOK_TEXT:-$DATA/valid.txt}  # long_prepare_wikitext.sh: the train split
[ -f "$TEXT" ] || { fail prepare_tok_data "$TEXT is missing (MASKD_DATA)"; exit 0; }
[ -d tests/node_modules/tokenizers ] || { fail prepare_tok_reference "tests/node_modules/tokenizers is missing (make setup)"; exit 0; }

node tests/hf_tokenize.js train "$T/hf.json" "$TEXT" 2>/dev/null || { fail prepare_tok_train "HF training failed"; exit 0; }
$PY - "$T/hf.json" "$T/tok.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
specials = ["[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"]
d["model"]["vocab"] = [[s, 0.0] for s in specials] + d["model"]["vocab"]
d["model"]["unk_id"] = 2
d["added_tokens"] = [dict(id=i, content=s, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
                     for i, s in enumerate(specials)]
d["post_processor"] = {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]},
                       "[SEP]": {"id": "[SEP]", "ids": [1], "tokens": ["[SEP]"]}}}
json.dump(d, open(sys.argv[2], "w"))
PY

if "$MASKD" prepare --tokenizer "$T/tok.json" --input "$TEXT" --split validation --seq-len 128 --shard-size 1000 \
     --out "$T/set" >"$T/out" 2>"$T/err"; then pass prepare_tok_runs
else fail prepare_tok_runs "exit $?: $(tail -1 "$T/err")"; exit 0; fi
node tests/hf_tokenize.js encode "$T/tok.json" "$TEXT" >"$T/hf_ids.txt" || { fail prepare_tok_reference "HF encode failed"; exit 0; }

r=$($PY - "$TEXT" "$T/hf_ids.txt" "$T/set" "$T/tok.json" <<'PY' 2>&1
import sys, numpy as np
sys.path.insert(0, "scripts")
import shards
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
hf = open(sys.argv[2]).read().split("\n")[: len(lines)]
ids = []
for text, enc in zip(lines, hf):
    if text.strip(" \t\r") == "":
        continue
    assert not enc.startswith("ERR"), enc
    ids += [int(x) for x in enc.split()]
n = len(ids) // 128
want = np.array(ids[: n * 128], dtype=np.uint32).reshape(n, 128)
manifest, got = shards.read_set(sys.argv[3])
assert got.shape == want.shape, (got.shape, want.shape)
bad = np.argwhere(got != want)
assert len(bad) == 0, f"{len(bad)} ids differ, first at sample/pos {bad[0].tolist()}"
import json
V = len(json.load(open(sys.argv[4]))["model"]["vocab"])
assert manifest["vocab_size"] == V, (manifest["vocab_size"], V)
h = "fnv1a64:%016x" % shards.fnv1a64(open(sys.argv[4], "rb").read())
assert manifest["tokenizer_hash"] == h, (manifest["tokenizer_hash"], h)
print("ok", n)
PY
)
[[ "$r" == ok* ]] && pass prepare_tok_matches_hf_tokenizers || fail prepare_tok_matches_hf_tokenizers "$r"

# A tokenizer that does not load is refused in one line before anything is written.
echo '{"model": {"type": "BPE"}}' >"$T/bpe.json"
"$MASKD" prepare --tokenizer "$T/bpe.json" --input "$TEXT" --out "$T/none" >/dev/null 2>"$T/err"
rc=$?; [ $rc -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && [ ! -e "$T/none" ] && pass prepare_tok_refuses_bad_tokenizer || fail prepare_tok_refuses_bad_tokenizer "rc $rc: $(cat "$T/err")"
"$MASKD" prepare --tokenizer "$T/tok.json" --vocab-size 100 --input "$TEXT" --out "$T/none" >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 2 ] && grep -q 'differs from the tokenizer' "$T/err" && pass prepare_tok_refuses_vocab_mismatch || fail prepare_tok_refuses_vocab_mismatch "rc $rc: $(cat "$T/err")"
rm -rf "$T"
