"""Independent reference for maskd's fill-mask pipeline.

transformers is not installed here, so this re-implements FillMaskPipeline
(transformers src/transformers/pipelines/fill_mask.py: _sanitize_parameters /
get_target_ids, preprocess, postprocess, __call__; base.py runs a list input
one item at a time) on top of:
  - the PyTorch model of scripts/torch_mlm.py (torch's own modules) with the
    weights of the model folder,
  - Hugging Face tokenizers (npm tokenizers, tests/node_modules) for encode,
    get_vocab and decode, run through node,
  - transformers' clean_up_tokenization, applied when tokenizer_config.json says
    clean_up_tokenization_spaces.
Results are printed with Python's json.dumps, as the pipeline's float scores
(float32 values widened to double) would be.

  fillmask_reference.py make-model --tokenizer T --out DIR [--model-type roberta|bert] [--seed S]
                                   [--no-tokenizer-json]
        a small random model folder (config.json, model.safetensors, tokenizer.json,
        tokenizer_config.json, special_tokens_map.json) with peaked predictions. The
        tokenizer's family decides the folder's tokenizer files and special-token ids:
          Unigram   the seed layout (AlbertTokenizer; pad 3, bos 0, eos 1)
          WordPiece as BertTokenizerFast saves ([PAD] [UNK] [CLS] [SEP] [MASK], do_lower_case
                    ...; config pad_token_id = the [PAD] id)
          BPE       as RobertaTokenizerFast saves (<s> </s> <unk> <pad>, <mask> with lstrip,
                    add_prefix_space, trim_offsets; config pad 1, bos 0, eos 2, and
                    max_position_embeddings = --max-pos + 2 as RoBERTa's positions start
                    after pad_token_id)
        --no-tokenizer-json (WordPiece, BPE): the legacy files instead of tokenizer.json
        (vocab.txt, or vocab.json + merges.txt; tests/hf_tokenize.js folder-*), and the
        tokenizer transformers' converter builds from them as DIR.ref.json beside DIR,
        which the reference then uses
  fillmask_reference.py make-models --tokenizer T OUT,TYPE,SEED,CLEAN...   (several at once)
  fillmask_reference.py run --model-dir DIR --cases CASES.json  |  run --job DIR CASES OUT ...
        one JSON line per case: {"name", "result"} or {"name", "error"}
  fillmask_reference.py check --model-dir DIR --cases CASES.json --expected EXP.jsonl --maskd MASKD
                               [--db DB --model NAME]   (maskd answers from its store instead)
        runs maskd fill-mask on every case; a PASS/FAIL line each: maskd's output against the reference (scores within 1e-5 and
        printed as repr(float32 value); everything else identical, key order included)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# torch is imported only by the modes that run the model (check does not).
torch = TorchMLM = read_safetensors = write_safetensors = None


def need_torch():
    global torch, TorchMLM, read_safetensors, write_safetensors
    import torch as _torch
    from torch_mlm import TorchMLM as _T
    from torch_reference import read_safetensors as _r, write_safetensors as _w
    torch, TorchMLM, read_safetensors, write_safetensors = _torch, _T, _r, _w

NODE_MODULES = os.path.join(HERE, "..", "tests", "node_modules")

# Runs a list of tokenizer operations in HF tokenizers (node) and returns the answers.
NODE_SCRIPT = r"""
const hf = require(process.env.HF_TOKENIZERS);
const rl = require('readline').createInterface({ input: process.stdin });
const cache = {};
const queue = [];
let busy = false;
async function serve(line) {
  const req = JSON.parse(line);
  const tok = cache[req.tokenizer] || (cache[req.tokenizer] = hf.Tokenizer.fromFile(req.tokenizer));
  const out = [];
  for (const op of req.ops) {
    if (op.op === 'encode') {
      const e = await tok.encode(op.text, null, { addSpecialTokens: op.special });
      out.push(Array.from(e.getIds()));
    } else if (op.op === 'decode') {
      out.push(await tok.decode(op.ids, op.skip));
    } else if (op.op === 'vocab') {
      out.push(tok.getVocab(true));
    } else if (op.op === 'token_to_id') {
      const id = tok.tokenToId(op.token);
      out.push(id === undefined || id === null ? null : id);
    } else if (op.op === 'id_to_token') {
      const t = tok.idToToken(op.id);
      out.push(t === undefined ? null : t);
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) await serve(queue.shift());
  busy = false;
}
rl.on('line', line => { queue.push(line); pump(); });
"""

_NODE = None


def hf_ops(tokenizer_path, ops):
    """Answers of HF tokenizers (one long-lived node process) to a list of operations."""
    global _NODE
    if _NODE is None:
        env = dict(os.environ, HF_TOKENIZERS=os.path.join(NODE_MODULES, "tokenizers"))
        _NODE = subprocess.Popen(["node", "-e", NODE_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True, env=env)
    _NODE.stdin.write(json.dumps({"tokenizer": os.path.abspath(tokenizer_path), "ops": ops}) + "\n")
    _NODE.stdin.flush()
    line = _NODE.stdout.readline()
    if not line:
        raise RuntimeError("the HF tokenizers helper (node) stopped")
    return json.loads(line)


def clean_up_tokenization(s):
    # transformers' PreTrainedTokenizerBase.clean_up_tokenization
    return (s.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",")
            .replace(" ' ", "'").replace(" n't", "n't").replace(" 'm", "'m").replace(" 's", "'s")
            .replace(" 've", "'ve").replace(" 're", "'re"))


class PipelineError(Exception):
    pass


class Tok:
    """The bits of a PreTrainedTokenizerFast the pipeline uses, over HF tokenizers."""

    def __init__(self, d):
        self.path = os.path.join(d, "tokenizer.json")
        if not os.path.exists(self.path):
            # A folder without tokenizer.json: the tokenizer transformers' converter
            # (BertConverter / RobertaConverter) builds from the legacy files, as HF builds it.
            self.path = os.path.abspath(d).rstrip("/") + ".ref.json"
            if not os.path.exists(self.path):
                subprocess.run(["node", os.path.join(NODE_MODULES, "..", "hf_tokenize.js"), "ref-folder", d, self.path],
                               check=True)
        cfg = {}
        p = os.path.join(d, "tokenizer_config.json")
        if os.path.exists(p):
            cfg = json.load(open(p))
        sm = {}
        p = os.path.join(d, "special_tokens_map.json")
        if os.path.exists(p):
            sm = json.load(open(p))

        def tokfield(k, default):
            v = sm.get(k, cfg.get(k, default))
            return v["content"] if isinstance(v, dict) else v
        self.mask_token = tokfield("mask_token", "[MASK]")
        self.pad_token = tokfield("pad_token", "<pad>")
        self.clean_up = cfg.get("clean_up_tokenization_spaces", True)
        vocab, mid, pid = hf_ops(self.path, [{"op": "vocab"}, {"op": "token_to_id", "token": self.mask_token},
                                             {"op": "token_to_id", "token": self.pad_token}])
        self.vocab, self.mask_token_id, self.pad_token_id = vocab, mid, pid
        self.pending = []

    def encode(self, texts, special):
        return hf_ops(self.path, [{"op": "encode", "text": t, "special": special} for t in texts])

    def id_to_token(self, i):
        return hf_ops(self.path, [{"op": "id_to_token", "id": int(i)}])[0]

    def decode_many(self, reqs):
        """reqs: [(ids, skip_special)] -> texts, cleaned up as transformers' decode does."""
        outs = hf_ops(self.path, [{"op": "decode", "ids": [int(x) for x in ids], "skip": skip} for ids, skip in reqs])
        return [clean_up_tokenization(s) if self.clean_up else s for s in outs]


def get_target_ids(tok, targets, warnings):
    if isinstance(targets, str):
        targets = [targets]
    vocab = tok.vocab
    target_ids = []
    missing = [t for t in targets if vocab.get(t) is None]
    enc = dict(zip(missing, tok.encode(missing, False))) if missing else {}
    for target in targets:
        id_ = vocab.get(target, None)
        if id_ is None:
            input_ids = enc[target][:1]   # max_length=1, truncation=True
            if len(input_ids) == 0:
                warnings.append(f"The specified target token `{target}` does not exist in the model vocabulary. "
                                f"We cannot replace it with anything meaningful, ignoring it")
                continue
            id_ = input_ids[0]
            warnings.append(f"The specified target token `{target}` does not exist in the model vocabulary. "
                            f"Replacing with `{tok.id_to_token(id_)}`.")
        target_ids.append(id_)
    target_ids = list(set(target_ids))
    if len(target_ids) == 0:
        raise ValueError("At least one target must be provided when passed.")
    return np.array(target_ids)


def run_one(model, tok, text, top_k, target_ids):
    ids = tok.encode([text], True)[0]
    input_ids = torch.tensor([ids], dtype=torch.long)
    if int((input_ids == tok.mask_token_id).sum()) < 1:
        raise PipelineError(f"No mask_token ({tok.mask_token}) found on the input")
    with torch.no_grad():
        _, logits = model(input_ids)
    # postprocess
    if target_ids is not None and target_ids.shape[0] < top_k:
        top_k = target_ids.shape[0]
    input_ids = input_ids[0]
    masked_index = torch.nonzero(input_ids == tok.mask_token_id, as_tuple=False).squeeze(-1)
    lg = logits[0, masked_index, :]
    probs = lg.softmax(dim=-1)
    if target_ids is not None:
        probs = probs[..., target_ids]
    values, predictions = probs.topk(top_k)
    single_mask = values.shape[0] == 1
    rows, reqs = [], []
    for i, (_values, _predictions) in enumerate(zip(values.tolist(), predictions.tolist())):
        row = []
        for v, p in zip(_values, _predictions):
            tokens = input_ids.numpy().copy()
            if target_ids is not None:
                p = target_ids[p].tolist()
            tokens[masked_index[i]] = p
            tokens = tokens[np.where(tokens != tok.pad_token_id)]
            reqs.append((tokens.tolist(), single_mask))
            reqs.append(([p], False))
            row.append([v, p])
        rows.append(row)
    texts = tok.decode_many(reqs)
    k = 0
    result = []
    for row in rows:
        out = []
        for v, p in row:
            out.append({"score": v, "token": p, "token_str": texts[k + 1], "sequence": texts[k]})
            k += 2
        result.append(out)
    return result[0] if single_mask else result


def pipeline(model, tok, inputs, top_k=None, targets=None, warnings=None):
    warnings = [] if warnings is None else warnings
    target_ids = get_target_ids(tok, targets, warnings) if targets is not None else None
    if top_k is None:
        top_k = 5
    if isinstance(inputs, list):
        outs = [run_one(model, tok, x, top_k, target_ids) for x in inputs]
        return outs[0] if len(inputs) == 1 else outs
    return run_one(model, tok, inputs, top_k, target_ids)


def load_model(d):
    need_torch()
    cfg = json.load(open(os.path.join(d, "config.json")))
    model = TorchMLM(cfg)
    _, sd = read_safetensors(os.path.join(d, "model.safetensors"))
    model.load_hf_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, strict=True)
    model.eval()
    return model


