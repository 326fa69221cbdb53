"""Writes PyTorch reference dumps for maskd's parity tests.

usage: /usr/bin/python3 scripts/torch_reference.py OUTDIR [--check]

OUTDIR/roberta.safetensors and OUTDIR/bert.safetensors, each holding, for a tiny
model built by scripts/torch_mlm.py (torch's own modules, dropout 0, float32,
fixed seed):

  __metadata__  format "pt"; "config": the HF config.json text; "steps_config":
                JSON {lr, weight_decay, warmup_steps, total_steps, clip_norm,
                beta1, beta2, eps, min_lr_ratio}
  <hf name>     every parameter (HF state-dict names; the tied decoder weight is
                the word embeddings and is not stored separately)
  input_ids, attention_mask, labels      I32 (B, T); labels -100 where unlabelled
  logits        F32 (B*T, V), the head at every position (padding included)
  loss          F32 [1], mean cross-entropy over labelled positions
  grad.<hf name> F32, d loss / d parameter (word embeddings include the decoder's)
  adamw_losses  F32 [10], the loss before each of 10 AdamW steps on this batch
  adamw_grad_norms F32 [10], the global gradient norm (before clipping) at each step

What lets the comparison fail (each one a thing an implementation gets wrong):
  - row 0 is all real tokens but holds the pad id at an attended position: HF's
    nn.Embedding(padding_idx) gives that token's word-embedding lookup no gradient,
    and RoBERTa gives it position id pad (ids are counted on input_ids != pad);
  - row 1 ends with padding; row 2 has only 2 real tokens: the padding mask must be
    applied per row, and logits at padded positions are still computed (their
    queries attend to the real keys);
  - LayerNorm weights/biases and all biases are perturbed away from 1/0 so that
    their gradients are not trivially related;
  - weights are N(0, 0.1) (not 0.02) so logits are far from uniform;
  - AdamW: warm-up 3 of 10 steps (the first update has lr 0), linear decay, weight
    decay 0.1 only on non-LayerNorm non-bias tensors, clip_norm set below the
    gradient norm so that clipping is active at every step.
With --check, the same run in float64 is compared with the float32 one and the
largest differences printed, to show the dumps are well-conditioned for the
tolerances (1e-4 logits/loss/losses, 1e-3 relative gradients).
"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlm import IGNORE, TorchMLM, linear_schedule  # noqa: E402

B, T = 3, 12
STEPS = dict(lr=5e-3, weight_decay=0.1, warmup_steps=3, total_steps=10, clip_norm=None,
             beta1=0.9, beta2=0.999, eps=1e-8, min_lr_ratio=0.0)


def tiny_config(model_type):
    roberta = model_type == "roberta"
    c = dict(architectures=["RobertaForMaskedLM" if roberta else "BertForMaskedLM"],
             model_type=model_type, vocab_size=97, hidden_size=32, num_hidden_layers=2,
             num_attention_heads=4, intermediate_size=64, max_position_embeddings=40,
             type_vocab_size=1 if roberta else 2, pad_token_id=1 if roberta else 0,
             layer_norm_eps=1e-5 if roberta else 1e-12, hidden_act="gelu",
             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.1,
             position_embedding_type="absolute")
    if roberta:
        c.update(bos_token_id=0, eos_token_id=2)
    return c


def make_batch(cfg, gen):
    pad = cfg["pad_token_id"]
    V = cfg["vocab_size"]
    ids = torch.randint(3, V, (B, T), generator=gen)
    am = torch.ones(B, T, dtype=torch.int64)
    am[1, 7:] = 0   # 7 real tokens
    am[2, 2:] = 0   # only 2 real tokens
    ids[am == 0] = pad
    ids[0, 5] = pad  # the pad id at an attended position (see the module doc)
    labels = torch.full((B, T), IGNORE, dtype=torch.int64)
    for (b, t) in [(0, 1), (0, 4), (0, 8), (0, 11), (1, 0), (1, 3), (1, 6), (2, 1)]:
        labels[b, t] = int(torch.randint(0, V, (1,), generator=gen))
    labels[0, 8] = pad  # predicting the pad id is allowed (it is a vocabulary row)
    return ids, am, labels


def perturb(model, gen):
    """Random weights N(0, 0.1), pad rows zero, biases and LayerNorm away from 0/1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype) * 0.1)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype))
        pad = model.cfg.pad_token_id
        model.word_embeddings.weight[pad].zero_()
        if model.position_embeddings.padding_idx is not None:
            model.position_embeddings.weight[pad].zero_()


