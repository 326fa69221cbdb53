#!/usr/bin/env bash
# Parity with Hugging Face tokenizers (npm tokenizers@0.23.2, tests/hf_tokenize.js):
# a Unigram tokenizer.json that HF trains (and the seed's layout around it) loads
# in maskd and gives the same ids, byte offsets and decoded text as HF on every
# line of WikiText-2 valid and test, the BANKING77 texts, and edge cases; maskd
# writes tokenizer.json byte for byte as HF does; a tokenizer maskd trains gives
# the same ids in HF as in maskd; truncation and padding set in tokenizer.json are
# read and ignored (the same ids as null). make test runs a representative
# part (HF trained on 6000 lines of WikiText-2 train; the first 1200 lines of valid,
# BANKING77 test, edge cases); TOK_HF_LONG=1 (tests/long/long_tokenizer_hf.sh) trains on
# all of train and compares all of valid, test and BANKING77 train+test.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" tokhf
D=$DATA_ROOT
H=tests/hf_tokenize.js
long=${TOK_HF_LONG:-0}
lines=6000; [ "$long" = 1 ] && lines=100000000

need tokenizer_hf_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
for f in "$D/wikitext-2/train.txt" "$D/wikitext-2/valid.txt" "$D/wikitext-2/test.txt" "$D/banking77/train.csv" "$D/banking77/test.csv"; do
  [ -f "$f" ] || { fail tokenizer_hf_data "$f missing (MASKD_DATA=$D)"; exit 1; }
done


