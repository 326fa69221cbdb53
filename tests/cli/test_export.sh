#!/usr/bin/env bash
# maskd import / export round trips through the store, and the exported folder
# checked by independent readers: PyTorch (scripts/torch_mlm.py, strict HF names)
# and HF tokenizers give the same fill-mask answers on it (scripts/
# fillmask_reference.py), the safetensors header says format "pt", the tokenizer
# config files say what AlbertTokenizerFast needs. (transformers itself is not
# installed here, so from_pretrained is not run.) Refusals: non-Unigram
# tokenizers, missing files, tokenizer settings the store cannot keep, unknown
# models and revisions, existing files without --force; --force that cannot replace
# them all (a full disk, a directory in a file's place) leaves the folder as it was, and so
# does a stop signal while the files are written.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" export
R=scripts/fillmask_reference.py
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
DB=$T/hub.db

need export_setup "tests/node_modules/tokenizers is missing (run scripts/setup)" -d tests/node_modules/tokenizers
need export_setup "$DATA/train.txt missing (MASKD_DATA)" -f "$DATA/train.txt"

head -2000 "$DATA/train.txt" > "$T/train.txt"
node tests/hf_tokenize.js train "$T/raw.json" "$T/train.txt" 2>/dev/null &&
  node tests/hf_tokenize.js seed "$T/raw.json" "$T/tok.json" || { fail export_setup "HF tokenizer training failed"; exit 1; }
$PY $R make-models --tokenizer "$T/tok.json" "$T/rob,roberta,5,true" "$T/bert,bert,6,true" "$T/noclean,roberta,7,false" ||
  { fail export_setup "make-models failed"; exit 1; }

# Fill-mask answers (several inputs, targets) of a model source, into a file.
answers() {  # out, source args...
  local out=$1; shift
  { "$M" fill-mask "$@" "The capital of France is [MASK] ." &&
    "$M" fill-mask "$@" "The [MASK] of France is [MASK] ." "[MASK] was here ." &&
    "$M" fill-mask "$@" --top-k 3 --targets "▁the,▁of,zzqx" "He said [MASK] it , didn't he ?"; } > "$out" 2> "$T/answers.err"
}
same_answers() {  # name, file a, file b
  if [ -s "$2" ] && cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "answers differ or are empty: $(diff "$2" "$3" | head -3 | cut -c1-200) $(head -2 "$T/answers.err")"; fi
}

for m in rob bert; do
  answers "$T/$m.dir.txt" --model-dir "$T/$m"
  out=$("$M" import --db "$DB" "$T/$m" "tiny-$m" 2>&1) || fail "export_import_$m" "$out"
  answers "$T/$m.store.txt" --db "$DB" --model "tiny-$m"
  same_answers "export_import_$m (store answers = folder answers)" "$T/$m.dir.txt" "$T/$m.store.txt"
  out=$("$M" export --db "$DB" "tiny-$m@main" "$T/out-$m" 2>&1) || fail "export_export_$m" "$out"
  n=0; for f in config.json model.safetensors tokenizer.json tokenizer_config.json special_tokens_map.json; do
    [ -s "$T/out-$m/$f" ] && n=$((n + 1)); done
  [ $n = 5 ] && pass "export_files_$m" || fail "export_files_$m" "$n of 5 files in $T/out-$m: $(ls "$T/out-$m")"
  answers "$T/$m.export.txt" --model-dir "$T/out-$m"
  same_answers "export_roundtrip_$m (exported folder answers = original)" "$T/$m.dir.txt" "$T/$m.export.txt"
  # Again: the exported folder imports and exports to the same bytes (canonical form).
  "$M" import --db "$DB" "$T/out-$m" "again-$m" > /dev/null 2>&1 && "$M" export --db "$DB" "again-$m" "$T/again-$m" > /dev/null 2>&1
  diffs=""; for f in config.json model.safetensors tokenizer.json tokenizer_config.json special_tokens_map.json; do
    cmp -s "$T/out-$m/$f" "$T/again-$m/$f" || diffs+="$f "; done
  [ -z "$diffs" ] && pass "export_idempotent_$m" || fail "export_idempotent_$m" "files differ after a second round trip: $diffs"
done

