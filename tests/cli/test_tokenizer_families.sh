#!/usr/bin/env bash
# Parity with Hugging Face tokenizers (npm tokenizers@0.23.2, tests/hf_tokenize.js) for
# BERT's WordPiece and RoBERTa's byte-level BPE:
#   - tokenizer.json files HF trains and writes (WordPiece uncased with BertProcessing,
#     WordPiece cased with TemplateProcessing, byte-level BPE laid out as roberta-base):
#     maskd gives HF's ids (with and without special tokens), byte offsets, pieces, and
#     decoded text (with and without --skip-special-tokens, also of random ids);
#   - legacy Hub folders without tokenizer.json (vocab.txt + tokenizer_config.json;
#     vocab.json + merges.txt + tokenizer_config.json), written from the trained files
#     and hand-made tiny ones (unknown words, unmerged and unknown bytes, a folder
#     without tokenizer_config.json, add_prefix_space): maskd reading the FOLDER against
#     the tokenizer transformers' BertConverter / RobertaConverter builds from it (REF.json,
#     built and saved by HF outside the folder); a folder holding both tokenizer.json and
#     vocab.txt is read through tokenizer.json;
#   - `maskd tokenizer export` writes a tokenizer.json that HF loads and encodes as the
#     source (HF on the export against HF on the source).
# make test runs a representative part (HF trains on 4000 lines of WikiText-2 train; the
# first 1000 lines of valid, BANKING77 test, edge cases); TOK_FAMILIES_LONG=1
# (tests/long/long_tokenizer_families.sh) trains on all of train and compares all of
# valid, test and BANKING77 train+test.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" tokfam
D=$DATA_ROOT
H=tests/hf_tokenize.js
long=${TOK_FAMILIES_LONG:-0}
lines=4000; [ "$long" = 1 ] && lines=100000000

need tokenizer_families_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
for f in "$D/wikitext-2/train.txt" "$D/wikitext-2/valid.txt" "$D/wikitext-2/test.txt" "$D/banking77/train.csv" "$D/banking77/test.csv"; do
  [ -f "$f" ] || { fail tokenizer_families_data "$f missing (MASKD_DATA=$D)"; exit 1; }
done


