"""mmbal.balance, mmbal.Assignment and mmbal.alltoall_plan against independent Python references."""

import os

import numpy as np
import pytest

import mmbal

ALGORITHMS = ["lpt", "lpt+refine", "greedy-ascending", "kk", "tolerance:v=10", "migrate:eps=0.001"]


def reference_loads(lengths, rank, slot, ranks, cost):
    """Per-rank cost recomputed in Python: tokens = sum, attention = alpha*sum + beta*sum of squares."""
    loads = np.zeros(ranks)
    for r in range(ranks):
        mine = [int(lengths[i]) for i in np.argsort(slot) if rank[i] == r]
        if cost == "tokens":
            loads[r] = sum(mine)
        else:  # attention:alpha=1,beta=0.01
            loads[r] = sum(mine) + 0.01 * sum(x * x for x in mine)
    return loads


def check_layout(rank, slot, ranks):
    """Every rank's slots are exactly 0..k-1."""
    for r in range(ranks):
        assert sorted(slot[rank == r].tolist()) == list(range(int((rank == r).sum())))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("cost", ["tokens", "attention:alpha=1,beta=0.01"])
def test_balance_is_a_valid_assignment_with_recomputed_loads(algorithm, cost):
    rng = np.random.default_rng(7)
    for n, ranks in [(1, 1), (5, 8), (40, 4), (257, 7)]:
        lengths = rng.integers(0, 3000, n).astype(np.int64)
        origin = rng.integers(0, ranks, n)
        a = mmbal.balance(lengths, ranks, algorithm=algorithm, cost=cost, origin=origin)
        assert a.rank.dtype == np.int32 and a.slot.dtype == np.int32 and a.loads.dtype == np.float64
        assert len(a.rank) == n and a.ranks == ranks and len(a.loads) == ranks
        a.validate()
        check_layout(a.rank, a.slot, ranks)
        np.testing.assert_allclose(a.loads, reference_loads(lengths, a.rank, a.slot, ranks, cost), rtol=1e-12)
        solo = lengths + (0.01 * lengths.astype(float) ** 2 if cost != "tokens" else 0)
        assert a.lower_bound == pytest.approx(max(solo.sum() / ranks, solo.max()), rel=1e-12)
        assert a.loads.max() >= a.lower_bound * (1 - 1e-12)


def test_the_default_algorithm_is_the_costs_best_quality_setting():
    # No algorithm: lpt+refine (padded for a padded cost), exactly as when named, never above lpt.
    rng = np.random.default_rng(5)
    for cost, default in (("tokens", "lpt+refine"), ("attention:alpha=1,beta=0.001", "lpt+refine"),
                          ("padded", "padded"), ("padded-attention:alpha=1,beta=0.001", "padded")):
        for n, ranks in [(1, 1), (9, 4), (64, 8), (300, 7)]:
            lengths = rng.integers(1, 5000, n)
            implicit = mmbal.balance(lengths, ranks, cost=cost)
            named = mmbal.balance(lengths, ranks, algorithm=default, cost=cost)
            np.testing.assert_array_equal(implicit.rank, named.rank)
            np.testing.assert_array_equal(implicit.slot, named.slot)
            lpt = mmbal.balance(lengths, ranks, algorithm="lpt", cost=cost)
            assert implicit.loads.max() <= lpt.loads.max() * (1 + 1e-12), (cost, n, ranks)
    assert mmbal.balance([1, 2], 2, algorithm=None).loads.max() == 2


def test_lpt_meets_its_guarantee_and_matches_a_python_lpt():
    rng = np.random.default_rng(3)
    for _ in range(20):
        ranks = int(rng.integers(1, 9))
        lengths = rng.integers(1, 10_000, int(rng.integers(1, 60)))
        a = mmbal.balance(lengths, ranks, algorithm="lpt")
        # Python LPT: largest first onto the least-loaded rank (ties: lowest rank).
        loads = [0] * ranks
        for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
            r = min(range(ranks), key=lambda r: (loads[r], r))
            loads[r] += int(lengths[i])
        assert a.loads.max() == max(loads)
        assert a.loads.max() <= (4 / 3) * max(lengths.sum() / ranks, lengths.max()) + 1e-9


