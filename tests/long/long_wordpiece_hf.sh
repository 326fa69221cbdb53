#!/usr/bin/env bash
# The BERT pipeline's pieces end to end against HF tokenizers (npm tokenizers@0.23.2):
# HF's WordPiece trainer learns a vocabulary from WikiText-2's first 2 MB behind
# BertNormalizer and BertPreTokenizer ([UNK] added to it, and the file saved by HF);
# then every line of WikiText-2's validation text, and a few lines of accents, CJK,
# emoji, controls and over-long words, is encoded by HF and by maskd's bert_normalize,
# bert_pretokenize and wordpiece_encode (`test_wordpiece --encode`), and the ids must
# be the same, and so must each token's byte span in the line (the normaliser's byte
# map against HF's alignments). A long test since tests/cli/test_tokenizer_families.sh
# checks the wired pipeline (ids, offsets, special tokens, decoding) in make test.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" long_wordpiece_hf
B=${MASKD_BUILD:-build}
BIN=$B/tests/unit/test_wordpiece
need wordpiece_hf_setup "$BIN is not built" -x "$BIN"
need wordpiece_hf_setup "tests/node_modules/tokenizers is not installed" -d tests/node_modules/tokenizers
need wordpiece_hf_setup "no WikiText-2 at $DATA" -f "$DATA/valid.txt"
command -v node >/dev/null || { fail wordpiece_hf_setup "node is not installed"; exit 1; }

cat > "$T/hf.js" <<'EOF'
// node hf.js train TRAIN.txt OUT.json | node hf.js encode TOKENIZER.json FILE
'use strict';
const fs = require('fs');
const hf = require(process.cwd() + '/tests/node_modules/tokenizers');
(async () => {
  const [cmd, a, b] = process.argv.slice(2);
  if (cmd === 'train') {
    const tok = new hf.Tokenizer(hf.WordPiece.empty());
    tok.setNormalizer(hf.bertNormalizer());
    tok.setPreTokenizer(hf.bertPreTokenizer());
    tok.setDecoder(hf.wordPieceDecoder());
    tok.train([a]);
    // The trainer's default has no special tokens: give the vocabulary its [UNK].
    tok.save(b + '.tmp', false);
    const j = JSON.parse(fs.readFileSync(b + '.tmp', 'utf8'));
    j.model.vocab['[UNK]'] = Object.keys(j.model.vocab).length;
    hf.Tokenizer.fromString(JSON.stringify(j)).save(b, true);
    fs.unlinkSync(b + '.tmp');
    return;
  }
  const tok = hf.Tokenizer.fromFile(a);
  const lines = fs.readFileSync(b, 'utf8').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const out = [];
  for (let i = 0; i < lines.length; i += 2000) {
    const encs = await tok.encodeBatch(lines.slice(i, i + 2000), { addSpecialTokens: false });
    encs.forEach((e, k) => {
      // HF's offsets count characters: turned into bytes, which maskd reports.
      const bo = [0];
      let n = 0;
      for (const ch of lines[i + k]) { n += Buffer.byteLength(ch, 'utf8'); bo.push(n); }
      out.push(e.getIds().map((id, t) => `${id}@${bo[e.getOffsets()[t][0]]}:${bo[e.getOffsets()[t][1]]}`).join(' '));
    });
  }
  process.stdout.write(out.length ? out.join('\n') + '\n' : '');
})().catch(e => { process.stderr.write(String(e.stack || e) + '\n'); process.exit(1); });
EOF

head -c 2000000 "$DATA/train.txt" > "$T/train.txt"
node "$T/hf.js" train "$T/train.txt" "$T/tok.json" >/dev/null 2>"$T/node.err" || { fail wordpiece_hf_train "node: $(tail -c 300 "$T/node.err")"; exit 1; }
cp "$DATA/valid.txt" "$T/text.txt"
long=$(printf 'x%.0s' $(seq 101))
printf '%s\n' "Héllo Wörld, naïve café — Ångström!" "你好世界abc 東京タワー" "I ❤️ 😀 emoji 👩‍👩‍👧" \
  "tab	and control chars: x y​z" "İstanbul ΣΑΣ STRASSE ß" "$long $long.y ${long:1}" \
  "a$(printf '\xcc\x81\xcc\x96\xcc\x81')b Cafe$(printf '\xcc\x81') ﬁ ① Ⅻ" >> "$T/text.txt"
node "$T/hf.js" encode "$T/tok.json" "$T/text.txt" > "$T/hf.txt" 2>"$T/node.err" ||
  { fail wordpiece_hf_encode "node: $(tail -c 300 "$T/node.err")"; exit 1; }
"$BIN" --encode "$T/tok.json" "$T/text.txt" > "$T/ours.txt" 2>"$T/err" ||
  { fail wordpiece_hf_encode "test_wordpiece --encode: $(tail -c 300 "$T/err")"; exit 1; }
n=$(wc -l < "$T/text.txt")
need wordpiece_hf_encode "HF encoded $(wc -l < "$T/hf.txt") of $n lines" "$(wc -l < "$T/hf.txt")" = "$n"
if cmp -s "$T/ours.txt" "$T/hf.txt"; then
  pass wordpiece_hf_encode
else
  first=$(diff <(nl -ba "$T/ours.txt") <(nl -ba "$T/hf.txt") | grep '^<' | head -1 | awk '{print $2}')
  fail wordpiece_hf_encode "$(diff "$T/ours.txt" "$T/hf.txt" | grep -c '^<') of $n lines differ; line $first: $(sed -n "${first}p" "$T/text.txt" | cut -c1-120)"
fi