# Corpora: WikiText-2 valid/test lines, BANKING77 texts (CSV parsed, as JSON lines
# since some hold newlines), and edge cases.
python3 - "$D" "$T" "$long" <<'EOF'
import csv, json, sys
d, t = sys.argv[1], sys.argv[2]
with open(f"{t}/banking.jsonl", "w", encoding="utf-8") as out:
    for split in (("train", "test") if sys.argv[3] == "1" else ("test",)):
        with open(f"{d}/banking77/{split}.csv", newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                out.write(json.dumps(row["text"], ensure_ascii=False) + "\n")
edge = [
    "", " ", "  ", "\t", "a", " a", "a ", "  a  b   c  ", "Hello world", "``quoted'' text", "```triple'''", "''", "``",
    "a``b''c", "x `` y '' z", "I am [MASK] ok", "I am  [MASK]", "[MASK]", " [MASK]", "[MASK] ", "[MASK][MASK]", "a[MASK]b",
    "a [MASK] [MASK] b", "\u3000[MASK]", "\u00a0 [MASK]", "\t[MASK]", "[CLS] x [SEP]", "[cls]", "<unk>", "a<unk>b", "<pad>",
    "[MASK", "MASK]", "[[MASK]]", "\u00e9\u4e2d\U0001F600 \u0278", "Z\u00fcrich \u2603\u2603 x", "e\u0301 combining",
    "\u2581already\u2581metaspace", "\u2581", "tab\tinside", "cr\rinside", "a" * 700, ("xyz " * 300).strip(),
    "\u4e2d" * 200, "\U0001F600" * 150, "@-@ @,@ @.@", " = = Heading = = ", "1 @,@ 000 , 1990s"]
with open(f"{t}/edge.jsonl", "w", encoding="utf-8") as out:
    for s in edge:
        out.write(json.dumps(s, ensure_ascii=False) + "\n")
EOF
head -n "$lines" "$D/wikitext-2/train.txt" > "$T/train.txt"

# HF trains (its default UnigramTrainer: vocab 8000, no specials, no unk), then the
# seed layout around it; both written by HF itself.
node $H train "$T/hf.json" "$T/train.txt" 2>"$T/train.log" || { fail tokenizer_hf_train "$(tail -3 "$T/train.log")"; exit 1; }
node $H seed "$T/hf.json" "$T/seed.json" || { fail tokenizer_hf_seed "hf_tokenize.js seed failed"; exit 1; }

# Variants that exercise the other Metaspace schemes, legacy keys and added-token flags.
python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
base = json.load(open(f"{t}/seed.json", encoding="utf-8"))
def write(name, d):
    json.dump(d, open(f"{t}/{name}.json", "w", encoding="utf-8"), ensure_ascii=False)
for scheme in ("first", "never"):
    d = json.loads(json.dumps(base))
    d["pre_tokenizer"]["prepend_scheme"] = scheme
    d["decoder"]["prepend_scheme"] = scheme
    write(f"var_{scheme}", d)
d = json.loads(json.dumps(base))
for k in ("pre_tokenizer", "decoder"):
    del d[k]["prepend_scheme"]; del d[k]["split"]; d[k]["add_prefix_space"] = True
write("var_legacy", d)
d = json.loads(json.dumps(base))
# rstrip, a normalized non-special token (matched after normalisation), a token
# beyond the model's vocabulary, and the mask without lstrip.
d["added_tokens"][4]["lstrip"] = False
d["added_tokens"][4]["rstrip"] = True
n = len(d["model"]["vocab"])
d["added_tokens"].append({"id": n, "content": "\"quoted\"", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False})
d["added_tokens"].append({"id": n + 1, "content": "<unk>", "single_word": False, "lstrip": True, "rstrip": True, "normalized": False, "special": False})
d["added_tokens"].append({"id": n + 2, "content": "@-@", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True})
write("var_added", d)
d = json.loads(json.dumps(base))
d["normalizer"] = None
d["post_processor"] = None
d["decoder"] = None
write("var_bare", d)
# truncation and padding as sentence-transformers' BERT folders set them (maskd ignores
# both), and truncation alone (what HF is compared with: its padding would pad every line).
pad = next(a for a in base["added_tokens"] if a["content"] == "<pad>")
trunc = {"direction": "Right", "max_length": 64, "strategy": "LongestFirst", "stride": 0}
d = json.loads(json.dumps(base))
d["truncation"] = trunc
d["padding"] = {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": pad["id"],
                "pad_type_id": 0, "pad_token": pad["content"]}
write("var_truncpad", d)
d = json.loads(json.dumps(base))
d["truncation"] = trunc
write("var_trunc", d)
EOF

M_() { "$M" tokenizer "$@"; }

# The HF side of most comparisons is queued and run in ONE node process at the end
# (node's start-up is most of the cost of a small comparison); maskd runs at once.
: > "$T/jobs"; : > "$T/checks"
hfq() {  # hfq KEY CMD ARGS...: HF's output for KEY goes to $T/h.KEY
  local key=$1; shift
  local IFS=$'\t'
  echo "$T/h.$key"$'\t'"$*" >> "$T/jobs"
}
later() { echo "$1 $2" >> "$T/checks"; }  # later NAME KEY: compare $T/h.KEY with $T/m.KEY
enc() {  # enc NAME KEY TOKENIZER INPUT [--jsonl] [--offsets] [--no-special]: both sides
  local name=$1 key=$2 tok=$3 in=$4; shift 4
  local mflags=()
  for a in "$@"; do case "$a" in --no-special) mflags+=(--no-special-tokens) ;; *) mflags+=("$a") ;; esac; done
  hfq "$key" encode "$tok" "$in" "$@"
  M_ encode --tokenizer "$tok" --input "$in" "${mflags[@]}" > "$T/m.$key"
  later "$name" "$key"
}
dec() {  # dec NAME KEY TOKENIZER IDS [--skip-special]
  local name=$1 key=$2 tok=$3 in=$4; shift 4
  local mflags=()
  for a in "$@"; do case "$a" in --skip-special) mflags+=(--skip-special-tokens) ;; *) mflags+=("$a") ;; esac; done
  hfq "$key" decode "$tok" "$in" "$@"
  M_ decode --tokenizer "$tok" --input "$in" "${mflags[@]}" > "$T/m.$key"
  later "$name" "$key"
}

# 1. The seed layout: ids, offsets, decode on the corpora.
corpora="valid"; [ "$long" = 1 ] && corpora="valid test"
for c in $corpora; do
  f="$D/wikitext-2/$c.txt"
  if [ "$long" != 1 ]; then head -n 1200 "$f" > "$T/$c.part"; f="$T/$c.part"; fi
  enc "tokenizer_hf_ids_wikitext_$c" "ids_$c" "$T/seed.json" "$f"
  enc "tokenizer_hf_offsets_wikitext_$c" "off_$c" "$T/seed.json" "$f" --offsets
  enc "tokenizer_hf_ids_nospecial_wikitext_$c" "nosp_$c" "$T/seed.json" "$f" --no-special
done
for c in banking edge; do
  enc "tokenizer_hf_ids_$c" "ids_$c" "$T/seed.json" "$T/$c.jsonl" --jsonl
  enc "tokenizer_hf_offsets_$c" "off_$c" "$T/seed.json" "$T/$c.jsonl" --jsonl --offsets
done
# Decoding: maskd's ids back to text, and random ids (specials, out of range).
python3 -c "
import random; random.seed(7)
for i in range(3000): print(' '.join(str(random.choice([random.randrange(0, 8000), random.randrange(0, 6), 7999, 8000, 8004])) for _ in range(random.randrange(0, 14))))" > "$T/m.ids_random"
for c in $corpora banking edge random; do
  dec "tokenizer_hf_decode_$c" "dec_$c" "$T/seed.json" "$T/m.ids_$c"
  dec "tokenizer_hf_decode_${c}_skip_special" "decs_$c" "$T/seed.json" "$T/m.ids_$c" --skip-special