def test_input_dtypes_agree_and_int32_is_read_in_place():
    lengths = np.array([5, 1, 9, 4, 4, 7, 0, 3], dtype=np.int64)
    ref = mmbal.balance(lengths, 3)
    for variant in (lengths.astype(np.int32), lengths.astype(np.uint32), lengths.astype(np.uint8), lengths.tolist(),
                    np.repeat(lengths, 2)[::2], lengths.astype(">i8"), lengths.astype(">u4")):
        a = mmbal.balance(variant, 3)
        np.testing.assert_array_equal(a.rank, ref.rank)
        np.testing.assert_array_equal(a.slot, ref.slot)


def test_empty_input_gives_an_empty_assignment():
    for empty in ([], np.zeros(0, dtype=np.int64), np.zeros(0)):
        a = mmbal.balance(empty, 4)
        assert len(a.rank) == 0 and len(a.slot) == 0 and a.ranks == 4
        np.testing.assert_array_equal(a.loads, np.zeros(4))
        a.validate()


def test_constraints_are_honoured():
    rng = np.random.default_rng(11)
    lengths = rng.integers(1, 1000, 30)
    a = mmbal.balance(lengths, 4, count_cap="equal")
    assert sorted(np.bincount(a.rank, minlength=4).tolist()) == [7, 7, 8, 8]
    a = mmbal.balance(lengths, 4, count_cap=9)
    assert np.bincount(a.rank, minlength=4).max() <= 9
    groups = np.arange(30) // 3
    a = mmbal.balance(lengths, 4, groups=groups)
    for g in range(10):
        assert len(set(a.rank[groups == g].tolist())) == 1
    a = mmbal.balance(lengths, 4, capacity=float(lengths.sum()))
    assert a.loads.max() <= lengths.sum()


def test_migrate_keeps_items_home_when_balanced():
    lengths = np.full(16, 100)
    origin = np.arange(16) % 4
    a = mmbal.balance(lengths, 4, algorithm="migrate:eps=0.001", origin=origin)
    np.testing.assert_array_equal(a.rank, origin)


def test_user_built_assignment():
    a = mmbal.Assignment([1, 0, 1], [1, 0, 0], 2)
    a.validate()
    assert a.loads is None and a.rank.dtype == np.int32
    np.testing.assert_array_equal(a.loads_for([5, 6, 7], "tokens"), [6.0, 12.0])
    assert [x.tolist() for x in a.items_by_rank()] == [[1], [2, 0]]
    with pytest.raises(mmbal.Error, match="slot"):
        mmbal.Assignment([0, 0], [0, 0], 1)
    with pytest.raises(mmbal.Error, match=r"assignment.rank\[1\] = 5"):
        mmbal.Assignment([0, 5], [0, 0], 2)
    with pytest.raises(mmbal.Error, match="rank has 2 entries but slot has 1"):
        mmbal.Assignment([0, 1], [0], 2)
    # a cost whose loads overflow a double is refused, as mmbal.balance refuses it
    with pytest.raises(mmbal.Error, match="overflow a double"):
        a.loads_for([5, 6, 7], "attention:alpha=1e308,beta=1e308")


def test_results_are_immutable_and_independent_of_the_inputs():
    """Validated state cannot be edited in place behind its checks: an assignment copies the
    caller's arrays and, as a plan, hands out read-only index arrays and new split lists."""
    rank = np.array([1, 0, 1], np.int32)
    a = mmbal.Assignment(rank, np.array([1, 0, 0], np.int32), 2)
    rank[0] = 0  # the caller's array changes; the assignment does not
    assert a.rank.tolist() == [1, 0, 1]
    b = mmbal.balance([1, 2, 3], 2)
    for arr in (a.rank, a.slot, b.rank, b.slot):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1
    p = mmbal.alltoall_plan([0, 1, 0], b, [2, 3, 4], 0)
    for arr in (p.pack_index, p.unpack_index, p.send_items, p.recv_items):
        with pytest.raises(ValueError, match="read-only"):
            arr += 1
    splits = p.send_splits
    splits.append(5)
    assert p.send_splits == splits[:-1] and sum(p.send_splits) == p.source_rows
    p.check(0, p.source_rows)


