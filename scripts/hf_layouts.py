#!/usr/bin/python3
"""Rewrites a model folder's weights into the layouts the Hugging Face Hub ships, to
test `maskd import` (tests/cli/test_import_hf.sh). Runs on /usr/bin/python3 with torch.

  hf_layouts.py round DIR
        rounds DIR/model.safetensors (F32) in place to values exact in both F16 and BF16
        (through bf16, then f16), so every layout below holds the same numbers.
  hf_layouts.py make SRC OUT KIND
        OUT: SRC's config and tokenizer files, SRC's weights in layout KIND:
        f16, bf16             model.safetensors in that dtype (+ a position_ids buffer, I64)
        sharded               3 F32 shards + model.safetensors.index.json
        legacy                LayerNorm gamma/beta names, the tied decoder weight and the
                              decoder bias duplicate present (as old checkpoints have them)
        pretraining           BertForPreTraining: + bert.pooler.*, cls.seq_relationship.*
        noprefix              a base model saved alone: no "bert."/"roberta." prefix, no MLM
                              head, a pooler; architectures *Model
        nohead                *ForMaskedLM config but no MLM-head tensors
        bin                   pytorch_model.bin (torch.save, zip format) with the tied
                              decoder weight and a pooler
        bin_f16               pytorch_model.bin in float16
        bin_sharded           2 pytorch_model-0000N-of-00002.bin + pytorch_model.bin.index.json
        bin_f64               pytorch_model.bin in float64 (DoubleStorage)
        bin_views_strided     pytorch_model.bin whose 2-D weights are non-contiguous views:
                              each the .t() of its transpose, the word embeddings a
                              transposed slice at offset 1 of a wider storage
        hf_cache              SRC's files as a Hugging Face cache holds them:
                              OUT/blobs/<sha256> and OUT/snapshots/abc/<file>, every
                              file (config, tokenizer files, model.safetensors) a symlink
                              to ../../blobs/<sha256>; the folder to read is
                              OUT/snapshots/abc
        shard_symlink         sharded, one shard a symlink to a file outside the folder
                              (absolute), followed as config.json is
        hostile layouts (each must be refused): shard_escape (the index names
        ../x.safetensors), shard_absolute (the index names /etc/passwd),
        shard_wrong (a tensor in another shard than the index says), bin_evil (a pickle
        calling os.system), bin_legacy (torch.save's pre-1.6 format), bin_deflate (a
        compressed zip entry), bin_views (200 entries viewing the word embeddings' storage),
        missing (a model tensor left out), unknown (an extra tensor), nan (element 123 of
        the word embeddings NaN, in model.safetensors), bin_inf (element 5 of the
        embeddings' LayerNorm weight +inf, in pytorch_model.bin)
        cls_default           a *ForSequenceClassification of 2 labels as save_pretrained
                              writes transformers' default: no id2label, no num_labels
  hf_layouts.py compare SRC EXPORTED [bf16]
        every tensor of EXPORTED/model.safetensors equals SRC's after transformers' name
        rules (the tied decoder weight dropped, the pooler and NSP head kept), or SRC's
        rounded to bfloat16 (torch's rounding) with bf16; exit 1 and one line on the
        first difference.
  hf_layouts.py batch
        runs the commands above, one a line on stdin (its arguments split on blanks), in
        one process (importing torch is most of one command's time); prints one line a
        command, in order: "ok OUTPUT" or "error WHY" (what the command alone would have
        printed, or exited with).
"""
import contextlib
import hashlib
import io
import json
import os
import shutil
import struct
import sys
import zipfile
from collections import OrderedDict

import numpy as np
import torch

SIDE = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
DT = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}
NP = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def write_st(path, tensors, meta=None):
    header = {"__metadata__": meta or {"format": "pt"}}
    blobs, off = [], 0
    for name, t in tensors:
        t = t.detach().contiguous()
        dt = DT[t.dtype]
        data = (t.view(torch.int16).numpy().astype("<i2") if dt == "BF16" else t.numpy().astype(NP[dt])).tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = OrderedDict()
    for k, v in header.items():
        a, b = v["data_offsets"]
        if v["dtype"] == "BF16":
            t = torch.frombuffer(bytearray(data[a:b]), dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(data[a:b], dtype=NP[v["dtype"]]).copy())
        out[k] = t.reshape(v["shape"])
    return out


