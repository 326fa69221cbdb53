#!/usr/bin/env bash
# maskd serve's POST /text-classification and POST /models/{name} over HTTP with curl,
# on small random classifiers made here (numpy writes HF RobertaForSequenceClassification
# folders: config.json with id2label, model.safetensors) and imported into a store:
# HF pipeline("text-classification")'s answer shapes (top_k absent, an integer, null;
# a string, a list), function_to_apply and the multi-label default, the answers equal to
# `maskd classify`'s bytes, concurrent requests equal to each alone, every refusal with
# its status (a fill-mask model asked to classify and a classifier asked to fill masks
# get 400 naming the other route), the limits, and POST /models/{name} answering the
# pipeline each model is for; the answers against a reference (transformers' forward as
# scripts/torch_cls.py writes it out, in float32, and TextClassificationPipeline's
# postprocess and __call__ copied from 4.46); the playground in chromium; the serve flags
# of the limits; bf16 weights; /metrics counting its passes apart from fill-mask's.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" servetextclass
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
serve_wrap=(timeout 600)

# A Unigram tokenizer from a made-up corpus (no data set needed), then three models on it.
$PY - "$T/corpus.txt" <<'EOF'
import random, sys
r = random.Random(3)
words = "the a cat dog sat on mat was big small red blue house tree river good bad film movie great awful fine".split()
with open(sys.argv[1], "w") as f:
    for _ in range(3000):
        f.write(" ".join(r.choice(words) for _ in range(r.randint(3, 12))) + " .\n")
EOF
"$M" tokenizer train --input "$T/corpus.txt" --vocab-size 120 --out "$T/tok.json" --threads 1 >"$T/setup.log" 2>&1 ||
  { fail serve_textclass_setup "tokenizer: $(tail -3 "$T/setup.log")"; exit 1; }

