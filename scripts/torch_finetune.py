#!/usr/bin/python3
"""The PyTorch side of issue 16's fine-tuning comparison: trains scripts/torch_cls.py's
RobertaForSequenceClassification / BertForSequenceClassification (torch's own modules,
checked against HF's heads) on the exact batches a `maskd finetune` run uses, from the
same initial weights, and evaluates it as maskd does.

usage: /usr/bin/python3 scripts/torch_finetune.py PLAN_DIR --out results.json [--threads N] [--quiet]
                                                 [--test-weights last|best]
       /usr/bin/python3 scripts/torch_finetune.py --write-example-plan DIR   # a tiny plan in this format
       /usr/bin/python3 scripts/torch_finetune.py --selftest   # metrics, evaluation, the loop written out

PLAN_DIR is what `maskd finetune --export-plan PLAN_DIR` writes:

  PLAN_DIR/init/config.json        HF config.json of the initialised classifier
                                   (architectures *ForSequenceClassification, id2label,
                                   label2id, problem_type, classifier_dropout, dropouts)
  PLAN_DIR/init/model.safetensors  its weights under HF names (F32, or BF16 widened),
                                   every tensor of the classifier: roberta.* +
                                   classifier.dense / classifier.out_proj, or bert.* with
                                   bert.pooler.dense + classifier
  PLAN_DIR/plan.json               one JSON object:
    {
      "format": "maskd-finetune-plan", "version": 1,
      "labels": ["name of class 0", ...],          # id order; must equal config id2label
      "pad_id": 1,                                 # padding id of the batches
      "hyper": {
        "lr": 2e-5, "weight_decay": 0.01,          # decay on all but biases and LayerNorm
        "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
        "clip_norm": 1.0,                          # 0 = no clipping
        "label_smoothing": 0.0,                    # optional (0): torch's CrossEntropyLoss(label_smoothing=)
        "warmup_steps": 0,                         # resolved (warmup_ratio already applied)
        "total_steps": 1200,                       # the schedule's length (linear decay to 0 here)
        "batch": 32, "eval_batch": 64,             # rows per training step / per evaluation forward
        "epochs": 3, "seed": 42
      },
      "sets": {                                    # tokenized: [CLS] ... [SEP], truncated
        "train": {"ids": [[0, 512, 77, 2], ...], "labels": [3, ...]},
        "valid": {"ids": [...], "labels": [...]},  # or null: no per-epoch evaluation
        "test":  {"ids": [...], "labels": [...]}   # or null: no final test
      },
      "split": {"seed": 42, "fraction": 0.1,       # or null; for a share held out of train: the
                "train_rows": [...], "valid_rows": [...]},   # file's rows of each set (unused here)
      "order": [                                   # per epoch, the training batches in order,
        [[17, 4, 230, ...], [9, 88, ...], ...],    # each a list of train-set indices (its rows);
        ...                                        # exactly the steps maskd takes (max_steps cut)
      ]
    }

What this script does with it (the same as maskd's loop, engine/train/finetune.h):
  - loads init/ into TorchCls (strict HF names and shapes);
  - each step: the listed rows padded to the longest of them (pad_id, attention mask 0),
    cross-entropy averaged over the batch's rows (smoothed by hyper.label_smoothing as HF
    Trainer's label_smoothing_factor, which is torch's label_smoothing), backward,
    clip_grad_norm_(clip_norm),
    torch.optim.AdamW (two groups: weight_decay, and 0 for biases and LayerNorm),
    LambdaLR = transformers.get_linear_schedule_with_warmup(warmup_steps, total_steps)
    (the first update at lr 0 when warmup_steps > 0);
  - dropout as the config gives it (hidden, attention probabilities, classifier_dropout
    or hidden for the head), in HF's places: nn.TransformerEncoderLayer's extra dropout
    between GELU and the output dense is replaced by the identity; torch's generator is
    seeded with hyper.seed (its draws are not maskd's);
  - after each epoch, the valid set in order, in batches of eval_batch padded to their
    longest, dropout off: loss (mean cross-entropy over the rows, smoothed as in training,
    as Trainer's evaluation loss is), accuracy, macro-F1,
    weighted-F1, macro precision/recall (scikit-learn, zero_division=0, averages over the
    labels present in y_true or y_pred as sklearn does); at the end the same on test, with
    the last epoch's weights, or with --test-weights best those of the best epoch by
    validation macro-F1 as maskd picks NAME@best (Trainer's load_best_model_at_end with
    metric_for_best_model eval_macro_f1: the first epoch, then any strictly better finite
    one; without a valid set the last epoch; a copy of the weights is kept outside the
    timed training).

results.json: {"framework": "torch", "torch_version", "threads", "model_type",
"num_labels", "parameters", "steps", "epochs": [{"epoch", "steps", "train_loss" (mean of
the epoch's step losses), "step_losses" (each step's, in order), "train_seconds", "eval_seconds", "wall_seconds",
"examples_per_s", "tokens_per_s" (real tokens), "lr_last", "valid": {loss, accuracy,
macro_f1, weighted_f1, macro_precision, macro_recall, n, seconds} or null}], "valid"
(the last epoch's), "test" (the same keys, plus "predictions") or null, "test_weights"
("last" or "best"), "test_epoch" (the 0-based epoch whose weights scored test),
"total_seconds"}.

What lets a comparison with maskd fail (what differs when the two disagree): different
initial weights or label order (both come from the plan: checked here), different batches
(the plan's order is followed exactly), a different learning-rate schedule or
weight-decay groups, the loss averaged over something else than the batch's rows,
padding that leaks into the first token's state, evaluation with dropout on. Expected
and not a failure: the dropout masks differ (two RNGs), so per-step losses separate after
the first step with dropout > 0, and final metrics agree only statistically (compare
across seeds). Threads: torch.set_num_threads(N), one inter-op thread, and the
environment of scripts/torch_train.py (OMP_WAIT_POLICY=PASSIVE, glibc malloc thresholds,
OPENBLAS_CORETYPE removed; the script re-executes itself with it).
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_train import ENV_MARK, fast_env  # noqa: E402  (no torch import at module level)

PLAN_FORMAT = "maskd-finetune-plan"
HYPER_KEYS = ("lr", "weight_decay", "beta1", "beta2", "eps", "clip_norm", "warmup_steps", "total_steps", "batch",
              "eval_batch", "epochs", "seed")


def fail(msg):
    sys.exit(f"torch_finetune: {msg}")


def load_plan(plan_dir):
    """plan.json checked for the fields above; returns the dict."""
    path = os.path.join(plan_dir, "plan.json")
    try:
        with open(path) as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if plan.get("format") != PLAN_FORMAT or plan.get("version") != 1:
        fail(f"{path}: format {plan.get('format')!r} version {plan.get('version')!r}, expected {PLAN_FORMAT!r} 1")
    hyper = plan.get("hyper") or {}
    missing = [k for k in HYPER_KEYS if k not in hyper]
    if missing:
        fail(f"{path}: hyper lacks {missing}")
    labels = plan.get("labels")
    if not isinstance(labels, list) or len(labels) < 2:
        fail(f"{path}: labels: a list of at least 2 names")
    sets = plan.get("sets") or {}
    if not sets.get("train"):
        fail(f"{path}: sets.train missing")
    for name, s in sets.items():
        if s is None:
            continue
        ids, lab = s.get("ids"), s.get("labels")
        if not isinstance(ids, list) or not isinstance(lab, list) or len(ids) != len(lab) or not ids:
            fail(f"{path}: sets.{name}: ids and labels of the same non-zero length")
        bad = [i for i, y in enumerate(lab) if not (0 <= y < len(labels)) and not (name != "train" and y == -100)]
        if bad:
            fail(f"{path}: sets.{name}: label {lab[bad[0]]} of example {bad[0]} out of range")
        if any(len(x) == 0 for x in ids):
            fail(f"{path}: sets.{name}: an empty example")
    order = plan.get("order")
    n_train = len(sets["train"]["ids"])
    if not isinstance(order, list) or not order:
        fail(f"{path}: order: one list of batches per epoch")
    for e, batches in enumerate(order):
        for b in batches:
            if not b or any(not (0 <= i < n_train) for i in b):
                fail(f"{path}: order[{e}]: an empty batch or an index outside the train set")
    return plan


def pad_batch(torch, seqs, pad_id):
    """ids, attention_mask (B, longest) as DataCollatorWithPadding gives them."""
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    am = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        am[i, :len(s)] = 1
    return ids, am


def metrics(y_true, y_pred):
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score
    return dict(accuracy=float(accuracy_score(y_true, y_pred)),
                macro_f1=float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
                weighted_f1=float(f1_score(y_true, y_pred, average="weighted", zero_division=0)),
                macro_precision=float(precision_score(y_true, y_pred, average="macro", zero_division=0)),
                macro_recall=float(recall_score(y_true, y_pred, average="macro", zero_division=0)))


def evaluate(torch, model, s, eval_batch, pad_id, smoothing=0.0):
    """Loss, metrics and predictions on set s in order, dropout off."""
    import torch.nn.functional as F
    t0 = time.perf_counter()
    model.eval()
    preds, loss_sum, n_lab = [], 0.0, 0
    with torch.no_grad():
        for a in range(0, len(s["ids"]), eval_batch):
            ids, am = pad_batch(torch, s["ids"][a:a + eval_batch], pad_id)
            y = torch.tensor(s["labels"][a:a + eval_batch], dtype=torch.long)
            _, logits = model(ids, am)
            keep = y != -100
            loss_sum += F.cross_entropy(logits[keep], y[keep], reduction="sum",
                                        label_smoothing=smoothing).item() if keep.any() else 0.0
            n_lab += int(keep.sum())
            preds += logits.argmax(-1).tolist()
    model.train()
    yt = [y for y in s["labels"] if y != -100]
    yp = [p for p, y in zip(preds, s["labels"]) if y != -100]
    out = dict(loss=loss_sum / max(1, n_lab), n=n_lab, **metrics(yt, yp))
    out["seconds"] = time.perf_counter() - t0
    return out, preds


def run(plan_dir, threads, quiet, test_weights="last"):
    import math

    import torch
    from torch_cls import TorchCls
    from torch_mlm import linear_schedule
    from torch_reference import read_safetensors

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    plan = load_plan(plan_dir)
    hp = plan["hyper"]
    with open(os.path.join(plan_dir, "init", "config.json")) as f:
        cfg = json.load(f)
    model = TorchCls(cfg)
    if model.cfg.labels != plan["labels"]:
        fail(f"init/config.json id2label {model.cfg.labels[:5]}... differs from plan labels {plan['labels'][:5]}...")
    _, sd = read_safetensors(os.path.join(plan_dir, "init", "model.safetensors"))
    model.load_hf_state_dict({k: v.copy() for k, v in sd.items()}, strict=True)
    for layer in model.layers:
        layer.dropout = torch.nn.Identity()  # not in HF's BertLayer (see doc)
    limit = model.cfg.max_position_embeddings - (model.cfg.pad_token_id + 1 if model.cfg.model_type == "roberta" else 0)
    for name, s in plan["sets"].items():
        if s and max(len(x) for x in s["ids"]) > limit:
            fail(f"sets.{name}: an example longer than the model's {limit} positions")
    torch.manual_seed(int(hp["seed"]))
    model.train()
    opt = torch.optim.AdamW(model.param_groups(float(hp["weight_decay"])), lr=float(hp["lr"]),
                            betas=(float(hp["beta1"]), float(hp["beta2"])), eps=float(hp["eps"]))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_schedule(int(hp["warmup_steps"]), int(hp["total_steps"])))
    train, valid, test = plan["sets"]["train"], plan["sets"].get("valid"), plan["sets"].get("test")
    pad, clip = int(plan["pad_id"]), float(hp["clip_norm"])
    smoothing = float(hp.get("label_smoothing", 0.0))
    n_steps = sum(len(b) for b in plan["order"])
    if n_steps != int(hp["total_steps"]):
        print(f"torch_finetune: note: the plan lists {n_steps} steps, the schedule is {hp['total_steps']} long",
              file=sys.stderr)
    params = list(model.parameters())
    results = dict(framework="torch", torch_version=torch.__version__, threads=threads,
                   model_type=model.cfg.model_type, num_labels=model.cfg.num_labels,
                   parameters=sum(p.numel() for p in params), steps=n_steps, epochs=[])
    step, t_all = 0, time.perf_counter()
    best_epoch, best_f1, best_state = -1, float("nan"), None
    for e, batches in enumerate(plan["order"]):
        t0 = time.perf_counter()
        losses, rows, tokens = [], 0, 0
        for b in batches:
            ids, am = pad_batch(torch, [train["ids"][i] for i in b], pad)
            y = torch.tensor([train["labels"][i] for i in b], dtype=torch.long)
            opt.zero_grad(set_to_none=True)
            _, logits = model(ids, am)
            loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=smoothing)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(params, clip) if clip > 0 else None
            lr = opt.param_groups[0]["lr"]
            opt.step()
            sched.step()
            step += 1
            losses.append(loss.item())
            rows += len(b)
            tokens += int(am.sum())
            if not quiet and (step % 50 == 0 or step == n_steps):
                print(f"step {step}/{n_steps} epoch {e} loss {losses[-1]:.4f} lr {lr:.3g}"
                      + (f" grad_norm {gn.item():.3f}" if gn is not None else ""), flush=True)
        train_s = time.perf_counter() - t0
        ev = evaluate(torch, model, valid, int(hp["eval_batch"]), pad, smoothing)[0] if valid else None
        ep = dict(epoch=e, steps=len(batches), train_loss=sum(losses) / max(1, len(losses)), step_losses=losses,
                  train_seconds=train_s,
                  eval_seconds=ev["seconds"] if ev else 0.0, wall_seconds=time.perf_counter() - t0,
                  examples_per_s=rows / train_s if train_s > 0 else 0.0,
                  tokens_per_s=tokens / train_s if train_s > 0 else 0.0, lr_last=sched.get_last_lr()[0], valid=ev)
        results["epochs"].append(ep)
        if test_weights == "best":
            f1 = ev["macro_f1"] if ev else float("nan")
            # Without a valid set every epoch is the best so far: the last one scores test, as maskd's NAME@best.
            if ev is None or best_epoch < 0 or (math.isfinite(f1) and (not math.isfinite(best_f1) or f1 > best_f1)):
                best_epoch, best_f1 = e, f1
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        print(f"epoch {e}: train loss {ep['train_loss']:.4f} ({train_s:.1f} s, {ep['examples_per_s']:.1f} examples/s)"
              + (f"; valid loss {ev['loss']:.4f} accuracy {ev['accuracy']:.4f} macro-F1 {ev['macro_f1']:.4f} "
                 f"weighted-F1 {ev['weighted_f1']:.4f}" if ev else ""), flush=True)
    results["valid"] = results["epochs"][-1]["valid"] if results["epochs"] else None
    results["test_weights"] = test_weights
    results["test_epoch"] = len(results["epochs"]) - 1
    if best_state is not None and best_epoch != results["test_epoch"]:
        model.load_state_dict(best_state)
        results["test_epoch"] = best_epoch
    if test:
        ev, preds = evaluate(torch, model, test, int(hp["eval_batch"]), pad, smoothing)
        ev["predictions"] = preds
        results["test"] = ev
        print(f"test (epoch {results['test_epoch']}'s weights): loss {ev['loss']:.4f} accuracy {ev['accuracy']:.4f} macro-F1 {ev['macro_f1']:.4f} "
              f"weighted-F1 {ev['weighted_f1']:.4f} ({ev['n']} examples)", flush=True)
    else:
        results["test"] = None
    results["total_seconds"] = time.perf_counter() - t_all
    return results


def write_example_plan(out):
    """A tiny plan in the format above, from a random classifier: for trying this script and
    as a concrete example of the format for the exporter."""
    import random

    import torch
    from torch_cls import TorchCls, classifier_config
    from torch_reference import write_safetensors
    rnd = random.Random(7)
    base = dict(model_type="roberta", vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=64, max_position_embeddings=40, type_vocab_size=1, pad_token_id=1,
                bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, hidden_act="gelu", hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1, initializer_range=0.02, position_embedding_type="absolute")
    labels = ["low", "mid", "high"]
    cfg = classifier_config(base, labels)
    torch.manual_seed(0)
    model = TorchCls(cfg)

    def example():
        y = rnd.randrange(3)
        n = rnd.randint(2, 20)
        # A learnable signal: most tokens come from the label's third of the vocabulary.
        body = [rnd.randrange(3 + 19 * y, 22 + 19 * y) if rnd.random() < 0.7 else rnd.randrange(3, 60)
                for _ in range(n)]
        return [0] + body + [2], y

    def make(n):
        xs = [example() for _ in range(n)]
        return dict(ids=[x for x, _ in xs], labels=[y for _, y in xs])
    sets = dict(train=make(96), valid=make(32), test=make(32))
    batch, epochs = 8, 6
    order = []
    for e in range(epochs):
        perm = list(range(96))
        random.Random(100 + e).shuffle(perm)
        order.append([perm[i:i + batch] for i in range(0, 96, batch)])
    hyper = dict(lr=3e-3, weight_decay=0.01, beta1=0.9, beta2=0.999, eps=1e-8, clip_norm=1.0, warmup_steps=4,
                 total_steps=epochs * 12, batch=batch, eval_batch=16, epochs=epochs, seed=42)
    plan = dict(format=PLAN_FORMAT, version=1, labels=labels, pad_id=1, hyper=hyper, sets=sets, order=order)
    os.makedirs(os.path.join(out, "init"), exist_ok=True)
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump(plan, f)
    with open(os.path.join(out, "init", "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    write_safetensors(os.path.join(out, "init", "model.safetensors"), list(model.hf_state_dict().items()),
                      {"format": "pt"})
    print(f"{out}: plan.json, init/config.json, init/model.safetensors")


def selftest():
    """Checks the parts a comparison leans on: metrics against hand-computed values (a label
    never predicted counts 0 in the macro average), evaluation independent of eval_batch
    (padding takes no part), and two runs of the example plan with dropout 0 giving the same
    losses as a loop written out here step by step (order, padding, schedule, clipping)."""
    import tempfile

    import torch
    import torch.nn.functional as F
    from torch_cls import TorchCls
    from torch_mlm import linear_schedule
    from torch_reference import read_safetensors
    ok = True

    def check(good, name, why=""):
        nonlocal ok
        ok &= bool(good)
        print(f"{'PASS' if good else 'FAIL'} torch_finetune_{name}" + ("" if good else f": {why}"), flush=True)

    m = metrics([0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 0, 0])
    # per class F1: 0: p 1/3 r 1/2 -> 0.4; 1: p 2/3 r 1 -> 0.8; 2: 0 (never predicted).
    want = dict(accuracy=0.5, macro_f1=(0.4 + 0.8 + 0) / 3, weighted_f1=(0.4 * 2 + 0.8 * 2 + 0) / 6,
                macro_precision=(1 / 3 + 2 / 3 + 0) / 3, macro_recall=(0.5 + 1 + 0) / 3)
    check(all(abs(m[k] - v) < 1e-12 for k, v in want.items()), "metrics_as_sklearn", f"{m} vs {want}")

    with tempfile.TemporaryDirectory() as d:
        import contextlib
        import io
        with contextlib.redirect_stdout(io.StringIO()):
            write_example_plan(d)
        cfg_path = os.path.join(d, "init", "config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        cfg.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        plan = load_plan(d)
        model = TorchCls(cfg)
        _, sd = read_safetensors(os.path.join(d, "init", "model.safetensors"))
        model.load_hf_state_dict({k: v.copy() for k, v in sd.items()})
        valid = plan["sets"]["valid"]
        a, pa = evaluate(torch, model, valid, 1, 1)
        b, pb = evaluate(torch, model, valid, 13, 1)
        check(pa == pb and abs(a["loss"] - b["loss"]) < 1e-6, "eval_batch_independent",
              f"loss {a['loss']} vs {b['loss']}")

        # The loop written out: same batches, padding, loss, clipping and schedule.
        hp = plan["hyper"]
        params = dict(model.named_parameters())
        decay = [n for n, p in params.items() if p.dim() == 2]   # biases and LayerNorm are 1-D here
        opt = torch.optim.AdamW([{"params": [params[n] for n in decay], "weight_decay": hp["weight_decay"]},
                                 {"params": [p for n, p in params.items() if n not in decay], "weight_decay": 0.0}],
                                lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
        f = linear_schedule(hp["warmup_steps"], hp["total_steps"])
        want_losses, step = [], 0
        for batches in plan["order"]:
            for bt in batches:
                for g in opt.param_groups:
                    g["lr"] = hp["lr"] * f(step)
                rows = [plan["sets"]["train"]["ids"][i] for i in bt]
                T = max(map(len, rows))
                ids = torch.tensor([r + [plan["pad_id"]] * (T - len(r)) for r in rows])
                am = torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in rows])
                y = torch.tensor([plan["sets"]["train"]["labels"][i] for i in bt])
                opt.zero_grad()
                loss = F.cross_entropy(model(ids, am)[1], y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip_norm"])
                opt.step()
                want_losses.append(loss.item())
                step += 1
        with contextlib.redirect_stdout(io.StringIO()):
            r = run(d, 1, True)
        got = [e["train_loss"] for e in r["epochs"]]
        want = [sum(want_losses[i * 12:(i + 1) * 12]) / 12 for i in range(len(plan["order"]))]
        diff = max(abs(x - y) for x, y in zip(got, want))
        check(diff < 1e-5 and r["steps"] == step, "loop_as_written_out", f"epoch losses differ by {diff}")
    return ok


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan_dir", nargs="?")
    ap.add_argument("--out", help="results.json path")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quiet", action="store_true", help="no per-step progress")
    ap.add_argument("--test-weights", choices=("last", "best"), default="last",
                    help="score test with the last epoch's weights, or the best epoch's by validation macro-F1")
    ap.add_argument("--write-example-plan", metavar="DIR")
    ap.add_argument("--selftest", action="store_true", help="check metrics, evaluation and the loop (see selftest)")
    a = ap.parse_args(argv)
    if a.selftest:
        return 0 if selftest() else 1
    if a.write_example_plan:
        write_example_plan(a.write_example_plan)
        return 0
    if not a.plan_dir or not a.out:
        ap.error("PLAN_DIR and --out are required")
    if a.threads < 1:
        ap.error("--threads: at least 1")
    if os.environ.get(ENV_MARK) != "1":
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + argv, fast_env(a.threads))
    res = run(a.plan_dir, a.threads, a.quiet, a.test_weights)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
