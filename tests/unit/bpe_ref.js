// The reference side of tests/unit/test_bpe.c: HF tokenizers (npm tokenizers@0.23.2)
// on inputs the C test writes, one JSON value a line, one output line an input.
//
//   node bpe_ref.js split IN OUT           byte starts of ByteLevel(add_prefix_space=false,
//                                          use_regex=true) pieces, space-separated
//   node bpe_ref.js decode IN OUT          IN: JSON arrays of tokens; OUT: hex of the UTF-8
//                                          of the ByteLevel decoder's string
//   node bpe_ref.js train TEXT OUT.json    BPE.empty() + ByteLevel pre-tokenizer, HF's
//                                          default BPE trainer, saved by HF
//   node bpe_ref.js encode TOK IN OUT      "ids|start:end ..." byte offsets (no post-processor)
//   node bpe_ref.js roberta TOK IN OUT APS byte offsets "a:b ..." of the text's tokens under
//                                          RobertaProcessing(trim_offsets, add_prefix_space=APS)
//   node bpe_ref.js pair TOK A B            type ids of a RobertaProcessing pair
'use strict';
const fs = require('fs');
const path = require('path');
const hf = require(path.join(__dirname, '..', 'node_modules', 'tokenizers'));

const lines = f => fs.readFileSync(f, 'utf8').split('\n').filter(l => l.length).map(l => JSON.parse(l));
// Byte offset of every code point index of s (plus the end): HF's offsets count chars.
function byteOffsets(s) {
  const out = [0];
  let b = 0;
  for (const ch of s) { b += Buffer.byteLength(ch, 'utf8'); out.push(b); }
  return out;
}

(async () => {
  const [mode, ...a] = process.argv.slice(2);
  const out = [];
  if (mode === 'split') {
    const pt = hf.byteLevelPreTokenizer(false, true);
    for (const s of lines(a[0])) {
      // Each piece is byte-level: one char a raw byte, so its length in chars is its byte count.
      let at = 0;
      const starts = [];
      for (const [piece] of pt.preTokenizeString(s)) { starts.push(at); at += [...piece].length; }
      out.push(starts.join(' '));
    }
    fs.writeFileSync(a[1], out.join('\n') + '\n');
  } else if (mode === 'decode') {
    // The npm package exports no ByteLevel decoder constructor: a tokenizer.json holding
    // one gives it (the model in it is irrelevant to decoding).
    const t = hf.Tokenizer.fromString(JSON.stringify({ version: '1.0', truncation: null, padding: null,
      added_tokens: [], normalizer: null, pre_tokenizer: null, post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
        end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
        vocab: {}, merges: [] } }));
    const d = t.getDecoder();
    for (const toks of lines(a[0])) out.push(Buffer.from(d.decode(toks), 'utf8').toString('hex'));
    fs.writeFileSync(a[1], out.join('\n') + '\n');
  } else if (mode === 'train') {
    const t = new hf.Tokenizer(hf.BPE.empty());
    t.setPreTokenizer(hf.byteLevelPreTokenizer(false, true));
    t.train([a[0]]);
    t.save(a[1]);
  } else if (mode === 'encode' || mode === 'roberta') {
    const t = hf.Tokenizer.fromFile(a[0]);
    if (mode === 'roberta') t.setPostProcessor(hf.robertaProcessing(['</s>', 1], ['<s>', 0], true, a[3] === '1'));
    for (const s of lines(a[1])) {
      const e = await t.encode(s);
      const bo = byteOffsets(s);
      if (mode === 'encode') {
        out.push(e.getIds().join(' ') + '|' + e.getOffsets().map(o => `${bo[o[0]]}:${bo[o[1]]}`).join(' '));
      } else {
        const sp = e.getSpecialTokensMask();
        out.push(e.getOffsets().filter((o, i) => !sp[i]).map(o => `${bo[o[0]]}:${bo[o[1]]}`).join(' '));
      }
    }
    fs.writeFileSync(a[2], out.join('\n') + '\n');
  } else if (mode === 'pair') {
    const t = hf.Tokenizer.fromFile(a[0]);
    t.setPostProcessor(hf.robertaProcessing(['</s>', 1], ['<s>', 0], true, false));
    const e = await t.encode(a[1], a[2]);
    console.log(e.getTypeIds().join(' '));
  } else {
    console.error('bpe_ref.js: unknown mode ' + mode);
    process.exit(2);
  }
})().catch(e => { console.error(e.message); process.exit(1); });
