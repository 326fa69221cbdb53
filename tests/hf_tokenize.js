// The reference side of the tokenizer parity tests: Hugging Face tokenizers
// (npm tokenizers@0.23.2). One input line in, one output line out, in the same
// formats `maskd tokenizer encode|decode` prints, so outputs compare with cmp.
//
//   node hf_tokenize.js encode TOKENIZER FILE [--no-special] [--pieces|--offsets] [--jsonl]
//   node hf_tokenize.js decode TOKENIZER FILE [--skip-special]
//   node hf_tokenize.js train OUT.json FILE...      (HF's Unigram trainer, seed pipeline)
//   node hf_tokenize.js bench TOKENIZER FILE         (encodeBatch MB/s on FILE's lines)
//   node hf_tokenize.js seed IN.json OUT.json         (the seed's layout around a trained
//        Unigram: special tokens first as HF's trainer puts them, unk_id, [MASK] lstrip,
//        TemplateProcessing; loaded and saved by HF so OUT is HF-written)
//   node hf_tokenize.js resave IN.json OUT.json       (HF loads IN and saves it)
//   node hf_tokenize.js multi JOBS                    (many encode/decode runs in one
//        process: each line OUT<TAB>encode|decode<TAB>args..., output to OUT)
//
// A line HF refuses prints "ERR <message>". Offsets are turned from HF's
// character offsets into byte offsets, which is what maskd reports.
'use strict';
const fs = require('fs');
const path = require('path');
const hf = require(path.join(__dirname, 'node_modules', 'tokenizers'));

