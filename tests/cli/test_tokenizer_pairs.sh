#!/usr/bin/env bash
# Text pairs and truncation against Hugging Face tokenizers (npm tokenizers@0.23.2,
# tests/hf_tokenize.js): `maskd tokenizer encode --pair` (HF's encode(a, b): the pair
# template's ids and type ids) and `--max-length N --truncation STRATEGY` (HF's
# setTruncation: longest_first, only_first, only_second; special tokens counted) give
# HF's ids and type ids, for the four layouts maskd reads: a Unigram tokenizer maskd
# trains (TemplateProcessing [CLS] $A [SEP] $B:1 [SEP]:1), WordPiece uncased
# (BertProcessing), WordPiece cased (TemplateProcessing) and byte-level BPE laid out as
# roberta-base (RobertaProcessing: <s> A </s></s> B </s>). The pairs mix BANKING77 and
# WikiText-2 texts with added tokens inside, empty sides and long sides; the lengths cover
# every case of HF's longest_first rule (one side short, both cut, both longer than the
# whole length, where HF's lazy encoding decides which side counts as longer). A pair HF
# refuses (only_first / only_second with a side too short to give up enough, only_second
# of a single text, a length under the template's own tokens) is refused by maskd with
# one line and a non-zero exit. make test runs a representative part (lengths none, 6 and
# 13; only_first / only_second at 12; 300 pairs); TOK_PAIRS_LONG=1 (tests/long/
# long_tokenizer_pairs.sh) runs 1200 pairs at nine lengths and both strategies at three.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" tokpairs
D=$DATA_ROOT
H=tests/hf_tokenize.js
need tokenizer_pairs_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
long=${TOK_PAIRS_LONG:-0}
npairs=300 lengths="none 6 13" singles="20" only_lengths="12"
[ "$long" = 1 ] && npairs=1200 lengths="none 4 5 6 9 13 20 32 64" singles="3 8 20" only_lengths="12 24 40"
need tokenizer_pairs_setup "$D/wikitext-2/valid.txt missing (MASKD_DATA=$D)" -f "$D/wikitext-2/valid.txt"
need tokenizer_pairs_setup "$D/banking77/test.csv missing (MASKD_DATA=$D)" -f "$D/banking77/test.csv"

head -c 400000 "$D/wikitext-2/train.txt" > "$T/train.txt"
{ "$M" tokenizer train --input "$T/train.txt" --vocab-size 2000 --out "$T/uni.json" --threads 1 &&
  node $H train-wordpiece "$T/wpu.json" "$T/train.txt" --vocab 3000 &&
  node $H train-wordpiece "$T/wpc.json" "$T/train.txt" --vocab 3000 --cased &&
  node $H train-bpe "$T/bpe.json" "$T/train.txt" --vocab 3000; } >"$T/setup.log" 2>&1 ||
  { fail tokenizer_pairs_setup "$(tail -3 "$T/setup.log")"; exit 1; }

# $npairs pairs (tab between the two texts): BANKING77 test utterances against WikiText-2 valid
# lines and each other, a fifth with an added token inside, some sides empty.
$PY - "$D" "$T/pairs.tsv" "$npairs" <<'EOF'
import csv, random, sys
d, out, npairs = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = random.Random(7)
bank = [row["text"].replace("\t", " ").replace("\n", " ") for row in csv.DictReader(open(d + "/banking77/test.csv", encoding="utf-8"))]
wiki = [l.strip().replace("\t", " ") for l in open(d + "/wikitext-2/valid.txt", encoding="utf-8") if l.strip() and not l.startswith(" =")]
added = ["[MASK]", "<mask>", "[SEP]", "<s>", "[CLS]", "</s>"]
def side():
    k = r.random()
    t = "" if k < 0.05 else r.choice(bank) if k < 0.6 else " ".join(r.choice(wiki).split()[: r.randint(1, 60)])
    if t and r.random() < 0.2:
        w = t.split(" ")
        w.insert(r.randint(0, len(w)), r.choice(added))
        t = " ".join(w)
    return t
with open(out, "w", encoding="utf-8") as f:
    for _ in range(npairs):
        f.write(side() + "\t" + side() + "\n")
EOF
cut -f1 "$T/pairs.tsv" > "$T/firsts.txt"