# ------------------------------------------------------------------ all-to-all plans


def source_slots(source_rank):
    """Position of every item among its rank's items in ascending id."""
    slots = np.zeros(len(source_rank), dtype=np.int64)
    seen = {}
    for i, r in enumerate(source_rank):
        slots[i] = seen.get(int(r), 0)
        seen[int(r)] = slots[i] + 1
    return slots


def make_rows(source_rank, sizes, ranks, width=3):
    """Each rank's input: its items' rows back to back in source-slot order; row j of item i is
    [i, j, i*1000+j] so every row is unique."""
    inputs = []
    for r in range(ranks):
        rows = [[i, j, i * 1000 + j] for i in range(len(sizes)) if source_rank[i] == r for j in range(sizes[i])]
        inputs.append(np.array(rows, dtype=np.int64).reshape(-1, width))
    return inputs


def expected_outputs(target, sizes):
    out = []
    for r in range(target.ranks):
        items = sorted((int(target.slot[i]), i) for i in range(len(sizes)) if target.rank[i] == r)
        rows = [[i, j, i * 1000 + j] for _, i in items for j in range(sizes[i])]
        out.append(np.array(rows, dtype=np.int64).reshape(-1, 3))
    return out


def simulate(plans, inputs):
    """all_to_all_single among the plans' ranks, in process."""
    ranks = len(plans)
    sends = []
    for p, x in zip(plans, inputs):
        assert x.shape[0] == p.source_rows == sum(p.send_splits)
        send = x[p.pack_index]
        sends.append(np.split(send, np.cumsum(p.send_splits)[:-1]))
    outs = []
    for q, p in enumerate(plans):
        recv = np.concatenate([sends[s][q] for s in range(ranks)]) if ranks else None
        assert recv.shape[0] == p.dest_rows == sum(p.recv_splits)
        assert all(sends[s][q].shape[0] == p.recv_splits[s] for s in range(ranks))
        outs.append(recv[p.unpack_index])
    return outs


@pytest.mark.parametrize("seed", range(8))
def test_plans_move_rows_exactly_and_inverse_restores(seed):
    rng = np.random.default_rng(seed)
    ranks = int(rng.integers(1, 6))
    n = int(rng.integers(0, 40))
    sizes = rng.integers(0, 5, n)  # zero-row items included
    source_rank = rng.integers(0, ranks, n)
    if seed == 0 and ranks > 1:
        source_rank[:] = 0  # every other rank starts empty
    target = mmbal.balance(rng.integers(0, 100, n), ranks, algorithm="lpt")
    plans = [mmbal.alltoall_plan(source_rank, target, sizes, r) for r in range(ranks)]
    assert len({p.fingerprint for p in plans}) == 1
    assert all(p.rank == r and p.ranks == ranks for r, p in enumerate(plans))
    inputs = make_rows(source_rank, sizes, ranks)
    outs = simulate(plans, inputs)
    for got, want in zip(outs, expected_outputs(target, sizes)):
        np.testing.assert_array_equal(got, want)
    back = simulate([p.inverse() for p in plans], outs)
    for got, want in zip(back, inputs):
        np.testing.assert_array_equal(got, want)
    # Wire order: to one peer in ascending destination slot; recv_items are destination slots.
    src_slot = source_slots(source_rank)
    for r, p in enumerate(plans):
        local = [i for i in range(n) if source_rank[i] == r]
        by_slot = {int(src_slot[i]): i for i in local}
        packed = [by_slot[s] for s in p.send_items.tolist()]
        assert packed == sorted(local, key=lambda i: (int(target.rank[i]), int(target.slot[i])))
        arrived = sorted((int(source_rank[i]), int(target.slot[i])) for i in range(n) if target.rank[i] == r)
        assert p.recv_items.tolist() == [s for _, s in arrived]
        assert p.send_items.dtype == np.int64 and p.pack_index.dtype == np.int64


