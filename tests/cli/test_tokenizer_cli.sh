#!/usr/bin/env bash
# maskd tokenizer encode|decode|export on the command line: output shapes, help,
# and errors (one line on stderr, non-zero exit, nothing half-written on stdout).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" tokcli
# ok NAME VERDICT WHY: this test's form of lib.sh's ok (a VERDICT of 1 passes).
ok() { if [ "$2" = 1 ]; then pass "$1"; else fail "$1" "$3"; fi; }

# A small tokenizer.json in the seed layout, written by hand. The expected outputs
# below are what HF tokenizers gives for it (checked with tests/hf_tokenize.js).
cat > "$T/tok.json" <<'EOF'
{"version":"1.0","truncation":null,"padding":null,
 "added_tokens":[{"id":0,"content":"[CLS]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
  {"id":1,"content":"[SEP]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
  {"id":2,"content":"<unk>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
  {"id":3,"content":"[MASK]","single_word":false,"lstrip":true,"rstrip":false,"normalized":false,"special":true}],
 "normalizer":{"type":"Sequence","normalizers":[{"type":"Replace","pattern":{"String":"``"},"content":"\""}]},
 "pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true},
 "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],
  "pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],
  "special_tokens":{"[CLS]":{"id":"[CLS]","ids":[0],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[1],"tokens":["[SEP]"]}}},
 "decoder":{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true},
 "model":{"type":"Unigram","unk_id":2,"vocab":[["[CLS]",0.0],["[SEP]",0.0],["<unk>",0.0],["[MASK]",0.0],["▁",-2.0],["▁the",-3.0],["cat",-4.0],["▁cat",-3.5],["\"",-5.0],["s",-4.5]],"byte_fallback":false}}
EOF
printf 'the cat\n\n the cats [MASK]\nx' > "$T/in.txt"

out=$("$M" tokenizer encode --tokenizer "$T/tok.json" --input "$T/in.txt" 2>&1)
ok tokenizer_cli_encode_ids "$([ "$out" = $'0 5 7 1\n0 1\n0 5 7 9 3 1\n0 4 2 1' ] && echo 1)" "$(echo "$out" | tr '\n' '|')"
out=$("$M" tokenizer encode --tokenizer "$T/tok.json" --pieces --no-special-tokens < "$T/in.txt" 2>&1)
# An added token's piece is the text it was cut from, as HF's getTokens() gives it: [MASK]
# strips the space on its left, so its piece is " [MASK]" (after the separating space).
ok tokenizer_cli_encode_pieces_stdin "$([ "$out" = $'▁the ▁cat\n\n▁the ▁cat s  [MASK]\n▁ <unk>' ] && echo 1)" "$(echo "$out" | tr '\n' '|')"
out=$("$M" tokenizer encode --tokenizer "$T/tok.json" --offsets --input "$T/in.txt" 2>&1 | sed -n 3p)
ok tokenizer_cli_encode_offsets "$([ "$out" = "0:0 0:4 4:8 8:9 9:16 0:0" ] && echo 1)" "$out"
printf '"a\\nb"\n"[MASK]"\n' > "$T/in.jsonl"
out=$("$M" tokenizer encode --tokenizer "$T/tok.json" --input "$T/in.jsonl" --jsonl --no-special-tokens 2>&1)
ok tokenizer_cli_encode_jsonl "$([ "$out" = $'4 2\n3' ] && echo 1)" "$(echo "$out" | tr '\n' '|')"
printf '0 5 7 4 9 3 1\n\n5 8 99 7\n' > "$T/ids.txt"
out=$("$M" tokenizer decode --tokenizer "$T/tok.json" --input "$T/ids.txt" 2>&1)
ok tokenizer_cli_decode "$([ "$out" = $'[CLS] the cat s[MASK][SEP]\n\nthe" cat' ] && echo 1)" "$(echo "$out" | tr '\n' '|')"
out=$("$M" tokenizer decode --tokenizer "$T/tok.json" --input "$T/ids.txt" --skip-special-tokens 2>&1 | head -1)
ok tokenizer_cli_decode_skip_special "$([ "$out" = "the cat s" ] && echo 1)" "$out"
"$M" tokenizer export --tokenizer "$T/tok.json" --out "$T/exp" 2>"$T/err"
ok tokenizer_cli_export "$([ -s "$T/exp/tokenizer.json" ] && [ -s "$T/exp/tokenizer_config.json" ] && [ -s "$T/exp/special_tokens_map.json" ] && "$M" tokenizer encode --tokenizer "$T/exp/tokenizer.json" --input "$T/in.txt" | cmp -s - <("$M" tokenizer encode --tokenizer "$T/tok.json" --input "$T/in.txt") && echo 1)" "$(cat "$T/err")"
"$M" tokenizer --help | grep -q "maskd tokenizer encode" && "$M" tokenizer encode --help | grep -q -- "--pieces"
ok tokenizer_cli_help "$([ $? = 0 ] && echo 1)" "help text missing"

# Errors: one line on stderr, non-zero status, no stdout.
expect_error() {  # name, expected text, args...
  local name=$1 want=$2; shift 2
  local o e rc
  o=$("$M" tokenizer "$@" 2>"$T/err" < /dev/null); rc=$?
  e=$(cat "$T/err")
  if [ $rc -ne 0 ] && [ -z "$o" ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q -- "$want" "$T/err"; then echo "PASS $name"
  else echo "FAIL $name: rc $rc, stdout '$(echo "$o" | head -c 80)', stderr '$e'"; fi
}
printf 'fine\nbad \xc3\x28 here\n' > "$T/bad.txt"
printf '1 2\n3 x4\n' > "$T/badids.txt"
printf '{"model":{"type":"BPE","vocab":{},"merges":[]}}' > "$T/bpe.json"
printf '{"model":{"type":"Unigram","vocab":[["a",-1' > "$T/corrupt.json"
expect_error tokenizer_cli_invalid_utf8 "line 2: invalid UTF-8 at byte 4" encode --tokenizer "$T/tok.json" --input "$T/bad.txt"
expect_error tokenizer_cli_bad_id "line 2: not a token id" decode --tokenizer "$T/tok.json" --input "$T/badids.txt"
expect_error tokenizer_cli_bpe_refused "model BPE without the ByteLevel pre-tokenizer is not supported" encode --tokenizer "$T/bpe.json" --input "$T/in.txt"
expect_error tokenizer_cli_corrupt_json "invalid JSON" encode --tokenizer "$T/corrupt.json" --input "$T/in.txt"
expect_error tokenizer_cli_missing_tokenizer "--tokenizer is required" encode --input "$T/in.txt"
expect_error tokenizer_cli_missing_file "no/such" encode --tokenizer "$T/tok.json" --input "$T/no/such"
expect_error tokenizer_cli_unknown_verb "unknown verb" frobnicate
expect_error tokenizer_cli_unknown_option "unknown option" encode --tokenizer "$T/tok.json" --bogus
expect_error tokenizer_cli_bad_threads "threads" encode --tokenizer "$T/tok.json" --threads 0
expect_error tokenizer_cli_bad_jsonl "line 1: not a JSON string" encode --tokenizer "$T/tok.json" --input "$T/in.txt" --jsonl
# A WordPiece vocabulary whose ids have a gap ([MASK] added, not in it): HF numbers added
# tokens from the vocabulary's number of entries (6), not its highest id + 1 (maskd said 8),
# and where that id is taken ('foo' has 6) HF gives both the one id: refused.
for foo in 7 6; do
  $PY - "$T/gap$foo.json" "$foo" <<'PYEOF'
import json, sys
A = lambda i, c: {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
json.dump({"version": "1.0", "added_tokens": [A(0, "[PAD]"), A(1, "[UNK]"), A(2, "[CLS]"), A(3, "[SEP]"), A(7, "[MASK]")],
           "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
           "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                     "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "foo": int(sys.argv[2])}}}, open(sys.argv[1], "w"))
PYEOF
done
printf 'hello [MASK] foo\n' > "$T/gap.txt"
out=$("$M" tokenizer encode --tokenizer "$T/gap7.json" --input "$T/gap.txt" 2>&1)
ok tokenizer_cli_added_id_after_vocabulary_entries "$([ "$out" = "2 4 6 7 3" ] && echo 1)" "$out (HF: 2 4 6 7 3)"
expect_error tokenizer_cli_added_id_taken_refused "would take id 6" encode --tokenizer "$T/gap6.json" --input "$T/gap.txt"
# A Replace normalizer with an empty pattern (HF puts its content between every two
# characters) is refused, not ignored.
$PY -c 'import json, sys; d = json.load(open(sys.argv[1])); d["normalizer"]["normalizers"][0]["pattern"]["String"] = ""; json.dump(d, open(sys.argv[2], "w"))' \
  "$T/tok.json" "$T/empty-replace.json"
expect_error tokenizer_cli_empty_replace_refused "Replace with an empty pattern is not supported" encode --tokenizer "$T/empty-replace.json" --input "$T/in.txt"
# Inputs and tokenizers that are not regular files are refused at once, never read.
mkfifo "$T/fifo"
expect_error tokenizer_cli_input_dev_zero "character device, not a regular file" encode --tokenizer "$T/tok.json" --input /dev/zero
expect_error tokenizer_cli_input_fifo "FIFO, not a regular file" encode --tokenizer "$T/tok.json" --input "$T/fifo"
expect_error tokenizer_cli_tokenizer_dev_zero "character device, not a regular file" encode --tokenizer /dev/zero --input "$T/in.txt"
exit 0
