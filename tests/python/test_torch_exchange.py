"""mmbal.torch on 4 gloo processes: exchange (rows, dtypes, shapes, autograd, groups), the
metadata gather, and StepBalancer's moves, each checked row by row against an independent
recomputation from the global placement."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import mmbal  # noqa: E402
import mmbal.torch as mt  # noqa: E402
import torch_harness  # noqa: E402


def make_case(seed, ranks):
    """A global rearrangement: sizes (zeros included), source ranks (rank 1 holds nothing),
    and a random target in which the last rank receives nothing."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 30))
    sizes = rng.integers(0, 6, n)
    sizes[:2] = 0  # zero-row items
    holders = [r for r in range(ranks) if r != 1] if ranks > 1 else [0]
    source = rng.choice(holders, n)
    receivers = list(range(ranks - 1)) if ranks > 1 else [0]
    dst = rng.choice(receivers, n).astype(np.int32)
    slot = np.zeros(n, np.int32)
    for r in range(ranks):
        idx = np.nonzero(dst == r)[0]
        slot[idx] = rng.permutation(len(idx))
    return sizes, source, mmbal.Assignment(dst, slot, ranks)


def item_rows(i, size, tail, dtype):
    """Rows of item i: every value encodes (item, row, column) so misplaced rows show."""
    base = torch.arange(size * int(np.prod(tail)), dtype=torch.float64).reshape((size,) + tail)
    vals = (base + 1000 * i) % 97
    if dtype == torch.bool:
        return vals.to(torch.int64) % 2 == 1
    return vals.to(dtype)


def local_input(items, sizes, tail, dtype):
    parts = [item_rows(i, int(sizes[i]), tail, dtype) for i in items]
    return torch.cat(parts) if parts else torch.empty((0,) + tail, dtype=dtype)


def exchange_worker(rank, ranks):
    checked = 0
    for seed in range(6):
        sizes, source, target = make_case(seed, ranks)
        plan = mmbal.alltoall_plan(source, target, sizes, rank)
        mine = np.nonzero(source == rank)[0]  # source-slot order: ascending i
        dest = np.nonzero(np.asarray(target.rank) == rank)[0]
        dest = dest[np.argsort(np.asarray(target.slot)[dest])]
        for dtype in (torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.bfloat16):
            for tail in ((), (3,), (2, 2)):
                x = local_input(mine, sizes, tail, dtype)
                y = mt.exchange(x, plan)
                want = local_input(dest, sizes, tail, dtype)
                assert y.dtype == dtype and y.shape == want.shape, (seed, dtype, tail, y.shape, want.shape)
                assert torch.equal(y, want), (seed, dtype, tail)
                checked += 1
        # non-contiguous input (every other column of a wider tensor)
        wide = local_input(mine, sizes, (6,), torch.float64)
        assert torch.equal(mt.exchange(wide[:, ::2], plan), local_input(dest, sizes, (6,), torch.float64)[:, ::2])
        # autograd: d/dx sum(y * w) = w moved back; and a round trip is the identity
        x = local_input(mine, sizes, (3,), torch.float64).requires_grad_(True)
        y = mt.exchange(x, plan)
        w = local_input(dest, sizes, (3,), torch.float64) * 3 + 1
        (y * w).sum().backward()
        expect = torch.cat([item_rows(i, int(sizes[i]), (3,), torch.float64) * 3 + 1 for i in mine]) if len(mine) else torch.empty((0, 3), dtype=torch.float64)
        assert torch.equal(x.grad, expect)
        back = mt.exchange(y.detach(), plan.inverse())
        assert torch.equal(back, x.detach())
    # every rank has nothing: all splits zero
    empty_target = mmbal.Assignment(np.zeros(0, np.int32), np.zeros(0, np.int32), ranks)
    plan = mmbal.alltoall_plan(np.zeros(0, np.int64), empty_target, np.zeros(0, np.int64), rank)
    assert mt.exchange(torch.empty((0, 4)), plan).shape == (0, 4)
    return checked


def test_exchange_rows_dtypes_shapes_autograd():
    counts = torch_harness.run(exchange_worker, 4)
    assert counts == [6 * 10 * 3] * 4


