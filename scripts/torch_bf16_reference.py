"""Writes PyTorch reference dumps of the bf16 model for maskd's parity test (issue 15).

usage: /usr/bin/python3 scripts/torch_bf16_reference.py OUTDIR [--check]

OUTDIR/roberta_bf16.safetensors and OUTDIR/bert_bf16.safetensors: the same tiny
models, weights, batch and tensors as scripts/torch_reference.py's dumps (see its
doc), with __metadata__ "precision": "bf16", computed by a model in which every
Linear layer (query, key, value, attention output, intermediate, output, the head's
dense and the tied decoder) is BF16Linear below, and the attention's two per-head
products are BF16Matmul, the arithmetic maskd's MODEL_BF16 claims (PyTorch
autocast's on a CPU with AVX512-BF16):

  forward  y  = bf16(x) bf16(W)^T + b       (inputs rounded to bfloat16, round to
                                             nearest even; products exact in float,
                                             float sums; the bias in float)
  backward dX = bf16(dY) bf16(W)
           dW = bf16(dY)^T bf16(x)
           db = sum of dY in float

  attention S = a bf16(Q) bf16(K)^T, C = bf16(P) bf16(V), each gradient likewise
                                            from bf16-rounded factors (a = 1/sqrt(d)
                                            applied to the float sum, as maskd's
                                            product applies its alpha)

Everything else (embeddings, LayerNorm, softmax, GELU, the loss, AdamW) stays
float32. The model is written out as
functions over TorchMLM's parameters (scripts/torch_mlm.py, torch's own modules),
and with F.linear in place of BF16Linear it must give TorchMLM's own logits
(checked on every run), so the bf16 model differs from the float one in the
rounding alone.

--check also prints how far the bf16 model is from the float32 one (logits, loss,
gradients), the size of what bf16 changes, against which the parity test's
tolerances are small.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlm import IGNORE, TorchMLM, linear_schedule  # noqa: E402
from torch_reference import B, STEPS, T, make_batch, perturb, tiny_config, write_safetensors  # noqa: E402


def bf16(t):
    """t rounded to bfloat16 (round to nearest even) and back to float32."""
    return t.bfloat16().float()


class BF16Linear(torch.autograd.Function):
    """A Linear layer whose three products take bfloat16 inputs (module doc)."""

    @staticmethod
    def forward(ctx, x, w, b):
        xb, wb = bf16(x), bf16(w)
        ctx.save_for_backward(xb, wb)
        return F.linear(xb, wb, b)

    @staticmethod
    def backward(ctx, dy):
        xb, wb = ctx.saved_tensors
        dyb = bf16(dy)
        out_f, in_f = wb.shape
        dx = dyb @ wb
        dw = dyb.reshape(-1, out_f).t() @ xb.reshape(-1, in_f)
        db = dy.reshape(-1, out_f).sum(0)
        return dx, dw, db


def linear_bf16(x, w, b):
    return BF16Linear.apply(x, w, b)


class BF16Matmul(torch.autograd.Function):
    """alpha (A B) for the attention's batched per-head products, both factors and
    the incoming gradient rounded to bfloat16 (module doc)."""

    @staticmethod
    def forward(ctx, a, b, alpha):
        ab, bb = bf16(a), bf16(b)
        ctx.save_for_backward(ab, bb)
        ctx.alpha = alpha
        return alpha * (ab @ bb)

    @staticmethod
    def backward(ctx, g):
        ab, bb = ctx.saved_tensors
        gb = bf16(g)
        return ctx.alpha * (gb @ bb.transpose(-1, -2)), ctx.alpha * (ab.transpose(-1, -2) @ gb), None


def matmul_bf16(a, b, alpha=1.0):
    return BF16Matmul.apply(a, b, alpha)


def matmul_float(a, b, alpha=1.0):
    return (a @ b) * alpha if alpha != 1.0 else a @ b


def forward(model, ids, am, labels, lin):
    """TorchMLM's forward as functions of its parameters, every Linear being lin(x, w, b)
    and the attention's products BF16Matmul when lin is linear_bf16.
    Returns (mean loss over labelled positions, logits (B, T, V))."""
    mm = matmul_bf16 if lin is linear_bf16 else matmul_float
    c = model.cfg
    H, nh = c.hidden_size, c.num_attention_heads
    d = H // nh
    x = (model.word_embeddings(ids) + model.position_embeddings(model.position_ids(ids))
         + model.token_type_embeddings(torch.zeros_like(ids)))
    x = model.emb_norm(x)
    masked = (am == 0)[:, None, None, :]
    for L in model.layers:
        W, bias = L.self_attn.in_proj_weight, L.self_attn.in_proj_bias

        def heads(t):
            return t.reshape(t.shape[0], t.shape[1], nh, d).transpose(1, 2)
        q = heads(lin(x, W[:H], bias[:H]))
        k = heads(lin(x, W[H:2 * H], bias[H:2 * H]))
        v = heads(lin(x, W[2 * H:], bias[2 * H:]))
        scores = mm(q, k.transpose(-1, -2), 1.0 / math.sqrt(d)) if mm is matmul_bf16 else \
            (q @ k.transpose(-1, -2)) / math.sqrt(d)
        p = torch.softmax(scores.masked_fill(masked, float("-inf")), dim=-1)
        ctx = mm(p, v).transpose(1, 2).reshape(x.shape)
        x = L.norm1(x + lin(ctx, L.self_attn.out_proj.weight, L.self_attn.out_proj.bias))
        f = lin(F.gelu(lin(x, L.linear1.weight, L.linear1.bias)), L.linear2.weight, L.linear2.bias)
        x = L.norm2(x + f)
    h = model.head_norm(F.gelu(lin(x, model.head_dense.weight, model.head_dense.bias)))
    logits = lin(h, model.word_embeddings.weight, model.head_bias)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)
    return loss, logits


def build(model_type):
    """torch_reference.py's model and batch for this type (same seeds, same numbers)."""
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(20261122 + (0 if model_type == "roberta" else 1))
    cfg = tiny_config(model_type)
    model = TorchMLM(cfg)
    perturb(model, gen)
    ids, am, labels = make_batch(cfg, gen)
    model.train()
    return cfg, model, ids, am, labels


