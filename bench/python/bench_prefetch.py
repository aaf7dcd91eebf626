"""Planning hidden behind compute in Python: mmbal.torch.PrefetchingBalancer on gloo processes.

One training step = get the step's plan + a simulated compute of f x P (a sleep: the
accelerator's time, during which the host thread waits and its core is free), P being the
inline plan time (metadata gather + orchestration + the StepPlan's NumPy work) measured at
start-up in the same run (median of 7). Per f in {0.5, 1, 2}, three variants interleaved
over the same steps' metadata:

- compute alone: the sleep only (the best a step can be);
- inline: ``balancer.plan(local)`` + sleep;
- prefetched: ``PrefetchingBalancer.next()`` + sleep (depth 1; the producer gathers on a
  process group of its own).

The workload is ``mmbal generate --family omni`` (text, images, video, audio), its samples
dealt to the ranks, a different seed per step. Figures: medians over the steps of the slowest
rank's step time, and the mean wait inside ``next()`` (the plan time not hidden; the first
step's plan is never hidden).

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python/bench_prefetch.py \\
        --tool build/release/tools/mmbal [--ranks 2 --samples 8192 --steps 30]
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import mmbal.torch as mt

MODALITIES = ("text", "image", "audio", "video")
CYCLE = 4  # distinct batches, cycled over the steps


def read_batches(tool: str, samples: int, ranks: int):
    """Per batch, per rank, the LocalMetadata of its samples (from `mmbal generate`)."""
    batches = []
    for seed in range(CYCLE):
        out = subprocess.run([tool, "generate", "--family", "omni", "--samples", str(samples), "--ranks", str(ranks), "--seed", str(seed)], check=True, capture_output=True, text=True).stdout
        per_rank = [[] for _ in range(ranks)]
        for line in out.splitlines():
            row = json.loads(line)
            per_rank[row["rank"]].append([(MODALITIES.index(s[0]), s[1], s[2] if len(s) > 2 else 0) for s in row["segments"]])
        batches.append([mt.LocalMetadata.from_samples(p) for p in per_rank])
    return batches


def slowest(values):
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def worker(rank, ranks, init_file, batches, steps, results):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=ranks, timeout=datetime.timedelta(seconds=600))
    torch.set_num_threads(1)
    local = [b[rank] for b in batches]
    inline = mt.StepBalancer(modalities=MODALITIES)
    times = []
    for k in range(7):
        dist.barrier()
        t0 = time.perf_counter()
        inline.plan(local[k % CYCLE])
        times.append(time.perf_counter() - t0)
    plan_s = slowest([statistics.median(times)])[0]
    rows = []
    for f in (0.5, 1.0, 2.0):
        compute_s = f * plan_s
        alone, inl = [], []
        dist.barrier()
        for k in range(steps):
            t0 = time.perf_counter()
            time.sleep(compute_s)
            alone.append(time.perf_counter() - t0)
        dist.barrier()
        for k in range(steps):
            t0 = time.perf_counter()
            inline.plan(local[k % CYCLE])
            time.sleep(compute_s)
            inl.append(time.perf_counter() - t0)
        balancer = mt.StepBalancer(modalities=MODALITIES, metadata_group=dist.new_group())
        pre, wait = [], []
        dist.barrier()
        with mt.PrefetchingBalancer(balancer, lambda k: local[k % CYCLE] if k < steps else None) as prefetcher:
            for k in range(steps):
                t0 = time.perf_counter()
                step = prefetcher.next()
                t1 = time.perf_counter()
                assert step.index == k
                time.sleep(compute_s)
                pre.append(time.perf_counter() - t0)
                wait.append(t1 - t0)
        rows.append([f, compute_s] + slowest([statistics.median(alone), statistics.median(inl), statistics.median(pre), statistics.mean(wait)]))
    if rank == 0:
        results["plan_s"] = plan_s
        results["rows"] = rows
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", default="build/release/tools/mmbal")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--samples", type=int, default=8192, help="samples per step, dealt to the ranks")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    batches = read_batches(args.tool, args.samples, args.ranks)
    items = sum(b.segment_sample.shape[0] for b in batches[0])
    with tempfile.TemporaryDirectory() as tmp:
        manager = mp.Manager()
        results = manager.dict()
        mp.spawn(worker, args=(args.ranks, os.path.join(tmp, "init"), batches, args.steps, results), nprocs=args.ranks, join=True)
        plan_s, rows = results["plan_s"], results["rows"]
    print(f"omni, {args.samples} samples ({items} segments) over {args.ranks} gloo processes, {args.steps} steps; P = {plan_s * 1e3:.1f} ms (inline plan, median of 7)")
    print("| compute | compute alone ms | inline: plan + compute ms | prefetched, depth 1 ms (waiting in next()) | prefetched / compute alone |")
    print("|---|---:|---:|---:|---:|")
    for f, c, alone, inl, pre, wait in rows:
        print(f"| {f:g} × P = {c * 1e3:.1f} ms | {alone * 1e3:.1f} | {inl * 1e3:.1f} | {pre * 1e3:.1f} ({wait * 1e3:.2f}) | {pre / alone:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
