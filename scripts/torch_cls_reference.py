"""Writes PyTorch reference dumps for maskd's sequence-classifier parity test (issue 16).

usage: /usr/bin/python3 scripts/torch_cls_reference.py OUTDIR [--check]

OUTDIR/roberta_cls.safetensors and OUTDIR/bert_cls.safetensors, each holding, for a
tiny RobertaForSequenceClassification / BertForSequenceClassification built by
scripts/torch_cls.py (torch's own modules, dropout 0, float32, fixed seed), in the
layout of scripts/torch_reference.py's masked-LM dumps:

  __metadata__  format "pt"; "config": the HF config.json text of the classifier
                (architectures, id2label {"0": name}, label2id, problem_type
                "single_label_classification", classifier_dropout: null for RoBERTa,
                0.0 for BERT); "steps_config": JSON {lr, weight_decay, warmup_steps,
                total_steps, clip_norm, beta1, beta2, eps, min_lr_ratio}
  <hf name>     every parameter (roberta.* + classifier.dense/out_proj; bert.* with
                bert.pooler.dense + classifier)
  input_ids, attention_mask, token_type_ids   I32 (B, T), padded to the longest row
  labels        I32 (B), a class id or -100
  logits        F32 (B, C), every row (the -100 row too)
  loss          F32 [1], mean cross-entropy over the rows whose label is not -100
  grad.<hf name> F32, d loss / d parameter
  adamw_losses  F32 [10], the loss before each of 10 AdamW steps on this batch
  adamw_grad_norms F32 [10], the global gradient norm (before clipping) at each step

What lets the comparison fail (each one a thing an implementation gets wrong):
  - 5 rows of 12, 7, 2, 9 and 5 real tokens: the batch is as wide as its longest row,
    the padding mask must be applied per row; the classifier reads each row's first
    token (position 0), never its last real one or a mean;
  - row 0 holds the pad id at an attended position (padding_idx: no word-embedding
    gradient; RoBERTa gives it position id pad);
  - row 3 has label -100: it takes no part in the loss, which is the mean over the
    other 4 rows (CrossEntropyLoss's ignore_index), but its logits are still dumped;
  - BERT's rows 0 and 1 have token type 1 on part of their tokens (a sentence pair);
  - the head: RoBERTa dense + tanh + out_proj, no pooler; BERT pooler (dense + tanh)
    then classifier; every head tensor gets a non-zero gradient;
  - weights N(0, 0.1), LayerNorm weights 1 + N(0, 0.2), biases N(0, 0.1), so logits
    are far from uniform and gradients informative;
  - AdamW as scripts/torch_reference.py: warm-up 3 of 10 steps (the first update has
    lr 0), linear decay, weight decay 0.1 only on non-LayerNorm non-bias tensors,
    clip_norm below the gradient norm so that clipping is active at every step.
With --check, the same run in float64 is compared with the float32 one and the largest
differences printed, to show the dumps are well-conditioned for the tolerances (1e-4
absolute / 1e-3 relative).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cls import TorchCls, classifier_config  # noqa: E402
from torch_mlm import IGNORE, linear_schedule  # noqa: E402
from torch_reference import STEPS, perturb, read_safetensors, tiny_config, write_safetensors  # noqa: E402

LABELS = ["negative", "neutral", "positive", "tr\u00e8s positif", "off_topic"]
LENGTHS = [12, 7, 2, 9, 5]          # real tokens per row; the batch width is the longest
ROW_LABELS = [3, 0, 4, IGNORE, 1]
B, T = len(LENGTHS), max(LENGTHS)


def cls_config(model_type):
    base = tiny_config(model_type)
    return classifier_config(base, LABELS, classifier_dropout=None if model_type == "roberta" else 0.0)


def make_batch(cfg, gen):
    pad = cfg["pad_token_id"]
    ids = torch.randint(3, cfg["vocab_size"], (B, T), generator=gen)
    am = torch.zeros(B, T, dtype=torch.int64)
    for b, n in enumerate(LENGTHS):
        am[b, :n] = 1
    ids[am == 0] = pad
    ids[0, 5] = pad  # the pad id at an attended position (see the module doc)
    tt = torch.zeros(B, T, dtype=torch.int64)
    if cfg["model_type"] == "bert":
        tt[0, 6:] = 1
        tt[1, 4:7] = 1
    labels = torch.tensor(ROW_LABELS, dtype=torch.int64)
    return ids, am, tt, labels


def run(model_type, dtype, clip_norm=None):
    """Builds, runs forward/backward and 10 AdamW steps; returns a dict of results."""
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(20261126 + (0 if model_type == "roberta" else 1))
    cfg = cls_config(model_type)
    model = TorchCls(cfg).to(dtype)
    perturb(model, gen)
    ids, am, tt, labels = make_batch(cfg, gen)
    model.train()  # dropout is 0: train mode changes nothing but is what training runs
    params0 = model.hf_state_dict()
    model.zero_grad()
    loss, logits = model(ids, am, tt, labels=labels)
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
        l, _ = model(ids, am, tt, labels=labels)
        l.backward()
        losses.append(l.item())
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), steps["clip_norm"]).item())
        opt.step()
        sched.step()
    return dict(cfg=cfg, steps=steps, params=params0, ids=ids, am=am, tt=tt, labels=labels,
                logits=logits.detach(), loss=loss.item(), grads=grads, losses=losses, norms=norms)


def dump(r, path):
    tensors = [(k, v) for k, v in r["params"].items()]
    i32 = torch.int32
    tensors += [("input_ids", r["ids"].to(i32)), ("attention_mask", r["am"].to(i32)),
                ("token_type_ids", r["tt"].to(i32)), ("labels", r["labels"].to(i32)),
                ("logits", r["logits"].float()), ("loss", torch.tensor([r["loss"]], dtype=torch.float32))]
    tensors += [("grad." + k, v) for k, v in r["grads"].items()]
    tensors += [("adamw_losses", torch.tensor(r["losses"], dtype=torch.float32)),
                ("adamw_grad_norms", torch.tensor(r["norms"], dtype=torch.float32))]
    # HF writes config.json as json.dumps(indent=2, sort_keys=True) (ASCII, \u escapes).
    meta = {"format": "pt", "config": json.dumps(r["cfg"], indent=2, sort_keys=True),
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
        path = os.path.join(out, mt + "_cls.safetensors")
        dump(r, path)
        print(f"{path}: loss {r['loss']:.6f}, losses {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}, "
              f"clip_norm {r['steps']['clip_norm']} (grad norms {min(r['norms']):.3f}..{max(r['norms']):.3f})")
        if check:
            meta, got = read_safetensors(path)
            c = json.loads(meta["config"])
            assert c["model_type"] == mt and c["id2label"]["3"] == LABELS[3], c
            assert got["logits"].shape == (B, len(LABELS)) and got["labels"].shape == (B,)
            r64 = run(mt, torch.float64, clip_norm=r["steps"]["clip_norm"])
            d_logits = (r["logits"].double() - r64["logits"]).abs().max().item()
            d_loss = abs(r["loss"] - r64["loss"])
            d_losses = max(abs(a - b) for a, b in zip(r["losses"], r64["losses"]))
            gmax = max(g.abs().max().item() for g in r64["grads"].values())
            # Gradients zero in exact arithmetic (the attention key bias) hold only rounding
            # noise; they are measured against the model's largest gradient.
            zero = [k for k in r["grads"] if r64["grads"][k].abs().max().item() < 1e-9 * gmax]
            d_grad = max(((r["grads"][k].double() - r64["grads"][k]).abs().max()
                          / (gmax if k in zero else r64["grads"][k].abs().max())).item() for k in r["grads"])
            d_grad_abs = max((r["grads"][k].double() - r64["grads"][k]).abs().max().item() for k in r["grads"])
            head = [k for k in r["grads"] if k.startswith("classifier") or "pooler" in k]
            head_ok = all(r64["grads"][k].abs().max().item() > 1e-3 * gmax for k in head)
            good = d_logits < 1e-5 and d_loss < 1e-5 and d_losses < 1e-5 and d_grad < 1e-4 and head_ok
            assert all(n > r["steps"]["clip_norm"] for n in r["norms"]), "clipping not active at every step"
            ok &= good
            print(f"  fp32 vs fp64: logits {d_logits:.1e}, loss {d_loss:.1e}, 10 losses {d_losses:.1e}, "
                  f"grads {d_grad_abs:.1e} abs, {d_grad:.1e} of the tensor's max; zero in exact arithmetic: "
                  f"{[z.split('.', 3)[-1] for z in zero] or 'none'}; largest gradient {gmax:.2f}; "
                  f"head gradients non-zero: {head_ok}; {len(got)} tensors read back; "
                  f"{'ok' if good else 'ILL-CONDITIONED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
