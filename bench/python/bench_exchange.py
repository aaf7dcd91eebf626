"""mmbal.torch.exchange on gloo (4 processes) vs a bare all_to_all_single of the same bytes.

For each payload, every rank holds random items (uneven row counts, some empty) that a
balanced assignment scatters over all ranks. Timed per repetition after a barrier; the figure
is the median over repetitions of the slowest rank (all-reduce MAX). The baseline moves the
same split sizes with preallocated, already packed buffers; "by hand" is the same collective
with the two row gathers a trainer must do itself to send items in plan order and get them in
destination order (x[pack_index], recv[unpack_index]); exchange adds to that only the plan
checks and the autograd node. Also prints the bytes every rank allocates per call (send buffer + receive
buffer + output; local + received + O(rows) for the index arrays) and the peak RSS growth.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python/bench_exchange.py [--reps 15]
"""

import argparse
import datetime
import os
import resource
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import mmbal
import mmbal.torch as mt

PAYLOADS = [  # (items, mean rows per item, row width in float32)
    (256, 8, 64),  # ~0.5 MB in total
    (512, 32, 256),  # ~16 MB
    (1024, 32, 512),  # ~64 MB
]


def case(items, mean_rows, ranks, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 2 * mean_rows + 1, items)
    source = rng.integers(0, ranks, items)
    target = mmbal.balance(sizes, ranks, algorithm="lpt")
    return sizes, source, target


def timed(fns, reps):
    """Median seconds of each function, interleaved rep by rep (so that the drift of a shared
    machine hits all alike), of the slowest rank."""
    out = [[] for _ in fns]
    for _ in range(reps):
        for k, fn in enumerate(fns):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            out[k].append(time.perf_counter() - t0)
    t = torch.tensor([statistics.median(o) for o in out], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def worker(rank, ranks, init_file, reps, results):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=ranks, timeout=datetime.timedelta(seconds=300))
    torch.set_num_threads(1)
    rows = []
    for items, mean_rows, width in PAYLOADS:
        sizes, source, target = case(items, mean_rows, ranks, items)
        plan = mmbal.alltoall_plan(source, target, sizes, rank)
        x = torch.randn(int(plan.source_rows), width)
        send = x[torch.from_numpy(np.array(plan.pack_index))].contiguous()
        recv = torch.empty(int(sum(plan.recv_splits)), width)
        rs, ss = list(plan.recv_splits), list(plan.send_splits)
        bare = lambda: dist.all_to_all_single(recv, send, output_split_sizes=rs, input_split_sizes=ss)  # noqa: E731
        ours = lambda: mt.exchange(x, plan)  # noqa: E731
        pi = torch.from_numpy(np.array(plan.pack_index))  # writable copies, once per plan, as exchange keeps
        ui = torch.from_numpy(np.array(plan.unpack_index))

        def by_hand():  # the same two row gathers around the bare collective, written inline
            r = torch.empty(int(sum(rs)), width)
            dist.all_to_all_single(r, x[pi], output_split_sizes=rs, input_split_sizes=ss)
            return r[ui]

        ours()
        bare()  # warm-up (connections, allocator)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_bare, t_ours, t_hand = timed([bare, ours, by_hand], reps)
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        total = int(sizes.sum()) * width * 4
        local = int(plan.source_rows) * width * 4
        received = int(plan.dest_rows) * width * 4
        per_call = local + 2 * received + 8 * (len(plan.pack_index) + len(plan.unpack_index))
        rows.append((items, total, local, received, per_call, (rss1 - rss0) * 1024, t_bare, t_ours, t_hand))
    results[rank] = rows
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manager = mp.Manager()
        results = manager.dict()
        mp.spawn(worker, args=(args.ranks, os.path.join(tmp, "init"), args.reps, results), nprocs=args.ranks, join=True)
        rows = {r: results[r] for r in range(args.ranks)}
    print(f"gloo, {args.ranks} processes, median of {args.reps} reps of the slowest rank; load average {os.getloadavg()[0]:.1f}")
    print("| items | global MB | bare all_to_all_single ms | pack + all_to_all_single + unpack by hand ms | exchange ms | exchange / bare | exchange / by hand | rank 0: local + received MB | rank 0: allocated per call MB | rank 0: peak RSS growth MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in range(len(PAYLOADS)):
        items, total, local, received, per_call, rss, base, ours, hand = rows[0][k]
        print(f"| {items} | {total / 1e6:.1f} | {base * 1e3:.2f} | {hand * 1e3:.2f} | {ours * 1e3:.2f} | {ours / base:.2f} | {ours / hand:.2f} | {(local + received) / 1e6:.2f} | {per_call / 1e6:.2f} | {rss / 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