# Corpora: WikiText-2 lines, BANKING77 texts (CSV parsed, as JSON lines since some hold
# newlines), and edge cases for the BERT normalizer and pre-tokenizer, WordPiece's
# 100-character limit (counted in characters, not bytes), byte-level BPE and the special
# tokens ([MASK] plain, <mask> with lstrip).
python3 - "$D" "$T" "$long" <<'EOF'
import csv, json, sys
d, t = sys.argv[1], sys.argv[2]
with open(f"{t}/banking.jsonl", "w", encoding="utf-8") as out:
    for split in (("train", "test") if sys.argv[3] == "1" else ("test",)):
        with open(f"{d}/banking77/{split}.csv", newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                out.write(json.dumps(row["text"], ensure_ascii=False) + "\n")
edge = [
    "", " ", "  ", "\t", "\n", "a", " a", "a ", "  a  b   c  ", "Hello world", "HELLO World hElLo",
    # accents, compatibility forms, combining marks, Turkish dotted/dotless i
    "Café naïve résumé Ñandú façade", "e\u0301 combining a\u0300\u0301\u0302 x\u0327", "Z\u00fcrich \u00c5ngstr\u00f6m \u00d8re",
    "\ufb01ne \ufb02ow \u2168 \uff21\uff22\uff23 \u00bd \u00b2", "\u0130stanbul ISTANBUL \u0131i \u0130 i\u0307 \u0049\u0307",
    "\u1e9e stra\u00dfe STRASSE", "\u03a3\u03bf\u03c6\u03af\u03b1 \u039f\u0394\u039f\u03a3", "\u0410\u0411\u0412 \u0439 \u0451",
    # CJK (BERT puts spaces around each ideograph), kana, hangul, CJK extension B
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059", "\u4e2d\u6587mixed\u82f1\u6587 text", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u3072\u3089\u304c\u306a \u30ab\u30bf\u30ab\u30ca \uff76\uff80\uff76\uff85", "\U00020000\U00020001 \U0002a6d6 \uf900 \u3400",
    # emoji (ZWJ sequences, skin tones, flags, keycaps)
    "\U0001F600 \U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F1EB\U0001F1F7 1\ufe0f\u20e3",
    "smile\U0001F600smile", "\U0001F600" * 30,
    # whitespace runs and separators
    "a  b", "   leading", "trailing   ", "a\t\tb", "a\n\nb", "a\r\nb", " \t \n \r ", "a \u00a0 b", "a\u3000b",
    "a\u2028b\u2029c", "a\u0085b", "a\u2003b\u2009c\u202fd", "x" + " " * 40 + "y",
    # punctuation and symbols (BERT: every punctuation char alone; ASCII symbols count)
    "hello, world! (test) [x] {y} <z> a-b a_b $5.00 50% #tag @user ~ ` ^ | \\ / +=*&",
    "\u2018quoted\u2019 \u201cdouble\u201d \u00abguillemets\u00bb \u2014 \u2013 \u2026 \u00bf\u00a1 \u00a7\u00b6 \u20ac\u00a3\u00a5",
    "``quoted'' text", "e.g. U.S.A. 3.14159 1,000,000 1990s 12:30 10-15",
    # contractions (byte-level BPE's 's 't 're 've 'm 'll 'd are case-sensitive)
    "don't", "DON'T", "'S", "'s", "He's 'S 's", "It's John's I'M YOU'RE we'll they'd I've", "don't've'", "'''",
    # very long words: WordPiece's max_input_chars_per_word is 100 characters
    "a" * 99, "a" * 100, "a" * 101, "a" * 150, "supercalifragilistic" * 8, "\u00e9" * 101, "\u00fc" * 70,
    "\U0001F600" * 101, "x" + "\u0301" * 120, "antidisestablishmentarianism " * 10,
    ("word " * 400).strip(), "\u4e2d" * 150,
    # special tokens written in the text
    "[MASK]", "a [MASK] b", "a[MASK]b", "  [MASK]  ", "[mask]", "[MASK][MASK]", "[CLS] x [SEP] [PAD] [UNK]",
    "<mask>", "a <mask> b", "a<mask>b", "  <mask>", "a  <mask>", "<mask><mask>", "<s> x </s> <pad> <unk>", "<MASK>",
    # WikiText's own markup
    " = = Heading = = ", "@-@ @,@ @.@", "1 @,@ 000 , 1990s",
]
# control characters: BERT's clean_text drops U+0000, U+FFFD and Cc/Cf ones, keeps tab,
# newline and carriage return as whitespace; byte-level keeps every byte.
ctrl = [chr(c) for c in range(0x20)] + ["\u007f", "\u200b", "\ufeff", "\ufffd", "\u00ad", "\u200e", "\u0600", "\U000e0001"]
edge += [f"a{c}b" for c in ctrl] + ["x" + "".join(ctrl) + "y", "".join(ctrl)]
with open(f"{t}/edge.jsonl", "w", encoding="utf-8") as out:
    for s in edge:
        out.write(json.dumps(s, ensure_ascii=False) + "\n")
EOF
head -n "$lines" "$D/wikitext-2/train.txt" > "$T/train.txt"

# HF trains the three tokenizers (its default trainers, laid out as the Python recipes:
# see hf_tokenize.js) and writes each.
node $H train-wordpiece "$T/wpu.json" "$T/train.txt" >/dev/null 2>"$T/train.log" &&
  node $H train-wordpiece "$T/wpc.json" "$T/train.txt" --cased >/dev/null 2>>"$T/train.log" &&
  node $H train-bpe "$T/bpe.json" "$T/train.txt" >/dev/null 2>>"$T/train.log" ||
  { fail tokenizer_families_train "$(tail -3 "$T/train.log")"; exit 1; }

# Legacy folders from the trained files, each with HF's converter-built reference.
for x in wpu wpc bpe; do
  fam=wordpiece; [ $x = bpe ] && fam=bpe
  node $H folder-$fam "$T/$x.json" "$T/dir_$x" "$T/ref_$x.json" || { fail tokenizer_families_folders "hf_tokenize.js folder-$fam $x failed"; exit 1; }
done
# Hand-made tiny folders. WordPiece: no tokenizer_config.json (BertTokenizer's defaults:
# do_lower_case, strip_accents unset, tokenize_chinese_chars), words that split into ##
# pieces and words with no split ([UNK]). BPE: few bytes in the vocabulary (RobertaConverter
# gives BPE no unk_token: bytes outside it are dropped), merges that leave bytes unmerged,
# add_prefix_space true.
mkdir -p "$T/tiny_wp" "$T/tiny_bpe"
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the a un '##aff' '##able' '##s' run '##ning' '##n' is , . "'" s t '##t' h '##e' e cafe '##y' 中 '##中' x '##x' > "$T/tiny_wp/vocab.txt"
python3 - "$T/tiny_bpe" <<'EOF'
import json, sys
d = sys.argv[1]
toks = ["<s>", "<pad>", "</s>", "<unk>", "a", "b", "c", "d", "e", "h", "l", "o", "t", "Ġ", "Ã", "©", "he", "Ġt", "Ġthe", "ll", "hell", "hello", "Ġa", "Ã©", "<mask>"]
merges = ["h e", "Ġ t", "Ġt he", "l l", "he ll", "hell o", "Ġ a", "Ã ©"]
json.dump({t: i for i, t in enumerate(toks)}, open(f"{d}/vocab.json", "w", encoding="utf-8"), ensure_ascii=False, indent=2, sort_keys=True)
open(f"{d}/merges.txt", "w", encoding="utf-8").write("#version: 0.2\n" + "".join(m + "\n" for m in merges))
mask = {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False, "special": True}
json.dump({"add_prefix_space": True, "bos_token": "<s>", "clean_up_tokenization_spaces": True, "cls_token": "<s>",
           "eos_token": "</s>", "errors": "replace", "mask_token": mask, "model_max_length": 512, "pad_token": "<pad>",
           "sep_token": "</s>", "tokenizer_class": "RobertaTokenizer", "trim_offsets": True, "unk_token": "<unk>"},
          open(f"{d}/tokenizer_config.json", "w"), indent=2, sort_keys=True)
EOF
for x in tiny_wp tiny_bpe; do
  node $H ref-folder "$T/$x" "$T/ref_$x.json" || { fail tokenizer_families_folders "hf_tokenize.js ref-folder $x failed"; exit 1; }
done
# A folder with both: tokenizer.json (the cased one) wins over vocab.txt (the uncased one).
mkdir -p "$T/dir_both"; cp "$T/wpc.json" "$T/dir_both/tokenizer.json"; cp "$T/dir_wpu/vocab.txt" "$T/dir_wpu/tokenizer_config.json" "$T/dir_both/"

M_() { "$M" tokenizer "$@"; }

# The HF side is queued and run in ONE node process at the end (node's start-up is most
# of the cost of a small comparison); maskd runs at once.
: > "$T/jobs"; : > "$T/checks"
hfq() {  # hfq KEY CMD ARGS...: HF's output for KEY goes to $T/h.KEY
  local key=$1; shift
  local IFS=$'\t'
  echo "$T/h.$key"$'\t'"$*" >> "$T/jobs"
}
later() { echo "$1 $T/h.$2 ${3:-$T/m.$2}" >> "$T/checks"; }  # later NAME KEY [FILE]: h.KEY against m.KEY (or FILE)
enc() {  # enc NAME KEY HF-TOKENIZER MASKD-TOKENIZER INPUT [--jsonl] [--offsets|--pieces] [--no-special]
  local name=$1 key=$2 htok=$3 mtok=$4 in=$5; shift 5
  local mflags=()
  for a in "$@"; do case "$a" in --no-special) mflags+=(--no-special-tokens) ;; *) mflags+=("$a") ;; esac; done
  hfq "$key" encode "$htok" "$in" "$@"
  M_ encode --tokenizer "$mtok" --input "$in" "${mflags[@]}" > "$T/m.$key" 2> "$T/m.$key.err"
  later "$name" "$key"
}
dec() {  # dec NAME KEY HF-TOKENIZER MASKD-TOKENIZER IDS [--skip-special]
  local name=$1 key=$2 htok=$3 mtok=$4 in=$5; shift 5
  local mflags=()
  # The ids are maskd's encode output: none (its encode failed) would compare empty to empty.
  [ -s "$in" ] || { fail "$name" "no ids to decode (maskd's encode printed none)"; return; }
  for a in "$@"; do case "$a" in --skip-special) mflags+=(--skip-special-tokens) ;; *) mflags+=("$a") ;; esac; done
  hfq "$key" decode "$htok" "$in" "$@"
  M_ decode --tokenizer "$mtok" --input "$in" "${mflags[@]}" > "$T/m.$key" 2> "$T/m.$key.err"
  later "$name" "$key"
}