def run(model_type, lin):
    """Forward/backward and 10 AdamW steps with every Linear being lin; a dict of results."""
    cfg, model, ids, am, labels = build(model_type)
    with torch.no_grad():
        ref_loss, ref_logits = model(ids, am, labels=labels)
        own_loss, own_logits = forward(model, ids, am, labels, F.linear)
        # The functions are TorchMLM: same logits with float Linear layers.
        assert (own_logits - ref_logits).abs().max().item() < 1e-5, "forward() is not TorchMLM's model"
    params0 = model.hf_state_dict()
    model.zero_grad()
    loss, logits = forward(model, ids, am, labels, lin)
    loss.backward()
    grads = model.hf_state_dict(grads=True)
    gnorm0 = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())).item()
    steps = dict(STEPS)
    steps["clip_norm"] = round(0.3 * gnorm0, 3)
    opt = torch.optim.AdamW(model.param_groups(steps["weight_decay"]), lr=steps["lr"],
                            betas=(steps["beta1"], steps["beta2"]), eps=steps["eps"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_schedule(steps["warmup_steps"], steps["total_steps"]))
    losses, norms = [], []
    for _ in range(steps["total_steps"]):
        opt.zero_grad()
        step_loss, _ = forward(model, ids, am, labels, lin)
        step_loss.backward()
        losses.append(step_loss.item())
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), steps["clip_norm"]).item())
        opt.step()
        sched.step()
    return dict(cfg=cfg, steps=steps, params=params0, ids=ids, am=am, labels=labels,
                logits=logits.detach().reshape(B * T, -1), loss=loss.item(), grads=grads, losses=losses, norms=norms)


def dump(r, path):
    tensors = list(r["params"].items())
    i32 = torch.int32
    tensors += [("input_ids", r["ids"].to(i32)), ("attention_mask", r["am"].to(i32)),
                ("labels", r["labels"].to(i32)), ("logits", r["logits"]),
                ("loss", torch.tensor([r["loss"]], dtype=torch.float32))]
    tensors += [("grad." + k, v) for k, v in r["grads"].items()]
    tensors += [("adamw_losses", torch.tensor(r["losses"], dtype=torch.float32)),
                ("adamw_grad_norms", torch.tensor(r["norms"], dtype=torch.float32))]
    meta = {"format": "pt", "precision": "bf16", "config": json.dumps(r["cfg"], indent=2),
            "steps_config": json.dumps(r["steps"])}
    write_safetensors(path, tensors, meta)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for mt in ("roberta", "bert"):
        r = run(mt, linear_bf16)
        path = os.path.join(out, mt + "_bf16.safetensors")
        dump(r, path)
        print(f"{path}: loss {r['loss']:.6f}, losses {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}")
        if "--check" in argv[2:]:
            f = run(mt, F.linear)
            lmax = f["logits"].abs().max().item()
            d_logits = (r["logits"] - f["logits"]).abs().max().item() / lmax
            d_grads = max(((r["grads"][k] - f["grads"][k]).abs().max() / f["grads"][k].abs().max().clamp_min(1e-30)).item()
                          for k in r["grads"] if "key.bias" not in k)
            print(f"  bf16 vs float32: logits {d_logits:.2e} of the largest, loss {abs(r['loss'] - f['loss']):.2e}, "
                  f"gradients up to {d_grads:.2e} of the tensor's largest, 10th loss {r['losses'][-1]:.5f} vs {f['losses'][-1]:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
