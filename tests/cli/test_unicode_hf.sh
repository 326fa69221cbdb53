#!/usr/bin/env bash
# engine/tok/unicode's tables and engine/tok/bert_text against HF tokenizers (npm
# tokenizers@0.23.2) over every code point but the surrogates: for each, what
# BertNormalizer's clean_text, handle_chinese_chars, lowercase and strip_accents
# make of it alone, its NFD, whether BertPreTokenizer splits on it or isolates it,
# whether the ByteLevel regex counts it as a letter, a number or a space, whether a
# single_word added token may match beside it (\w), and its
# NFD beside U+0345 (class 240) and U+0334 (class 1), which tells the non-starters
# apart; then the NFD of every non-starter beside one mark of each combining class,
# in both orders, which checks the canonical order itself; then 1500 random texts
# drawn from characters each step treats specially (marks of many classes, CJK,
# controls, whitespace, case expansions, the characters HF's versions disagree on)
# under all 24 BertNormalizer settings and BertPreTokenizer, which checks how the
# steps combine along a text. maskd's side is `test_bert_text --dump` and `--texts`. A difference names the code points (scripts/gen-unicode-tables
# lists where HF's crates differ from Python's Unicode data; the fix goes there).
. "$(dirname "$0")/../lib.sh" test_unicode_hf
B=${MASKD_BUILD:-build}
BIN=$B/tests/unit/test_bert_text
need unicode_hf_setup "$BIN is not built" -x "$BIN"
need unicode_hf_setup "tests/node_modules/tokenizers is not installed" -d tests/node_modules/tokenizers
command -v node >/dev/null || { fail unicode_hf_setup "node is not installed"; exit 1; }