def group_worker(rank, ranks):
    """Global ranks 1 and 3 form a group (group ranks 0 and 1): plans speak group ranks."""
    group = dist.new_group([1, 3])
    if rank not in (1, 3):
        return None
    g = dist.get_rank(group)
    sizes = np.array([2, 0, 3, 1])
    source = np.array([0, 0, 1, 1])
    target = mmbal.Assignment(np.array([1, 1, 0, 0], np.int32), np.array([1, 0, 0, 1], np.int32), 2)
    plan = mmbal.alltoall_plan(source, target, sizes, g)
    mine = np.nonzero(source == g)[0]
    dest = [i for i in np.argsort(np.asarray(target.slot)) if target.rank[i] == g]
    y = mt.exchange(local_input(mine, sizes, (2,), torch.float64), plan, group=group)
    assert torch.equal(y, local_input(dest, sizes, (2,), torch.float64))
    # a plan for the group used on the default group is rejected by size
    with pytest.raises(mmbal.Error, match="plan.ranks = 2 but the group has 4"):
        mt.exchange(local_input(mine, sizes, (2,), torch.float64), plan)
    return g


def test_exchange_in_a_subgroup():
    assert torch_harness.run(group_worker, 4) == [None, 0, None, 1]


def local_meta(seed, rank):
    rng = np.random.default_rng([seed, rank])
    samples = 0 if rank == 1 else int(rng.integers(1, 7))
    segs = []
    for _ in range(samples):
        k = int(rng.integers(0, 4))
        segs.append([(int(rng.integers(0, 3)), int(rng.integers(0, 9)), int(rng.integers(0, 12))) for _ in range(k)])
    segs = [[(m, t, 0 if m == 0 else e) for m, t, e in s] for s in segs]
    return segs


def metadata_worker(rank, ranks):
    gatherer = mt.MetadataGatherer(initial_capacity=8)  # small: forces a growth on step 0
    capacities = []
    for seed in range(3):
        meta = gatherer.gather(mt.LocalMetadata.from_samples(local_meta(seed, rank)))
        capacities.append(gatherer.capacity)
        # independent recomputation from every rank's local data
        sample_rank, seg = [], []
        for r in range(ranks):
            for s in local_meta(seed, r):
                for m, t, e in s:
                    seg.append((len(sample_rank), m, t, e))
                sample_rank.append(r)
        assert meta.sample_rank.tolist() == sample_rank
        got = list(zip(meta.segment_sample.tolist(), meta.segment_modality.tolist(), meta.segment_tokens.tolist(), meta.segment_encoder_len.tolist()))
        assert got == seg
        assert meta.rank_offsets.tolist() == [sum(1 for q in sample_rank if q < r) for r in range(ranks + 1)]
    return capacities


def test_metadata_gather_grows_capacity_consistently():
    caps = torch_harness.run(metadata_worker, 4)
    assert all(c == caps[0] for c in caps), "every rank agrees on the capacity"
    assert caps[0][0] > 8


def same_plan(a, b):
    return (list(a.send_splits) == list(b.send_splits) and list(a.recv_splits) == list(b.recv_splits)
            and np.array_equal(a.pack_index, b.pack_index) and np.array_equal(a.unpack_index, b.unpack_index))


def balancer_worker(rank, ranks):
    for engine in mt.StepBalancer.ENGINES:
        balancer_checks(rank, ranks, engine)
    # verify: equal fingerprints pass; a rank planning with another policy is caught on every rank
    segs = mt.LocalMetadata.from_samples(local_meta(99, rank))
    mt.StepBalancer(modalities=("text", "image", "audio"), verify=True).plan(segs)
    odd = {"llm": ("tokens", "lpt")} if rank == 2 else {}
    with pytest.raises(mmbal.Error, match="ranks planned different steps"):
        mt.StepBalancer(modalities=("text", "image", "audio"), policies=odd, verify=True, engine="python").plan(segs)
    return True


