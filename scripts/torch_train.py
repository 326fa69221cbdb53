#!/usr/bin/python3
"""The PyTorch side of issue 4's end-to-end comparison: trains scripts/torch_mlm.py's
model (torch's own modules, checked against a hand-written HF model) on maskd's shards
with the run description of a `maskd train` run, and evaluates it the way maskd does.

usage: scripts/torch_train.py --run RUN.json [--key value ...] [--json OUT] [--quiet]
       scripts/torch_train.py --selftest      # collator proportions, schedule, dropout sites
       scripts/torch_train.py --tokenizer T --train DIR --validation DIR --config small [...]

--run takes the run description maskd stores with a run (runs.config in the store; the
keys of engine/train/run_config.h); flags with the same names (--lr, --batch, ...) override it.
What is the same as maskd, and what is the run's own:
  - the same shards (read with scripts/shards.py), tokenizer ids ([MASK], <pad>, the
    special ids from tokenizer.json's special added tokens), model config (a preset takes
    vocab_size and pad_token_id from the tokenizer, as maskd does; or a config.json);
  - HF init: N(0, initializer_range) for Linear and Embedding weights, zero biases,
    LayerNorm 1/0, padding rows 0 (TorchMLM.init_weights), from a torch Generator seeded
    with the run's seed (different numbers from maskd's: its own RNG);
  - dropout as HF: embeddings, attention probabilities, attention output, FFN output.
    nn.TransformerEncoderLayer has one more (between GELU and the FFN output dense),
    which HF's BertLayer and maskd do not: it is replaced by the identity;
  - DataCollatorForLanguageModeling re-implemented on torch tensors: 15% of non-special
    positions chosen by bernoulli, of those 80% [MASK], half the rest a random id in
    [0, vocab), the rest unchanged; labels -100 elsewhere; a fresh draw every batch from
    the run's own torch Generator;
  - an epoch = floor(N / batch) batches of a fresh random permutation (drop_last);
    grad_accum (times ranks, for a data-parallel run) micro-batches per step, the loss being the mean over all the step's
    labelled tokens (as maskd: each micro-batch's summed loss / the step's label count),
    smoothed by label_smoothing as torch's CrossEntropyLoss(label_smoothing=), in training
    and evaluation (HF Trainer's label_smoothing_factor, maskd's --label-smoothing);
  - precision: fp32 only. A bf16 run is refused: PyTorch 1.13's CPU autocast fails in
    LayerNorm on this model ("expected scalar type BFloat16 but found Float"); maskd's bf16
    is checked against scripts/torch_bf16_reference.py's rounding reference instead;
  - AdamW (torch.optim.AdamW) with no decay on LayerNorm weights and biases; learning
    rate warm-up from 0 over warmup_steps (-1: total // 20) then linear decay to
    min_lr_ratio * lr (create_optimizer's schedule, first update at lr 0); clipping of
    the global gradient norm when clip_norm > 0;
  - evaluation after every epoch on the whole validation set in order (eval_batches > 0:
    the first that many batches), dropout off, masks drawn from a Generator re-seeded
    with eval_seed each time: loss = mean cross-entropy over all labelled tokens,
    accuracy = argmax == label over them, perplexity = exp(loss).
Threads as given (2 by default), one inter-op thread, and the environment that made
torch fastest here (BENCHMARKS.md): OMP_WAIT_POLICY=PASSIVE, glibc malloc thresholds
high, OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed (the script re-executes itself
with it). Prints one line per epoch, like maskd's, and a JSON summary last (--json
writes it to a file too): per-epoch train loss, validation loss, accuracy, perplexity,
train / eval / wall seconds, steps.
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENV_MARK = "MASKD_TORCH_TRAIN_ENV"


def fast_env(threads):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["MALLOC_MMAP_THRESHOLD_"] = str(1 << 34)
    env["MALLOC_TRIM_THRESHOLD_"] = str(1 << 34)
    env["OMP_NUM_THREADS"] = str(threads)
    env[ENV_MARK] = "1"
    return env


# Keys of maskd's run description that change what is computed, with their defaults
# (engine/train/run_config.h). The others (name, out, checkpoints, keep_last) are ignored.
DEFAULTS = dict(tokenizer=None, train=None, validation="", config="small", epochs=1, max_steps=0, batch=8,
                grad_accum=1, lr=1e-4, weight_decay=1e-3, warmup_steps=-1, clip_norm=0.0, min_lr_ratio=0.0,
                adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, seed=42, eval_seed=1234, threads=2,
                eval_batches=0, mlm_probability=0.15, label_smoothing=0.0, ranks=1, precision="fp32")
IGNORED = {"name", "out", "checkpoint_steps", "checkpoint_epochs", "keep_last", "hosts"}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", help="a maskd run description (JSON)")
    for k, v in DEFAULTS.items():
        flag = "--" + k.replace("_", "-")
        typ = str if v is None or isinstance(v, str) else type(v)
        ap.add_argument(flag, dest=k, type=typ, default=None)
    ap.add_argument("--json", help="also write the summary to this file")
    ap.add_argument("--quiet", action="store_true", help="no per-step progress")
    a = ap.parse_args(argv)
    rc = dict(DEFAULTS)
    if a.run:
        with open(a.run) as f:
            d = json.load(f)
        for k, v in d.items():
            if k in IGNORED:
                continue
            if k not in DEFAULTS:
                sys.exit(f"torch_train: {a.run}: unknown key {k!r}")
            rc[k] = v
    for k in DEFAULTS:
        if getattr(a, k) is not None:
            rc[k] = getattr(a, k)
    if rc["precision"] != "fp32":
        sys.exit(f"torch_train: precision {rc['precision']!r}: only fp32 runs here (PyTorch 1.13's CPU autocast "
                 "fails in LayerNorm on this model)")
    for k in ("tokenizer", "train"):
        if not rc[k]:
            sys.exit(f"torch_train: {k}: missing")
    return a, rc


def tokenizer_ids(path):
    """(vocab_size, mask_id, pad_id, special ids) from a tokenizer.json."""
    with open(path) as f:
        tok = json.load(f)
    model = tok["model"]
    if model.get("type") == "Unigram":
        vocab = {p[0]: i for i, p in enumerate(model["vocab"])}
    else:
        vocab = dict(model["vocab"])
    for t in tok.get("added_tokens", []):
        vocab.setdefault(t["content"], t["id"])
    size = max(vocab.values()) + 1
    specials = sorted({t["id"] for t in tok.get("added_tokens", []) if t.get("special")})
    mask = vocab.get("[MASK]")
    pad = vocab.get("<pad>", vocab.get("[PAD]"))
    if mask is None or pad is None:
        sys.exit(f"torch_train: tokenizer: {path} lacks [MASK] or <pad>")
    return size, mask, pad, specials


def model_config(spec, vocab, pad):
    from torch_mlm import PRESETS, preset_config
    if spec in PRESETS:
        return preset_config(spec, vocab_size=vocab, pad_token_id=pad)
    with open(spec) as f:
        d = json.load(f)
    if int(d["vocab_size"]) != vocab or int(d.get("pad_token_id", -1)) != pad:
        sys.exit(f"torch_train: config: {spec} disagrees with the tokenizer (vocab {vocab}, pad {pad})")
    return d


def lr_factor(warmup, total, min_ratio):
    """maskd's adamw_lr_at / create_optimizer's schedule as a LambdaLR factor of the step."""
    def f(step):
        if step < warmup:
            return step / warmup
        decay = total - warmup
        if decay <= 0:
            return min_ratio
        frac = min(1.0, (step - warmup) / decay)
        return (1.0 - min_ratio) * (1.0 - frac) + min_ratio
    return f


class Masker:
    """DataCollatorForLanguageModeling(mlm=True) on (B, T) int64 ids, torch only."""

    def __init__(self, torch, vocab, mask_id, specials, prob):
        self.t = torch
        self.vocab, self.mask_id, self.prob = vocab, mask_id, prob
        self.special = torch.zeros(vocab, dtype=torch.bool)
        self.special[torch.tensor(specials, dtype=torch.long)] = True

    def __call__(self, ids, attn, gen):
        torch = self.t
        labels = ids.clone()
        p = torch.full(ids.shape, self.prob)
        p.masked_fill_(self.special[ids] | (attn == 0), 0.0)
        chosen = torch.bernoulli(p, generator=gen).bool()
        labels[~chosen] = -100
        inputs = ids.clone()
        replaced = torch.bernoulli(torch.full(ids.shape, 0.8), generator=gen).bool() & chosen
        inputs[replaced] = self.mask_id
        rand = torch.bernoulli(torch.full(ids.shape, 0.5), generator=gen).bool() & chosen & ~replaced
        inputs[rand] = torch.randint(self.vocab, ids.shape, dtype=torch.long, generator=gen)[rand]
        return inputs, labels


def selftest():
    """Checks the pieces that are not torch's own: the collator's proportions (HF's), that
    specials and padding are never chosen, the schedule's values, the dropout sites."""
    import torch
    sys.path.insert(0, HERE)
    from torch_mlm import TorchMLM, preset_config
    ok = True

    def check(good, name, why=""):
        nonlocal ok
        ok &= bool(good)
        print(f"{'PASS' if good else 'FAIL'} torch_train_{name}" + ("" if good else f": {why}"))

    specials = [0, 1, 2, 3, 4]
    m = Masker(torch, 8000, 4, specials, 0.15)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, 8000, (500, 128), generator=g)
    ids[:, 0], ids[:, 1] = 0, 3
    attn = torch.ones_like(ids)
    attn[:50, 100:] = 0
    inputs, labels = m(ids, attn, g)
    chosen = labels != -100
    cand = (ids >= 5) & (attn == 1)
    n = int(cand.sum())
    frac = int(chosen.sum()) / n
    # Binomial standard deviations: 0.15 of ~62000 candidates: 0.0014; 0.8 of ~9400: 0.004.
    check(abs(frac - 0.15) < 0.006, "masker_chosen_15pct", f"{frac:.4f}")
    check(not bool((chosen & ~cand).any()), "masker_never_specials_or_padding")
    check(bool((labels[chosen] == ids[chosen]).all()), "masker_labels_are_ids")
    nm = int(chosen.sum())
    fm = int((inputs[chosen] == 4).sum()) / nm
    fk = int((inputs[chosen] == ids[chosen]).sum()) / nm
    check(abs(fm - 0.8) < 0.016 and abs(fk - 0.1) < 0.012, "masker_80_10_10", f"mask {fm:.4f} kept {fk:.4f}")
    check(bool((inputs[~chosen] == ids[~chosen]).all()), "masker_unchosen_unchanged")
    f = lr_factor(10, 110, 0.1)
    vals = [f(0), f(5), f(10), f(60), f(110), f(200)]
    want = [0.0, 0.5, 1.0, 0.55, 0.1, 0.1]
    check(all(abs(x - y) < 1e-12 for x, y in zip(vals, want)), "schedule", f"{vals}")
    check(lr_factor(0, 10, 0.0)(0) == 1.0, "schedule_no_warmup")
    model = TorchMLM(preset_config("tiny", vocab_size=100))
    for layer in model.layers:
        layer.dropout = torch.nn.Identity()
    drops = [mod for mod in model.modules() if isinstance(mod, torch.nn.Dropout) and mod.p > 0]
    attn_p = [layer.self_attn.dropout for layer in model.layers]
    check(len(drops) == 1 + 2 * len(model.layers) and all(p == 0.1 for p in attn_p), "dropout_sites_as_hf",
          f"{len(drops)} dropouts")
    return ok