# WikiText as JSON lines too, so every corpus goes through --jsonl the same way.
corpora="valid"; [ "$long" = 1 ] && corpora="valid test"
for c in $corpora; do
  f="$D/wikitext-2/$c.txt"
  if [ "$long" = 1 ]; then cp "$f" "$T/$c.txt"; else head -n 1000 "$f" > "$T/$c.txt"; fi
done

# Random ids for decoding: specials, ordinary ids, ids past the vocabulary (HF skips them).
randids() {  # vocab size, out
  python3 -c "
import random, sys; random.seed(11); n = int(sys.argv[1])
for i in range(2000): print(' '.join(str(random.choice([random.randrange(0, n), random.randrange(0, 6), n - 1, n, n + 3])) for _ in range(random.randrange(0, 16))))" "$1" > "$2"
}

# 1. The trained tokenizer.json files: ids, offsets, pieces, no specials, decode.
for x in wpu wpc bpe; do
  tok=$T/$x.json
  for c in $corpora; do
    enc "tokfam_${x}_ids_wikitext_$c" "${x}_ids_$c" "$tok" "$tok" "$T/$c.txt"
    enc "tokfam_${x}_offsets_wikitext_$c" "${x}_off_$c" "$tok" "$tok" "$T/$c.txt" --offsets
    enc "tokfam_${x}_pieces_wikitext_$c" "${x}_pcs_$c" "$tok" "$tok" "$T/$c.txt" --pieces
  done
  for c in banking edge; do
    enc "tokfam_${x}_ids_$c" "${x}_ids_$c" "$tok" "$tok" "$T/$c.jsonl" --jsonl
    enc "tokfam_${x}_offsets_$c" "${x}_off_$c" "$tok" "$tok" "$T/$c.jsonl" --jsonl --offsets
    enc "tokfam_${x}_pieces_$c" "${x}_pcs_$c" "$tok" "$tok" "$T/$c.jsonl" --jsonl --pieces
  done
  enc "tokfam_${x}_ids_nospecial_edge" "${x}_nosp_edge" "$tok" "$tok" "$T/edge.jsonl" --jsonl --no-special
  enc "tokfam_${x}_offsets_nospecial_edge" "${x}_nospoff_edge" "$tok" "$tok" "$T/edge.jsonl" --jsonl --offsets --no-special
  n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['model']['vocab']))" "$tok")
  randids "$n" "$T/m.${x}_ids_random"
  for c in $corpora banking edge random; do
    dec "tokfam_${x}_decode_$c" "${x}_dec_$c" "$tok" "$tok" "$T/m.${x}_ids_$c"
    dec "tokfam_${x}_decode_${c}_skip_special" "${x}_decs_$c" "$tok" "$tok" "$T/m.${x}_ids_$c" --skip-special
  done