# The exported folder read by PyTorch (strict HF state-dict names) and HF tokenizers:
# the independent pipeline agrees with maskd on it.
cat > "$T/cases.json" <<'EOF'
[{"name": "single", "inputs": "The capital of France is [MASK] ."},
 {"name": "multi_list", "inputs": ["The [MASK] of France is [MASK] .", "[MASK] was here ."]},
 {"name": "targets", "inputs": "He said [MASK] it , didn't he ?", "targets": ["▁the", "▁of", "zzqx"], "top_k": 3}]
EOF
if $PY $R run --job "$T/out-rob" "$T/cases.json" "$T/exp-rob.jsonl" --job "$T/out-bert" "$T/cases.json" "$T/exp-bert.jsonl" 2> "$T/ref.err"; then
  for m in rob bert; do
    $PY $R check --model-dir "$T/out-$m" --cases "$T/cases.json" --expected "$T/exp-$m.jsonl" --maskd "$M" --prefix "export_torch_hf_${m}_"
  done
else fail export_torch_hf "the reference cannot read the exported folders: $(tail -1 "$T/ref.err")"; fi

# --dtype bf16: every tensor BF16, bit for bit torch's own rounding (nearest even) of the
# F32 export's; config.json says torch_dtype bfloat16; the PyTorch reference reads the
# folder and agrees with maskd on it; import takes it back and fill-mask answers from it.
out=$("$M" export --db "$DB" --dtype bf16 "tiny-rob@1" "$T/out-rob16" 2>&1) && pass export_bf16 || fail export_bf16 "$out"
msg=$($PY - "$T/out-rob" "$T/out-rob16" <<'EOF'
import json, struct, sys, torch
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n]); h.pop("__metadata__")
    data = raw[8 + n:]
    out = {}
    for k, v in h.items():
        a, b = v["data_offsets"]
        dt = {"F32": torch.float32, "BF16": torch.bfloat16}[v["dtype"]]
        out[k] = (v["dtype"], torch.frombuffer(bytearray(data[a:b]), dtype=dt).reshape(v["shape"]))
    return out
f32, b16 = tensors(sys.argv[1] + "/model.safetensors"), tensors(sys.argv[2] + "/model.safetensors")
problems = []
if sorted(f32) != sorted(b16): problems.append("tensor names differ")
for k in sorted(set(f32) & set(b16)):
    (d32, x), (d16, y) = f32[k], b16[k]
    if d16 != "BF16" or y.dtype != torch.bfloat16: problems.append(f"{k}: {d16}, not BF16"); continue
    if not torch.equal(x.to(torch.bfloat16).view(torch.int16), y.view(torch.int16)): problems.append(f"{k}: not torch's bf16 rounding")