M_() { "$M" tokenizer encode "$@"; }
for tk in uni wpu wpc bpe; do
  tok="$T/$tk.json"
  # Without truncation, and cut to lengths from the template's own tokens up (4 is
  # RoBERTa's pair template alone: both sides emptied) to more than most pairs need.
  for ml in $lengths; do
    a=(); h=()
    [ $ml != none ] && { a=(--max-length $ml); h=(--max-length=$ml); }
    for what in ids type-ids; do
      f=(); [ $what = type-ids ] && f=(--type-ids)
      node $H encode "$tok" "$T/pairs.tsv" --pair "${h[@]}" "${f[@]}" > "$T/h" 2>"$T/h.err"
      M_ --tokenizer "$tok" --input "$T/pairs.tsv" --pair "${a[@]}" "${f[@]}" > "$T/m" 2>"$T/m.err"
      same "tokenizer_pairs_${tk}_${what}_longest_first_$ml" "$T/h" "$T/m"
    done
  done
  # A single text cut the same way (the first texts alone).
  for ml in $singles; do
    node $H encode "$tok" "$T/firsts.txt" --max-length=$ml > "$T/h" 2>"$T/h.err"
    M_ --tokenizer "$tok" --input "$T/firsts.txt" --max-length $ml > "$T/m" 2>"$T/m.err"
    same "tokenizer_single_${tk}_max_length_$ml" "$T/h" "$T/m"
  done
  # only_first / only_second: the pairs HF cuts are compared in one run; of those HF
  # refuses, three are each refused by maskd alone.
  for tr in only_first only_second; do
    for ml in $only_lengths; do
      node $H encode "$tok" "$T/pairs.tsv" --pair --max-length=$ml --truncation=$tr > "$T/h_all"
      [ "$(wc -l < "$T/h_all")" = "$npairs" ] || { fail "tokenizer_pairs_${tk}_${tr}_$ml" "HF gave $(wc -l < "$T/h_all") lines"; continue; }
      paste "$T/h_all" "$T/pairs.tsv" | grep -v '^ERR' | cut -f2- > "$T/ok.tsv"
      grep -v '^ERR' "$T/h_all" > "$T/h"
      M_ --tokenizer "$tok" --input "$T/ok.tsv" --pair --max-length $ml --truncation $tr > "$T/m" 2>"$T/m.err"
      same "tokenizer_pairs_${tk}_${tr}_$ml" "$T/h" "$T/m"
      paste "$T/h_all" "$T/pairs.tsv" | grep '^ERR' | cut -f2- | head -3 > "$T/bad.tsv"
      n=$(wc -l < "$T/bad.tsv") bad=0
      while IFS= read -r line; do
        printf '%s\n' "$line" > "$T/one.tsv"
        out=$(M_ --tokenizer "$tok" --input "$T/one.tsv" --pair --max-length $ml --truncation $tr 2>&1 >/dev/null) && bad=$((bad + 1))
        grep -q "^maskd tokenizer encode: line 1: truncation $tr: the .* sequence has [0-9]* tokens, too few to give up the [0-9]* that do not fit$" <<<"$out" ||
          bad=$((bad + 1))
      done < "$T/bad.tsv"
      [ $bad = 0 ] && pass "tokenizer_pairs_${tk}_${tr}_${ml}_refusals ($n)" ||
        fail "tokenizer_pairs_${tk}_${tr}_${ml}_refusals" "$bad of $n not refused as HF refuses them: $out"
    done
  done
done

# only_second of a single text that must be cut: HF's "Second sequence not provided".
printf 'a b c d e f g h i j k l m n o p\n' > "$T/long1.txt"
node $H encode "$T/uni.json" "$T/long1.txt" --max-length=6 --truncation=only_second > "$T/h"
out=$(M_ --tokenizer "$T/uni.json" --input "$T/long1.txt" --max-length 6 --truncation only_second 2>&1 >/dev/null); rc=$?
grep -q '^ERR .*Second sequence not provided' "$T/h" && [ $rc = 1 ] &&
  grep -q "^maskd tokenizer encode: line 1: truncation only_second: there is no second sequence to cut$" <<<"$out" &&
  pass tokenizer_only_second_without_pair_refused || fail tokenizer_only_second_without_pair_refused "rc $rc: $out; hf: $(cat "$T/h")"
# A length the template's tokens alone exceed: HF's answer there is not a truncation
# (tokenizers 0.23 keeps tokens it was asked to cut), so maskd refuses it.
out=$(M_ --tokenizer "$T/bpe.json" --input "$T/pairs.tsv" --pair --max-length 3 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && grep -q "a maximum length of 3 leaves no room: the special tokens alone are 4$" <<<"$out" &&
  pass tokenizer_pairs_max_length_under_template_refused || fail tokenizer_pairs_max_length_under_template_refused "rc $rc: $out"
# The flags' own refusals: one line, exit 2.
for c in "--truncation only_first" "--pair --pieces" "--pair --no-special-tokens" "--max-length 0"; do
  out=$(M_ --tokenizer "$T/uni.json" --input "$T/pairs.tsv" $c 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && pass "tokenizer_encode_refuses_${c// /_}" ||
    fail "tokenizer_encode_refuses_${c// /_}" "rc $rc: $out"
done
printf 'no tab here\n' > "$T/notab.tsv"
out=$(M_ --tokenizer "$T/uni.json" --input "$T/notab.tsv" --pair 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && grep -q "line 1: no tab between the pair's two texts (--pair)" <<<"$out" &&
  pass tokenizer_pairs_line_without_tab_refused || fail tokenizer_pairs_line_without_tab_refused "rc $rc: $out"
# --jsonl pairs: [a, b] lists, texts holding tabs and newlines.
printf '%s\n' '["a\tb", "c\nd"]' '["", "x y z"]' > "$T/p.jsonl"
node $H encode "$T/uni.json" "$T/p.jsonl" --pair --jsonl > "$T/h"
M_ --tokenizer "$T/uni.json" --input "$T/p.jsonl" --pair --jsonl > "$T/m" 2>"$T/m.err"
same tokenizer_pairs_jsonl "$T/h" "$T/m"