def family_files(tj, clean_up):
    """(tokenizer_config.json, special_tokens_map.json, pad/bos/eos ids, position offset) of a
    WordPiece or BPE tokenizer.json's family, as transformers' BertTokenizerFast /
    RobertaTokenizerFast save_pretrained writes them (keys sorted)."""
    vocab = tj["model"]["vocab"]
    def added(entries):
        return {str(vocab[t]): {"content": t, "lstrip": lstrip, "normalized": False, "rstrip": False,
                                "single_word": False, "special": True}
                for t, lstrip in sorted(entries, key=lambda e: vocab[e[0]]) if t in vocab}
    if tj["model"]["type"] == "WordPiece":
        n = tj.get("normalizer") or {}
        sp = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]", "unk_token": "[UNK]"}
        cfg = dict(sp, added_tokens_decoder=added([(t, False) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]),
                   clean_up_tokenization_spaces=clean_up, do_basic_tokenize=True,
                   do_lower_case=n.get("lowercase", True) is not False, model_max_length=512, never_split=None,
                   strip_accents=n.get("strip_accents"),
                   tokenize_chinese_chars=n.get("handle_chinese_chars", True) is not False, tokenizer_class="BertTokenizer")
        return cfg, sp, {"pad_token_id": vocab["[PAD]"]}, 0
    mask = {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}
    sp = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": mask, "pad_token": "<pad>",
          "sep_token": "</s>", "unk_token": "<unk>"}
    pre = tj.get("pre_tokenizer") or {}
    cfg = dict(sp, add_prefix_space=bool(pre.get("add_prefix_space", False)),
               added_tokens_decoder=added([("<s>", False), ("<pad>", False), ("</s>", False), ("<unk>", False), ("<mask>", True)]),
               clean_up_tokenization_spaces=clean_up, errors="replace", mask_token="<mask>", model_max_length=512,
               tokenizer_class="RobertaTokenizer", trim_offsets=True)
    return cfg, sp, {"pad_token_id": vocab["<pad>"], "bos_token_id": vocab["<s>"], "eos_token_id": vocab["</s>"]}, vocab["<pad>"] + 1