def balancer_checks(rank, ranks, engine):
    policies = {"llm": ("attention:alpha=1,beta=0.01", "lpt"), "audio": ("attention:alpha=1,beta=0.1", "lpt")}
    balancer = mt.StepBalancer(modalities=("text", "image", "audio"), policies=policies, engine=engine)
    for seed in range(3):
        segs = local_meta(seed + 10, rank)
        plan = balancer.plan(mt.LocalMetadata.from_samples(segs))
        if engine == "orchestrator":
            # the NumPy composition over the orchestrator's targets gives its composed plans
            reference = mt.StepPlan(plan.meta, plan.modalities, plan.phases, rank, None)
            for name in [n for n in plan.phases if n != "llm"]:
                assert same_plan(plan.composed_plan(name), reference.composed_plan(name)), name
                assert same_plan(plan.encoder_plan(name), reference.encoder_plan(name)), name
            assert same_plan(plan.llm_plan(), reference.llm_plan())
        meta = plan.meta
        lo = int(meta.rank_offsets[rank])
        # encode every value as (global segment id, row) to check placements exactly
        for name in [n for n in ("image", "audio") if n in plan.phases]:
            mine = plan.local_segments(name)
            x = torch.cat([torch.full((int(meta.segment_encoder_len[j]), 1), float(j)) for j in mine] or [torch.empty((0, 1))])
            moved = plan.move_encoder_inputs(name, x)
            enc = plan.encoder_segments(name)
            want = torch.cat([torch.full((int(meta.segment_encoder_len[j]), 1), float(j)) for j in enc] or [torch.empty((0, 1))])
            assert torch.equal(moved, want)
            out = torch.cat([torch.full((int(meta.segment_tokens[j]), 1), float(j)) for j in enc] or [torch.empty((0, 1))]).requires_grad_(True)
            arrived = plan.move_encoder_outputs(name, out)
            llm = plan.llm_segments(name)
            want = torch.cat([torch.full((int(meta.segment_tokens[j]), 1), float(j)) for j in llm] or [torch.empty((0, 1))])
            assert torch.equal(arrived, want)
            # assembly order: samples in llm_samples order, then segment id
            order = {int(s): k for k, s in enumerate(plan.llm_samples())}
            keys = [(order[int(meta.segment_sample[j])], int(j)) for j in llm]
            assert keys == sorted(keys)
            assert set(llm.tolist()) == {j for j in np.nonzero(meta.segment_modality == plan.modalities.index(name))[0] if int(meta.segment_sample[j]) in order}
            arrived.sum().backward()
            assert torch.equal(out.grad, torch.ones_like(out))
        # per-sample rows and restore
        per = torch.arange(lo, lo + len(segs), dtype=torch.float64).view(-1, 1)
        moved = plan.move_samples(per, sizes=np.ones(meta.samples, np.int64))
        assert moved.view(-1).tolist() == [float(s) for s in plan.llm_samples()]
        assert torch.equal(plan.restore(moved, sizes=np.ones(meta.samples, np.int64)), per)
        # the LLM phase is balanced: max load after <= before (LPT never worse than origin here)
        before, after = plan.tokens_per_rank("llm")
        assert before.sum() == after.sum()
        lb, la = plan.loads("llm")
        assert la.max() <= lb.max() + 1e-9 and abs(la.sum() - lb.sum()) <= 1e-9 * max(1.0, lb.sum())


def test_step_balancer_moves_every_row_to_its_place():
    assert torch_harness.run(balancer_worker, 4) == [True] * 4


def double_backward_worker(rank, ranks):
    """The backward of exchange is itself differentiable: a gradient penalty through two
    ranks equals the same computation without the exchange (rows only move)."""
    sizes, source, target = make_case(7, ranks)
    plan = mmbal.alltoall_plan(source, target, sizes, rank)
    mine = np.nonzero(source == rank)[0]
    x = local_input(mine, sizes, (2,), torch.float64).requires_grad_(True)
    # loss = Σ y³ over every rank, y = moved x; dL/dx = 3x² (moved back); penalty Σ (dL/dx)² / 2
    g, = torch.autograd.grad((mt.exchange(x, plan) ** 3).sum(), x, create_graph=True)
    assert torch.equal(g.detach(), 3 * x.detach() ** 2)
    (g.pow(2).sum() / 2 + x.sum()).backward()
    # d/dx [ (3x²)² / 2 + x ] = 18 x³ + 1, row by row, whatever rank the row visited
    assert torch.allclose(x.grad, 18 * x.detach() ** 3 + 1, rtol=1e-12, atol=0)
    return x.shape[0]


def test_exchange_double_backward():
    rows = torch_harness.run(double_backward_worker, 2)
    assert sum(rows) > 0