def test_plan_check_rejects_another_rank_or_row_count():
    target = mmbal.balance([3, 1, 2, 5], 2)
    p = mmbal.alltoall_plan([0, 0, 1, 1], target, [2, 1, 1, 1], 0)
    p.check(0, 3)
    p.check(np.int64(0), np.int64(3))
    with pytest.raises(mmbal.Error, match="made for rank 0 of 2 but used on rank 1"):
        p.check(1, 3)
    with pytest.raises(mmbal.Error, match="the input has 4 rows but the plan for rank 0 expects source_rows = 3"):
        p.check(0, 4)
    with pytest.raises(mmbal.Error, match="rows = -1 is out of range"):
        p.check(0, -1)


def test_numpy_integers_are_accepted_as_ints_floats_are_not():
    a = mmbal.balance([4, 2, 9, 1], np.int64(2))
    assert a.ranks == 2
    p = mmbal.alltoall_plan([0, 0, 1, 1], a, [1, 1, 1, 1], np.int32(1))
    assert p.rank == 1
    with pytest.raises(mmbal.Error, match=r"ranks: expected an int, got 2.0 \(float\)"):
        mmbal.balance([4, 2], 2.0)
    with pytest.raises(mmbal.Error, match="ranks: expected an int, got True"):
        mmbal.balance([4, 2], True)
    # NumPy's and torch's booleans pass operator.index as 0 or 1: refused as Python's are
    with pytest.raises(mmbal.Error, match="ranks: expected an int, got True"):
        mmbal.balance([4, 2], np.bool_(True))
    with pytest.raises(mmbal.Error, match="rank: expected an int, got array"):
        mmbal.alltoall_plan([0, 0, 1, 1], a, [1, 1, 1, 1], np.array(True))
    torch = pytest.importorskip("torch")
    with pytest.raises(mmbal.Error, match=r"ranks: expected an int, got tensor\(True\)"):
        mmbal.balance([4, 2], torch.tensor(True))


def test_fingerprint_changes_with_sizes_and_inverse():
    target = mmbal.balance([3, 1, 2, 5], 2)
    p = mmbal.alltoall_plan([0, 0, 1, 1], target, [1, 1, 1, 1], 0)
    q = mmbal.alltoall_plan([0, 0, 1, 1], target, [1, 1, 1, 2], 0)
    assert p.fingerprint != q.fingerprint
    assert p.inverse().fingerprint != p.fingerprint
    assert p.inverse().inverse().fingerprint == p.fingerprint


def test_plan_bad_input():
    target = mmbal.balance([3, 1, 2, 5], 2)
    with pytest.raises(mmbal.Error, match="source_rank has 3 entries but target has 4 items"):
        mmbal.alltoall_plan([0, 0, 1], target, [1, 1, 1, 1], 0)
    with pytest.raises(mmbal.Error, match="sizes has 2 entries"):
        mmbal.alltoall_plan([0, 0, 1, 1], target, [1, 1], 0)
    with pytest.raises(mmbal.Error, match=r"sizes\[1\] = -1"):
        mmbal.alltoall_plan([0, 0, 1, 1], target, [1, -1, 1, 1], 0)
    with pytest.raises(mmbal.Error, match=r"source_rank\[3\] = 2 is out of range"):
        mmbal.alltoall_plan([0, 0, 1, 2], target, [1, 1, 1, 1], 0)
    with pytest.raises(mmbal.Error, match="rank = 2 is out of range"):
        mmbal.alltoall_plan([0, 0, 1, 1], target, [1, 1, 1, 1], 2)
    with pytest.raises(mmbal.Error, match="rank = -1 is out of range"):
        mmbal.alltoall_plan([0, 0, 1, 1], target, [1, 1, 1, 1], -1)
    with pytest.raises(mmbal.Error, match="target must be an mmbal.Assignment"):
        mmbal.alltoall_plan([0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 1, 1], 0)
    with pytest.raises(mmbal.Error, match=r"sizes\[0\] = 1.0 is not an int"):
        mmbal.alltoall_plan([0, 0, 1, 1], target, [1.0, 1, 1, 1], 0)
    with pytest.raises(mmbal.Error, match="sizes: expected integers, got dtype float64"):
        mmbal.alltoall_plan([0, 0, 1, 1], target, np.array([1.0, 1, 1, 1]), 0)


