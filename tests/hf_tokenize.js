// The reference side of the tokenizer parity tests: Hugging Face tokenizers
// (npm tokenizers@0.23.2). One input line in, one output line out, in the same
// formats `maskd tokenizer encode|decode` prints, so outputs compare with cmp.
//
//   node hf_tokenize.js encode TOKENIZER FILE [--no-special] [--pieces|--offsets|--type-ids] [--jsonl]
//        [--pair] [--max-length=N [--truncation=longest_first|only_first|only_second]]
//        (--pair: each line is two texts split at the first tab, or with --jsonl a JSON
//        [a, b]; --max-length: HF's setTruncation, special tokens counted; one ERR line per
//        line HF refuses, as for single texts)
//   node hf_tokenize.js decode TOKENIZER FILE [--skip-special]
//   node hf_tokenize.js train OUT.json FILE...      (HF's Unigram trainer, seed pipeline)
//   node hf_tokenize.js bench TOKENIZER FILE         (encodeBatch MB/s on FILE's lines; JSON
//        with wall and CPU seconds and busy_threads, the threads working at once)
//   node hf_tokenize.js seed IN.json OUT.json         (the seed's layout around a trained
//        Unigram: special tokens first as HF's trainer puts them, unk_id, [MASK] lstrip,
//        TemplateProcessing; loaded and saved by HF so OUT is HF-written)
//   node hf_tokenize.js resave IN.json OUT.json       (HF loads IN and saves it)
//   node hf_tokenize.js multi JOBS                    (many encode/decode runs in one
//        process: each line OUT<TAB>encode|decode<TAB>args..., output to OUT)
//   node hf_tokenize.js train-wordpiece OUT.json FILE... [--vocab N] [--cased]
//        HF's WordPiece trainer in BertWordPieceTokenizer's pipeline: BertNormalizer
//        (uncased: lowercase, strip_accents unset; --cased: neither), BertPreTokenizer,
//        [PAD] [UNK] [CLS] [SEP] [MASK] = ids 0-4, BertProcessing (uncased) or the
//        TemplateProcessing of transformers' BertConverter (--cased), WordPiece decoder
//   node hf_tokenize.js train-bpe OUT.json FILE... [--vocab N]
//        HF's BPE trainer in ByteLevelBPETokenizer's pipeline laid out as roberta-base:
//        <s> <pad> </s> <unk> = 0-3, the 256 byte-level characters, merges, <mask> last
//        (lstrip), RobertaProcessing, ByteLevel pre-tokenizer and decoder
//        (--vocab N, both: the first N entries, specials included, as vocab_size would;
//        default: all the default trainer gives, at most 30000 plus the specials and,
//        for BPE, the byte-level characters the corpus lacks)
//   node hf_tokenize.js folder-wordpiece IN.json DIR REF.json
//   node hf_tokenize.js folder-bpe IN.json DIR REF.json
//        the legacy files of a Hub folder without tokenizer.json (vocab.txt, or
//        vocab.json + merges.txt, + tokenizer_config.json) from IN, then as ref-folder
//   node hf_tokenize.js ref-folder DIR REF.json
//        the tokenizer transformers' BertConverter / RobertaConverter builds from DIR's
//        legacy files (BertTokenizerFast / RobertaTokenizerFast without tokenizer.json)
//
// Thread count: HF parallelises encodeBatch with rayon; RAYON_NUM_THREADS=N sizes
// its pool and TOKENIZERS_PARALLELISM=false turns the parallel loop off; each alone
// gives one thread (bench's busy_threads: 1, against 2 unset on 2 cores).
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
  if (mode === 'type-ids') return enc.getTypeIds().join(' ');
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
  const mode = flags.includes('--pieces') ? 'pieces' : flags.includes('--offsets') ? 'offsets'
    : flags.includes('--type-ids') ? 'type-ids' : 'ids';
  let lines = readLines(file);
  if (flags.includes('--jsonl')) lines = lines.map(l => JSON.parse(l));
  const value = name => { const f = flags.find(x => x.startsWith(name + '=')); return f ? f.slice(name.length + 1) : null; };
  const maxLength = value('--max-length');
  if (flags.includes('--pair') || maxLength) {
    const strategy = { longest_first: 'LongestFirst', only_first: 'OnlyFirst', only_second: 'OnlySecond' }[value('--truncation') || 'longest_first'];
    if (maxLength) tok.setTruncation(Number(maxLength), { strategy });
    const out = [];
    try {
      for (const line of lines) {
        let a = line, b = null;
        if (flags.includes('--pair')) {
          if (Array.isArray(line)) [a, b] = line;
          else { const k = line.indexOf('\t'); a = line.slice(0, k); b = line.slice(k + 1); }
        }
        try { out.push(format(await tok.encode(a, b, opts), a, mode, tok)); }
        catch (e) { out.push('ERR ' + String(e.message || e).split('\n')[0]); }
      }
    } finally { tok.disableTruncation(); }
    return out.length ? out.join('\n') + '\n' : '';
  }
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