# make DIR KIND SEED [LABELS...]: KIND cls (RobertaForSequenceClassification, single
# label), multi (the same, multi_label_classification), bert (BertForSequenceClassification:
# a pooler, two token types, positions from 0) or mlm (RobertaForMaskedLM).
# Weights N(0, 0.6) so that scores differ clearly.
make_model() {
  $PY - "$T/tok.json" "$@" <<'EOF'
import json, os, shutil, struct, sys
import numpy as np
tok, out, kind, seed, labels = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
V = len(json.load(open(tok))["model"]["vocab"])
H, L, I, P = 16, 2, 32, 40
r = np.random.default_rng(seed)
t = {}
def w(name, *shape): t[name] = (r.standard_normal(shape) * 0.6).astype(np.float32)
def ln(name): t[name + ".weight"] = np.ones(H, np.float32); t[name + ".bias"] = np.zeros(H, np.float32)
bert = kind == "bert"
pre = "bert." if bert else "roberta."
e = pre + "embeddings."
w(e + "word_embeddings.weight", V, H); w(e + "position_embeddings.weight", P, H)
w(e + "token_type_embeddings.weight", 2 if bert else 1, H)
ln(e + "LayerNorm")
for l in range(L):
    p = pre + "encoder.layer.%d." % l
    for m in ("query", "key", "value"):
        w(p + "attention.self.%s.weight" % m, H, H); w(p + "attention.self.%s.bias" % m, H)
    w(p + "attention.output.dense.weight", H, H); w(p + "attention.output.dense.bias", H); ln(p + "attention.output.LayerNorm")
    w(p + "intermediate.dense.weight", I, H); w(p + "intermediate.dense.bias", I)
    w(p + "output.dense.weight", H, I); w(p + "output.dense.bias", H); ln(p + "output.LayerNorm")
cfg = {"model_type": "bert" if bert else "roberta", "vocab_size": V, "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": 2,
       "intermediate_size": I, "max_position_embeddings": P, "type_vocab_size": 2 if bert else 1, "pad_token_id": 3, "bos_token_id": 0,
       "eos_token_id": 1, "layer_norm_eps": 1e-12 if bert else 1e-5, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
       "initializer_range": 0.02, "hidden_act": "gelu", "position_embedding_type": "absolute"}
if kind == "mlm":
    cfg["architectures"] = ["RobertaForMaskedLM"]
    w("lm_head.dense.weight", H, H); w("lm_head.dense.bias", H); ln("lm_head.layer_norm"); w("lm_head.bias", V)
else:
    cfg["architectures"] = ["BertForSequenceClassification" if bert else "RobertaForSequenceClassification"]
    cfg["id2label"] = {str(i): n for i, n in enumerate(labels)}
    cfg["label2id"] = {n: i for i, n in enumerate(labels)}
    cfg["problem_type"] = "multi_label_classification" if kind == "multi" else "single_label_classification"
    if bert:
        w("bert.pooler.dense.weight", H, H); w("bert.pooler.dense.bias", H)
        w("classifier.weight", len(labels), H); w("classifier.bias", len(labels))
    else:
        w("classifier.dense.weight", H, H); w("classifier.dense.bias", H)
        w("classifier.out_proj.weight", len(labels), H); w("classifier.out_proj.bias", len(labels))
os.makedirs(out, exist_ok=True)
json.dump(cfg, open(out + "/config.json", "w"), indent=2)
shutil.copy(tok, out + "/tokenizer.json")
header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
for name in sorted(t):
    b = t[name].tobytes()
    header[name] = {"dtype": "F32", "shape": list(t[name].shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(out + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h); f.write(b"".join(blobs))
EOF
}
{ make_model "$T/cls" cls 5 negative neutral positive café && make_model "$T/multi" multi 6 sports politics tech &&
  make_model "$T/mlm" mlm 7 && make_model "$T/bert" bert 8 yes no &&
  "$M" import --db "$T/hub.db" "$T/cls" tiny-cls && "$M" import --db "$T/hub.db" "$T/multi" tiny-multi &&
  "$M" import --db "$T/hub.db" "$T/mlm" tiny-mlm && "$M" import --db "$T/hub.db" "$T/bert" tiny-bert; } >>"$T/setup.log" 2>&1 ||
  { fail serve_textclass_setup "$(tail -3 "$T/setup.log")"; exit 1; }
pass serve_textclass_setup

tc() { call POST /text-classification --data-binary "$1"; }
# shape_is SPEC: the 200 answer's shape: "legacy1" ([ {label, score} ]), "legacyN:n"
# (n dicts), "sorted:k" (a sorted list of k), "lists:n:k" (n sorted lists of k).
shape_is() {
  status_is 200 && $PY - "$T/body" "$1" <<'EOF'
import json, struct, sys
b = json.load(open(sys.argv[1]))
spec = sys.argv[2].split(":")
def obj(o):
    assert isinstance(o, dict) and list(o) == ["label", "score"], o
    assert isinstance(o["label"], str) and isinstance(o["score"], float), o
    assert struct.unpack("f", struct.pack("f", o["score"]))[0] == o["score"], ("not a float32", o)
def srt(l, k):
    assert isinstance(l, list) and len(l) == k, (l, k)
    for o in l: obj(o)
    s = [o["score"] for o in l]
    assert s == sorted(s, reverse=True), s
    assert len({o["label"] for o in l}) == k, l
if spec[0] == "legacy1":
    assert isinstance(b, list) and len(b) == 1, b; obj(b[0])
elif spec[0] == "legacyN":
    assert isinstance(b, list) and len(b) == int(spec[1]), b
    for o in b: obj(o)
elif spec[0] == "sorted":
    srt(b, int(spec[1]))
elif spec[0] == "lists":
    assert isinstance(b, list) and len(b) == int(spec[1]), b
    for l in b: srt(l, int(spec[2]))
EOF
}
# py EXPR: a Python expression over the body `b` is true.
py() { $PY -c "import json,sys,math; b=json.load(open('$T/body')); sys.exit(0 if ($1) else 1)"; }
save() { cp "$T/body" "$T/$1.json"; }

serve_start --db "$T/hub.db" --quiet --batch-window-ms 20 || { fail serve_textclass_start "$(cat "$T/err")"; exit 1; }
pass serve_textclass_start

M1='"model": "tiny-cls"'
# ---- answer shapes ----
tc "{$M1, \"inputs\": \"the cat sat on the mat .\"}"
ok textclass_http_legacy_string shape_is legacy1
save legacy
tc "{$M1, \"inputs\": [\"the cat sat on the mat .\", \"a good film\", \"bad\"]}"
ok textclass_http_legacy_list shape_is legacyN:3
ok textclass_http_legacy_list_first_is_alone py "b[0] == json.load(open('$T/legacy.json'))[0]"
tc "{$M1, \"inputs\": [\"the cat sat on the mat .\"]}"
ok textclass_http_legacy_list_of_one shape_is legacyN:1
tc "{$M1, \"inputs\": \"the cat sat on the mat .\", \"parameters\": {\"top_k\": 2}}"
ok textclass_http_top_k_string shape_is sorted:2
save top2
tc "{$M1, \"inputs\": \"the cat sat on the mat .\", \"parameters\": {\"top_k\": null}}"
ok textclass_http_top_k_null shape_is sorted:4
ok textclass_http_softmax_sums_to_one py "abs(sum(o['score'] for o in b) - 1) < 1e-5"
ok textclass_http_legacy_is_best py "b[0] == json.load(open('$T/legacy.json'))[0]"
ok textclass_http_top2_is_prefix py "b[:2] == json.load(open('$T/top2.json'))"
ok textclass_http_labels_from_config py "sorted(o['label'] for o in b) == sorted(['negative', 'neutral', 'positive', 'café'])"
save all
tc "{$M1, \"inputs\": \"the cat sat on the mat .\", \"parameters\": {\"top_k\": 1000000}}"
ok textclass_http_top_k_huge py "b == json.load(open('$T/all.json'))"
tc "{$M1, \"inputs\": [\"the cat sat on the mat .\", \"a dog\"], \"parameters\": {\"top_k\": 3}}"
ok textclass_http_top_k_list shape_is lists:2:3
tc "{$M1, \"inputs\": [], \"parameters\": {\"top_k\": 3}}"
ok textclass_http_empty_list py "b == []"
tc "{$M1, \"inputs\": \"\"}"
ok textclass_http_empty_text shape_is legacy1

# ---- against a reference: transformers' forward (scripts/torch_cls.py's hf_style_cls_forward,
# float32, each input alone) and TextClassificationPipeline's postprocess and __call__
# (4.46, copied below) on maskd's own encoding of each text ----
cat > "$T/ref_cases.json" <<'EOF2'
[{"model": "tiny-cls", "inputs": "the cat sat on the mat ."},
 {"model": "tiny-cls", "inputs": ["a good film", "the river was red", "x"]},
 {"model": "tiny-cls", "inputs": "the cat sat on the mat .", "parameters": {"top_k": 2}},
 {"model": "tiny-cls", "inputs": ["a good film", "bad"], "parameters": {"top_k": null}},
 {"model": "tiny-cls", "inputs": "fine", "parameters": {"top_k": null, "function_to_apply": "none"}},
 {"model": "tiny-cls", "inputs": ["fine", "awful movie"], "parameters": {"function_to_apply": "sigmoid"}},
 {"model": "tiny-multi", "inputs": ["a red house", "the blue tree"], "parameters": {"top_k": 3}},
 {"model": "tiny-multi", "inputs": "a red house"},
 {"model": "tiny-bert", "inputs": ["a good film", "the cat sat on the mat ."], "parameters": {"top_k": null}},
 {"model": "tiny-bert", "inputs": "cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat",
  "parameters": {"truncation": true}},
 {"model": "tiny-cls", "inputs": "cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat cat",
  "parameters": {"truncation": true, "top_k": null}},
 {"model": "tiny-bert", "inputs": {"text": "a good film", "text_pair": "the cat sat on the mat ."}},
 {"model": "tiny-bert", "inputs": [{"text": "the river was red", "text_pair": "bad"}, "a good film", {"text": "x"}],
  "parameters": {"top_k": null}},
 {"model": "tiny-bert", "inputs": {"text": "fine"}, "parameters": {"top_k": 2, "function_to_apply": "none"}},
 {"model": "tiny-cls", "inputs": {"text": "a red house", "text_pair": "the blue tree was big"}, "parameters": {"top_k": 2}},
 {"model": "tiny-cls", "inputs": {"text": "a red house"}},
 {"model": "tiny-bert", "inputs": {"text": "cat dog cat dog cat dog cat dog cat dog cat dog cat dog cat dog cat dog cat dog cat dog cat dog cat dog",
  "text_pair": "the mat the mat the mat the mat the mat the mat the mat the mat the mat the mat the mat"}, "parameters": {"truncation": true}},
 {"model": "tiny-bert", "inputs": {"text": "a good film", "text_pair": "the river was red the river was red the river was red the river was red the river was red the river was red the river was red the river was red the river was red"},
  "parameters": {"truncation": "only_second", "top_k": null}}]
EOF2
ref_check() {
  $PY - "$T" "$base" "$M" <<'EOF2'
import json, os, subprocess, sys
import numpy as np
import torch
sys.path.insert(0, "scripts")
from torch_cls import ClsConfig, hf_style_cls_forward
from torch_reference import read_safetensors
T, base, M = sys.argv[1:4]
dirs = {"tiny-cls": T + "/cls", "tiny-multi": T + "/multi", "tiny-bert": T + "/bert"}
models = {}
def model(name):
    if name not in models:
        d = json.load(open(dirs[name] + "/config.json"))
        _, sd = read_safetensors(dirs[name] + "/model.safetensors")
        models[name] = (d, ClsConfig(d), {k: torch.from_numpy(np.array(v)) for k, v in sd.items()})
    return models[name]
def encode(text):
    out = subprocess.run([M, "tokenizer", "encode", "--tokenizer", T + "/tok.json", "--jsonl"], input=json.dumps(text) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]
def hf_encode(text, pair, limit, strategy):
    # HF tokenizers itself (tests/hf_tokenize.js) for dict inputs: ids and type ids, cut as
    # tokenizer(text, text_pair, truncation=strategy) cuts to model_max_length.
    with open(T + "/pair.jsonl", "w") as f:
        f.write(json.dumps([text, pair] if pair is not None else text) + "\n")
    args = ["node", "tests/hf_tokenize.js", "encode", T + "/tok.json", T + "/pair.jsonl", "--jsonl"]
    if pair is not None: args.append("--pair")
    if strategy: args += ["--max-length=%d" % limit, "--truncation=" + strategy]
    ids = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    types = subprocess.run(args + ["--type-ids"], capture_output=True, text=True, check=True).stdout.split()
    return [int(x) for x in ids], [int(x) for x in types]
# transformers 4.46 pipelines/text_classification.py
def sigmoid(_outputs):
    return 1.0 / (1.0 + np.exp(-_outputs))
def softmax(_outputs):
    maxes = np.max(_outputs, axis=-1, keepdims=True)
    shifted_exp = np.exp(_outputs - maxes)
    return shifted_exp / shifted_exp.sum(axis=-1, keepdims=True)
def postprocess(d, logits, function_to_apply=None, top_k=1, _legacy=True):
    num_labels = len(d["id2label"])
    if function_to_apply is None:
        if d.get("problem_type") == "multi_label_classification" or num_labels == 1:
            function_to_apply = "sigmoid"
        else:
            function_to_apply = "softmax"
    outputs = logits.float().numpy()
    scores = {"sigmoid": sigmoid, "softmax": softmax, "none": lambda o: o}[function_to_apply](outputs)
    id2label = {int(k): v for k, v in d["id2label"].items()}
    if top_k == 1 and _legacy:
        return {"label": id2label[scores.argmax().item()], "score": scores.max().item()}
    dict_scores = [{"label": id2label[i], "score": score.item()} for i, score in enumerate(scores)]
    if not _legacy:
        dict_scores.sort(key=lambda x: x["score"], reverse=True)
        if top_k is not None:
            dict_scores = dict_scores[:top_k]
    return dict_scores
def pipeline(case):
    d, c, sd = model(case["model"])
    params = dict(case.get("parameters", {}))
    fn = params.get("function_to_apply")
    fn = fn.lower() if fn else None
    legacy = "top_k" not in params
    top_k = params.get("top_k", 1)
    limit = c.max_position_embeddings - (c.pad_token_id + 1 if c.model_type == "roberta" else 0)
    inputs = case["inputs"]
    results = []
    trunc = params.get("truncation")
    strategy = "longest_first" if trunc is True else trunc if isinstance(trunc, str) else None
    for text in (inputs if isinstance(inputs, list) else [inputs]):
        types = None
        if isinstance(text, dict):
            ids, types = hf_encode(text["text"], text.get("text_pair"), limit, strategy)
        else:
            ids = encode(text)
            if len(ids) > limit and params.get("truncation"):
                ids = ids[:limit - 1] + ids[-1:]
        x = torch.tensor([ids])
        # token_type_ids as HF's tokenizer returns them: BERT's, not RoBERTa's (model_input_names).
        tt = torch.tensor([types]) if types is not None and c.model_type == "bert" else None
        with torch.no_grad():
            _, logits = hf_style_cls_forward(sd, c, x, torch.ones_like(x), tt, torch.zeros(1, dtype=torch.long))
        results.append(postprocess(d, logits[0], fn, top_k, legacy))
    if not isinstance(inputs, list):
        # TextClassificationPipeline.__call__: a str input's legacy answer is [result].
        return [results[0]] if legacy and isinstance(inputs, str) else results[0]
    return results
def same(a, b, where):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, where + [i])
        return
    assert isinstance(b, dict) and list(a) == list(b) == ["label", "score"], (where, a, b)
    assert abs(a["score"] - b["score"]) < 1e-5, (where, a, b)
    assert a["label"] == b["label"], (where, a, b)
bad = 0
for i, case in enumerate(json.load(open(T + "/ref_cases.json"))):
    want = pipeline(case)
    r = subprocess.run(["curl", "-s", "--max-time", "60", "-X", "POST", "-H", "Content-Type: application/json",
                        "--data-binary", json.dumps(case), base + "/text-classification"], capture_output=True, text=True)
    try:
        same(want, json.loads(r.stdout), [])
        print("PASS textclass_reference_%d" % i)
    except AssertionError as e:
        print("FAIL textclass_reference_%d: %s" % (i, str(e)[:400]))
EOF2
}
ref_check

# ---- function_to_apply ----
tc "{$M1, \"inputs\": \"the cat sat on the mat .\", \"parameters\": {\"top_k\": null, \"function_to_apply\": \"none\"}}"
ok textclass_http_function_none shape_is sorted:4
save none
tc "{$M1, \"inputs\": \"the cat sat on the mat .\", \"parameters\": {\"top_k\": null, \"function_to_apply\": \"Sigmoid\"}}"
ok textclass_http_function_sigmoid py "all(abs(o['score'] - 1 / (1 + math.exp(-n['score']))) < 1e-6 for o, n in zip(b, json.load(open('$T/none.json'))))"
tc "{$M1, \"inputs\": \"the cat sat on the mat .\", \"parameters\": {\"top_k\": null, \"function_to_apply\": \"SOFTMAX\"}}"
ok textclass_http_function_softmax py "b == json.load(open('$T/all.json'))"
# A multi-label model's default is sigmoid.
tc '{"model": "tiny-multi", "inputs": "a red house", "parameters": {"top_k": null}}'
save multi
tc '{"model": "tiny-multi", "inputs": "a red house", "parameters": {"top_k": null, "function_to_apply": "sigmoid"}}'
ok textclass_http_multi_label_default_sigmoid py "b == json.load(open('$T/multi.json')) and abs(sum(o['score'] for o in b) - 1) > 1e-3"

# ---- the same bytes as maskd classify ----
cli_same() {
  local body=$1; shift
  tc "$body" && status_is 200 && "$M" classify --db "$T/hub.db" --model tiny-cls "$@" >"$T/cli.out" 2>"$T/cli.err" &&
    [ "$(cat "$T/body")" = "$(cat "$T/cli.out")" ]
}
ok textclass_cli_equals_http_legacy cli_same "{$M1, \"inputs\": \"a big red tree\"}" "a big red tree"
ok textclass_cli_equals_http_topk cli_same "{$M1, \"inputs\": [\"a big red tree\", \"the film was awful\"], \"parameters\": {\"top_k\": 2}}" \
  --top-k 2 "a big red tree" "the film was awful"
ok textclass_cli_equals_http_all_none cli_same "{$M1, \"inputs\": \"fine\", \"parameters\": {\"top_k\": null, \"function_to_apply\": \"none\"}}" \
  --top-k all --function none fine
ok textclass_cli_model_dir bash -c "'$M' classify --model-dir '$T/cls' --top-k all --function none fine | cmp -s - '$T/cli.out'"
ok textclass_cli_refuses_mlm bash -c "! '$M' classify --db '$T/hub.db' --model tiny-mlm 'a cat' 2>'$T/cli.err' && grep -q 'fill-mask model' '$T/cli.err'"
ok textclass_cli_bad_top_k bash -c "! '$M' classify --db '$T/hub.db' --model tiny-cls --top-k 0 'a' 2>/dev/null"

# ---- concurrent requests, each equal to its answer alone ----
texts=("the cat" "a dog sat on the big mat ." "good" "an awful film , a bad film , a great film" "red" "the house by the river" "blue tree" "fine movie")
for i in "${!texts[@]}"; do
  tc "{$M1, \"inputs\": \"${texts[$i]}\", \"parameters\": {\"top_k\": null}}"; cp "$T/body" "$T/alone$i.json"
done
curls=()
for i in "${!texts[@]}"; do
  curl -s --max-time 60 -X POST -H 'Content-Type: application/json' -o "$T/conc$i.json" \
    --data-binary "{$M1, \"inputs\": \"${texts[$i]}\", \"parameters\": {\"top_k\": null}}" "$base/text-classification" &
  curls+=($!)
done
wait "${curls[@]}"   # not the server's
same=1
for i in "${!texts[@]}"; do cmp -s "$T/alone$i.json" "$T/conc$i.json" || same=0; done
ok textclass_http_concurrent_equal_alone [ "$same" = 1 ]

# ---- refusals ----
tc '{"model": "tiny-mlm", "inputs": "a cat"}'
ok textclass_http_mlm_refused error_is 400 fill-mask
ok textclass_http_mlm_refused_names_route error_is 400 "POST /fill-mask"
call POST /fill-mask --data-binary '{"model": "tiny-cls", "inputs": "a [MASK]"}'
ok fillmask_http_classifier_refused error_is 400 text-classification
tc '{"model": "nosuch", "inputs": "a"}'
ok textclass_http_unknown_model error_is 404 nosuch
tc "{$M1, \"inputs\": 5}"
ok textclass_http_inputs_number error_is 422 inputs
tc "{$M1, \"inputs\": [\"a\", null]}"
ok textclass_http_inputs_null_item error_is 422 "inputs[1]"
tc "{$M1}"
ok textclass_http_no_inputs error_is 422 inputs
tc "{$M1, \"inputs\": \"a\", \"parameters\": {\"top_k\": 0}}"
ok textclass_http_top_k_zero error_is 422 top_k
tc "{$M1, \"inputs\": \"a\", \"parameters\": {\"top_k\": \"2\"}}"
ok textclass_http_top_k_string_refused error_is 422 top_k
tc "{$M1, \"inputs\": \"a\", \"parameters\": {\"top_k\": 99999999999999999999999}}"
ok textclass_http_top_k_overflow error_is 400 "too big integer"   # jansson reads no integer past 64 bits: malformed JSON
tc "{$M1, \"inputs\": \"a\", \"parameters\": {\"function_to_apply\": \"relu\"}}"
ok textclass_http_bad_function error_is 422 function_to_apply
tc "{$M1, \"inputs\": \"a\", \"parameters\": {\"targets\": [\"a\"]}}"
ok textclass_http_unknown_parameter error_is 422 targets
tc "{$M1, \"inputs\": \"a\", \"parameters\": [1]}"
ok textclass_http_parameters_list error_is 422 parameters
tc '{"model": 3, "inputs": "a"}'
ok textclass_http_model_number error_is 422 model
tc "{$M1, \"inputs\": \"a\", \"extra\": 1}"
ok textclass_http_unknown_field error_is 422 extra
tc '[1, 2]'
ok textclass_http_body_list status_is 422
call POST /text-classification --data-binary "$(printf '{"inputs": "\xff\xfe"}')"
ok textclass_http_not_utf8 status_is 400
tc "{$M1, \"inputs\": \"a"
ok textclass_http_bad_json status_is 400
long=$(printf 'cat %.0s' $(seq 60))
tc "{$M1, \"inputs\": \"$long\"}"
ok textclass_http_too_long error_is 400 "positions (parameters.truncation: true cuts it)"
tc "{$M1, \"inputs\": \"$long\", \"parameters\": {\"truncation\": true, \"top_k\": 1}}"
ok textclass_http_truncation shape_is sorted:1
many=$($PY -c 'import json; print(json.dumps(["a"] * 65))')
tc "{$M1, \"inputs\": $many}"
ok textclass_http_max_inputs error_is 413 max_inputs
ok textclass_http_max_inputs_flag error_is 413 '"flag": "--classify-max-inputs"'

# ---- POST /models/{name}: the pipeline the model is for ----
call POST /models/tiny-cls --data-binary '{"inputs": "the cat sat on the mat .", "parameters": {"top_k": null}}'
ok models_post_classifier py "b == json.load(open('$T/all.json'))"
call POST '/models/tiny-cls?revision=main' --data-binary '{"inputs": "the cat sat on the mat ."}'
ok models_post_classifier_revision py "b == json.load(open('$T/legacy.json'))"
call POST /fill-mask --data-binary '{"model": "tiny-mlm", "inputs": "the cat [MASK] on the mat ."}'
save fill
call POST /models/tiny-mlm --data-binary '{"inputs": "the cat [MASK] on the mat ."}'
ok models_post_masked_lm py "b == json.load(open('$T/fill.json')) and len(b) == 5 and 'token_str' in b[0]"
call POST /models/nosuch --data-binary '{"inputs": "a"}'
ok models_post_unknown error_is 404 nosuch
call POST /models/tiny-cls --data-binary '{"inputs": "a", "model": "tiny-mlm"}'
ok models_post_model_field error_is 422 model
call POST /models/tiny-mlm --data-binary '{"inputs": "no mask here"}'
ok models_post_masked_lm_refusal error_is 400 mask
call GET /models/tiny-cls
ok models_get_still_revisions status_is 200

# ---- the page's playground, in a real browser (when playwright and chromium are here) ----
if [ -d tests/node_modules/playwright-core ] && [ -x /usr/bin/chromium ]; then
  cat > "$T/page.js" <<'EOF2'
const { chromium } = require(process.cwd() + "/tests/node_modules/playwright-core");
const base = process.argv[2];
const check = (ok, name, why) => console.log(ok ? "PASS " + name : `FAIL ${name}: ${why}`);
(async () => {
  const b = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  try {
    const p = await b.newPage({ viewport: { width: 1280, height: 860 } });
    const errors = [];
    p.on("pageerror", (e) => errors.push(String(e)));
    await p.goto(base + "/#/classify");
    await p.waitForFunction(() => document.querySelectorAll("#tc-model option").length > 0, null, { timeout: 10000 });
    const opts = await p.$$eval("#tc-model option", (o) => o.map((x) => x.value));
    check(opts.includes("tiny-cls") && opts.includes("tiny-multi") && !opts.some((v) => v.startsWith("tiny-mlm")),
          "textclass_page_lists_classifiers", JSON.stringify(opts));
    await p.selectOption("#tc-model", "tiny-cls");
    await p.fill("#tc-form textarea", "a good film\nthe cat sat on the mat .");
    await p.fill("#tc-form input[name=top_k]", "");
    await p.click("#tc-form button");
    await p.waitForFunction(() => document.querySelectorAll("#tc-results .mask-card").length === 2, null, { timeout: 10000 });
    const rows = await p.$$eval("#tc-results .mask-card", (c) => c.map((x) => x.querySelectorAll(".pred").length));
    const first = await p.$eval("#tc-results .mask-card .pred .tok", (e) => e.textContent);
    check(rows.join() === "4,4" && ["negative", "neutral", "positive", "café"].includes(first), "textclass_page_shows_bars",
          `${rows} ${first}`);
    await p.setViewportSize({ width: 390, height: 844 });
    await p.waitForTimeout(300);
    const wide = await p.evaluate(() => document.documentElement.scrollWidth);
    check(wide <= 390, "textclass_page_phone_fits", `page is ${wide}px wide`);
    check(errors.length === 0, "textclass_page_no_js_errors", errors.join(" | "));
  } finally { await b.close(); }
})().catch((e) => { console.log("FAIL textclass_page: " + String(e).split("\n")[0]); });
EOF2
  timeout 120 node "$T/page.js" "$base" 2>&1 | grep -E '^(PASS|FAIL) '
else
  echo "SKIP textclass_page: no playwright-core or /usr/bin/chromium"
fi

# The server is still up and answering.
call GET /healthz
ok textclass_http_alive status_is 200
ok textclass_healthz_limits py "b['limits']['text_classification'] == {'max_inputs': 64, 'max_tokens': 4096}"
serve_stop
ok textclass_http_clean_stop [ $? = 0 ]

# The limits from maskd serve's flags, each at its value and one past it: max_tokens is
# the two texts' tokens ([CLS]/[SEP] counted) as the tokenizer encodes them.
ntok=$(printf 'a cat\na\n' | "$M" tokenizer encode --tokenizer "$T/tok.json" 2>/dev/null | wc -w)
serve_start --db "$T/hub.db" --quiet --classify-max-inputs 2 --classify-max-tokens "$ntok" ||
  { fail textclass_limits_start "$(cat "$T/err")"; exit 1; }
call GET /healthz
ok textclass_healthz_limits_flags py "b['limits']['text_classification'] == {'max_inputs': 2, 'max_tokens': $ntok}"
tc "{$M1, \"inputs\": [\"a cat\", \"a\"]}"
ok textclass_limits_at_value status_is 200
tc "{$M1, \"inputs\": [\"a\", \"a\", \"a\"]}"
ok textclass_limits_max_inputs_flag error_is 413 '"got": 3'
tc "{$M1, \"inputs\": [\"a cats\", \"a\"]}"
ok textclass_limits_max_tokens_flag error_is 413 "\"flag\": \"--classify-max-tokens\", \"max\": $ntok"
serve_stop

# bf16 weights (--precision bf16): the classifier loads and answers, the labels in the
# fp32 order (scores differ in the last digits only).
serve_start --db "$T/hub.db" --quiet --precision bf16 || { fail textclass_bf16_start "$(cat "$T/err")"; exit 1; }
tc "{$M1, \"inputs\": \"the cat sat on the mat .\", \"parameters\": {\"top_k\": null}}"
ok textclass_http_bf16 py "[o['label'] for o in b] == [o['label'] for o in json.load(open('$T/all.json'))] and all(abs(o['score'] - a['score']) < 0.05 for o, a in zip(b, json.load(open('$T/all.json'))))"
serve_stop

# /metrics: text-classification's passes and latency are counted under names of their
# own, and move none of fill-mask's (its passes were counted as fill-mask's).
metric() { $PY -c "import sys; print(sum(float(l.split()[1]) for l in open(sys.argv[1]) if l.split()[:1] == [sys.argv[2]]))" "$T/body" "$1"; }
serve_start --db "$T/hub.db" --quiet || { fail textclass_metrics_start "$(cat "$T/err")"; exit 1; }
tc "{$M1, \"inputs\": \"the cat sat on the mat .\"}"
tc "{$M1, \"inputs\": [\"a good film\", \"bad\"]}"
call GET /metrics
ok textclass_metrics_not_fill_mask test "$(metric maskd_fill_mask_passes_total) $(metric maskd_fill_mask_duration_seconds_count)" = "0.0 0.0"
ok textclass_metrics_own test "$(metric maskd_text_classification_passes_total) $(metric maskd_text_classification_duration_seconds_count)" = "2.0 2.0"
call POST /fill-mask --data-binary '{"model": "tiny-mlm", "inputs": "a [MASK]"}'
call GET /metrics
ok textclass_metrics_fill_mask_apart test "$(metric maskd_fill_mask_passes_total) $(metric maskd_text_classification_passes_total)" = "1.0 2.0"
serve_stop

# A request that names no model: each route has its own default, the most recently pushed
# model of its task (imported in the order tiny-cls, tiny-multi, tiny-mlm, tiny-bert), so a
# classifier pushed after a masked LM does not take fill-mask's requests, nor the reverse;
# --model is the default of the route whose task it serves, the other route keeping its own.
serve_start --db "$T/hub.db" --quiet || { fail default_model_start "$(cat "$T/err")"; exit 1; }
tc '{"inputs": "a cat", "parameters": {"top_k": null}}'
ok textclass_http_default_newest_classifier py "sorted(o['label'] for o in b) == ['no', 'yes']"
call POST /fill-mask --data-binary '{"inputs": "a [MASK]"}'
ok fillmask_http_default_skips_newer_classifier status_is 200
serve_stop
serve_start --db "$T/hub.db" --quiet --model tiny-cls || { fail default_model_flag_start "$(cat "$T/err")"; exit 1; }
tc '{"inputs": "a cat", "parameters": {"top_k": null}}'
ok textclass_http_default_model_flag py "sorted(o['label'] for o in b) == sorted(['negative', 'neutral', 'positive', 'café'])"
call POST /fill-mask --data-binary '{"inputs": "a [MASK]"}'
ok fillmask_http_default_model_flag_other_task status_is 200
serve_stop
# A --model that names nothing is not skipped: its 404 tells the operator.
serve_start --db "$T/hub.db" --quiet --model nosuch || { fail default_model_typo_start "$(cat "$T/err")"; exit 1; }
call POST /fill-mask --data-binary '{"inputs": "a [MASK]"}'
ok fillmask_http_default_model_unknown error_is 404 nosuch
serve_stop
# A store with classifiers only: fill-mask's default is a 404 that says so.
"$M" import --db "$T/cls-only.db" "$T/cls" tiny-cls >>"$T/setup.log" 2>&1 || fail default_model_cls_only_setup "$(tail -2 "$T/setup.log")"
serve_start --db "$T/cls-only.db" --quiet || { fail default_model_cls_only_start "$(cat "$T/err")"; exit 1; }
call POST /fill-mask --data-binary '{"inputs": "a [MASK]"}'
ok fillmask_http_default_none_of_task error_is 404 "holds no fill-mask model"
tc '{"inputs": "a cat"}'
ok textclass_http_default_only_classifier py "b[0]['label'] in ['negative', 'neutral', 'positive', 'café']"
serve_stop

# A repository named owner/name, as the Hub names them, under /models/ as under the Hub's
# routes: GET /models/{owner}/{name} (the page lists its revisions: it asks for
# encodeURIComponent(name), the slash as %2F) and POST /models/{owner}/{name}.
"$M" import --db "$T/cls-only.db" "$T/cls" acme/tiny-cls >>"$T/setup.log" 2>&1 || fail owner_repo_setup "$(tail -2 "$T/setup.log")"
serve_start --db "$T/cls-only.db" --quiet || { fail owner_repo_start "$(cat "$T/err")"; exit 1; }
call GET /models/acme/tiny-cls
ok models_owner_name_get py "b['name'] == 'acme/tiny-cls' and len(b['revisions']) == 1"
call GET /models/acme%2Ftiny-cls
ok models_owner_name_get_encoded py "b['name'] == 'acme/tiny-cls'"
call POST /models/acme/tiny-cls --data-binary '{"inputs": "a cat", "parameters": {"top_k": null}}'
ok models_owner_name_post py "sorted(o['label'] for o in b) == sorted(['negative', 'neutral', 'positive', 'café'])"
call POST "/models/acme/tiny-cls?revision=main" --data-binary '{"inputs": "a cat"}'
ok models_owner_name_post_revision status_is 200
call GET /models/acme/nosuch
ok models_owner_name_unknown error_is 404 acme/nosuch
serve_stop

# The command line names its own way past a refusal: --truncation, a limit's flag.
out=$("$M" classify --db "$T/hub.db" --model tiny-cls "$long" 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -q "positions (--truncation cuts it)$" <<<"$out" && pass textclass_cli_too_long_names_flag ||
  fail textclass_cli_too_long_names_flag "rc $rc: $out"
out=$("$M" fill-mask --db "$T/hub.db" --model tiny-mlm --top-k 9 --max-top-k 5 "a [MASK]" 2>&1 >/dev/null); rc=$?
[ $rc != 0 ] && grep -q "(--max-top-k raises it from 5)$" <<<"$out" && pass fillmask_cli_limit_names_flag ||
  fail fillmask_cli_limit_names_flag "rc $rc: $out"