# ------------------------------------------------------------------ bad input of balance


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: mmbal.balance([1, -2], 2), r"lengths\[1\] = -2 is out of range \[0, 4294967295\]"),
        (lambda: mmbal.balance([1, 2**32], 2), r"lengths\[1\] = 4294967296 is out of range"),
        (lambda: mmbal.balance(np.array([1.5, 2.0]), 2), "lengths: expected integers, got dtype float64"),
        (lambda: mmbal.balance(np.array([True, False]), 2), "lengths: expected integers, got dtype bool"),
        (lambda: mmbal.balance(np.ones((2, 2), dtype=np.int64), 2), r"lengths: expected a 1-D array, got shape \(2, 2\)"),
        (lambda: mmbal.balance([1, 2], 0), r"ranks = 0 is out of range \[1, "),
        (lambda: mmbal.balance([1, 2], -3), r"ranks = -3 is out of range"),
        (lambda: mmbal.balance([1, 2], 2**40), r"ranks = 1099511627776 is out of range"),
        # Above max_ranks (2**24) a plan's per-rank state alone exhausted memory (an OOM kill).
        (lambda: mmbal.balance([1, 2], 2**31), r"ranks = 2147483648 is out of range \[1, 16777216\]"),
        (lambda: mmbal.balance([1, 2], mmbal.max_ranks + 1), r"ranks = 16777217 is out of range"),
        (lambda: mmbal.Assignment([0], [0], 2**31), r"ranks = 2147483648 is out of range"),
        (lambda: mmbal.balanced_partitions([1, 2], 2**25, False), r"k_partitions = 33554432 is out of range"),
        (lambda: mmbal.balance([1, 2], "2"), "ranks: expected an int, got '2'"),
        (lambda: mmbal.balance([1, 2], 2, algorithm="lpt+magic"), "unknown suffix"),
        (lambda: mmbal.balance([1, 2], 2, algorithm="nope"), "unknown algorithm 'nope'"),
        (lambda: mmbal.balance([1, 2], 2, cost="attention:alpha=nan"), "alpha = 'nan' is not a finite number"),
        (lambda: mmbal.balance([1, 2], 2, cost="bogus"), "unknown cost spec 'bogus'"),
        (lambda: mmbal.balance([1000, 2], 2, cost="attention:alpha=1e308,beta=1e308"), "overflow a double"),
        (lambda: mmbal.balance([1, 2], 2, algorithm="migrate"), "needs origin="),
        (lambda: mmbal.balance([1, 2], 2, origin=[0]), "origin has 1 entries but lengths has 2"),
        (lambda: mmbal.balance([1, 2], 2, origin=[0, 2]), r"origin\[1\] = 2 is out of range \[0, 1\]"),
        (lambda: mmbal.balance([1, 2], 2, count_cap="some"), "count_cap = 'some'"),
        (lambda: mmbal.balance([1, 2, 3], 1, count_cap=2), "count"),
        (lambda: mmbal.balance([1, 2], 2, capacity=float("nan")), "capacity = nan must be a finite number"),
        (lambda: mmbal.balance([1, 2], 2, capacity=1.0), "capacity"),
        (lambda: mmbal.balance([1, 2], 2, groups=[0]), "groups has 1 entries"),
        (lambda: mmbal.balance([1, 2], 2, colour="red"), "unknown constraint colour="),
        (lambda: mmbal.balance([1, 2], 2, algorithm="padded", cost="tokens"), "needs a padded cost"),
        (lambda: mmbal.balance("abc", 2), "lengths"),
        (lambda: mmbal.balance(np.ma.array([3, 100, 2], mask=[0, 1, 0]), 2), "a masked array"),
        (lambda: mmbal.balance([1, 2], 2, capacity=True), "capacity: expected a number, got True"),
        (lambda: mmbal.balance([1, 2], 2, capacity=np.array([5.0])), r"capacity: expected a number, got array\(\[5.\]\)"),
        # one line, without pybind11's "At:" traceback
        (lambda: mmbal.balance([1, 2], 2, origin=[[0], [0, 1]]), r"^origin: cannot be read as an integer array \(setting an array element with a sequence[^\n]*\)$"),
    ],
)
def test_balance_bad_input_raises_error_naming_the_value(call, message):
    with pytest.raises(mmbal.Error, match=message) as info:
        call()
    assert isinstance(info.value, ValueError)


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    a = mmbal.balance(torch.tensor([4, 2, 9, 1], dtype=torch.int64), 2)
    b = mmbal.balance([4, 2, 9, 1], 2)
    np.testing.assert_array_equal(a.rank, b.rank)
    with pytest.raises(mmbal.Error, match="lengths: expected integers, got dtype float32"):
        mmbal.balance(torch.tensor([1.0, 2.0]), 2)