// utime + stime (clock ticks) of each thread of this process, by thread id (Linux).
function threadTicks() {
  const m = new Map();
  try {
    for (const tid of fs.readdirSync('/proc/self/task')) {
      try {
        const st = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
        const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
        m.set(tid, Number(f[11]) + Number(f[12]));
      } catch (e) { /* the thread ended */ }
    }
  } catch (e) { /* no /proc */ }
  return m;
}

async function bench(tokPath, file) {
  const tok = hf.Tokenizer.fromFile(tokPath);
  const lines = readLines(file);
  const bytes = Buffer.byteLength(fs.readFileSync(file, 'utf8'), 'utf8');
  const B = 10000;
  let ntok = 0;
  // The threads that encode at once: CPU ticks per thread over each encodeBatch call; a
  // thread with at least a tenth of the busiest one's counts, the most over the calls.
  // Per call, since each runs on one of libuv's pool threads, not always the same one;
  // node's main thread is left out (it waits, then turns the results into JS objects:
  // up to a tenth of the encoding's time, never at the same time).
  let busy = null;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < lines.length; i += B) {
    const k0 = threadTicks();
    const encs = await tok.encodeBatch(lines.slice(i, i + B), { addSpecialTokens: true });
    const k1 = threadTicks(), d = [];
    for (const [tid, t] of k1) if (tid !== String(process.pid)) d.push(t - (k0.get(tid) || 0));
    const top = Math.max(0, ...d);
    if (top >= 5) busy = Math.max(busy || 0, d.filter(x => x >= top / 10).length);
    for (const e of encs) ntok += e.getLength();
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1e6;
  console.log(JSON.stringify({ seconds: s, cpu_seconds: cpu, bytes, tokens: ntok, mb_per_s: bytes / 1e6 / s, busy_threads: busy }));
}

// ---- WordPiece (BERT) and byte-level BPE (RoBERTa) ----

// The JS binding exposes only each model's default trainer (WordPieceTrainer /
// BpeTrainer ::default(): vocab_size 30000, min_frequency 0, no special tokens, no
// limit_alphabet, no initial alphabet), so HF trains, then the vocabulary is laid out
// around the trained one as the Python recipes would and HF builds and saves the result.
// The trainers are greedy and give ids in merge order, so the first N entries are what
// vocab_size N would have given (--vocab).
function trainRaw(model, preTok, normalizer, files) {
  const tok = new hf.Tokenizer(model);
  if (normalizer) tok.setNormalizer(normalizer);
  tok.setPreTokenizer(preTok);
  const t0 = process.hrtime.bigint();
  tok.train(files);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  process.stderr.write(`hf train: ${s.toFixed(3)} s\n`);
  const tmp = path.join(require('os').tmpdir(), `hf_raw_${process.pid}.json`);
  tok.save(tmp, false);
  const d = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  fs.unlinkSync(tmp);
  return d;
}

const BERT_SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
function bertNorm(lower, stripAccents, chinese) {
  const o = { cleanText: true, handleChineseChars: chinese, lowercase: lower };
  if (stripAccents !== null && stripAccents !== undefined) o.stripAccents = stripAccents;  // unset: follows lowercase
  return hf.bertNormalizer(o);
}