done

# 1b. Variants of the trained files on the edge cases: merges written as "a b" strings
# (the layout of older files such as roberta-base's on the Hub; HF 0.23 writes pairs and
# reads both), add_prefix_space (RobertaTokenizerFast(add_prefix_space=True): pre-tokenizer
# and post-processor), and BertNormalizer switches: Chinese characters not split,
# accents stripped without lowercasing, clean_text off.
python3 - "$T" <<'PYEOF2'
import json, sys
t = sys.argv[1]
def load(n): return json.load(open(f"{t}/{n}.json", encoding="utf-8"))
def write(n, d): json.dump(d, open(f"{t}/{n}.json", "w", encoding="utf-8"), ensure_ascii=False)
d = load("bpe"); d["model"]["merges"] = [" ".join(m) for m in d["model"]["merges"]]; write("var_bpe_strmerges", d)
d = load("bpe"); d["pre_tokenizer"]["add_prefix_space"] = True; d["post_processor"]["add_prefix_space"] = True; write("var_bpe_prefix", d)
d = load("wpc"); d["normalizer"].update(handle_chinese_chars=False, strip_accents=True, lowercase=False); write("var_wp_norm", d)
d = load("wpu"); d["normalizer"]["clean_text"] = False; write("var_wp_noclean", d)
# Many added tokens (as transformers' add_tokens makes them), overlapping each other and the
# text: whole vocabulary words and their beginnings (so a word's first letters, the word and
# a longer one share a start: leftmost-longest decides), invented words, normalized or not,
# a few with lstrip, rstrip or single_word. Ids as HF's AddedVocabulary gives them: the
# vocabulary's for a piece, else the next free one.
import random
rnd = random.Random(5)
for name, src in (("var_wp_added", "wpu"), ("var_bpe_added", "bpe")):
    d = load(src)
    vocab = d["model"]["vocab"]
    words = sorted(w for w in vocab if w.isalpha() and w.isascii() and len(w) >= 4)
    rnd.shuffle(words)
    contents = []
    for w in words[:600]:
        contents += [w, w[:3], w + "zq"]
    contents += [w.upper() for w in words[600:650]]
    nxt = max(vocab.values()) + 1 if isinstance(vocab, dict) else len(vocab)
    seen = {a["content"] for a in d["added_tokens"]}
    for i, c in enumerate(contents):
        if c in seen:
            continue
        seen.add(c)
        tid = vocab.get(c) if isinstance(vocab, dict) else None
        if tid is None:
            tid, nxt = nxt, nxt + 1
        d["added_tokens"].append({"id": tid, "content": c, "lstrip": i % 31 == 0,
                                  "rstrip": i % 37 == 0, "normalized": i % 3 != 1, "special": False,
                                  "single_word": i % 5 == 2})
    write(name, d)