def make_model(a):
    need_torch()
    tj = json.load(open(a.tokenizer))
    family = tj["model"]["type"]
    if family not in ("Unigram", "WordPiece", "BPE"):
        sys.exit(f"make-model: a {family} tokenizer is not handled")
    if getattr(a, "no_tokenizer_json", False) and family == "Unigram":
        sys.exit("make-model: --no-tokenizer-json is for WordPiece and BPE tokenizers")
    if family == "Unigram":
        vocab_size = len(tj["model"]["vocab"])
    else:   # ids from the vocab map, and added tokens past it
        vocab_size = max(list(tj["model"]["vocab"].values()) + [t["id"] for t in tj.get("added_tokens") or []]) + 1
    mt = a.model_type
    special_ids, max_pos = {"pad_token_id": 3, "bos_token_id": 0, "eos_token_id": 1}, a.max_pos
    if family != "Unigram":
        tok_cfg, tok_map, special_ids, pos_offset = family_files(tj, a.clean_up == "true")
        if mt == "roberta":
            max_pos = a.max_pos + pos_offset   # RoBERTa: position ids start after pad_token_id
    cfg = {"architectures": ["RobertaForMaskedLM" if mt == "roberta" else "BertForMaskedLM"], "model_type": mt,
           "vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 64, "max_position_embeddings": max_pos, "type_vocab_size": 1 if mt == "roberta" else 2,
           **special_ids, "hidden_act": "gelu",
           "layer_norm_eps": 1e-5 if mt == "roberta" else 1e-12, "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02, "position_embedding_type": "absolute"}
    torch.manual_seed(a.seed)
    model = TorchMLM(cfg)
    # Larger weights than HF's init so that predictions are peaked (a freshly initialised
    # model gives nearly uniform probabilities whose order float rounding could swap).
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        model.head_bias.normal_(0.0, 2.0)
        model.word_embeddings.weight[cfg["pad_token_id"]].zero_()
    os.makedirs(a.out, exist_ok=True)
    sd = model.hf_state_dict()
    write_safetensors(os.path.join(a.out, "model.safetensors"), list(sd.items()), {"format": "pt"})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if family != "Unigram":
        if getattr(a, "no_tokenizer_json", False):
            ref = os.path.abspath(a.out).rstrip("/") + ".ref.json"
            subprocess.run(["node", os.path.join(NODE_MODULES, "..", "hf_tokenize.js"),
                            "folder-wordpiece" if family == "WordPiece" else "folder-bpe", a.tokenizer, a.out, ref], check=True)
        else:
            shutil.copyfile(a.tokenizer, os.path.join(a.out, "tokenizer.json"))
        with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
            json.dump(tok_cfg, f, indent=2, sort_keys=True, ensure_ascii=False)
        with open(os.path.join(a.out, "special_tokens_map.json"), "w") as f:
            json.dump(tok_map, f, indent=2, sort_keys=True, ensure_ascii=False)
        return
    shutil.copyfile(a.tokenizer, os.path.join(a.out, "tokenizer.json"))
    mask = {"content": "[MASK]", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump({"clean_up_tokenization_spaces": a.clean_up == "true", "mask_token": mask, "pad_token": "<pad>",
                   "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "<unk>",
                   "tokenizer_class": "AlbertTokenizer"}, f, indent=2)
    with open(os.path.join(a.out, "special_tokens_map.json"), "w") as f:
        json.dump({"mask_token": mask, "pad_token": "<pad>", "cls_token": "[CLS]", "sep_token": "[SEP]",
                   "unk_token": "<unk>"}, f, indent=2)


def run_cases(model_dir, cases, out):
    model = load_model(model_dir)
    tok = Tok(model_dir)
    for case in json.load(open(cases)):
        rec = {"name": case["name"]}
        try:
            rec["result"] = pipeline(model, tok, case["inputs"], case.get("top_k"), case.get("targets"))
        except (PipelineError, ValueError) as e:
            rec["error"] = str(e)
        print(json.dumps(rec), file=out)


def run(a):
    if a.model_dir and a.cases:
        run_cases(a.model_dir, a.cases, sys.stdout)
    for d, cases, path in a.job or []:   # several models in one process (torch starts once)
        with open(path, "w") as out:
            run_cases(d, cases, out)


def make_models(a):
    for spec in a.spec:
        out, mt, seed, clean = spec.split(",")
        make_model(argparse.Namespace(tokenizer=a.tokenizer, out=out, model_type=mt, seed=int(seed),
                                      max_pos=a.max_pos, clean_up=clean))


def compare(exp, name, rc, text, err):
    """PASS/FAIL line for maskd's output (exit status rc, stdout text, stderr err) against exp."""
    if "error" in exp:
        if rc != 0 and exp["error"] in err:
            print(f"PASS {name} (refused: {exp['error']})")
        else:
            print(f"FAIL {name}: expected the error '{exp['error']}', got exit {rc}, stderr {err.strip()[:200]!r}")
        return
    if rc != 0:
        print(f"FAIL {name}: exit {rc}: {err.strip()[:300]}")
        return
    try:
        got = json.loads(text, parse_float=lambda s: ("F", s))
    except ValueError as e:
        print(f"FAIL {name}: maskd printed invalid JSON: {e}")
        return
    worst = [0.0, 0]

    def walk(e, g, where):
        if isinstance(e, list):
            if not isinstance(g, list) or len(g) != len(e):
                return f"{where}: expected a list of {len(e)}, got {str(g)[:80]}"
            for i, (x, y) in enumerate(zip(e, g)):
                m = walk(x, y, f"{where}[{i}]")
                if m:
                    return m
            return None
        if isinstance(e, dict):
            if not isinstance(g, dict) or list(g.keys()) != list(e.keys()):
                return f"{where}: keys {list(g.keys()) if isinstance(g, dict) else g} != {list(e.keys())}"
            for k in e:
                m = walk(e[k], g[k], f"{where}.{k}")
                if m:
                    return m
            return None
        if isinstance(e, float):
            if not (isinstance(g, tuple) and g[0] == "F"):
                return f"{where}: expected a float, got {g!r}"
            v = float(g[1])
            if repr(v) != g[1]:
                return f"{where}: {g[1]} is not printed as Python's repr ({repr(v)})"
            if float(np.float32(v)) != v:
                return f"{where}: {g[1]} is not a float32 value"
            d = abs(v - e)
            worst[1] += 1
            if d > worst[0]:
                worst[0] = d
            if d > 1e-5:
                return f"{where}: score {g[1]} vs reference {e!r} (diff {d:.3g})"
            return None
        if g != e:
            return f"{where}: {g!r} != reference {e!r}"
        return None

    m = walk(exp["result"], got, "result")
    if m:
        print(f"FAIL {name}: {m}")
    else:
        print(f"PASS {name} ({worst[1]} scores, max diff {worst[0]:.2g})")


def maskd_args(case):
    """The maskd fill-mask command line for a case."""
    args = []
    if case.get("top_k") is not None:
        args += ["--top-k", str(case["top_k"])]
    t = case.get("targets")
    if t is not None:
        args += ["--targets", t if isinstance(t, str) else ",".join(t)]
    if isinstance(case["inputs"], list):
        args += ["--list", "--"] + case["inputs"]
    else:
        args += ["--", case["inputs"]]
    return args


def check(a):
    """Runs maskd on every case of the reference's output and compares."""
    cases = {c["name"]: c for c in json.load(open(a.cases))}
    for line in open(a.expected):
        exp = json.loads(line)
        case = cases[exp["name"]]
        src = ["--db", a.db, "--model", a.model] if a.model else ["--model-dir", a.model_dir]
        r = subprocess.run([a.maskd, "fill-mask"] + src + maskd_args(case), capture_output=True, text=True)
        compare(exp, a.prefix + exp["name"], r.returncode, r.stdout, r.stderr)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make-model")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--model-type", default="roberta", choices=["roberta", "bert"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-pos", type=int, default=64)
    p.add_argument("--clean-up", default="true", choices=["true", "false"])
    p.add_argument("--no-tokenizer-json", action="store_true")
    p = sub.add_parser("make-models")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--max-pos", type=int, default=64)
    p.add_argument("spec", nargs="+", help="OUT,roberta|bert,SEED,true|false (clean-up)")
    p = sub.add_parser("run")
    p.add_argument("--model-dir")
    p.add_argument("--cases")
    p.add_argument("--job", nargs=3, action="append", metavar=("DIR", "CASES", "OUT"))
    p = sub.add_parser("check")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--cases", required=True)
    p.add_argument("--expected", required=True)
    p.add_argument("--maskd", required=True)
    p.add_argument("--db")
    p.add_argument("--model")
    p.add_argument("--prefix", default="fillmask_ref_")
    a = ap.parse_args()
    {"make-model": make_model, "make-models": make_models, "run": run, "check": check}[a.cmd](a)


if __name__ == "__main__":
    main()