done

# 2. HF's trained file as HF wrote it (no unk id): lines HF encodes agree; lines HF
# refuses (a character outside the vocabulary), maskd refuses too.
if [ "$long" = 1 ]; then cat "$D/wikitext-2/valid.txt" "$D/wikitext-2/test.txt" > "$T/vt.txt"
else cp "$D/wikitext-2/test.txt" "$T/vt.txt"; fi
node $H encode "$T/hf.json" "$T/vt.txt" > "$T/h_raw"
grep -n '^ERR' "$T/h_raw" | cut -d: -f1 > "$T/err_lines"
awk -v f="$T/err_lines" 'BEGIN { while ((getline l < f) > 0) bad[l] = 1 } !(FNR in bad)' "$T/vt.txt" > "$T/vt_ok.txt"
grep -v '^ERR' "$T/h_raw" > "$T/h"
M_ encode --tokenizer "$T/hf.json" --input "$T/vt.txt" > /dev/null 2> "$T/err"
first_bad=$(head -1 "$T/err_lines")
if [ -n "$first_bad" ] && grep -q "line $first_bad: .*no piece and the model has no unk_id" "$T/err"; then
  pass "tokenizer_hf_no_unk_refused_same_line (HF refuses $(wc -l < "$T/err_lines") lines, first $first_bad)"
elif [ -z "$first_bad" ] && [ ! -s "$T/err" ]; then pass "tokenizer_hf_no_unk_refused_same_line (no line refused)"
else fail tokenizer_hf_no_unk_refused_same_line "HF's first refused line $first_bad; maskd said: $(head -1 "$T/err")"; fi
M_ encode --tokenizer "$T/hf.json" --input "$T/vt_ok.txt" > "$T/m"; same tokenizer_hf_ids_hf_trained_no_unk "$T/h" "$T/m"

# 3. Writing: maskd re-writes HF-written files byte for byte, each Unigram score as its
# text was (HF's own re-save is not a fixed point: serde_json's default float reading can
# be 1 ulp off the written score, so printing the value again can give other digits);
# HF loads maskd's files.
for f in hf seed; do
  rm -rf "$T/exp"; M_ export --tokenizer "$T/$f.json" --out "$T/exp" || fail "tokenizer_export_$f" "export failed"
  if cmp -s "$T/$f.json" "$T/exp/tokenizer.json"; then pass "tokenizer_json_written_as_hf_$f"
  else fail "tokenizer_json_written_as_hf_$f" "$(cmp "$T/$f.json" "$T/exp/tokenizer.json" | head -1)"; fi
done
cp -r "$T/exp" "$T/exp_seed"
rm -rf "$T/exp"; M_ export --tokenizer "$T/var_added.json" --out "$T/exp" || fail tokenizer_export_var_added "export failed"
cp "$T/exp/tokenizer.json" "$T/var_added_by_maskd.json"
hfq loads_maskd_json encode "$T/var_added_by_maskd.json" "$T/edge.jsonl" --jsonl
M_ encode --tokenizer "$T/var_added.json" --input "$T/edge.jsonl" --jsonl > "$T/m.loads_maskd_json"
later tokenizer_hf_loads_maskd_json loads_maskd_json
python3 - "$T/exp_seed" <<'EOF' && pass tokenizer_config_files || fail tokenizer_config_files "tokenizer_config.json / special_tokens_map.json content"
import json, sys
c = json.load(open(sys.argv[1] + "/tokenizer_config.json")); m = json.load(open(sys.argv[1] + "/special_tokens_map.json"))
assert c["clean_up_tokenization_spaces"] is True and c["tokenizer_class"] == "AlbertTokenizer"
# AlbertTokenizer's own text handling off: tokenizer.json's pipeline alone decides (transformers.js
# applies remove_space itself before it; the class's defaults would lowercase and strip accents).
assert c["do_lower_case"] is False and c["remove_space"] is False and c["keep_accents"] is True, c
assert c["mask_token"] == "[MASK]" and c["added_tokens_decoder"]["4"]["content"] == "[MASK]"
assert m["cls_token"] == "[CLS]" and m["sep_token"] == "[SEP]" and m["pad_token"] == "<pad>" and m["unk_token"] == "<unk>"
assert list(c) == sorted(c) and list(m) == sorted(m)
EOF

