"""Batch samplers of mmbal.torch: equal batch counts, every sample exactly once per epoch,
set_epoch, exact mid-epoch resume, bad input. No process group needed (num_replicas/rank)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import mmbal  # noqa: E402
import mmbal.torch as mt  # noqa: E402


def epoch_batches(make, ranks):
    """Every rank's batches of one epoch (each rank its own sampler instance)."""
    return [list(make(r)) for r in range(ranks)]


def check_epoch(per_rank, n):
    counts = {len(b) for b in per_rank}
    assert len(counts) == 1, f"ranks got different batch counts {[len(b) for b in per_rank]}"
    seen = sorted(i for batches in per_rank for b in batches for i in b)
    assert seen == list(range(n)), "every sample exactly once in the epoch"


CASES = [(n, ranks, budget) for n in (0, 1, 3, 7, 40, 113) for ranks in (1, 2, 3, 4, 5) for budget in (1, 50, 170, 1000)]


@pytest.mark.parametrize("n,ranks,budget", CASES)
def test_token_budget_epoch_properties(n, ranks, budget):
    rng = np.random.default_rng(n * 31 + ranks)
    lengths = {"text": rng.integers(0, 60, n), "image": rng.integers(0, 80, n) * (rng.random(n) < 0.5), "audio": rng.integers(0, 30, n), "video": np.zeros(n, np.int64)}
    cost = sum(lengths.values())
    for epoch in (0, 3):

        def make(r):
            s = mt.TokenBudgetSampler(lengths, budget, num_replicas=ranks, rank=r, seed=11)
            s.set_epoch(epoch)
            return s

        per_rank = epoch_batches(make, ranks)
        check_epoch(per_rank, n)
        assert all(len(make(r)) == len(per_rank[r]) for r in range(ranks))
        # budget: a batch above it is a single oversize sample (merges keep it since session 28)
        over = [b for batches in per_rank for b in batches if len(b) > 1 and cost[b].sum() > budget]
        assert over == []
        # empty batches only when there are fewer samples than ranks, or when every batch is
        # one sample and no two fit together
        empties = sum(1 for batches in per_rank for b in batches if not b)
        if 0 < n < ranks:
            assert empties == ranks - n
        elif empties:
            assert empties < ranks and all(len(b) == 1 for batches in per_rank for b in batches if b)
        if n == 0:
            assert per_rank == [[] for _ in range(ranks)]  # no batch at all, on every rank


def test_token_budget_counts_every_modality():
    # 2 samples of 10 text tokens + 100 image tokens: budget 150 cannot hold both
    s = mt.TokenBudgetSampler([[10, 100], [10, 100]], 150, num_replicas=1, rank=0, shuffle=False)
    assert list(s) == [[0], [1]]
    # the same by text alone would fit in one batch
    s = mt.TokenBudgetSampler([10, 10], 150, num_replicas=1, rank=0, shuffle=False)
    assert list(s) == [[0, 1]]
    # weights scale modalities
    s = mt.TokenBudgetSampler([[10, 100], [10, 100]], 150, num_replicas=1, rank=0, shuffle=False, weights=[1, 0.5])
    assert list(s) == [[0, 1]]


def test_epochs_reshuffle_deterministically():
    lengths = np.arange(1, 60)
    a = mt.TokenBudgetSampler(lengths, 100, num_replicas=2, rank=0, seed=5)
    b = mt.TokenBudgetSampler(lengths, 100, num_replicas=2, rank=0, seed=5)
    e0 = list(a)
    assert e0 == list(b) == list(a)  # same epoch, same batches, also when iterated again
    a.set_epoch(1)
    assert list(a) != e0
    c = mt.TokenBudgetSampler(lengths, 100, num_replicas=2, rank=0, seed=6)
    assert list(c) != e0


