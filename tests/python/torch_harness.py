"""Runs a function on N gloo processes (torch.multiprocessing.spawn, file:// rendezvous) for
the mmbal.torch tests. `fn(rank, ranks, *args)` runs after init_process_group; what it returns
is collected per rank; an exception on any rank fails the run with that rank's traceback."""

import datetime
import os
import tempfile
import traceback


def _entry(rank, ranks, init_file, timeout_s, fn, args, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=ranks, timeout=datetime.timedelta(seconds=timeout_s))
    try:
        results[rank] = ("ok", fn(rank, ranks, *args))
    except BaseException as e:  # noqa: BLE001 -- reported to the parent
        results[rank] = ("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 -- a timed-out group may fail to tear down
            pass


def run(fn, ranks=4, *args, timeout_s=60, allow_errors=False):
    """Returns [result of rank 0, ..., rank N-1]; raises AssertionError naming the failing rank
    unless `allow_errors` (then failing ranks give ("error", text))."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        manager = mp.Manager()
        results = manager.dict()
        mp.spawn(_entry, args=(ranks, os.path.join(tmp, "init"), timeout_s, fn, args, results), nprocs=ranks, join=True)
        out = [results.get(r, ("error", "no result")) for r in range(ranks)]
        manager.shutdown()
    if allow_errors:
        return out
    for r, (status, value) in enumerate(out):
        assert status == "ok", f"rank {r} failed: {value}"
    return [value for _, value in out]