# ------------------------------------------------------------------ module plumbing


def test_results_own_their_cpp_buffers():
    a = mmbal.balance(np.arange(100, dtype=np.int32), 4)
    for arr in (a.rank, a.slot, a.loads):
        assert type(arr.base).__name__ == "PyCapsule"  # the C++ vector, no copy
    p = mmbal.alltoall_plan(np.zeros(100, dtype=np.int64), a, np.ones(100, dtype=np.int64), 0)
    assert type(p.pack_index.base).__name__ == "PyCapsule"


def test_concurrent_calls_from_threads_agree():
    import threading

    lengths = np.random.default_rng(0).integers(0, 5000, 20000)
    want = mmbal.balance(lengths, 16, algorithm="lpt+refine")
    results = [None] * 4

    def work(i):
        results[i] = mmbal.balance(lengths, 16, algorithm="lpt+refine")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r.rank, want.rank)
        np.testing.assert_array_equal(r.slot, want.slot)


def test_stub_lists_every_public_name_of_the_module():
    import ast
    import os

    stub = os.path.join(os.path.dirname(mmbal.__file__), "_core.pyi")
    tree = ast.parse(open(stub).read())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}  # constants: max_ranks
    public = {n for n in dir(mmbal._core) if not n.startswith("_")}
    assert public == stubbed
    assert os.path.exists(os.path.join(os.path.dirname(mmbal.__file__), "py.typed"))
    for name in mmbal.__all__:
        assert getattr(mmbal, name).__doc__, name


def test_pickle_and_deepcopy_keep_an_assignment_valid_and_read_only():
    import copy
    import pickle

    a = mmbal.balance([1, 2, 3, 4], 2, cost="tokens")
    for b in [pickle.loads(pickle.dumps(a, protocol=p)) for p in range(pickle.HIGHEST_PROTOCOL + 1)] + [copy.deepcopy(a)]:
        assert b.rank.tolist() == a.rank.tolist() and b.slot.tolist() == a.slot.tolist() and b.ranks == a.ranks
        assert b.loads.tolist() == a.loads.tolist() and b.lower_bound == a.lower_bound and b.cost == a.cost
        with pytest.raises(ValueError, match="read-only"):
            b.rank[0] = 7