function trainWordPiece(out, files, vocabN, cased) {
  const norm = () => cased ? bertNorm(false, false, true) : bertNorm(true, null, true);
  const raw = trainRaw(hf.WordPiece.empty(), hf.bertPreTokenizer(), norm(), files);
  const trained = Object.entries(raw.model.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t)
    .filter(t => !BERT_SPECIALS.includes(t));
  let toks = BERT_SPECIALS.concat(trained);
  if (vocabN !== null) toks = toks.slice(0, vocabN);
  const vocab = {};
  toks.forEach((t, i) => { vocab[t] = i; });
  const tok = new hf.Tokenizer(hf.WordPiece.init(vocab, { unkToken: '[UNK]', continuingSubwordPrefix: '##', maxInputCharsPerWord: 100 }));
  tok.setNormalizer(norm());
  tok.setPreTokenizer(hf.bertPreTokenizer());
  // BertWordPieceTokenizer sets BertProcessing; BertConverter (BertTokenizerFast from
  // vocab.txt) sets TemplateProcessing: the uncased file has one, the cased the other.
  tok.setPostProcessor(cased
    ? hf.templateProcessing('[CLS]:0 $A:0 [SEP]:0', '[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1', [['[CLS]', 2], ['[SEP]', 3]])
    : hf.bertProcessing(['[SEP]', 3], ['[CLS]', 2]));
  tok.setDecoder(hf.wordPieceDecoder('##', true));
  tok.addAddedTokens(BERT_SPECIALS.map(c => new hf.AddedToken(c, true, { normalized: false })));
  tok.save(out, true);
}

const ROBERTA_SPECIALS = ['<s>', '<pad>', '</s>', '<unk>'];
const BYTE_LEVEL_DECODER = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
const cpOrder = (a, b) => a.codePointAt(0) - b.codePointAt(0);
function cpCompare(a, b) {  // Python's str order (code points; JS compares UTF-16 units)
  const x = [...a], y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d) return d;
  }
  return x.length - y.length;
}

function trainBpe(out, files, vocabN) {
  const raw = trainRaw(hf.BPE.empty(), hf.byteLevelPreTokenizer(false, true), null, files);
  const nmerge = raw.model.merges.length;
  const trained = Object.entries(raw.model.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t);
  const nalpha = trained.length - nmerge;
  // ByteLevelBPETokenizer gives the trainer initial_alphabet = ByteLevel.alphabet();
  // the trainer keeps its alphabet sorted by code point, before the merges.
  const alphabet = [...new Set(trained.slice(0, nalpha).concat(hf.byteLevelAlphabet()))].sort(cpOrder);
  let toks = ROBERTA_SPECIALS.concat(alphabet, trained.slice(nalpha));
  if (vocabN !== null) toks = toks.slice(0, vocabN - 1);   // <mask> counts
  toks.push('<mask>');
  const vocab = {};
  toks.forEach((t, i) => { vocab[t] = i; });
  const merges = raw.model.merges.filter(([a, b]) => (a + b) in vocab && vocab[a + b] < toks.length - 1);
  const tok = new hf.Tokenizer(hf.BPE.init(vocab, merges, {}));
  tok.setPreTokenizer(hf.byteLevelPreTokenizer(false, true));
  tok.setPostProcessor(hf.robertaProcessing(['</s>', 2], ['<s>', 0], true, false));
  robertaAdded(tok, toks.length - 1);
  // The binding has no ByteLevel decoder constructor: set it in the JSON, HF re-reads and saves.
  const tmp = out + '.tmp';
  tok.save(tmp, false);
  const d = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  fs.unlinkSync(tmp);
  d.decoder = BYTE_LEVEL_DECODER;
  hf.Tokenizer.fromString(JSON.stringify(d)).save(out, true);
}

// RobertaTokenizer's special tokens as transformers adds them: special, not
// normalized, <mask> with lstrip (it takes the space before it).
function robertaAdded(tok, maskId, names) {
  const n = names || { bos: '<s>', pad: '<pad>', eos: '</s>', unk: '<unk>', mask: '<mask>' };
  const list = [n.bos, n.pad, n.eos, n.unk].map(c => [c, tok.tokenToId(c)]).concat([[n.mask, maskId]]);
  list.sort((a, b) => a[1] - b[1]);
  const seen = new Set();
  for (const [c] of list) {
    if (seen.has(c)) continue;
    seen.add(c);
    tok.addAddedTokens([new hf.AddedToken(c, true, { leftStrip: c === n.mask, rightStrip: false, normalized: false })]);
  }
}