def run(model_type, dtype, clip_norm=None):
    """Builds, runs forward/backward and 10 AdamW steps; returns a dict of results."""
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(20261122 + (0 if model_type == "roberta" else 1))
    cfg = tiny_config(model_type)
    model = TorchMLM(cfg).to(dtype)
    perturb(model, gen)
    ids, am, labels = make_batch(cfg, gen)
    model.train()  # dropout is 0: train mode changes nothing but is what training runs
    params0 = model.hf_state_dict()
    model.zero_grad()
    loss, logits = model(ids, am, labels=labels)
    loss.backward()
    grads = model.hf_state_dict(grads=True)
    gnorm0 = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())).item()
    steps = dict(STEPS)
    steps["clip_norm"] = clip_norm if clip_norm is not None else round(0.3 * gnorm0, 3)
    opt = torch.optim.AdamW(model.param_groups(steps["weight_decay"]), lr=steps["lr"],
                            betas=(steps["beta1"], steps["beta2"]), eps=steps["eps"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_schedule(steps["warmup_steps"], steps["total_steps"]))
    losses, norms = [], []
    for _ in range(steps["total_steps"]):
        opt.zero_grad()
        l, _ = model(ids, am, labels=labels)
        l.backward()
        losses.append(l.item())
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), steps["clip_norm"]).item())
        opt.step()
        sched.step()
    return dict(cfg=cfg, steps=steps, params=params0, ids=ids, am=am, labels=labels,
                logits=logits.detach().reshape(B * T, -1), loss=loss.item(), grads=grads,
                losses=losses, norms=norms)


def write_safetensors(path, tensors, metadata):
    """tensors: [(name, torch tensor)] in order; F32/I32 little-endian, C order."""
    header = {"__metadata__": metadata}
    blobs, off = [], 0
    for name, t in tensors:
        t = t.detach().contiguous()
        if t.dtype == torch.float32:
            dt = "F32"
        elif t.dtype == torch.int32:
            dt = "I32"
        else:
            raise TypeError(f"{name}: dtype {t.dtype}")
        data = t.numpy().astype("<f4" if dt == "F32" else "<i4").tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """The reader used by --check, to prove the files are what we meant (F32, I32; BF16 widened to float32)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    data = raw[8 + n:]
    out, ends = {}, []
    for k, v in header.items():
        a, b = v["data_offsets"]
        ends.append((a, b))
        if v["dtype"] == "BF16":
            # bfloat16 is the upper half of a float32: widen exactly, as torch's .float() does.
            half = np.frombuffer(data[a:b], dtype="<u2").astype("<u4") << 16
            out[k] = half.view("<f4").reshape(v["shape"])
        else:
            out[k] = np.frombuffer(data[a:b], dtype="<f4" if v["dtype"] == "F32" else "<i4").reshape(v["shape"])
    ends.sort()
    assert ends[0][0] == 0 and ends[-1][1] == len(data)
    assert all(ends[i][1] == ends[i + 1][0] for i in range(len(ends) - 1))
    return meta, out


def dump(r, path):
    tensors = [(k, v) for k, v in r["params"].items()]
    i32 = torch.int32
    tensors += [("input_ids", r["ids"].to(i32)), ("attention_mask", r["am"].to(i32)),
                ("labels", r["labels"].to(i32)), ("logits", r["logits"]),
                ("loss", torch.tensor([r["loss"]], dtype=torch.float32))]
    tensors += [("grad." + k, v) for k, v in r["grads"].items()]
    tensors += [("adamw_losses", torch.tensor(r["losses"], dtype=torch.float32)),
                ("adamw_grad_norms", torch.tensor(r["norms"], dtype=torch.float32))]
    meta = {"format": "pt", "config": json.dumps(r["cfg"], indent=2),
            "steps_config": json.dumps(r["steps"])}
    write_safetensors(path, tensors, meta)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    out = argv[1]
    check = "--check" in argv[2:]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    ok = True
    for mt in ("roberta", "bert"):
        r = run(mt, torch.float32)
        path = os.path.join(out, mt + ".safetensors")
        dump(r, path)
        print(f"{path}: loss {r['loss']:.6f}, losses {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}, "
              f"clip_norm {r['steps']['clip_norm']} (grad norms {min(r['norms']):.3f}..{max(r['norms']):.3f})")
        if check:
            meta, got = read_safetensors(path)
            assert json.loads(meta["config"])["model_type"] == mt
            r64 = run(mt, torch.float64, clip_norm=r["steps"]["clip_norm"])
            d_logits = (r["logits"].double() - r64["logits"]).abs().max().item()
            d_loss = abs(r["loss"] - r64["loss"])
            d_losses = max(abs(a - b) for a, b in zip(r["losses"], r64["losses"]))
            gmax = max(g.abs().max().item() for g in r64["grads"].values())
            # Tensors whose gradient is zero in exact arithmetic (the attention key bias: softmax
            # ignores a constant added to every score of a query) hold only rounding noise; they
            # can only be compared absolutely, against the largest gradient of the model.
            zero = [k for k in r["grads"] if r64["grads"][k].abs().max().item() < 1e-9 * gmax]
            d_grad = max(((r["grads"][k].double() - r64["grads"][k]).abs().max()
                          / (gmax if k in zero else r64["grads"][k].abs().max())).item() for k in r["grads"])
            good = d_logits < 1e-5 and d_loss < 1e-5 and d_losses < 1e-5 and d_grad < 1e-4
            assert all(n > r["steps"]["clip_norm"] for n in r["norms"]), "clipping not active at every step"
            ok &= good
            print(f"  fp32 vs fp64: logits {d_logits:.1e}, loss {d_loss:.1e}, 10 losses {d_losses:.1e}, "
                  f"grads (rel. to max) {d_grad:.1e}; zero in exact arithmetic: {[z.split('.', 3)[-1] for z in zero] or 'none'} (max {max([r['grads'][z].abs().max().item() for z in zero] or [0]):.1e} in fp32); "
                  f"{len(got)} tensors read back; {'ok' if good else 'ILL-CONDITIONED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