if json.load(open(sys.argv[2] + "/config.json")).get("torch_dtype") != "bfloat16": problems.append("config.json torch_dtype is not bfloat16")
if json.load(open(sys.argv[1] + "/config.json")).get("torch_dtype") != "float32": problems.append("the F32 export's torch_dtype is not float32")
print("; ".join(problems[:3]) or "ok")   # a crash prints nothing: a failure
EOF
)
[ "$msg" = ok ] && pass export_bf16_is_torch_rounding || fail export_bf16_is_torch_rounding "${msg:-the check crashed}"
# The rounding on the values where torch's differs from the AVX512-BF16 instruction's and
# at the edges: subnormals (rounded, not flushed to zero), ±0, the largest float and the
# values that round up to infinity, ties, random bit patterns (every finite exponent) and
# random normals: the word embeddings of an imported folder hold them, and the BF16 export
# is torch's .to(torch.bfloat16) of the folder's F32 tensors, bit for bit. (Import refuses
# infinities and NaNs in weights, so their rounding is test_safetensors' bf16_torch_bits.)
$PY - "$T/rob" "$T/edge" <<'EOF'
import json, shutil, struct, sys
import numpy as np
src, out = sys.argv[1], sys.argv[2]
shutil.copytree(src, out)
raw = bytearray(open(src + "/model.safetensors", "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
a, b = h["roberta.embeddings.word_embeddings.weight"]["data_offsets"]
count = (b - a) // 4
edge = [0x00000000, 0x80000000, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0xff7f8000, 0x7f7f7fff, 0x7f7f8001, 0x00000001, 0x80000001,
        0x007fffff, 0x807fffff, 0x00008000, 0x00018000, 0x00007fff, 0x00008001, 0x00800000, 0x3f808000,
        0x3f818000, 0x3f807fff]
edge += [int(x) for x in np.array([1e-39, -3e-39, 1e-45, -1e-40, 5.9e-39, 1.1754942e-38], dtype=np.float32).view(np.uint32)]
rng = np.random.default_rng(7)
bits = rng.integers(0, 2**32, size=count // 2, dtype=np.uint64).astype(np.uint32)
bits[(bits & 0x7f800000) == 0x7f800000] ^= 0x00800000   # an infinity or NaN pattern made finite (exponent 254)
normals = (rng.standard_normal(count - len(edge) - len(bits)).astype(np.float32)).view(np.uint32)
w = np.concatenate([np.array(edge, dtype=np.uint32), bits, normals])
raw[8 + n + a:8 + n + b] = w.astype("<u4").tobytes()
open(out + "/model.safetensors", "wb").write(raw)
EOF
out=$("$M" import --db "$DB" "$T/edge" edge 2>&1) && out=$("$M" export --db "$DB" --dtype bf16 edge "$T/out-edge16" 2>&1) ||
  fail export_bf16_edge_values "$out"
msg=$($PY - "$T/edge" "$T/out-edge16" <<'EOF'
import json, struct, sys, torch
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n]); h.pop("__metadata__", None)
    dt = {"F32": torch.float32, "BF16": torch.bfloat16}
    return {k: torch.frombuffer(bytearray(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]),
                                dtype=dt[v["dtype"]]) for k, v in h.items()}
f32, b16 = tensors(sys.argv[1] + "/model.safetensors"), tensors(sys.argv[2] + "/model.safetensors")
k = "roberta.embeddings.word_embeddings.weight"
x, y = f32[k], b16[k]
want, got = x.to(torch.bfloat16).view(torch.int16).int() & 0xffff, y.view(torch.int16).int() & 0xffff
nan = torch.isnan(x)
problems = []
if y.dtype != torch.bfloat16 or y.numel() != x.numel(): problems.append(f"{k}: not BF16 of {x.numel()} values")
else:
    bad = (~nan & (want != got)).nonzero().flatten()
    for i in bad[:3].tolist():
        problems.append(f"{x[i].item()!r} (0x{x[i:i+1].view(torch.int32).item() & 0xffffffff:08x}): torch 0x{want[i].item():04x}, maskd 0x{got[i].item():04x}")
    if len(bad) > 3: problems.append(f"{len(bad)} values in all")
    quiet = torch.isnan(y.float()) & (got & 0x40 != 0)
    if not bool(quiet[nan].all()): problems.append(f"{int((~quiet[nan]).sum())} NaNs not quiet NaNs")
    if int(nan.sum()) or int((x.abs() < 1.1754944e-38).sum()) < 10: problems.append("NaNs stored, or too few subnormals tried")
print("; ".join(problems) or "ok")   # a crash prints nothing: a failure
EOF
)
[ "$msg" = ok ] && pass export_bf16_edge_values || fail export_bf16_edge_values "${msg:-the check crashed}"
if $PY $R run --job "$T/out-rob16" "$T/cases.json" "$T/exp-rob16.jsonl" 2> "$T/ref16.err"; then
  $PY $R check --model-dir "$T/out-rob16" --cases "$T/cases.json" --expected "$T/exp-rob16.jsonl" --maskd "$M" --prefix "export_torch_hf_rob_bf16_"
else fail export_torch_hf_bf16 "the reference cannot read the BF16 folder: $(tail -1 "$T/ref16.err")"; fi
answers "$T/rob16.dir.txt" --model-dir "$T/out-rob16"
out=$("$M" import --db "$DB" "$T/out-rob16" "tiny-rob16" 2>&1) || fail export_import_bf16 "$out"
answers "$T/rob16.store.txt" --db "$DB" --model "tiny-rob16"
same_answers "export_import_bf16 (store answers = BF16 folder answers)" "$T/rob16.dir.txt" "$T/rob16.store.txt"