function readLines(file) {
  const text = fs.readFileSync(file, 'utf8');
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

// Byte offset of every code point index of s (plus the end).
function byteOffsets(s) {
  const out = [0];
  let b = 0;
  for (const ch of s) { b += Buffer.byteLength(ch, 'utf8'); out.push(b); }
  return out;
}

function format(enc, line, mode, tok) {
  if (mode === 'pieces') return enc.getTokens().join(' ');
  if (mode === 'offsets') {
    const bo = byteOffsets(line);
    return enc.getOffsets().map(([a, b]) => `${bo[a]}:${bo[b]}`).join(' ');
  }
  return enc.getIds().join(' ');
}

async function encode(tokPath, file, flags) { process.stdout.write(await encodeText(tokPath, file, flags)); }
async function decode(tokPath, file, flags) { process.stdout.write(await decodeText(tokPath, file, flags)); }

// Many jobs in one process: each line of JOBS is OUT<TAB>encode|decode<TAB>args...
async function multi(jobsPath) {
  for (const line of readLines(jobsPath)) {
    const [out, cmd, ...args] = line.split('\t');
    const flags = args.filter(a => a.startsWith('--')), pos = args.filter(a => !a.startsWith('--'));
    const text = cmd === 'encode' ? await encodeText(pos[0], pos[1], flags) : await decodeText(pos[0], pos[1], flags);
    fs.writeFileSync(out, text);
  }
}

const tokCache = new Map();
function loadTok(p) { if (!tokCache.has(p)) tokCache.set(p, hf.Tokenizer.fromFile(p)); return tokCache.get(p); }

async function encodeText(tokPath, file, flags) {
  const tok = loadTok(tokPath);
  const opts = { addSpecialTokens: !flags.includes('--no-special') };
  const mode = flags.includes('--pieces') ? 'pieces' : flags.includes('--offsets') ? 'offsets' : 'ids';
  let lines = readLines(file);
  if (flags.includes('--jsonl')) lines = lines.map(l => JSON.parse(l));
  const out = [];
  const B = 2000;
  for (let i = 0; i < lines.length; i += B) {
    const batch = lines.slice(i, i + B);
    let encs = null;
    try { encs = await tok.encodeBatch(batch, opts); } catch (e) { encs = null; }
    if (encs) { for (let k = 0; k < batch.length; k++) out.push(format(encs[k], batch[k], mode, tok)); continue; }
    for (const line of batch) {
      try { out.push(format(await tok.encode(line, null, opts), line, mode, tok)); }
      catch (e) { out.push('ERR ' + String(e.message || e).split('\n')[0]); }
    }
  }
  return out.length ? out.join('\n') + '\n' : '';
}

async function decodeText(tokPath, file, flags) {
  const tok = loadTok(tokPath);
  const skip = flags.includes('--skip-special');
  const lines = readLines(file);
  const ids = lines.map(l => l.trim() === '' ? [] : l.trim().split(/\s+/).map(Number));
  const out = [];
  const B = 2000;
  for (let i = 0; i < ids.length; i += B) out.push(...await tok.decodeBatch(ids.slice(i, i + B), skip));
  return out.length ? out.join('\n') + '\n' : '';
}

// HF's own training: the seed's normalizer, Metaspace pre-tokenizer and decoder
// around Unigram. The JS binding exposes only the model's default trainer
// (UnigramTrainer::default(): vocab 8000, no special tokens, no unk token).
function train(out, files) {
  const tok = new hf.Tokenizer(hf.Unigram.empty());
  tok.setNormalizer(hf.sequenceNormalizer([hf.replace('``', '"'), hf.replace("''", '"')]));
  tok.setPreTokenizer(hf.metaspacePreTokenizer());
  tok.setDecoder(hf.metaspaceDecoder());
  const t0 = process.hrtime.bigint();
  tok.train(files);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  tok.save(out, true);
  process.stderr.write(`hf train: ${s.toFixed(3)} s\n`);
}

// What UnigramTrainer({special_tokens, unk_token: "<unk>"}) then AlbertTokenizerFast
// produce: specials prepended with score 0.0 (the trainer fills vocab_size minus the
// specials, so the last pieces make room), unk_id the index of <unk>, the mask
// token with lstrip, and the post-processor of the seed recipe.
function seed(inPath, outPath) {
  const d = JSON.parse(fs.readFileSync(inPath, 'utf8'));
  const sp = ['[CLS]', '[SEP]', '<unk>', '<pad>', '[MASK]'];
  const keep = d.model.vocab.filter(([p]) => !sp.includes(p)).slice(0, d.model.vocab.length - sp.length);
  d.model.vocab = sp.map(c => [c, 0.0]).concat(keep);
  d.model.unk_id = 2;
  d.added_tokens = sp.map((c, i) => ({ id: i, content: c, single_word: false, lstrip: c === '[MASK]',
                                        rstrip: false, normalized: false, special: true }));
  const S = (id, t) => ({ SpecialToken: { id, type_id: t } }), Q = (id, t) => ({ Sequence: { id, type_id: t } });
  d.post_processor = { type: 'TemplateProcessing', single: [S('[CLS]', 0), Q('A', 0), S('[SEP]', 0)],
    pair: [S('[CLS]', 0), Q('A', 0), S('[SEP]', 0), Q('B', 1), S('[SEP]', 1)],
    special_tokens: { '[CLS]': { id: '[CLS]', ids: [0], tokens: ['[CLS]'] }, '[SEP]': { id: '[SEP]', ids: [1], tokens: ['[SEP]'] } } };
  hf.Tokenizer.fromString(JSON.stringify(d)).save(outPath, true);
}

async function bench(tokPath, file) {
  const tok = hf.Tokenizer.fromFile(tokPath);
  const lines = readLines(file);
  const bytes = Buffer.byteLength(fs.readFileSync(file, 'utf8'), 'utf8');
  const B = 10000;
  let ntok = 0;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < lines.length; i += B) {
    const encs = await tok.encodeBatch(lines.slice(i, i + B), { addSpecialTokens: true });
    for (const e of encs) ntok += e.getLength();
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1e6;
  console.log(JSON.stringify({ seconds: s, cpu_seconds: cpu, bytes, tokens: ntok, mb_per_s: bytes / 1e6 / s }));
}

(async () => {
  const [cmd, ...args] = process.argv.slice(2);
  const flags = args.filter(a => a.startsWith('--'));
  const pos = args.filter(a => !a.startsWith('--'));
  if (cmd === 'encode' && pos.length === 2) return encode(pos[0], pos[1], flags);
  if (cmd === 'decode' && pos.length === 2) return decode(pos[0], pos[1], flags);
  if (cmd === 'train' && pos.length >= 2) return train(pos[0], pos.slice(1));
  if (cmd === 'bench' && pos.length === 2) return bench(pos[0], pos[1]);
  if (cmd === 'multi' && pos.length === 1) return multi(pos[0]);
  if (cmd === 'seed' && pos.length === 2) return seed(pos[0], pos[1]);
  if (cmd === 'resave' && pos.length === 2) return hf.Tokenizer.fromFile(pos[0]).save(pos[1], true);
  process.stderr.write('usage: hf_tokenize.js encode|decode|train|bench ... (see the header)\n');
  process.exit(2);
})().catch(e => { process.stderr.write(String(e.stack || e) + '\n'); process.exit(1); });
