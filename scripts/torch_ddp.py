#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo, 127.0.0.1) training benchmark: the anchor that
scripts/bench-dist compares `maskd train --ranks N` with.

usage: scripts/torch_ddp.py --world N --threads T --config tiny|small|base [--global-batch G] [--seq 128]
                            [--steps S] [--warmup W] [--nosync-steps K] [--vocab V] [--json]

Launches N processes (subprocesses of this script with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
MASTER_PORT a free port; GLOO_SOCKET_IFNAME=lo), each with torch.set_num_threads(T) and one
inter-op thread, in scripts/bench-train's environment (bench_env: OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE removed, OMP_WAIT_POLICY=PASSIVE, OMP_NUM_THREADS=T, glibc malloc
thresholds high). With N > 1 each joins a gloo process group and wraps the model in
DistributedDataParallel; with N = 1 there is no process group and no wrapper, so
`--world 1 --threads 2` is "1 process x 2 threads".

The model is scripts/torch_mlm.py's TorchMLM for maskd's preset (config_preset: vocab
8000 for tiny/small, 32000 for base unless --vocab, max_position_embeddings 514, pad 3),
dropout 0; the step is scripts/bench-train's torch step: encoder, the MLM head only at
the 15% labelled positions, cross-entropy, backward, clip_grad_norm_(1.0), AdamW (decay
0.01 except LayerNorm and biases, lr 1e-3) and a LambdaLR schedule. Each rank trains on
its own fixed batch of G/N synthetic rows of --seq ids (bench-train's synthetic_batch,
seed 1 + rank), W untimed steps, then S timed steps between two barriers.

Reported (one JSON object on stdout with --json, else a few lines):
  tokens_per_s            G * seq * S / the timed wall time, the slowest rank's
  tokens_per_s_per_rank   (G/N) * seq * S / each rank's timed wall time
  s_per_step              the slowest rank's wall time / S
  step_s_median           the slowest rank's median step (tokens_per_s_median_step: G * seq / it,
                          the basis bench-dist compares with maskd's median per-step rate)
  nosync_s_per_step       with N > 1: K more steps (default S) under ddp.no_sync(): the same
                          compute without the gradient all-reduce (the slowest rank)
  comm_exposed_s_per_step s_per_step - nosync_s_per_step: the communication DDP does not
                          hide behind the backward pass
  allreduce_s             one all_reduce of a buffer the size of the parameters (median of 3)
"""
import argparse
import importlib.machinery
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def bench_train_module():
    """scripts/bench-train (no .py suffix) as a module: bench_env and synthetic_batch."""
    path = os.path.join(HERE, "bench-train")
    loader = importlib.machinery.SourceFileLoader("bench_train", path)
    spec = importlib.util.spec_from_loader("bench_train", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def cpu_line():
    model, flags = "?", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = sorted(x for x in line.split(":", 1)[1].split() if x.startswith("avx512"))
                    break
    except OSError:
        pass
    return dict(model=model, cpus=os.cpu_count(), avx512=flags)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- one rank --------------------------------------------------------------------------------
def worker(a):
    import datetime
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    sys.path.insert(0, HERE)
    from torch_mlm import TorchMLM, linear_schedule, preset_config
    bt = bench_train_module()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=600))
    torch.manual_seed(1)  # the same weights on every rank (DDP broadcasts rank 0's anyway)
    over = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if a.vocab:
        over["vocab_size"] = a.vocab
    cfg = preset_config(a.config, **over)
    model = TorchMLM(cfg)
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    B, T = a.global_batch // world, a.seq
    ids, labels, pos = bt.synthetic_batch(torch, V, B, T, 1 + rank)
    lab = labels.reshape(-1).index_select(0, pos)

    class Step(nn.Module):
        """bench-train's forward (encoder, head at the labelled rows, cross-entropy) as one
        forward() so that DistributedDataParallel sees it."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, pos, lab):
            h = self.m.encode(ids)
            logits = self.m.head(h.reshape(-1, H).index_select(0, pos))
            return nn.functional.cross_entropy(logits, lab)

    net = Step(model)
    if world > 1:
        net = nn.parallel.DistributedDataParallel(net)
    model.train()
    total = a.warmup + a.steps + (a.nosync_steps if world > 1 else 0)
    opt = torch.optim.AdamW(model.param_groups(0.01), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_schedule(1, total + 1))
    params = list(model.parameters())
    nparams = sum(p.numel() for p in params)
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        loss = net(ids, pos, lab)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())

    def barrier():
        if world > 1:
            dist.barrier()

    def timed(n, ctx=None):
        barrier()
        ts = []
        t0 = time.perf_counter()
        for _ in range(n):
            s0 = time.perf_counter()
            if ctx is None:
                step()
            else:
                with ctx():
                    step()
            ts.append(time.perf_counter() - s0)
        wall = time.perf_counter() - t0
        barrier()
        return wall, ts

    for _ in range(a.warmup):
        step()
    wall, ts = timed(a.steps)
    out = dict(rank=rank, wall_s=wall, step_s=ts, params=nparams, batch=B,
               loss_first=losses[0], loss_last=losses[-1])
    if world > 1:
        if a.nosync_steps:
            nwall, nts = timed(a.nosync_steps, net.no_sync)
            out.update(nosync_wall_s=nwall, nosync_step_s=nts)
        buf = torch.zeros(nparams)
        ar = []
        for _ in range(3):
            barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            ar.append(time.perf_counter() - t0)
        out["allreduce_s"] = statistics.median(ar)
        dist.barrier()
    print(json.dumps(out), flush=True)
    # No destroy_process_group() and no interpreter teardown: in torch 1.13 the DDP reducer's
    # ProcessGroupGloo destructor can deadlock with the GIL (seen here: the rank hung after its
    # last step). Everything is reported; leave at once.
    sys.stderr.flush()
    os._exit(0)