# Normalized added tokens whose normalized text differs from the original: their strings
# (pieces) are the normalized text, and RoBERTa's trim_offsets trims by it.
def added(tid, content, **kw):
    a = {"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False}
    a.update(kw)
    return a
d = load("bpe"); n = max(d["model"]["vocab"].values()) + 1
d["normalizer"] = {"type": "Replace", "pattern": {"String": "_"}, "content": " "}
d["added_tokens"] += [added(n, " x"), added(n + 1, "y_z", lstrip=True)]
write("var_bpe_normadded", d)
d = load("wpu"); n = max(d["model"]["vocab"].values()) + 1
d["added_tokens"] += [added(n, "Wor", lstrip=True, rstrip=True), added(n + 1, "\u00e9"), added(n + 2, "ZQ")]
write("var_wp_normadded", d)
# single_word tokens match only where no word character (the regex crate's \w: letters,
# marks, digits, _, ZWJ, circled letters) touches them, in the raw text or the
# normalized one; a refused match still takes its text (a shorter token at its place
# does not match), and the search goes on after it.
d = load("wpu"); n = max(d["model"]["vocab"].values()) + 1
d["added_tokens"] += [added(n, "cat", single_word=True), added(n + 1, "ca"), added(n + 2, "Dog", single_word=True, normalized=False),
                      added(n + 3, "+", single_word=True, normalized=False), added(n + 4, "ZZ", single_word=True, lstrip=True, rstrip=True),
                      added(n + 5, "\u4e2d", single_word=True)]
write("var_wp_sw", d)
d = load("bpe"); n = max(d["model"]["vocab"].values()) + 1
d["normalizer"] = {"type": "Replace", "pattern": {"String": "_"}, "content": " "}
d["added_tokens"] += [added(n, " cat", single_word=True), added(n + 1, "Dog", single_word=True, normalized=False),
                      added(n + 2, "ca", normalized=False), added(n + 3, "x", single_word=True, lstrip=True, rstrip=True)]
write("var_bpe_sw", d)
with open(f"{t}/sw.jsonl", "w", encoding="utf-8") as out:
    for s in ["cat", "cats", "a cat.", "_cat", "cat_", "9cat", "cat9", "\u00e9cat", "cat\u0301", "cat\u200d", "\u24b6cat",
              "cat\u2167", "cat-dog", "cat's", "cat cat  cat", "catcat", "cat\u00a0x", "\u0301cat", "cat\U0001F600",
              "\u4e2dcat", "cat\u4e2d", "a\u4e2db", "[MASK]cat", "CAT Cat", "Dog dog Dogs xDog Dog!", "a+b a + b +",
              "ZZ zz xZZ  zz  y", "the cats sat", "ca cat", "_cat_", "x_x", "a x b", "ax", "DogDog Dog", "\u0660cat",
              "cat\u203f", "cat\u2160x", ""]:
        out.write(json.dumps(s, ensure_ascii=False) + "\n")
with open(f"{t}/normadded.jsonl", "w", encoding="utf-8") as out:
    for s in ["a_x b", "_x", "x_x_x", " x", "a y_z", "a y z", "__y_z_", "HELLO [MASK] World", "the WORLD wor x",
              "\u00e9\u00e9 \u00c9", "zq ZQ zQ", "a   Wor   b", "nothing here"]:
        out.write(json.dumps(s, ensure_ascii=False) + "\n")
PYEOF2
for v in var_bpe_normadded var_wp_normadded; do
  enc "tokfam_${v}_offsets" "${v}_off" "$T/$v.json" "$T/$v.json" "$T/normadded.jsonl" --jsonl --offsets
  enc "tokfam_${v}_pieces" "${v}_pcs" "$T/$v.json" "$T/$v.json" "$T/normadded.jsonl" --jsonl --pieces
  enc "tokfam_${v}_ids" "${v}_ids" "$T/$v.json" "$T/$v.json" "$T/normadded.jsonl" --jsonl
  dec "tokfam_${v}_decode" "${v}_dec" "$T/$v.json" "$T/$v.json" "$T/m.${v}_ids"   # HF decodes ZQ as zq
done
for v in var_wp_sw var_bpe_sw; do
  enc "tokfam_${v}_offsets" "${v}_off" "$T/$v.json" "$T/$v.json" "$T/sw.jsonl" --jsonl --offsets
  enc "tokfam_${v}_pieces" "${v}_pcs" "$T/$v.json" "$T/$v.json" "$T/sw.jsonl" --jsonl --pieces
done
for v in var_wp_added var_bpe_added; do
  enc "tokfam_${v}_ids_wikitext_valid" "${v}_ids_valid" "$T/$v.json" "$T/$v.json" "$T/valid.txt"
  enc "tokfam_${v}_offsets_banking" "${v}_off_banking" "$T/$v.json" "$T/$v.json" "$T/banking.jsonl" --jsonl --offsets
done
for v in var_bpe_strmerges var_bpe_prefix var_wp_norm var_wp_noclean var_wp_added var_bpe_added; do
  enc "tokfam_${v}_ids_edge" "${v}_ids" "$T/$v.json" "$T/$v.json" "$T/edge.jsonl" --jsonl
  enc "tokfam_${v}_offsets_edge" "${v}_off" "$T/$v.json" "$T/$v.json" "$T/edge.jsonl" --jsonl --offsets
  dec "tokfam_${v}_decode_edge" "${v}_dec" "$T/$v.json" "$T/$v.json" "$T/m.${v}_ids"
done

# 2. Legacy folders: maskd reads the folder, HF the converter-built REF.json.
for x in wpu wpc bpe tiny_wp tiny_bpe; do
  ref=$T/ref_$x.json dir=$T/dir_$x
  case $x in tiny_*) dir=$T/$x ;; esac
  for c in $corpora; do
    enc "tokfam_folder_${x}_ids_wikitext_$c" "f${x}_ids_$c" "$ref" "$dir" "$T/$c.txt"
    enc "tokfam_folder_${x}_offsets_wikitext_$c" "f${x}_off_$c" "$ref" "$dir" "$T/$c.txt" --offsets
  done
  for c in banking edge; do
    enc "tokfam_folder_${x}_ids_$c" "f${x}_ids_$c" "$ref" "$dir" "$T/$c.jsonl" --jsonl
    enc "tokfam_folder_${x}_offsets_$c" "f${x}_off_$c" "$ref" "$dir" "$T/$c.jsonl" --jsonl --offsets
  done
  enc "tokfam_folder_${x}_pieces_edge" "f${x}_pcs_edge" "$ref" "$dir" "$T/edge.jsonl" --jsonl --pieces
  dec "tokfam_folder_${x}_decode_edge" "f${x}_dec_edge" "$ref" "$dir" "$T/m.f${x}_ids_edge"
  dec "tokfam_folder_${x}_decode_edge_skip_special" "f${x}_decs_edge" "$ref" "$dir" "$T/m.f${x}_ids_edge" --skip-special