# What transformers' loaders look at: the weights and config of an export, and the side
# files maskd generates for a revision it trained (an import's own go back out as they came).
"$M" prepare --tokenizer "$T/tok.json" --input "$T/train.txt" --split train --seq-len 32 --out "$T/shards" --quiet \
  > "$T/trained.log" 2>&1 &&
  "$M" train --db "$DB" --name trained --tokenizer "$T/tok.json" --train "$T/shards" --config tiny --max-steps 1 --batch 4 \
    --quiet >> "$T/trained.log" 2>&1 &&
  "$M" export --db "$DB" trained "$T/out-trained" >> "$T/trained.log" 2>&1 || fail export_trained "$(tail -2 "$T/trained.log")"
msg=$($PY - "$T/out-rob" "$T/out-trained" <<'EOF'
import json, struct, sys
d, g = sys.argv[1], sys.argv[2]
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
problems = []
if h.get("__metadata__", {}).get("format") != "pt": problems.append("safetensors __metadata__.format is not pt")
if "lm_head.bias" not in h or "roberta.embeddings.word_embeddings.weight" not in h: problems.append("HF tensor names missing")
if any(v["dtype"] != "F32" for k, v in h.items() if k != "__metadata__"): problems.append("not all F32")
c = json.load(open(d + "/config.json"))
if c.get("architectures") != ["RobertaForMaskedLM"] or c.get("model_type") != "roberta": problems.append("config architectures/model_type")
tc = json.load(open(g + "/tokenizer_config.json"))
if tc.get("tokenizer_class") != "AlbertTokenizer": problems.append("tokenizer_class")
if tc.get("clean_up_tokenization_spaces") is not True: problems.append("clean_up_tokenization_spaces")
# transformers writes the model's input size (512 for roberta-base: 514 positions less
# pad_token_id + 1) and truncation=True cuts to it; int(1e30) means "no limit".
gc = json.load(open(g + "/config.json"))
want = gc["max_position_embeddings"] - (gc["pad_token_id"] + 1 if gc["model_type"] == "roberta" else 0)
if tc.get("model_max_length") != want: problems.append("model_max_length %r, not the model's %d tokens" % (tc.get("model_max_length"), want))
if (tc.get("do_lower_case"), tc.get("remove_space"), tc.get("keep_accents")) != (False, False, True): problems.append("AlbertTokenizer text options not no-ops")
mt = tc.get("mask_token")
if (mt.get("content") if isinstance(mt, dict) else mt) != "[MASK]" or tc["added_tokens_decoder"]["4"]["lstrip"] is not True: problems.append("mask token")
sm = json.load(open(g + "/special_tokens_map.json"))
mt = sm.get("mask_token")
if not isinstance(mt, dict) or mt.get("content") != "[MASK]" or mt.get("lstrip") is not True: problems.append("special_tokens_map mask_token")
if sm.get("pad_token") != "<pad>" or sm.get("cls_token") != "[CLS]" or sm.get("sep_token") != "[SEP]": problems.append("special_tokens_map roles")
t = json.load(open(g + "/tokenizer.json"))
if t["model"]["type"] != "Unigram" or t["model"]["unk_id"] != 2: problems.append("tokenizer.json model")
print("; ".join(problems) or "ok")
EOF
)
[ "$msg" = ok ] && pass export_hf_layout || fail export_hf_layout "${msg:-the check crashed}"
# An import's own tokenizer_config.json and special_tokens_map.json go back out as they came.
if cmp -s "$T/rob/tokenizer_config.json" "$T/out-rob/tokenizer_config.json" && cmp -s "$T/rob/special_tokens_map.json" "$T/out-rob/special_tokens_map.json"; then
  pass export_keeps_imported_side_files
else
  fail export_keeps_imported_side_files "$(diff "$T/rob/tokenizer_config.json" "$T/out-rob/tokenizer_config.json" | head -5)"
fi