# ---- the launcher ----------------------------------------------------------------------------
def launch(a):
    """Runs the N ranks, returns the combined report (a dict)."""
    bt = bench_train_module()
    env = bt.bench_env(a.threads)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(a.world),
               GLOO_SOCKET_IFNAME="lo")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--threads", str(a.threads), "--config", a.config,
           "--global-batch", str(a.global_batch), "--seq", str(a.seq), "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--nosync-steps", str(a.nosync_steps), "--vocab", str(a.vocab or 0)]
    procs = []
    for r in range(a.world):
        procs.append(subprocess.Popen(cmd, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs, failed = [], None
    for r, p in enumerate(procs):
        try:
            so, se = p.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.kill()
            sys.exit(f"torch_ddp: rank {r} still running after {a.timeout} s (killed all ranks)")
        if p.returncode != 0 and failed is None:
            failed = f"rank {r} failed ({p.returncode}): {se.strip()[-800:]}"
            for q in procs:  # a rank waiting for the dead one in a collective would hang
                if q.poll() is None:
                    q.kill()
        elif p.returncode == 0:
            outs.append(json.loads(so.strip().splitlines()[-1]))
    if failed:
        sys.exit("torch_ddp: " + failed)
    G, T, S, N = a.global_batch, a.seq, a.steps, a.world
    wall = max(o["wall_s"] for o in outs)
    rep = dict(side="torch-ddp", config=a.config, world=N, threads=a.threads, global_batch=G,
               batch_per_rank=G // N, seq=T, steps=S, warmup=a.warmup, params=outs[0]["params"],
               vocab_size=a.vocab or None,
               tokens_per_s=G * T * S / wall,
               tokens_per_s_per_rank=[o["batch"] * T * S / o["wall_s"] for o in outs],
               s_per_step=wall / S,
               step_s_median=max(statistics.median(o["step_s"]) for o in outs),
               tokens_per_s_median_step=G * T / max(statistics.median(o["step_s"]) for o in outs),
               loss_first=outs[0]["loss_first"], loss_last=outs[0]["loss_last"],
               nosync_s_per_step=None, comm_exposed_s_per_step=None, allreduce_s=None,
               step_s_per_rank=[o["step_s"] for o in outs], cpu=cpu_line())
    if N > 1:
        if a.nosync_steps:
            ns = max(o["nosync_wall_s"] for o in outs) / a.nosync_steps
            rep["nosync_s_per_step"] = ns
            rep["comm_exposed_s_per_step"] = rep["s_per_step"] - ns
            rep["nosync_step_s_per_rank"] = [o["nosync_step_s"] for o in outs]
        rep["allreduce_s"] = max(o["allreduce_s"] for o in outs)
    return rep


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--config", choices=["tiny", "small", "base"], default="small")
    ap.add_argument("--vocab", type=int, default=0, help="vocab_size instead of the preset's (bench-dist: 8000)")
    ap.add_argument("--global-batch", type=int, default=32, help="sequences per step over all ranks (default 32)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=8, help="timed steps (default 8)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--nosync-steps", type=int, default=-1,
                    help="steps under no_sync() to measure the compute alone (default: --steps; 0: none)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before the ranks are killed (default 1800)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.nosync_steps < 0:
        a.nosync_steps = a.steps
    if a.world < 1 or a.threads < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--world, --threads and --steps must be at least 1, --warmup at least 0")
    if a.global_batch % a.world:
        ap.error(f"--global-batch {a.global_batch} is not a multiple of --world {a.world}")
    return a


def main():
    a = parse()
    if a.worker:
        return worker(a)
    rep = launch(a)
    if a.json:
        print(json.dumps(rep))
        return
    c = rep["cpu"]
    print(f"torch DDP {a.config} global batch {a.global_batch}x{a.seq}, {a.world} process(es) x {a.threads} "
          f"thread(s), {rep['params']} parameters: {rep['tokens_per_s']:.0f} tokens/s "
          f"({rep['s_per_step']:.3f} s/step; per rank " +
          ", ".join(f"{x:.0f}" for x in rep["tokens_per_s_per_rank"]) + " tokens/s)")
    if rep["nosync_s_per_step"] is not None:
        print(f"  compute only (no_sync): {rep['nosync_s_per_step']:.3f} s/step; exposed communication "
              f"{rep['comm_exposed_s_per_step']:.3f} s/step; one all_reduce of the parameters {rep['allreduce_s']:.3f} s")
    print(f"  CPU: {c['model']}, {c['cpus']} CPUs, {' '.join(c['avx512']) or 'no avx512'}")


if __name__ == "__main__":
    main()