function addedDecoder(entries) {  // tokenizer_config.json's added_tokens_decoder
  const o = {};
  for (const [id, content, lstrip] of entries.sort((a, b) => a[0] - b[0]))
    o[String(id)] = { content, lstrip: !!lstrip, normalized: false, rstrip: false, single_word: false, special: true };
  return o;
}
function writeJsonSorted(file, obj) {  // transformers writes these with sort_keys=True, indent=2
  const sortRec = v => Array.isArray(v) ? v.map(sortRec) : (v && typeof v === 'object')
    ? Object.fromEntries(Object.keys(v).sort().map(k => [k, sortRec(v[k])])) : v;
  fs.writeFileSync(file, JSON.stringify(sortRec(obj), null, 2) + '\n');
}

// vocab.txt (one token per line, id = line number) and BertTokenizer's tokenizer_config.json.
function folderWordPiece(inPath, dir, refPath) {
  const d = JSON.parse(fs.readFileSync(inPath, 'utf8'));
  const toks = Object.entries(d.model.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'vocab.txt'), toks.join('\n') + '\n');
  const n = d.normalizer || {};
  const id = t => d.model.vocab[t];
  writeJsonSorted(path.join(dir, 'tokenizer_config.json'), {
    added_tokens_decoder: addedDecoder(BERT_SPECIALS.filter(t => t in d.model.vocab).map(t => [id(t), t, false])),
    clean_up_tokenization_spaces: true, cls_token: '[CLS]', do_basic_tokenize: true, do_lower_case: n.lowercase !== false,
    mask_token: '[MASK]', model_max_length: 512, never_split: null, pad_token: '[PAD]', sep_token: '[SEP]',
    strip_accents: n.strip_accents === undefined ? null : n.strip_accents, tokenize_chinese_chars: n.handle_chinese_chars !== false,
    tokenizer_class: 'BertTokenizer', unk_token: '[UNK]' });
  refFolder(dir, refPath);
}

// vocab.json + merges.txt ("#version: 0.2", then "a b" a line) and RobertaTokenizer's
// tokenizer_config.json.
function folderBpe(inPath, dir, refPath) {
  const d = JSON.parse(fs.readFileSync(inPath, 'utf8'));
  fs.mkdirSync(dir, { recursive: true });
  // As RobertaTokenizer.save_vocabulary: json.dumps(encoder, indent=2, sort_keys=True,
  // ensure_ascii=False). Written by hand: a JS object puts integer-like keys ("0") first.
  const keys = Object.keys(d.model.vocab).sort(cpCompare);
  fs.writeFileSync(path.join(dir, 'vocab.json'),
    '{\n' + keys.map(k => `  ${JSON.stringify(k)}: ${d.model.vocab[k]}`).join(',\n') + '\n}\n');
  const merges = d.model.merges.map(m => Array.isArray(m) ? m.join(' ') : m);
  // RobertaTokenizer drops the first line and the last (split('\n')[1:-1]): end with '\n'.
  fs.writeFileSync(path.join(dir, 'merges.txt'), '#version: 0.2\n' + merges.map(m => m + '\n').join(''));
  const pre = d.pre_tokenizer || {};
  const id = t => d.model.vocab[t];
  writeJsonSorted(path.join(dir, 'tokenizer_config.json'), {
    add_prefix_space: !!pre.add_prefix_space,
    added_tokens_decoder: addedDecoder(['<s>', '<pad>', '</s>', '<unk>', '<mask>'].filter(t => t in d.model.vocab)
      .map(t => [id(t), t, t === '<mask>'])),
    bos_token: '<s>', clean_up_tokenization_spaces: true, cls_token: '<s>', eos_token: '</s>', errors: 'replace',
    mask_token: '<mask>', model_max_length: 512, pad_token: '<pad>', sep_token: '</s>',
    tokenizer_class: 'RobertaTokenizer', trim_offsets: true, unk_token: '<unk>' });
  refFolder(dir, refPath);
}