cat > "$T/probe.js" <<'EOF'
// node probe.js all OUT            one line per code point (the format of test_bert_text --dump all)
// node probe.js pairs IN OUT       IN's first column (code points) with HF's NFD of it
'use strict';
const fs = require('fs');
const hf = require(process.cwd() + '/tests/node_modules/tokenizers');
const hex = s => { let r = ''; for (const ch of s) r += (r ? '.' : '') + ch.codePointAt(0).toString(16).toUpperCase(); return r || '-'; };
const B = 50000;
// Normalises every probe string at once, joined by '|' (a starter no step changes):
// each probe is c alone (so c = '|' is answered by hand: nothing changes it).
function normAll(nz, cps, pre, post) {
  const res = [];
  for (let i = 0; i < cps.length; i += B) {
    const part = cps.slice(i, i + B);
    const out = nz.normalizeString(part.map(c => c === 0x7C ? 'a' : pre + String.fromCodePoint(c) + post).join('|')).split('|');
    if (out.length !== part.length) throw new Error('a probe split apart at ' + i);
    for (let k = 0; k < part.length; k++) res.push(part[k] === 0x7C ? hex(pre + '|' + post) : hex(out[k]));
  }
  return res;
}
// The piece holding each code point of sep c1 sep c2 sep ... as [start, end] relative
// to the code point, or null: separators that join with their neighbours keep the
// number of pieces, and so the time, small.
function where(pt, sep, list) {
  const r = pt.preTokenizeString(sep + list.map(c => String.fromCodePoint(c)).join(sep) + sep);
  const out = new Array(list.length).fill(null);
  for (const [, [a, b]] of r)
    for (let p = a; p < b; p++) if (p & 1) { const k = (p - 1) >> 1; if (k < list.length) out[k] = [a - p, b - p]; }
  return out;
}
const joined = x => x && x[0] < 0 && x[1] > 1;
async function all(outPath) {
  const cps = [];
  for (let c = 0; c < 0x110000; c++) if (c < 0xD800 || c > 0xDFFF) cps.push(c);
  const N = o => hf.bertNormalizer(Object.assign({ cleanText: false, handleChineseChars: false, stripAccents: false, lowercase: false }, o));
  const nfd = hf.nfdNormalizer();
  const cols = [N({ cleanText: true }), N({ handleChineseChars: true }), N({ lowercase: true }), N({ stripAccents: true }), nfd]
    .map(nz => normAll(nz, cps, '', ''));
  const bp = hf.bertPreTokenizer(), bl = hf.byteLevelPreTokenizer(false, true);
  const pre = [];
  for (let i = 0; i < cps.length; i += B)
    for (const x of where(bp, 'a', cps.slice(i, i + B))) pre.push(x === null ? 'W' : (x[0] === 0 && x[1] === 1) ? 'P' : '-');
  // ByteLevel: between '!'s only a non-letter, non-number, non-space joins; the rest is
  // tried between 'a's (letters join), then between '1's (numbers join); what is left is \s.
  const cls = new Array(cps.length).fill('-');
  let rest = [];
  for (let i = 0; i < cps.length; i += B) {
    const w = where(bl, '!', cps.slice(i, i + B));
    w.forEach((x, k) => { if (!joined(x)) rest.push(i + k); });
  }
  for (const [sep, tag] of [['a', 'L'], ['1', 'N']]) {
    const next = [];
    for (let i = 0; i < rest.length; i += B) {
      const idx = rest.slice(i, i + B);
      where(bl, sep, idx.map(j => cps[j])).forEach((x, k) => { if (joined(x)) cls[idx[k]] = tag; else next.push(idx[k]); });
    }
    rest = next;
  }
  for (const j of rest) cls[j] = 'S';
  const a = normAll(nfd, cps, '\u0345', ''), b = normAll(nfd, cps, '', '\u0334');
  // \w: a single_word added token # matches in #c only where c is not a word character.
  const sw = hf.Tokenizer.fromString(JSON.stringify({ version: '1.0', truncation: null, padding: null,
    added_tokens: [{ id: 1, content: '#', single_word: true, lstrip: false, rstrip: false, normalized: false, special: false }],
    normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null,
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: { '[UNK]': 0 } } }));
  const word = [];
  for (let i = 0; i < cps.length; i += B)
    for (const e of await sw.encodeBatch(cps.slice(i, i + B).map(c => '#' + String.fromCodePoint(c)), false))
      word.push(e.getIds()[0] === 1 ? '-' : 'W');
  const lines = cps.map((c, j) => [c.toString(16).toUpperCase(), cols[0][j], cols[1][j], cols[2][j], cols[3][j], cols[4][j],
    pre[j], cls[j], a[j], b[j], word[j]].join('\t'));
  fs.writeFileSync(outPath, lines.join('\n') + '\n');
}
function pairs(inPath, outPath) {
  const ins = fs.readFileSync(inPath, 'utf8').split('\n').filter(l => l).map(l => l.split('\t')[0]);
  const strs = ins.map(h => String.fromCodePoint(...h.split('.').map(x => parseInt(x, 16))));
  const out = [];
  const nfd = hf.nfdNormalizer();
  for (let i = 0; i < strs.length; i += B) {
    const o = nfd.normalizeString(strs.slice(i, i + B).join('|')).split('|');
    for (let k = 0; k < o.length; k++) out.push(ins[i + k] + '\t' + hex(o[k]));
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
}
// Random texts (a fixed LCG, so every run draws the same) into IN; HF's answers into OUT.
function texts(inPath, outPath) {
  const pool = [...'aZe9 .,!?\'-#$|~', '\t', '\n', '\r', '\0', '\x01', '\x0b', '\x7f'].map(c => c.codePointAt(0)).concat([
    0xA0, 0x3000, 0x2028, 0x200B, 0x200D, 0xFEFF, 0xFFFD, 0x378, 0xE000, 0x85,
    0x301, 0x316, 0x334, 0x345, 0x5B0, 0xF71, 0x93C, 0x3099, 0xE38, 0x1DFA, 0x7FD, 0x344, 0xF73, 0x1734, 0xFE0F,
    0x1D165, 0x1D16D, 0x1D15E, 0xE9, 0xC4, 0x130, 0x3A3, 0xDF, 0x1E9E, 0x1C5, 0x390, 0x2126, 0x212B, 0xFB01, 0x2460,
    0x1E69, 0x4F60, 0x4E16, 0xF900, 0x2F800, 0x20000, 0xD55C, 0xAC00, 0x30A2, 0x1F600, 0x2764, 0x2026, 0xBF, 0x166D,
    0x2E43, 0x61D, 0x3001, 0xA7CB, 0x10D50, 0x16EA0, 0x11938, 0x111C9]);
  // Every other text draws from few characters, marks of several classes among them
  // (U+1D165, U+1D16D: Mc, so their order survives strip_accents) with characters that
  // clean_text drops or that end a run, so the canonical reordering is well exercised.
  const marks = [0x61, 0x1D165, 0x1D16D, 0x1D15E, 0x301, 0x316, 0x345, 0x344, 0xF73, 0x1734, 0x0, 0x1, 0x200B, 0x378,
    0xE000, 0x4F60, 0x20, 0x3000, 0x130];
  let x = 12345;
  const rnd = n => { x = (x * 1103515245 + 12345) % 2147483648; return Math.floor(x / 65536) % n; };
  const ins = [];
  for (let i = 0; i < 1500; i++) {
    const len = rnd(25), cps = [];
    const p = i % 2 ? marks : pool;
    for (let k = 0; k < len; k++) cps.push(p[rnd(p.length)]);
    ins.push(cps);
  }
  fs.writeFileSync(inPath, ins.map(c => c.length ? c.map(v => v.toString(16).toUpperCase()).join('.') : '').join('\n') + '\n');
  const strs = ins.map(c => String.fromCodePoint(...c));
  const cols = [];
  for (const clean of [false, true]) for (const chinese of [false, true]) for (const strip of [null, false, true]) for (const lower of [false, true]) {
    const j = { version: '1.0', truncation: null, padding: null, added_tokens: [], pre_tokenizer: null, post_processor: null, decoder: null,
      normalizer: { type: 'BertNormalizer', clean_text: clean, handle_chinese_chars: chinese, strip_accents: strip, lowercase: lower },
      model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: { '[UNK]': 0 } } };
    const nz = hf.Tokenizer.fromString(JSON.stringify(j)).getNormalizer();
    cols.push(strs.map(t => hex(nz.normalizeString(t))));
  }
  const bp = hf.bertPreTokenizer();
  const words = strs.map(t => { const r = bp.preTokenizeString(t); return r.length ? r.map(([w]) => hex(w)).join(' ') : '-'; });
  fs.writeFileSync(outPath, strs.map((_, i) => cols.map(c => c[i]).join('\t') + '\t' + words[i]).join('\n') + '\n');
}
if (process.argv[2] === 'all') all(process.argv[3]).catch(e => { console.error(e); process.exit(1); });
else if (process.argv[2] === 'texts') texts(process.argv[3], process.argv[4]);
else pairs(process.argv[3], process.argv[4]);
EOF