def read_any(d):
    """A folder's raw state dict (safetensors, sharded, or pytorch_model.bin through torch)."""
    p = os.path.join(d, "model.safetensors")
    if os.path.exists(p):
        return read_st(p)
    for index, reader in (("model.safetensors.index.json", read_st),
                          ("pytorch_model.bin.index.json", lambda p: torch.load(p, map_location="cpu", weights_only=True))):
        p = os.path.join(d, index)
        if os.path.exists(p):
            out = OrderedDict()
            for shard in sorted(set(json.load(open(p))["weight_map"].values())):
                out.update(reader(os.path.join(d, shard)))
            return out
    return torch.load(os.path.join(d, "pytorch_model.bin"), map_location="cpu", weights_only=True)


def family(cfg):
    return cfg["model_type"]


def head_names(mt):
    return ("lm_head.",) if mt == "roberta" else ("cls.predictions.",)


def set_arch(out, arch):
    cfg = json.load(open(os.path.join(out, "config.json")))
    cfg["architectures"] = [arch]
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)


def make(src, out, kind):
    os.makedirs(out, exist_ok=True)
    for f in SIDE:
        if os.path.exists(os.path.join(src, f)):
            shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    mt = family(cfg)
    pre = "roberta." if mt == "roberta" else "bert."
    Fam = "Roberta" if mt == "roberta" else "Bert"
    sd = read_st(os.path.join(src, "model.safetensors"))
    H = cfg["hidden_size"]
    g = torch.Generator().manual_seed(7)
    pooler = OrderedDict([(pre + "pooler.dense.weight", torch.randn(H, H, generator=g)),
                          (pre + "pooler.dense.bias", torch.randn(H, generator=g))])
    pos = torch.arange(cfg["max_position_embeddings"], dtype=torch.int64).reshape(1, -1)
    word = sd[pre + "embeddings.word_embeddings.weight"]
    dec_w = "lm_head.decoder.weight" if mt == "roberta" else "cls.predictions.decoder.weight"
    bias = "lm_head.bias" if mt == "roberta" else "cls.predictions.bias"
    dec_b = "lm_head.decoder.bias" if mt == "roberta" else "cls.predictions.decoder.bias"
    W = os.path.join(out, "model.safetensors")
    if kind in ("f16", "bf16"):
        dt = torch.float16 if kind == "f16" else torch.bfloat16
        t = [(k, v.to(dt)) for k, v in sd.items()] + [(pre + "embeddings.position_ids", pos)]
        write_st(W, t)
    elif kind == "hf_cache":
        tmp = out.rstrip("/") + ".plain"
        os.makedirs(tmp, exist_ok=True)
        for f in SIDE + ("model.safetensors",):
            if os.path.exists(os.path.join(src, f)):
                shutil.copyfile(os.path.join(src, f), os.path.join(tmp, f))
        snap, blobs = os.path.join(out, "snapshots", "abc"), os.path.join(out, "blobs")
        os.makedirs(snap, exist_ok=True)
        os.makedirs(blobs, exist_ok=True)
        for f in sorted(os.listdir(tmp)):
            h = hashlib.sha256(open(os.path.join(tmp, f), "rb").read()).hexdigest()
            os.replace(os.path.join(tmp, f), os.path.join(blobs, h))
            os.symlink(os.path.join("..", "..", "blobs", h), os.path.join(snap, f))
        os.rmdir(tmp)
        for f in SIDE:   # make() copied them into OUT itself too: only the snapshot has them
            if os.path.exists(os.path.join(out, f)):
                os.remove(os.path.join(out, f))
    elif kind in ("sharded", "shard_escape", "shard_absolute", "shard_wrong", "shard_symlink"):
        items = list(sd.items())
        parts = [items[i::3] for i in range(3)]
        names = [f"model-0000{i + 1}-of-00003.safetensors" for i in range(3)]
        wmap = {}
        for i, (part, nm) in enumerate(zip(parts, names)):
            write_st(os.path.join(out, nm), part)
            for k, _ in part:
                wmap[k] = nm
        if kind == "shard_escape":
            os.rename(os.path.join(out, names[2]), os.path.join(os.path.dirname(out.rstrip("/")), names[2]))
            for k in list(wmap):
                if wmap[k] == names[2]:
                    wmap[k] = "../" + names[2]
        if kind == "shard_absolute":
            for k in list(wmap):
                if wmap[k] == names[2]:
                    wmap[k] = "/etc/passwd"
        if kind == "shard_wrong":
            k = parts[0][0][0]
            wmap[k] = names[1]
        if kind == "shard_symlink":
            outside = os.path.join(os.path.dirname(out.rstrip("/")), "outside.safetensors")
            os.rename(os.path.join(out, names[2]), outside)
            os.symlink(outside, os.path.join(out, names[2]))
        total = sum(v.numel() * 4 for v in sd.values())
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap},
                  open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)
    elif kind == "legacy":
        t = []
        for k, v in sd.items():
            if k.endswith("LayerNorm.weight"):
                k = k[:-len("weight")] + "gamma"
            elif k.endswith("LayerNorm.bias"):
                k = k[:-len("bias")] + "beta"
            t.append((k, v))
        t += [(dec_w, word.clone()), (dec_b, sd[bias].clone())]
        write_st(W, t)
    elif kind == "pretraining":
        assert mt == "bert"
        set_arch(out, "BertForPreTraining")
        nsp = [("cls.seq_relationship.weight", torch.randn(2, H, generator=g)),
               ("cls.seq_relationship.bias", torch.randn(2, generator=g))]
        write_st(W, list(sd.items()) + list(pooler.items()) + nsp)
    elif kind in ("noprefix", "nohead"):
        enc = [(k, v) for k, v in list(sd.items()) + list(pooler.items()) if k.startswith(pre)]
        if kind == "noprefix":
            set_arch(out, Fam + "Model")
            enc = [(k[len(pre):], v) for k, v in enc]
        write_st(W, enc)
    elif kind == "cls_default":
        cfg = json.load(open(os.path.join(out, "config.json")))
        for k in ("id2label", "label2id", "num_labels"):
            cfg.pop(k, None)
        cfg["architectures"] = [Fam + "ForSequenceClassification"]
        json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
        enc = [(k, v) for k, v in sd.items() if not k.startswith(head_names(mt))]
        if mt == "roberta":
            head = [("classifier.dense.weight", torch.randn(H, H, generator=g) * 0.1),
                    ("classifier.dense.bias", torch.randn(H, generator=g) * 0.1),
                    ("classifier.out_proj.weight", torch.randn(2, H, generator=g)),
                    ("classifier.out_proj.bias", torch.tensor([0.5, -0.5]))]
        else:
            head = list(pooler.items()) + [("classifier.weight", torch.randn(2, H, generator=g)),
                                           ("classifier.bias", torch.tensor([0.5, -0.5]))]
        write_st(W, enc + head)
    elif kind == "nan":
        word.view(-1)[123] = float("nan")
        write_st(W, list(sd.items()))
    elif kind == "bin_inf":
        sd[pre + "embeddings.LayerNorm.weight"][5] = float("inf")
        torch.save(OrderedDict(sd), os.path.join(out, "pytorch_model.bin"))
    elif kind == "missing":
        write_st(W, [(k, v) for k, v in sd.items() if not k.endswith("layer.1.output.dense.bias")])
    elif kind == "unknown":
        write_st(W, list(sd.items()) + [(pre + "encoder.layer.9.extra.weight", torch.zeros(2))])
    elif kind in ("bin", "bin_f16", "bin_legacy"):
        state = OrderedDict(sd)
        state[dec_w] = word   # shares the storage, as a tied model's state dict does
        state.update(pooler)
        state[pre + "embeddings.position_ids"] = pos   # a LongStorage, as transformers 4.0-4.30 saved it
        if kind == "bin_f16":
            state = OrderedDict((k, v.half() if v.is_floating_point() else v) for k, v in state.items())
        torch.save(state, os.path.join(out, "pytorch_model.bin"), _use_new_zipfile_serialization=kind != "bin_legacy")
    elif kind == "bin_f64":
        torch.save(OrderedDict((k, v.double()) for k, v in sd.items()), os.path.join(out, "pytorch_model.bin"))
    elif kind == "bin_views_strided":
        state = OrderedDict()
        for k, v in sd.items():
            if k == pre + "embeddings.word_embeddings.weight":
                wide = torch.zeros(v.shape[1], v.shape[0] + 1)
                wide[:, 1:] = v.t()
                v = wide[:, 1:].t()   # storage offset 1, strides (1, V + 1)
            elif v.dim() == 2:
                v = v.t().contiguous().t()
            state[k] = v
        assert not state[pre + "embeddings.word_embeddings.weight"].is_contiguous()
        torch.save(state, os.path.join(out, "pytorch_model.bin"))
    elif kind == "bin_sharded":
        items = list(sd.items()) + [(pre + "embeddings.position_ids", pos)]
        wmap = {}
        for i in range(2):
            nm = f"pytorch_model-0000{i + 1}-of-00002.bin"
            part = OrderedDict(items[i::2])
            torch.save(part, os.path.join(out, nm))
            wmap.update({k: nm for k in part})
        json.dump({"metadata": {"total_size": 0}, "weight_map": wmap},
                  open(os.path.join(out, "pytorch_model.bin.index.json"), "w"), indent=2)
    elif kind == "bin_views":
        # A small file asking for much memory: many entries viewing one storage.
        state = OrderedDict(sd)
        for i in range(200):
            state[f"{pre}x{i}"] = word
        torch.save(state, os.path.join(out, "pytorch_model.bin"))
    elif kind == "bin_evil":
        torch.save(OrderedDict(sd), os.path.join(out, "pytorch_model.bin"))
        evil = b"\x80\x02cos\nsystem\nq\x00X\x0b\x00\x00\x00touch /tmp/pwnedq\x01\x85q\x02Rq\x03."
        rewrite_zip(os.path.join(out, "pytorch_model.bin"), lambda name, data: evil if name.endswith("data.pkl") else data)
    elif kind == "bin_deflate":
        torch.save(OrderedDict(sd), os.path.join(out, "pytorch_model.bin"))
        rewrite_zip(os.path.join(out, "pytorch_model.bin"), None, zipfile.ZIP_DEFLATED)
    else:
        sys.exit(f"unknown layout {kind}")