# 3b. A tokenizer maskd trains (seed recipe, vocab 8000) loads in HF: same ids,
# offsets and decoded text.
mkdir -p "$T/mtrain"
mt="$T/mtrain/tokenizer.json"
if M_ train --input "$T/train.txt" --vocab-size 8000 --out "$mt" --quiet 2> "$T/mtrain.err"; then
  for c in $corpora; do
    f="$D/wikitext-2/$c.txt"; [ "$long" != 1 ] && f="$T/$c.part"
    enc "tokenizer_maskd_trained_in_hf_ids_wikitext_$c" "mt_ids_$c" "$mt" "$f"
    dec "tokenizer_maskd_trained_in_hf_decode_wikitext_$c" "mt_dec_$c" "$mt" "$T/m.mt_ids_$c" --skip-special
  done
  for c in banking edge; do
    enc "tokenizer_maskd_trained_in_hf_offsets_$c" "mt_off_$c" "$mt" "$T/$c.jsonl" --jsonl --offsets
    enc "tokenizer_maskd_trained_in_hf_ids_$c" "mt_ids_$c" "$mt" "$T/$c.jsonl" --jsonl
    dec "tokenizer_maskd_trained_in_hf_decode_$c" "mt_dec_$c" "$mt" "$T/m.mt_ids_$c"
  done
else
  fail tokenizer_maskd_train "$(tail -2 "$T/mtrain.err")"
fi

# 3c. The scores as HF reads them. tokenizers' serde_json reads a number's digits into a
# u64 and scales it by one power of ten, which for 16-17 significant digits is often one
# unit in the last place off the exact value: a small tokenizer maskd trains (2000 pieces
# on 300 KB) has near-ties in Viterbi that this decides ("XIII": X I II in HF, X II I when
# read exactly); its ids on the 6000 training lines and WikiText-2 test must be HF's. Then scores written in
# every shape serde_json's reading treats apart (17 digits, mantissas past u64, long
# integers, exponents, subnormals, -0): maskd reads each as HF (maskd's values, dumped
# by test_vocab_scores, against HF's re-save, whose shortest decimals give its values).
head -c 300000 "$T/train.txt" > "$T/train300k.txt"
mkdir -p "$T/mt2k"
if M_ train --input "$T/train300k.txt" --vocab-size 2000 --threads 1 --out "$T/mt2k/tokenizer.json" --quiet 2> "$T/mt2k.err"; then
  enc tokenizer_small_maskd_trained_in_hf_ids_train "mt2k_ids" "$T/mt2k/tokenizer.json" "$T/train.txt"
  enc tokenizer_small_maskd_trained_in_hf_ids_wikitext_test "mt2k_ids_test" "$T/mt2k/tokenizer.json" "$D/wikitext-2/test.txt"
else
  fail tokenizer_small_maskd_train "$(tail -2 "$T/mt2k.err")"
fi
python3 - "$T/scores.json" <<'EOF'
import random, sys
r = random.Random(7)
# (integers past int64 are left out: jansson refuses them, so maskd refuses such a file)
texts = ["0", "-0", "-0.0", "5", "-5", "9223372036854775807", "-9223372036854775808",
         "-123456789012345678901234.5", "1e-320", "-4.9e-324",
         "-1e-400", "1.7976931348623157e308", "-2.5E+2", "-2.5e-0", "1234567890123456789012345e-30", "-0.1", "-1e22",
         "-1e23", "-123456789.123456789e-3", "-9007199254740993", "-9007199254740993.0", "-12.152813876606297",
         "-" + "1" * 400 + "e-400", "-0." + "0" * 30 + "123456789012345678901"]
for _ in range(3000):
    k = r.randrange(6)
    if k == 0:   # what shortest round-trip printing writes: 16-17 significant digits
        texts.append(repr(-r.uniform(0, 20)))
    elif k == 1:
        texts.append("-%d.%0*d" % (r.randrange(30), r.randrange(15, 22), r.randrange(10 ** 21)))
    elif k == 2:
        texts.append("-%de-%d" % (r.randrange(10 ** 19, 10 ** 21), r.randrange(0, 40)))
    elif k == 3:
        texts.append("-%d.%de%d" % (r.randrange(10), r.randrange(10 ** 17), r.randrange(-30, 10)))
    elif k == 4:
        texts.append("%.*e" % (r.randrange(1, 20), -r.uniform(0, 1) * 10 ** r.randrange(-310, -290)))
    else:
        texts.append(str(-r.randrange(10 ** r.randrange(1, 19))))