// transformers' BertConverter / RobertaConverter on DIR's legacy files, then the special
// tokens added as PreTrainedTokenizerFast adds them; saved by HF to REF (outside DIR).
function refFolder(dir, refPath) {
  const cfgPath = path.join(dir, 'tokenizer_config.json');
  const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, 'utf8')) : {};
  const str = (k, dflt) => { const v = cfg[k]; return v === undefined || v === null ? dflt : (typeof v === 'object' ? v.content : v); };
  if (fs.existsSync(path.join(dir, 'vocab.txt'))) {
    // BertTokenizer's load_vocab: id = line number (Python's readlines, then rstrip('\n')).
    let text = fs.readFileSync(path.join(dir, 'vocab.txt'), 'utf8').replace(/\r\n?/g, '\n');
    const lines = text.split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    const vocab = {};
    lines.forEach((t, i) => { vocab[t] = i; });
    const unk = str('unk_token', '[UNK]'), cls = str('cls_token', '[CLS]'), sep = str('sep_token', '[SEP]');
    const pad = str('pad_token', '[PAD]'), mask = str('mask_token', '[MASK]');
    const lower = cfg.do_lower_case === undefined ? true : cfg.do_lower_case;
    const chinese = cfg.tokenize_chinese_chars === undefined ? true : cfg.tokenize_chinese_chars;
    const strip = cfg.strip_accents === undefined ? null : cfg.strip_accents;
    const tok = new hf.Tokenizer(hf.WordPiece.init(vocab, { unkToken: unk, continuingSubwordPrefix: '##', maxInputCharsPerWord: 100 }));
    tok.setNormalizer(bertNorm(lower, strip, chinese));
    tok.setPreTokenizer(hf.bertPreTokenizer());
    tok.setPostProcessor(hf.templateProcessing(`${cls}:0 $A:0 ${sep}:0`, `${cls}:0 $A:0 ${sep}:0 $B:1 ${sep}:1`,
      [[cls, vocab[cls]], [sep, vocab[sep]]]));
    tok.setDecoder(hf.wordPieceDecoder('##', true));
    const sp = [pad, unk, cls, sep, mask].filter(t => t in vocab).sort((a, b) => vocab[a] - vocab[b]);
    tok.addAddedTokens([...new Set(sp)].map(c => new hf.AddedToken(c, true, { normalized: false })));
    tok.save(refPath, true);
    return;
  }
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'vocab.json'), 'utf8'));
  const lines = fs.readFileSync(path.join(dir, 'merges.txt'), 'utf8').split('\n').slice(1, -1);
  const merges = lines.map(l => l.split(/\s+/).filter(Boolean)).filter(p => p.length === 2);
  const aps = !!cfg.add_prefix_space;
  const n = { bos: str('bos_token', '<s>'), pad: str('pad_token', '<pad>'), eos: str('eos_token', '</s>'),
              unk: str('unk_token', '<unk>'), mask: str('mask_token', '<mask>') };
  const cls = str('cls_token', '<s>'), sep = str('sep_token', '</s>');
  const tok = new hf.Tokenizer(hf.BPE.init(vocab, merges, { continuingSubwordPrefix: '', endOfWordSuffix: '', fuseUnk: false }));
  tok.setPreTokenizer(hf.byteLevelPreTokenizer(aps, true));
  tok.setPostProcessor(hf.robertaProcessing([sep, vocab[sep]], [cls, vocab[cls]], true, aps));
  robertaAdded(tok, vocab[n.mask], n);
  const tmp = refPath + '.tmp';
  tok.save(tmp, false);
  const d = JSON.parse(fs.readFileSync(tmp, 'utf8'));
  fs.unlinkSync(tmp);
  d.decoder = BYTE_LEVEL_DECODER;
  hf.Tokenizer.fromString(JSON.stringify(d)).save(refPath, true);
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
  const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
  const vocabN = opt('--vocab', null);
  const files = pos.filter(p => p !== vocabN);
  if (cmd === 'train-wordpiece' && files.length >= 2)
    return trainWordPiece(files[0], files.slice(1), vocabN === null ? null : Number(vocabN), flags.includes('--cased'));
  if (cmd === 'train-bpe' && files.length >= 2) return trainBpe(files[0], files.slice(1), vocabN === null ? null : Number(vocabN));
  if (cmd === 'folder-wordpiece' && pos.length === 3) return folderWordPiece(pos[0], pos[1], pos[2]);
  if (cmd === 'folder-bpe' && pos.length === 3) return folderBpe(pos[0], pos[1], pos[2]);
  if (cmd === 'ref-folder' && pos.length === 2) return refFolder(pos[0], pos[1]);
  process.stderr.write('usage: hf_tokenize.js encode|decode|train|bench|seed|resave|multi|train-wordpiece|train-bpe|folder-wordpiece|folder-bpe|ref-folder ... (see the header)\n');
  process.exit(2);
})().catch(e => { process.stderr.write(String(e.stack || e) + '\n'); process.exit(1); });