def main():
    if sys.argv[1:] == ["--selftest"]:
        sys.exit(0 if selftest() else 1)
    a, rc = parse_args(sys.argv[1:])
    threads = int(rc["threads"]) if rc["threads"] else 2
    if os.environ.get(ENV_MARK) != "1":
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], fast_env(threads))
    import numpy as np
    import torch
    sys.path.insert(0, HERE)
    from shards import read_set
    from torch_mlm import IGNORE, TorchMLM

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    vocab, mask_id, pad_id, specials = tokenizer_ids(rc["tokenizer"])
    cfg = model_config(rc["config"], vocab, pad_id)
    _, train_ids = read_set(rc["train"])
    valid_ids = read_set(rc["validation"])[1] if rc["validation"] else None
    if train_ids.size and int(train_ids.max()) >= vocab:
        sys.exit("torch_train: train shards have ids outside the tokenizer's vocabulary")
    train = torch.from_numpy(train_ids.astype(np.int64))
    valid = torch.from_numpy(valid_ids.astype(np.int64)) if valid_ids is not None else None
    N, T = train.shape
    # A data-parallel run's step is ranks x grad_accum micro-batches of batch rows (maskd
    # sums them in micro-batch order): here one process accumulates them all.
    B, accum = int(rc["batch"]), int(rc["grad_accum"]) * int(rc["ranks"])
    spe = (N // B) // accum
    if spe < 1:
        sys.exit(f"torch_train: train: {N} samples make no step of batch {B} x grad_accum {accum}")
    epochs = int(rc["epochs"])
    total = int(rc["max_steps"]) if int(rc["max_steps"]) > 0 else epochs * spe
    epochs = math.ceil(total / spe)
    warmup = int(rc["warmup_steps"]) if int(rc["warmup_steps"]) >= 0 else total // 20
    seed = int(rc["seed"])

    gen = torch.Generator().manual_seed(seed)            # init, then shuffling and masking
    drop_seed = seed ^ 0x5DEECE66D                       # dropout: torch's global generator
    model = TorchMLM(cfg)
    model.init_weights(generator=gen)
    for layer in model.layers:
        layer.dropout = torch.nn.Identity()              # not in HF's BertLayer (see doc)
    H = model.cfg.hidden_size
    opt = torch.optim.AdamW(model.param_groups(float(rc["weight_decay"])), lr=float(rc["lr"]),
                            betas=(float(rc["adam_beta1"]), float(rc["adam_beta2"])), eps=float(rc["adam_epsilon"]))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(warmup, total, float(rc["min_lr_ratio"])))
    masker = Masker(torch, vocab, mask_id, specials, float(rc["mlm_probability"]))
    params = list(model.parameters())
    clip = float(rc["clip_norm"])
    nparams = sum(p.numel() for p in params)
    print(f"torch run: {total} steps ({spe} per epoch, warm-up {warmup}), batch {B} x {accum} x {T} tokens, "
          f"{nparams} parameters, {threads} threads", file=sys.stderr, flush=True)

    # label_smoothing: HF Trainer's label_smoothing_factor, in training and evaluation (maskd's
    # --label-smoothing).
    smoothing = float(rc["label_smoothing"])

    def loss_sum(inputs, labels, attn):
        h = model.encode(inputs, attn)
        flat = labels.reshape(-1)
        pos = (flat != IGNORE).nonzero().reshape(-1)
        logits = model.head(h.reshape(-1, H).index_select(0, pos))
        lab = flat.index_select(0, pos)
        return torch.nn.functional.cross_entropy(logits, lab, reduction="sum", label_smoothing=smoothing), logits, lab

    def evaluate():
        t0 = time.perf_counter()
        egen = torch.Generator().manual_seed(int(rc["eval_seed"]))
        model.eval()
        s, n, correct = 0.0, 0, 0
        nb = math.ceil(len(valid) / B)
        if int(rc["eval_batches"]) > 0:
            nb = min(nb, int(rc["eval_batches"]))
        with torch.no_grad():
            for b in range(nb):
                ids = valid[b * B:(b + 1) * B]
                attn = torch.ones_like(ids)
                inputs, labels = masker(ids, attn, egen)
                ls, logits, lab = loss_sum(inputs, labels, attn)
                s += ls.item()
                n += len(lab)
                correct += int((logits.argmax(-1) == lab).sum())
        model.train()
        loss = s / n if n else float("nan")
        return dict(loss=loss, accuracy=correct / n if n else float("nan"), perplexity=math.exp(loss),
                    labels=n, seconds=time.perf_counter() - t0)

    step, out = 0, []
    run_t0 = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        e0 = time.perf_counter()
        perm = torch.randperm(N, generator=gen)
        losses = []
        for k in range(spe):
            if step == total:
                break
            s0 = time.perf_counter()
            micro = []
            for j in range(accum):
                idx = perm[(k * accum + j) * B:(k * accum + j + 1) * B]
                ids = train.index_select(0, idx)
                attn = torch.ones_like(ids)
                micro.append((*masker(ids, attn, gen), attn))
            nlab = sum(int((lab != IGNORE).sum()) for _, lab, _ in micro)
            opt.zero_grad(set_to_none=True)
            tot = 0.0
            torch.manual_seed(drop_seed + step)
            for inputs, labels, attn in micro:
                ls, _, _ = loss_sum(inputs, labels, attn)
                if nlab:
                    (ls / nlab).backward()
                tot += ls.item()
            lr = opt.param_groups[0]["lr"]
            norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
            opt.step()
            sched.step()
            step += 1
            loss = tot / nlab if nlab else float("nan")
            if nlab:
                losses.append(loss)
            if not a.quiet:
                dt = time.perf_counter() - s0
                el = time.perf_counter() - run_t0
                print(f"\repoch {epoch + 1}/{epochs} step {step}/{total} loss {loss:.4f} lr {lr:.3g} "
                      f"norm {float(norm):.3f} {B * accum * T / dt:.0f} tok/s elapsed {el:.0f}s "
                      f"eta {el / step * (total - step):.0f}s ", end="", file=sys.stderr, flush=True)
        train_s = time.perf_counter() - e0
        ev = evaluate() if valid is not None else dict(loss=float("nan"), accuracy=float("nan"),
                                                        perplexity=float("nan"), labels=0, seconds=0.0)
        rec = dict(epoch=epoch + 1, step=step, train_loss=sum(losses) / len(losses) if losses else float("nan"),
                   val_loss=ev["loss"], val_accuracy=ev["accuracy"], val_perplexity=ev["perplexity"],
                   val_labels=ev["labels"], train_seconds=train_s, eval_seconds=ev["seconds"],
                   wall_seconds=time.perf_counter() - e0)
        out.append(rec)
        print(f"\repoch {epoch + 1}/{epochs}: loss {rec['train_loss']:.4f} - val_loss {rec['val_loss']:.4f} - "
              f"val_accuracy {rec['val_accuracy']:.4f} - val_perplexity {rec['val_perplexity']:.3f} "
              f"(train {train_s:.1f}s, eval {ev['seconds']:.1f}s)" + " " * 20, file=sys.stderr, flush=True)
    summary = dict(side="torch", torch_version=torch.__version__, threads=threads, steps=step, total_steps=total,
                   steps_per_epoch=spe, warmup_steps=warmup, batch=B, grad_accum=accum, seq_len=T,
                   train_samples=N, valid_samples=0 if valid is None else len(valid), params=nparams,
                   config=cfg, run=rc, epochs=out, wall_seconds=time.perf_counter() - run_t0)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