@pytest.mark.parametrize("stop", [0, 1, 4, 9])
def test_resume_mid_epoch_exactly(stop):
    lengths = np.random.default_rng(3).integers(1, 90, 101)
    s = mt.TokenBudgetSampler(lengths, 120, num_replicas=3, rank=2, seed=9)
    s.set_epoch(2)
    full = list(s)
    assert len(full) > 9
    it = iter(s)
    taken = [next(it) for _ in range(stop)]
    state = s.state_dict()
    assert state == {"epoch": 2, "seed": 9, "position": stop}
    fresh = mt.TokenBudgetSampler(lengths, 120, num_replicas=3, rank=2, seed=9)
    fresh.load_state_dict(state)
    assert len(fresh) == len(full)
    assert taken + list(fresh) == full
    # after the resumed epoch the next pass is a whole epoch again
    assert list(fresh) == full
    # consumed= overrides the count (DataLoader prefetch)
    assert s.state_dict(consumed=1)["position"] == 1
    # the usual loop calls set_epoch(epoch) after loading: the position of that epoch is kept
    looped = mt.TokenBudgetSampler(lengths, 120, num_replicas=3, rank=2, seed=9)
    looped.load_state_dict(state)
    looped.set_epoch(2)
    assert taken + list(looped) == full
    # ... but another epoch starts from its first batch
    other = mt.TokenBudgetSampler(lengths, 120, num_replicas=3, rank=2, seed=9)
    other.load_state_dict(state)
    other.set_epoch(3)
    s.set_epoch(3)
    assert list(other) == list(s)


def test_bad_input_raises_mmbal_error():
    with pytest.raises(mmbal.Error, match="negative"):
        mt.TokenBudgetSampler([1, -2], 10, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="integers"):
        mt.TokenBudgetSampler([1.5, 2.0], 10, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="max_tokens"):
        mt.TokenBudgetSampler([1, 2], 0, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="max_tokens"):
        mt.TokenBudgetSampler([1, 2], float("nan"), num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="rank = 2"):
        mt.TokenBudgetSampler([1, 2], 10, num_replicas=2, rank=2)
    with pytest.raises(mmbal.Error, match="num_replicas = 0"):
        mt.TokenBudgetSampler([1, 2], 10, num_replicas=0, rank=0)
    with pytest.raises(mmbal.Error, match=r"num_replicas = 2147483648 is out of range \[1, 16777216\]"):
        mt.TokenBudgetSampler([1, 2], 10, num_replicas=2**31, rank=0)
    with pytest.raises(mmbal.Error, match=r"deal_groups: ranks = 16777217 is out of range"):
        mt.deal_groups([[0]], mmbal.max_ranks + 1, [1.0])
    with pytest.raises(mmbal.Error, match="different lengths"):
        mt.TokenBudgetSampler({"text": [1, 2], "image": [1]}, 10, num_replicas=1, rank=0)
    s = mt.TokenBudgetSampler([1, 2], 10, num_replicas=1, rank=0, seed=1)
    with pytest.raises(mmbal.Error, match="seed 2"):
        s.load_state_dict({"epoch": 0, "seed": 2, "position": 0})
    with pytest.raises(mmbal.Error, match="position 5"):
        s.load_state_dict({"epoch": 0, "seed": 1, "position": 5})
    with pytest.raises(mmbal.Error, match="missing key"):
        s.load_state_dict({"epoch": 0})
    with pytest.raises(mmbal.Error, match=r"state\['position'\] = 1.9 must be an integer"):
        s.load_state_dict({"epoch": 0, "seed": 1, "position": 1.9})
    with pytest.raises(mmbal.Error, match=r"consumed = 999 not in \[0, 1\]"):
        s.state_dict(consumed=999)
    with pytest.raises(mmbal.Error, match="beyond int64"):
        mt.TokenBudgetSampler(np.array([2**63], np.uint64), 10, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="max_tokens = True must be"):
        mt.TokenBudgetSampler([1, 2], True, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="weights 'a' must be"):
        mt.TokenBudgetSampler([1, 2], 10, num_replicas=1, rank=0, weights="a")
    with pytest.raises(mmbal.Error, match="num_replicas = 'x' must be an integer"):
        mt.TokenBudgetSampler([1, 2], 10, num_replicas="x", rank=0)
    with pytest.raises(mmbal.Error, match="epoch = 1.5 must be an integer"):
        s.set_epoch(1.5)


def test_sampler_arguments_numpy_would_refuse():
    """Negative seeds and epochs (DistributedSampler takes any integer), NumPy and tensor
    budgets, and an empty epoch given as a plain list."""
    lengths = np.random.default_rng(4).integers(1, 50, 40)
    for seed in (-1, -(2**70)):
        s = mt.TokenBudgetSampler(lengths, 60, num_replicas=2, rank=0, seed=seed)
        s.set_epoch(-3)
        again = mt.TokenBudgetSampler(lengths, 60, num_replicas=2, rank=0, seed=seed)
        again.set_epoch(-3)
        assert list(s) == list(again) and sorted(i for b in s.global_batches() for i in b) == list(range(40))
    v = np.random.default_rng(5).integers(0, 5, 40)
    isf = mt.ISFSampler(v, lengths, 12, 400, num_replicas=2, rank=1, seed=-7)
    assert sorted(i for b in isf.global_batches() for i in b) == list(range(40))
    # a budget of any real number type gives the same batches as the int
    base = mt.TokenBudgetSampler(lengths, 60, num_replicas=2, rank=0).global_batches()
    for budget in (np.float32(60), np.int16(60), torch.tensor(60), 60.0):
        assert mt.TokenBudgetSampler(lengths, budget, num_replicas=2, rank=0).global_batches() == base
    empty = mt.TokenBudgetSampler([], 10, num_replicas=2, rank=0)
    assert len(empty) == 0 and list(empty) == []