# What another thread rewrites while a call runs with the GIL released, and the call checked.
_REWRITTEN = {
    # `origin` segfaulted migrate (the checked index was read again; 4 of 15 runs of 40 calls).
    "origin": ("origin = np.zeros(n, np.int32)\n",
               "        origin[::7] = 2**30\n        origin[::7] = 0\n",
               "            mmbal.balance(lengths, 4, algorithm='migrate:eps=0.1', origin=origin).validate()\n"),
    # `groups` corrupted the heap (a sort's comparator read values that changed; 2 of 3 runs).
    "groups": ("groups = np.zeros(n, np.uint64)\nother = np.arange(n, dtype=np.uint64) % 997\n",
               "        np.copyto(groups, other)\n        groups[:] = 0\n",
               "            mmbal.balance(lengths, 16, groups=groups).validate()\n"),
    # Block workloads read twice gave per-rank sums that differ from the total (15 of 15 calls).
    "block_workloads": ("blocks = lengths.astype(np.int64)\n",
                        "        blocks[::3] = 5\n        blocks[::3] = 900\n",
                        "            d = mmbal.distribute_tokens(blocks, 8, tokens=n, block=1)\n"
                        "            assert d['rank_workloads'].sum() == d['total_workload']\n"),
}


@pytest.mark.parametrize("argument", sorted(_REWRITTEN))
def test_input_rewritten_by_another_thread_never_crashes(tmp_path, argument):
    """Calls release the GIL; a thread rewriting an input array meanwhile must not crash them
    or make their results inconsistent: every array is copied once, element by element, as it
    is checked. In a child process: each result is valid (or mmbal.Error), never a crash."""
    from child_process import run_script

    setup, rewrite, call = _REWRITTEN[argument]
    run_script(
        tmp_path,
        "import numpy as np, mmbal, threading\n"
        "n = 200000\n"
        "lengths = np.random.default_rng(0).integers(1, 1000, n).astype(np.int32)\n"
        + setup +
        "stop = False\n"
        "def writer():\n"
        "    while not stop:\n"
        + rewrite +
        "t = threading.Thread(target=writer)\n"
        "t.start()\n"
        "try:\n"
        "    for _ in range(100 if 'migrate' not in " + repr(call) + " else 600):\n"
        "        try:\n"
        + call +
        "        except mmbal.Error:\n"
        "            pass\n"
        "finally:\n"
        "    stop = True\n"
        "    t.join()\n"
        "print('done')\n",
        timeout=600)