done
# The trained tokenizer.json and the folder made from it agree in HF (a check of the
# reference itself: BertProcessing and TemplateProcessing, RobertaConverter's options).
for x in wpu wpc bpe; do
  hfq "fsrc_${x}" encode "$T/$x.json" "$T/edge.jsonl" --jsonl --offsets
  hfq "fref_${x}" encode "$T/ref_$x.json" "$T/edge.jsonl" --jsonl --offsets
  later "tokfam_reference_folder_${x}_as_trained" "fsrc_${x}" "$T/h.fref_${x}"
done
# Its tokenizer_config.json (the uncased one's: do_lower_case true) then lowercases the
# cased tokenizer.json, as BertTokenizerFast's __init__ does (see 2b).
python3 - "$T/wpc.json" "$T/ref_both.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
d["normalizer"].update(lowercase=True, strip_accents=None, handle_chinese_chars=True)
json.dump(d, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
EOF
enc tokfam_folder_both_reads_tokenizer_json both_ids_edge "$T/ref_both.json" "$T/dir_both" "$T/edge.jsonl" --jsonl --offsets

# 2b. What the fast tokenizer classes' __init__ (transformers 4.x) change in the tokenizer.json
# they load, from tokenizer_config.json's arguments and their defaults: BertTokenizerFast
# rebuilds a BertNormalizer whose lowercase / strip_accents / handle_chinese_chars differ from
# do_lower_case (True) / strip_accents (None) / tokenize_chinese_chars (True);
# RobertaTokenizerFast sets add_prefix_space (False) and trim_offsets (True) where they differ.
# The class is tokenizer_class, else config.json's model_type's. maskd reads each folder; HF
# encodes the tokenizer.json edited here by those rules.
python3 - "$T" <<'EOF'
import json, os, sys
t = sys.argv[1]
cases = {  # name: (source, tokenizer_config.json or None, config.json model_type or None)
    "fc_bert_lower": ("wpc", {"tokenizer_class": "BertTokenizer", "do_lower_case": True}, None),
    "fc_bert_no_config": ("wpc", None, "bert"),
    "fc_bert_other_class": ("wpc", {"tokenizer_class": "PreTrainedTokenizerFast", "do_lower_case": True}, "bert"),
    "fc_bert_accents_chinese": ("wpu", {"tokenizer_class": "BertTokenizerFast", "do_lower_case": True, "strip_accents": False,
                                        "tokenize_chinese_chars": False}, None),
    "fc_bert_cased_kept": ("wpc", {"tokenizer_class": "BertTokenizer", "do_lower_case": False}, None),
    "fc_roberta_prefix": ("bpe", {"tokenizer_class": "RobertaTokenizer", "add_prefix_space": True}, None),
    "fc_roberta_no_trim": ("bpe", {"trim_offsets": False}, "roberta"),
}
for name, (src, tc, mt) in cases.items():
    d = json.load(open(f"{t}/{src}.json", encoding="utf-8"))
    os.makedirs(f"{t}/{name}", exist_ok=True)
    json.dump(d, open(f"{t}/{name}/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
    if tc is not None:
        json.dump(tc, open(f"{t}/{name}/tokenizer_config.json", "w"))
    if mt is not None:
        json.dump({"model_type": mt}, open(f"{t}/{name}/config.json", "w"))
    c = tc or {}
    cls = c.get("tokenizer_class", {"bert": "BertTokenizer", "roberta": "RobertaTokenizer"}.get(mt))
    if cls in ("BertTokenizer", "BertTokenizerFast") and d["normalizer"]["type"] == "BertNormalizer":
        want = {"lowercase": c.get("do_lower_case", True), "strip_accents": c.get("strip_accents"),
                "handle_chinese_chars": c.get("tokenize_chinese_chars", True)}
        if any(d["normalizer"].get(k, v) != v for k, v in want.items()):
            d["normalizer"].update(want)
    if cls in ("RobertaTokenizer", "RobertaTokenizerFast"):
        aps, trim = c.get("add_prefix_space", False), c.get("trim_offsets", True)
        for part, keys in (("pre_tokenizer", {"add_prefix_space": aps}), ("post_processor", {"add_prefix_space": aps, "trim_offsets": trim})):
            for k, v in keys.items():
                if d.get(part) and k in d[part]:
                    d[part][k] = v
    json.dump(d, open(f"{t}/ref_{name}.json", "w", encoding="utf-8"), ensure_ascii=False)
EOF
for x in fc_bert_lower fc_bert_no_config fc_bert_other_class fc_bert_accents_chinese fc_bert_cased_kept fc_roberta_prefix fc_roberta_no_trim; do
  enc "tokfam_${x}_offsets_edge" "${x}_off" "$T/ref_$x.json" "$T/$x" "$T/edge.jsonl" --jsonl --offsets
  enc "tokfam_${x}_ids_banking" "${x}_ids" "$T/ref_$x.json" "$T/$x" "$T/banking.jsonl" --jsonl
done

# 3. Export: HF loads maskd's tokenizer.json and encodes (and decodes) as on the source.
for x in wpu wpc bpe dir_bpe tiny_wp tiny_bpe; do
  case $x in
    dir_bpe) src=$T/dir_bpe; href=$T/ref_bpe.json ;;
    tiny_*) src=$T/$x; href=$T/ref_$x.json ;;
    *) src=$T/$x.json; href=$T/$x.json ;;
  esac
  rm -rf "$T/exp_$x"
  if ! M_ export --tokenizer "$src" --out "$T/exp_$x" > "$T/exp_$x.log" 2>&1 || [ ! -s "$T/exp_$x/tokenizer.json" ]; then
    fail "tokfam_export_${x}" "export failed: $(tail -c 300 "$T/exp_$x.log")"; continue
  fi
  if node -e "require('./tests/node_modules/tokenizers').Tokenizer.fromFile(process.argv[1])" "$T/exp_$x/tokenizer.json" 2> "$T/exp_$x.hf"; then
    pass "tokfam_export_${x}_loads_in_hf"
  else fail "tokfam_export_${x}_loads_in_hf" "$(head -c 300 "$T/exp_$x.hf")"; continue; fi
  hfq "exp_src_off_$x" encode "$href" "$T/edge.jsonl" --jsonl --offsets
  hfq "exp_off_$x" encode "$T/exp_$x/tokenizer.json" "$T/edge.jsonl" --jsonl --offsets
  later "tokfam_export_${x}_hf_offsets_edge" "exp_src_off_$x" "$T/h.exp_off_$x"
  hfq "exp_src_ids_$x" encode "$href" "$T/valid.txt"
  hfq "exp_ids_$x" encode "$T/exp_$x/tokenizer.json" "$T/valid.txt"
  later "tokfam_export_${x}_hf_ids_wikitext_valid" "exp_src_ids_$x" "$T/h.exp_ids_$x"
  hfq "exp_src_pcs_$x" encode "$href" "$T/banking.jsonl" --jsonl --pieces
  hfq "exp_pcs_$x" encode "$T/exp_$x/tokenizer.json" "$T/banking.jsonl" --jsonl --pieces
  later "tokfam_export_${x}_hf_pieces_banking" "exp_src_pcs_$x" "$T/h.exp_pcs_$x"
  hfq "exp_src_dec_$x" decode "$href" "$T/h.exp_src_ids_$x"
  hfq "exp_dec_$x" decode "$T/exp_$x/tokenizer.json" "$T/h.exp_src_ids_$x"
  later "tokfam_export_${x}_hf_decode_wikitext_valid" "exp_src_dec_$x" "$T/h.exp_dec_$x"
done
# The export keeps each added token's flags: single_word tokens match where they did.
for x in var_wp_sw var_bpe_sw; do
  rm -rf "$T/exp_$x"
  if ! M_ export --tokenizer "$T/$x.json" --out "$T/exp_$x" > "$T/exp_$x.log" 2>&1 || [ ! -s "$T/exp_$x/tokenizer.json" ]; then
    fail "tokfam_export_${x}" "export failed: $(tail -c 300 "$T/exp_$x.log")"; continue
  fi
  hfq "exp_off_$x" encode "$T/exp_$x/tokenizer.json" "$T/sw.jsonl" --jsonl --offsets
  later "tokfam_export_${x}_hf_offsets_single_word" "${x}_off" "$T/h.exp_off_$x"
done

# The queued HF side, then every comparison (a job's input may be an earlier job's output).
if node $H multi "$T/jobs" 2> "$T/multi.err"; then
  while read -r name a b; do same "$name" "$a" "$b"; done < "$T/checks"
else
  fail tokenizer_families_reference "hf_tokenize.js multi failed: $(tail -2 "$T/multi.err")"
fi
exit 0