# Names the properties and the first code points where two dumps differ.
report() {  # name, ours, hf
  local diffs
  diffs=$(paste "$2" "$3" | awk -F'\t' -v n="$(head -1 "$2" | awk -F'\t' '{print NF}')" '
    { for (i = 2; i <= n; i++) if ($i != $(i + n)) { printf "U+%s field %d: maskd %s, HF %s\n", $1, i, $i, $(i + n); c++ } }
    c >= 8 { exit }')
  fail "$1" "$(diff "$2" "$3" | grep -c '^<') code points differ, first: ${diffs//$'\n'/; }"
}

"$BIN" --dump all "$T/ours.txt" || { fail unicode_hf_all "test_bert_text --dump all failed"; exit 1; }
node "$T/probe.js" all "$T/hf.txt" 2>"$T/node.err" || { fail unicode_hf_all "node: $(tail -c 300 "$T/node.err")"; exit 1; }
need unicode_hf_all "the dumps have different lengths" "$(wc -l < "$T/ours.txt")" = "$(wc -l < "$T/hf.txt")"
if cmp -s "$T/ours.txt" "$T/hf.txt"; then pass unicode_hf_all; else report unicode_hf_all "$T/ours.txt" "$T/hf.txt"; fi

"$BIN" --dump pairs "$T/pairs_ours.txt" || { fail unicode_hf_ccc_pairs "test_bert_text --dump pairs failed"; exit 1; }
node "$T/probe.js" pairs "$T/pairs_ours.txt" "$T/pairs_hf.txt" 2>"$T/node.err" ||
  { fail unicode_hf_ccc_pairs "node: $(tail -c 300 "$T/node.err")"; exit 1; }
if cmp -s "$T/pairs_ours.txt" "$T/pairs_hf.txt"; then
  pass unicode_hf_ccc_pairs
else
  fail unicode_hf_ccc_pairs "$(diff "$T/pairs_ours.txt" "$T/pairs_hf.txt" | grep -c '^<') pairs differ, first: $(diff "$T/pairs_ours.txt" "$T/pairs_hf.txt" | head -4 | tr '\n' ' ')"
fi

node "$T/probe.js" texts "$T/texts.txt" "$T/texts_hf.txt" 2>"$T/node.err" ||
  { fail unicode_hf_random_texts "node: $(tail -c 300 "$T/node.err")"; exit 1; }
"$BIN" --texts "$T/texts.txt" "$T/texts_ours.txt" || { fail unicode_hf_random_texts "test_bert_text --texts failed"; exit 1; }
if cmp -s "$T/texts_ours.txt" "$T/texts_hf.txt"; then
  pass unicode_hf_random_texts
else
  first=$(cmp "$T/texts_ours.txt" "$T/texts_hf.txt" | sed -n 's/.* line \([0-9]*\)$/\1/p')
  fail unicode_hf_random_texts "$(diff "$T/texts_ours.txt" "$T/texts_hf.txt" | grep -c '^<') of 1500 texts differ; text $first ($(sed -n "${first}p" "$T/texts.txt")): maskd $(sed -n "${first}p" "$T/texts_ours.txt" | cut -c1-300), HF $(sed -n "${first}p" "$T/texts_hf.txt" | cut -c1-300)"
fi