# Revisions: a second import is revision 2; @1, @2 and a commit prefix resolve.
"$M" import --db "$DB" "$T/bert" "tiny-rob" > "$T/imp2.txt" 2>&1
commit=$(sed -n 's/.*@\([0-9a-f]*\) (revision 2).*/\1/p' "$T/imp2.txt")
answers "$T/r1.txt" --db "$DB" --model "tiny-rob@1"
answers "$T/r2.txt" --db "$DB" --model "tiny-rob@${commit:0:8}"
answers "$T/rmain.txt" --db "$DB" --model "tiny-rob"
same_answers export_revision_1 "$T/rob.dir.txt" "$T/r1.txt"
same_answers export_revision_commit "$T/bert.dir.txt" "$T/r2.txt"
same_answers export_revision_main_is_newest "$T/bert.dir.txt" "$T/rmain.txt"

# Refusals, each with a message naming the problem.
refuse() {  # name, expected text, command...
  local name=$1 want=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out"; then pass "$name"; else fail "$name" "exit $rc, output: $(head -c 300 <<<"$out")"; fi
}
mkdir -p "$T/bpe"; cp "$T/rob/config.json" "$T/rob/model.safetensors" "$T/bpe/"
echo '{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"vocab":{"a":0},"merges":[]}}' > "$T/bpe/tokenizer.json"
refuse export_refuse_bpe "model BPE without the ByteLevel pre-tokenizer is not supported" "$M" import --db "$DB" "$T/bpe" bpe
mkdir -p "$T/nowt"; cp "$T/rob/config.json" "$T/rob/tokenizer.json" "$T/nowt/"
refuse export_refuse_missing_weights "model.safetensors: missing" "$M" import --db "$DB" "$T/nowt" nowt
# clean_up_tokenization_spaces false is kept with the model: fill-mask from the store answers as the folder does.
out=$("$M" import --db "$DB" "$T/noclean" noclean 2>&1) || fail export_import_clean_up_false "$out"
answers "$T/noclean.dir.txt" --model-dir "$T/noclean"
answers "$T/noclean.store.txt" --db "$DB" --model noclean
same_answers "export_import_clean_up_false (store answers = folder answers)" "$T/noclean.dir.txt" "$T/noclean.store.txt"
cp -r "$T/rob" "$T/othermask"
sed -i 's/"mask_token": {/"mask_token": {"x": 1, /; s/"content": "\[MASK\]"/"content": "<mask>"/' "$T/othermask/special_tokens_map.json"
refuse export_refuse_other_mask "the tokenizer has no mask token (<mask>)" "$M" import --db "$DB" "$T/othermask" othermask
cp -r "$T/rob" "$T/badshape"
$PY - "$T/badshape/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["intermediate_size"] = 48; json.dump(c, open(sys.argv[1], "w"))
EOF
refuse export_refuse_shape_mismatch "intermediate.dense.weight" "$M" import --db "$DB" "$T/badshape" badshape
refuse export_refuse_unknown_model "nosuch" "$M" export --db "$DB" nosuch "$T/x"
refuse export_refuse_unknown_revision 'has no revision "9"' "$M" export --db "$DB" "tiny-rob@9" "$T/x"
refuse export_refuse_existing "exists (use --force to overwrite)" "$M" export --db "$DB" tiny-rob@1 "$T/out-rob"
out=$("$M" export --db "$DB" --force tiny-rob@1 "$T/out-rob" 2>&1) && pass export_force || fail export_force "$out"
# A full disk (a file-size limit: the write fails with EFBIG) leaves the folder exactly as it
# was and no temporary beside its files; the same export without the limit replaces them all.
sums() { (cd "$1" && cksum $(ls -A | sort)); }
before=$(sums "$T/out-rob")
out=$(ulimit -f 64; "$M" export --db "$DB" --force tiny-rob "$T/out-rob" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'File too large' <<<"$out" && [ "$(sums "$T/out-rob")" = "$before" ] && [ -z "$(ls -A "$T/out-rob" | grep tmp-)" ] &&
  pass export_full_disk_keeps_folder || fail export_full_disk_keeps_folder "exit $rc: $out; $(ls -A "$T/out-rob")"
out=$(ulimit -f 64; "$M" export --db "$DB" tiny-rob "$T/fresh" 2>&1); rc=$?
[ $rc = 1 ] && [ ! -e "$T/fresh" ] && pass export_full_disk_no_folder || fail export_full_disk_no_folder "exit $rc: $out; $(ls -A "$T/fresh" 2>&1)"
# ... nor the parents it made for it.
out=$(ulimit -f 64; "$M" export --db "$DB" tiny-rob "$T/n1/n2/n3" 2>&1); rc=$?
[ $rc = 1 ] && grep -q 'File too large' <<<"$out" && [ ! -e "$T/n1" ] && pass export_full_disk_no_parents ||
  fail export_full_disk_no_parents "exit $rc: $out; $(find "$T/n1" 2>&1)"
# A directory where one of the files goes (which no rename replaces) is refused before
# anything is written: the other files are not replaced, no temporary is left.
cp -a "$T/out-rob" "$T/out-dir"; rm "$T/out-dir/tokenizer.json"; mkdir -p "$T/out-dir/tokenizer.json/keep"
files_sums() { (cd "$1" && find . -type f | sort | xargs cksum); }
before_dir=$(files_sums "$T/out-dir")
out=$("$M" export --db "$DB" --force tiny-rob "$T/out-dir" 2>&1); rc=$?
[ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF "out-dir/tokenizer.json is a directory, not a file: nothing was written" <<<"$out" &&
  [ "$(files_sums "$T/out-dir")" = "$before_dir" ] && [ -z "$(ls -A "$T/out-dir" | grep tmp-)" ] &&
  pass export_force_keeps_folder_with_directory || fail export_force_keeps_folder_with_directory "exit $rc: $out; $(ls -A "$T/out-dir")"
out=$("$M" export --db "$DB" --force tiny-rob "$T/out-rob" 2>&1) || fail export_force_replaces "$out"
answers "$T/replaced.txt" --model-dir "$T/out-rob"
[ "$(sums "$T/out-rob")" != "$before" ] && [ -z "$(ls -A "$T/out-rob" | grep tmp-)" ] && same export_force_replaces "$T/bert.dir.txt" "$T/replaced.txt" ||
  fail export_force_replaces "the folder did not change"
# A stop signal while the files are written (SIGTERM, SIGINT, SIGHUP): the export ends with
# one line and 128 + the signal, and DIR is as it was: a folder it made is gone, an existing
# one keeps its files and holds no temporary (a new one's parents it made go too). The weights are made big (an 800000-row
# embedding, 100 MB in F32) so that writing them lasts a few hundred ms: the signal is sent
# once their temporary is there. An export that was done before the signal came is tried
# again (3 tries). A stop signal ignored at the start (nohup) stays ignored.
$PY - "$T/rob" "$T/big" 800000 <<'EOF'
import json, shutil, struct, sys
import numpy as np
src, out, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
shutil.copytree(src, out)
raw = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); meta = h.pop("__metadata__")
rng, tensors = np.random.default_rng(1), {}
for k, v in h.items():
    a, b = v["data_offsets"]
    x = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(v["shape"])
    if k in ("roberta.embeddings.word_embeddings.weight", "lm_head.bias"):   # the vocabulary's rows
        x = np.concatenate([x, rng.standard_normal((rows - x.shape[0],) + x.shape[1:], dtype=np.float32) * 0.3])
    tensors[k] = x
hdr, off = {"__metadata__": meta}, 0
for k, x in tensors.items():
    hdr[k] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [off, off + x.nbytes]}; off += x.nbytes