def test_text_and_flag_arguments_raise_mmbal_error_naming_them():
    """Strings that cannot be encoded (a lone surrogate), non-str values where a name is
    expected and NUL characters raised pybind11's RuntimeError or TypeError, or cut the message
    short; flags took NumPy's 0-d bool in some functions only."""
    w = mmbal.Workload([0, 1], [0, 0, 1], ["text", "image", "text"], [5, 9, 7])  # sample ranks, then segments
    orch = mmbal.Orchestrator(2).plan(w)
    asg = mmbal.Assignment([0, 1, 0], [0, 0, 1], 2)
    surrogate = "\ud800"
    cases = [
        (lambda: mmbal.Workload([0], [0], [surrogate], [3]), r"segment_modality\[0\] = '\\ud800' cannot be encoded"),
        (lambda: mmbal.Orchestrator(2, policies={surrogate: ("tokens", "lpt")}), "a phase name = '\\\\ud800'"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": (surrogate, "lpt")}), r"policies\['llm'\]\[0\]"),
        (lambda: mmbal.balance([1, 2], 2, algorithm=surrogate), "algorithm = '\\\\ud800' cannot be encoded"),
        (lambda: mmbal.balance([1, 2], 2, algorithm="lpt\x00"), r"algorithm = 'lpt\\x00' holds a NUL"),
        (lambda: mmbal.balance([1, 2], 2, cost=5), "cost: expected a str, got 5"),
        (lambda: mmbal.isf([1], [1], qv=5, qt=1, oversize=None), "oversize: expected a str, got None"),
        (lambda: mmbal.isf([1], [1], qv=5, qt=1, drop_unfilled="no"), "drop_unfilled: expected True or False"),
        (lambda: mmbal.bitfield_mask(w, assign=None), "assign: expected a str, got None"),
        (lambda: mmbal.bitfield_mask(w, layout=1), "layout: expected a str, got 1"),
        (lambda: mmbal.distribute_tokens([1], 2, tokens=1, block=1, distributor=surrogate), "distributor = "),
        (lambda: asg.loads_for([1, 2, 3], None), "cost: expected a str, got None"),
        (lambda: orch.items(5), "phase: expected a str, got 5"),
        (lambda: orch.report(None), "phase: expected a str, got None"),
        (lambda: orch.phase_plan(b"llm", 0), "phase: expected a str, got b'llm'"),
        (lambda: orch.composed_plan(1, 0), "modality: expected a str, got 1"),
        (lambda: mmbal.Orchestrator(2).policy(5), "phase: expected a str, got 5"),
        (lambda: mmbal.Orchestrator(2, relabel="yes"), "relabel: expected True or False, got 'yes'"),
        (lambda: mmbal._core.balanced_partitions([1, 2], 2, True, None), "refine: expected True or False, got None"),
        (lambda: mmbal._core.time_balance([1, 2], 2, "lpt", "tokens", 1.5), "repeats: expected an int, got 1.5"),
    ]
    for call, message in cases:
        with pytest.raises(mmbal.Error, match=message):
            call()
    # Keyword names as in _core.pyi, and one flag rule everywhere (a 0-d bool array is a bool).
    assert mmbal.Orchestrator(2)._core.policy(phase="llm") == mmbal.Orchestrator(2).policy("llm")
    flag = np.array(True)
    assert mmbal.isf([1, 2], [1, 2], qv=5, qt=10, drop_unfilled=flag).dropped.size >= 0
    assert mmbal.Orchestrator(2, relabel=flag).plan(w).fingerprint == orch.fingerprint


def test_integer_lists_numpy_reads_as_floats_name_the_element():
    """A plain list holding an int beyond int64 becomes float64 or object in NumPy; the error
    named that dtype, not the element (and a valid uint64 list could not be passed at all)."""
    with pytest.raises(mmbal.Error, match=r"lengths\[0\] = 18446744073709551616 is out of range \[0, 2\^64 - 1\]"):
        mmbal.balance([2**64], 3)
    with pytest.raises(mmbal.Error, match=r"lengths\[0\] = -1 is out of range \[0, 2\^64 - 1\]"):
        mmbal.balance([-1, 2**63], 3)
    with pytest.raises(mmbal.Error, match=r"lengths\[1\] = 2.5 is not an int"):
        mmbal.balance([1, 2.5], 2)
    with pytest.raises(mmbal.Error, match=r"lengths\[1\] = True is not an int"):  # NumPy made it 1
        mmbal.balance([3, True, 2], 2)
    with pytest.raises(mmbal.Error, match=r"sizes\[0\] = False is not an int"):
        mmbal.alltoall_plan([0, 0], mmbal.Assignment([0, 0], [0, 1], 1), (False, 2), 0)
    top = 2**64 - 1
    a = mmbal.balance([1, 2, 3, 4], 2, groups=[top, 0, 0, 1])  # groups up to 2^64 - 1, as documented
    a.validate()
    assert a.rank[1] == a.rank[2]
    with pytest.raises(mmbal.Error, match="token 0 sets the reserved bit 63"):  # read, then refused by value
        mmbal.BitfieldMask.from_bits([2**63 + 1, 2**63 + 1], [0, 0])


def test_distribute_tokens_of_a_mask_checks_tokens_as_an_int():
    m = mmbal.BitfieldMask.from_bits([1] * 4, [0] * 4)
    for tokens in (np.array([9, 10]), np.array([10]), 10.0, True):
        with pytest.raises(mmbal.Error, match="tokens: expected an int"):
            mmbal.distribute_tokens(m, 3, tokens=tokens, block=2)
    with pytest.raises(mmbal.Error, match="tokens = 5 but the mask has 4 tokens"):
        mmbal.distribute_tokens(m, 2, tokens=5, block=2)
    assert mmbal.distribute_tokens(m, 2, tokens=np.int64(4), block=2)["tokens"] == 4