vocab = ",\n    ".join('["p%d", %s]' % (i, t) for i, t in enumerate(texts))
open(sys.argv[1], "w").write('{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, '
                             '"pre_tokenizer": null, "post_processor": null, "decoder": null, '
                             '"model": {"type": "Unigram", "unk_id": 0, "vocab": [\n    ["<unk>", 0.0],\n    ' + vocab + ']}}')
EOF
B=${MASKD_BUILD:-build}
if "$B/tests/unit/test_vocab_scores" --dump "$T/scores.json" > "$T/scores_maskd.txt" 2> "$T/scores_maskd.err" &&
   node $H resave "$T/scores.json" "$T/scores_hf.json" 2> "$T/scores_hf.err"; then
  if python3 - "$T/scores_hf.json" "$T/scores_maskd.txt" > "$T/scores.diff" 2>&1 <<'EOF'
import json, sys
h = [float(s).hex() for _, s in json.load(open(sys.argv[1]))["model"]["vocab"]]
m = [float.fromhex(l).hex() for l in open(sys.argv[2]).read().split()]
assert len(h) == len(m), (len(h), len(m))
bad = [(i, a, b) for i, (a, b) in enumerate(zip(h, m)) if a != b]
assert not bad, "%d of %d scores differ, first (entry, HF, maskd): %s" % (len(bad), len(h), bad[:3])
EOF
  then pass tokenizer_scores_read_as_hf; else fail tokenizer_scores_read_as_hf "$(tail -c 300 "$T/scores.diff")"; fi
else
  fail tokenizer_scores_read_as_hf "$(tail -c 300 "$T/scores_maskd.err") $(tail -c 300 "$T/scores_hf.err")"
fi

# 4. Variants on the edge cases and WikiText valid.
nvar=300; [ "$long" = 1 ] && nvar=100000000
head -n "$nvar" "$D/wikitext-2/valid.txt" | python3 -c "
import json, sys
for l in sys.stdin.read().split('\n')[:-1]: print(json.dumps(l, ensure_ascii=False))" > "$T/var_in.jsonl"
cat "$T/edge.jsonl" >> "$T/var_in.jsonl"
for v in var_first var_never var_legacy var_added var_bare; do
  enc "tokenizer_hf_offsets_$v" "off_$v" "$T/$v.json" "$T/var_in.jsonl" --jsonl --offsets
  enc "tokenizer_hf_ids_$v" "ids_$v" "$T/$v.json" "$T/var_in.jsonl" --jsonl
  dec "tokenizer_hf_decode_$v" "dec_$v" "$T/$v.json" "$T/m.ids_$v"
done

# 5. truncation and padding set (Hub folders such as sentence-transformers' have them):
# loaded and ignored, maskd applying its own limits. The same ids as the seed's (both
# null) on every line, longer than max_length 64 too; on the lines of at most 64 ids,
# HF's with truncation set (they were refused: "truncation is not supported").
if M_ encode --tokenizer "$T/var_truncpad.json" --input "$T/var_in.jsonl" --jsonl > "$T/m.truncpad" 2> "$T/truncpad.err"; then
  M_ encode --tokenizer "$T/seed.json" --input "$T/var_in.jsonl" --jsonl > "$T/m.truncpad_null"
  same tokenizer_hf_truncation_padding_ignored "$T/m.truncpad_null" "$T/m.truncpad"
  awk -v ids="$T/m.truncpad" 'BEGIN { while ((getline l < ids) > 0) n[++k] = split(l, a, " ") } n[FNR] <= 64' \
    "$T/var_in.jsonl" > "$T/short.jsonl"
  if [ -s "$T/short.jsonl" ] && [ "$(wc -l < "$T/short.jsonl")" -lt "$(wc -l < "$T/var_in.jsonl")" ]; then
    hfq truncation_short encode "$T/var_trunc.json" "$T/short.jsonl" --jsonl
    M_ encode --tokenizer "$T/var_truncpad.json" --input "$T/short.jsonl" --jsonl > "$T/m.truncation_short"
    later tokenizer_hf_truncation_short_lines truncation_short
  else
    fail tokenizer_hf_truncation_short_lines "expected some lines over 64 ids and some not: $(wc -l < "$T/short.jsonl")"
  fi
else
  fail tokenizer_hf_truncation_padding_ignored "$(head -c 300 "$T/truncpad.err")"
fi

# The queued HF side, then every comparison.
if node $H multi "$T/jobs" 2> "$T/multi.err"; then
  while read -r name key; do same "$name" "$T/h.$key" "$T/m.$key"; done < "$T/checks"
else
  fail tokenizer_hf_reference "hf_tokenize.js multi failed: $(tail -2 "$T/multi.err")"
fi
exit 0