hb = json.dumps(hdr).encode(); hb += b" " * (-len(hb) % 8)
with open(out + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb)
    for x in tensors.values(): f.write(x.tobytes())
c = json.load(open(out + "/config.json")); c["vocab_size"] = rows; json.dump(c, open(out + "/config.json", "w"))
EOF
out=$("$M" import --db "$T/big.db" "$T/big" big 2>&1) || fail export_stop_setup "$(tail -1 <<<"$out")"
rm -rf "$T/big"
# stop_export SIGNAL DIR [TEMPLATE]: DIR made afresh (a copy of TEMPLATE, or absent with
# its parents under $T), then
# `export --force big DIR` with SIGNAL sent once the weights' temporary is in DIR; sets rc and
# out (its output). env gives SIGINT back its default: a script's background job ignores it.
stop_export() {
  local sig=$1 dir=$2 tmpl=${3:-} p top=${2#"$T"/}
  top=${top%%/*}   # DIR's outermost folder under $T
  for _ in 1 2 3; do
    if [ -z "$tmpl" ]; then rm -rf "$T/${top:?}"; else rm -rf "$dir"; cp -a "$tmpl" "$dir"; fi
    env --default-signal=INT,TERM,HUP "$M" export --db "$T/big.db" --force big "$dir" > "$T/stop.out" 2>&1 & p=$!
    until compgen -G "$dir/.model.safetensors.tmp-*" > /dev/null || ! kill -0 $p 2> /dev/null; do sleep 0.01; done
    kill -s "$sig" $p 2> /dev/null
    { wait $p; } 2> /dev/null; rc=$?   # without the shell's "Hangup" line
    out=$(cat "$T/stop.out")
    [ $rc = 0 ] || return 0   # 0: the files were in place before the signal came
  done
}
stopped() {  # signal, exit status: the last stop_export ended so, with one line naming it
  [ $rc = "$2" ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "^maskd export: stopped by $1" <<<"$out"
}
stop_export TERM "$T/stop-new/a/b"
stopped SIGTERM 143 && [ ! -e "$T/stop-new" ] && pass export_stop_sigterm_no_folder ||
  fail export_stop_sigterm_no_folder "exit $rc: $out; $(find "$T/stop-new" 2>&1)"
cp -a "$T/out-rob" "$T/stop-kept"
before=$(sums "$T/stop-kept")
stop_export INT "$T/stop-old" "$T/stop-kept"
stopped SIGINT 130 && [ "$(sums "$T/stop-old")" = "$before" ] && [ -z "$(ls -A "$T/stop-old" | grep tmp-)" ] &&
  pass export_stop_sigint_keeps_folder || fail export_stop_sigint_keeps_folder "exit $rc: $out; $(ls -A "$T/stop-old")"
mkdir -p "$T/stop-empty"
stop_export HUP "$T/stop-hup" "$T/stop-empty"
stopped SIGHUP 129 && [ -d "$T/stop-hup" ] && [ -z "$(ls -A "$T/stop-hup")" ] &&
  pass export_stop_sighup_keeps_empty_folder || fail export_stop_sighup_keeps_empty_folder "exit $rc: $out; $(ls -A "$T/stop-hup" 2>&1)"
env --ignore-signal=HUP "$M" export --db "$T/big.db" big "$T/stop-nohup" > "$T/stop.out" 2>&1 & p=$!
until compgen -G "$T/stop-nohup/.model.safetensors.tmp-*" > /dev/null || ! kill -0 $p 2> /dev/null; do sleep 0.01; done
kill -HUP $p 2> /dev/null; { wait $p; } 2> /dev/null; rc=$?
[ $rc = 0 ] && [ "$(ls "$T/stop-nohup" | wc -l)" = 5 ] && pass export_stop_ignored_sighup_goes_on ||
  fail export_stop_ignored_sighup_goes_on "exit $rc: $(cat "$T/stop.out"); $(ls -A "$T/stop-nohup" 2>&1)"
# Import reads the folder's JSON side files only when they are regular files of sane size.
cp -r "$T/rob" "$T/fifoside"; rm "$T/fifoside/tokenizer_config.json"; mkfifo "$T/fifoside/tokenizer_config.json"
refuse export_import_refuses_fifo "FIFO, not a regular file" timeout 20 "$M" import --db "$DB" "$T/fifoside" fifoside
refuse import_refuses_missing_folder "maskd import: $T/nofolder: No such file or directory" "$M" import --db "$T/none.db" "$T/nofolder" x
refuse import_refuses_file_as_folder "maskd import: $T/rob/config.json: not a directory" "$M" import --db "$T/none.db" "$T/rob/config.json" x
refuse export_refuse_no_store "no store at" "$M" export --db "$T/none.db" tiny-rob "$T/y"
refuse export_refuse_fillmask_no_store "no store at" "$M" fill-mask --db "$T/none.db" --model tiny-rob "[MASK]"
refuse export_refuse_fillmask_unknown_model "nosuch" "$M" fill-mask --db "$DB" --model nosuch "[MASK]"
n=$(ls "$T"/none.db* 2>/dev/null | wc -l)
[ "$n" = 0 ] && pass export_no_store_created || fail export_no_store_created "a refused command created $n store files"