def test_deal_groups_merges_and_splits_without_loss():
    rng = np.random.default_rng(0)
    for _ in range(200):
        ranks = int(rng.integers(1, 6))
        sizes = rng.integers(0, 4, int(rng.integers(0, 12)))
        items = iter(range(1000))
        groups = [[next(items) for _ in range(k)] for k in sizes]
        costs = [float(len(g)) for g in groups]
        out = mt.deal_groups(groups, ranks, costs)
        assert len(out) % ranks == 0
        assert sorted(i for g in out for i in g) == sorted(i for g in groups for i in g)
        n = sum(len(g) for g in groups)
        if n >= ranks:
            assert all(out), "no empty group when there are enough samples"
        assert out == reference_deal_groups(groups, ranks, costs)


def reference_deal_groups(groups, ranks, costs):
    """The plain list version (one sort per merge, one scan per split): what deal_groups did
    before its heaps, and must still do when every merge fits."""
    out = [list(g) for g in groups if len(g)]
    cost = [c for g, c in zip(groups, costs) if len(g)]
    if len(out) >= ranks:
        while len(out) % ranks:
            order = sorted(range(len(out)), key=lambda i: (cost[i], i))
            a, b = sorted(order[:2])
            out[a] = out[a] + out[b]
            cost[a] += cost[b]
            del out[b], cost[b]
    elif out:
        while len(out) < ranks:
            i = max(range(len(out)), key=lambda k: (len(out[k]), -k))
            if len(out[i]) < 2:
                break
            g = out[i]
            out[i : i + 1] = [g[: len(g) // 2], g[len(g) // 2 :]]
        out += [[] for _ in range(ranks - len(out))]
    return out


def test_deal_groups_keeps_the_budget():
    """A merge that would exceed the caps is refused: splits reach the next multiple instead
    (found in session 28: the two cheapest batches of 60 tokens merged to 120 > 100)."""
    c = [50, 50, 60, 60, 60]
    fits = lambda members: sum(c[m] for m in members) <= 100  # noqa: E731
    # the cheapest pair (60 + 60) does not fit: the two-sample group is split instead
    assert mt.deal_groups([[0, 1], [2], [3]], 2, [100.0, 60.0, 60.0], fits) == [[0], [1], [2], [3]]
    # nothing fits and nothing splits: an empty group makes up the count
    assert mt.deal_groups([[2], [3], [4]], 2, [60.0] * 3, fits) == [[2], [3], [4], []]
    # a merge that fits is still a merge (the cheapest pair, in the earlier place)
    assert mt.deal_groups([[2], [0], [1]], 2, [60.0, 50.0, 50.0], fits) == [[2], [0, 1]]
    s = mt.TokenBudgetSampler([60] * 5, 100, num_replicas=2, rank=0, shuffle=False)
    batches = s.global_batches()
    assert len(batches) % 2 == 0 and sorted(i for b in batches for i in b) == list(range(5))
    assert all(60 * len(b) <= 100 for b in batches), batches
    rng = np.random.default_rng(11)
    for ranks in (3, 8, 64):
        lengths = rng.integers(1, 3000, 1000)
        s = mt.TokenBudgetSampler(lengths, 8192, num_replicas=ranks, rank=0, seed=ranks)
        batches = s.global_batches()
        assert len(batches) % ranks == 0 and sorted(i for b in batches for i in b) == list(range(1000))
        assert all(int(lengths[b].sum()) <= 8192 for b in batches if len(b) > 1)
    # Splitting at scale: 80,001 one-sample groups over 512 ranks took 15.6 s with a sort per merge.
    groups = [[i] for i in range(80_001)]
    out = mt.deal_groups(groups, 512, [1.0] * len(groups))
    assert len(out) % 512 == 0 and sum(map(len, out)) == 80_001


ISF_CASES = [(n, ranks) for n in (0, 1, 5, 64, 300) for ranks in (1, 3, 4)]


@pytest.mark.parametrize("n,ranks", ISF_CASES)
def test_isf_sampler_epoch_properties(n, ranks):
    rng = np.random.default_rng(n + 7 * ranks)
    vision = rng.integers(0, 5, n) * (rng.random(n) < 0.7)  # images per sample, some text-only
    text = rng.integers(20, 400, n)
    text[:1] = 5000  # an oversize sample: a group of its own
    for epoch in (0, 1):

        def make(r):
            s = mt.ISFSampler(vision, text, 8, 1024, num_replicas=ranks, rank=r, seed=3)
            s.set_epoch(epoch)
            return s

        per_rank = epoch_batches(make, ranks)
        check_epoch(per_rank, n)
        # the caps hold except for oversize singletons and <= ranks-1 merged groups
        over = [b for batches in per_rank for b in batches if len(b) > 1 and (vision[b].sum() > 8 or text[b].sum() > 1024)]
        assert len(over) <= ranks - 1
    a, b = make(0), make(0)
    a.set_epoch(0)
    b.set_epoch(1)
    if n > 5:
        assert list(a) != list(b), "epochs reshuffle"


def test_isf_sampler_resumes_and_refuses_lossy_options():
    rng = np.random.default_rng(1)
    vision, text = rng.integers(0, 6, 200), rng.integers(10, 500, 200)
    s = mt.ISFSampler(vision, text, 10, 2048, num_replicas=2, rank=1, seed=4)
    full = list(s)
    it = iter(s)
    head = [next(it) for _ in range(3)]
    fresh = mt.ISFSampler(vision, text, 10, 2048, num_replicas=2, rank=1, seed=4)
    fresh.load_state_dict(s.state_dict())
    assert head + list(fresh) == full
    with pytest.raises(mmbal.Error, match="would drop samples"):
        mt.ISFSampler(vision, text, 10, 2048, num_replicas=2, rank=0, oversize="drop")
    with pytest.raises(mmbal.Error, match="would drop samples"):
        mt.ISFSampler(vision, text, 10, 2048, num_replicas=2, rank=0, drop_unfilled=True)
    with pytest.raises(mmbal.Error, match="vision has 200 samples but text has 3"):
        mt.ISFSampler(vision, [1, 2, 3], 10, 2048, num_replicas=2, rank=0)
    with pytest.raises(mmbal.Error):  # ISF's own check: Qv > 0
        mt.ISFSampler(vision, text, 0, 2048, num_replicas=2, rank=0)


def test_samplers_drive_a_dataloader():
    lengths = np.random.default_rng(5).integers(1, 50, 37)
    dataset = torch.arange(37)
    seen = []
    for rank in range(3):
        sampler = mt.TokenBudgetSampler(lengths, 80, num_replicas=3, rank=rank, seed=2)
        loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)
        batches = [b.tolist() for b in loader]
        assert len(batches) == len(loader) == len(sampler)
        assert batches == list(sampler)
        seen += [i for b in batches for i in b]
    assert sorted(seen) == list(range(37))


def test_global_batches_is_a_copy_and_flags_are_bools():
    s = mt.TokenBudgetSampler(np.arange(1, 21), 30, num_replicas=2, rank=0, seed=1)
    g = s.global_batches()
    g[0].clear()
    g.pop()
    assert sorted(i for b in s.global_batches() for i in b) == list(range(20))
    assert list(s)[0] != []
    with pytest.raises(mmbal.Error, match="shuffle: expected True or False, got 'False'"):
        mt.TokenBudgetSampler([1, 2], 10, num_replicas=1, rank=0, shuffle="False")
    # masked arrays and ragged lists: mmbal.Error, not NumPy's values or ValueError
    with pytest.raises(mmbal.Error, match="lengths is a masked array"):
        mt.TokenBudgetSampler(np.ma.array([1, 2], mask=[0, 1]), 10, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="vision is a masked array"):
        mt.ISFSampler(np.ma.array([1, 2], mask=[0, 1]), [1, 2], 5, 5, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="lengths cannot be read as an array"):
        mt.TokenBudgetSampler([[1, 2], [3]], 10, num_replicas=1, rank=0)
    with pytest.raises(mmbal.Error, match="samples must be a list of samples, got int"):
        mt.LocalMetadata.from_samples(5)
    with pytest.raises(mmbal.Error, match="groups must be lists of sample indices, got 1"):
        mt.deal_groups([1, 2], 2, [1.0, 1.0])