def rewrite_zip(path, fn, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path) as z:
        entries = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, data in entries:
            z.writestr(name, fn(name, data) if fn else data)


def hf_rules(sd, mt):
    """transformers' loading of a *ForMaskedLM / *Model state dict, as names: gamma/beta,
    prefix, buffers, the tied decoder weight and the bias duplicate."""
    pre = "roberta." if mt == "roberta" else "bert."
    out = OrderedDict()
    for k, v in sd.items():
        if k.endswith(".gamma"):
            k = k[:-5] + "weight"
        if k.endswith(".beta"):
            k = k[:-4] + "bias"
        out[k] = v
    if not any(k.startswith(pre) for k in out):
        out = OrderedDict((pre + k, v) for k, v in out.items())
    for k in list(out):
        if k.endswith("position_ids") or k.endswith("embeddings.token_type_ids"):
            del out[k]
    for k in ("lm_head.decoder.weight", "cls.predictions.decoder.weight"):
        out.pop(k, None)
    for b, d in (("lm_head.bias", "lm_head.decoder.bias"), ("cls.predictions.bias", "cls.predictions.decoder.bias")):
        if d in out:
            v = out.pop(d)
            out.setdefault(b, v)
    return out


def compare(src, exported, bf16=False):
    mt = json.load(open(os.path.join(src, "config.json")))["model_type"]
    want = hf_rules(read_any(src), mt)
    got = read_st(os.path.join(exported, "model.safetensors"))
    if set(want) != set(got):
        sys.exit(f"tensor names differ: only in the source {sorted(set(want) - set(got))[:4]}, "
                 f"only in the export {sorted(set(got) - set(want))[:4]}")
    for k in want:
        a, b = want[k].float(), got[k].float()
        if bf16:
            a = a.to(torch.bfloat16).float()
        if a.shape != b.shape or not torch.equal(a, b):
            sys.exit(f"{k}: differs (shape {tuple(a.shape)} vs {tuple(b.shape)})")
    print(f"{len(want)} tensors equal")


def round_dir(d):
    p = os.path.join(d, "model.safetensors")
    sd = read_st(p)
    write_st(p, [(k, v.to(torch.bfloat16).float().to(torch.float16).float()) for k, v in sd.items()])


def command(a):
    if a[:1] == ["round"] and len(a) == 2:
        round_dir(a[1])
    elif a[:1] == ["make"] and len(a) == 4:
        make(a[1], a[2], a[3])
    elif a[:1] == ["compare"] and len(a) in (3, 4):
        compare(a[1], a[2], a[3:] == ["bf16"])
    else:
        sys.exit(__doc__)


def batch():
    for line in sys.stdin:
        a = line.split()
        if not a:
            continue
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                command(a)
            result = "ok " + out.getvalue()
        except SystemExit as e:   # a difference, an unknown layout: sys.exit(message)
            result = "ok " + out.getvalue() if e.code in (None, 0) else f"error {e.code}"
        except Exception as e:    # a broken folder: the command alone would have died with it
            result = f"error {type(e).__name__}: {e}"
        print(" ".join(result.split()), flush=True)


def main():
    a = sys.argv[1:]
    if a == ["batch"]:
        batch()
    else:
        command(a)


if __name__ == "__main__":
    main()
