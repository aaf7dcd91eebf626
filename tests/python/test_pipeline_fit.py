"""The pipeline half and the fitted cost from Python: mmbal.pipeline_orders, fit_cost,
OnlineFit and should_balance, checked against independent references (a 1F1B simulator
written here, brute force over every order, hand-computed trigger figures, exact synthetic
costs)."""

import functools
import itertools
import pickle

import numpy as np
import pytest

import mmbal


def makespan_1f1b(fwd, bwd, order, hop):
    """Megatron's non-interleaved 1F1B as a longest path: each operation ends at its length plus
    the later of its stage predecessor's end and its pipeline predecessor's end (+ hop)."""
    p, m = fwd.shape[0], len(order)
    ops = []  # per stage, the operations in program order
    for s in range(p):
        warm = min(p - 1 - s, m)
        seq = [("F", k) for k in range(warm)]
        for k in range(warm, m):
            seq += [("F", k), ("B", k - warm)]
        seq += [("B", k) for k in range(m - warm, m)]
        ops.append(seq)
    at = {(s, op): i for s in range(p) for i, op in enumerate(ops[s])}

    @functools.lru_cache(maxsize=None)
    def end(s, kind, k):
        i = at[(s, (kind, k))]
        start = end(s, *ops[s][i - 1]) if i > 0 else 0.0
        if kind == "F" and s > 0:
            start = max(start, end(s - 1, "F", k) + hop)
        if kind == "B":
            start = max(start, end(s, "F", k) if s == p - 1 else end(s + 1, "B", k) + hop)
        length = (fwd if kind == "F" else bwd)[s][order[k]]
        return start + length

    return max(end(s, *ops[s][-1]) for s in range(p))


@pytest.mark.parametrize("seed", range(6))
def test_pipeline_orders_match_an_independent_simulator_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    p, m = int(rng.integers(1, 5)), int(rng.integers(1, 7))
    fwd = np.round(rng.uniform(0.1, 3.0, (p, m)) * np.where(np.arange(p)[:, None] == 0, 3, 1), 3)
    bwd = np.round(rng.uniform(0.0, 4.0, (p, m)), 3)
    hop = 0.25 * (seed % 2)
    r = mmbal.pipeline_orders(fwd, bwd, hop=hop)
    assert (r["stages"], r["micro_batches"], r["schedule"]) == (p, m, "1f1b")
    optimum = min(makespan_1f1b(fwd, bwd, list(o), hop) for o in itertools.permutations(range(m)))
    for name, (order, makespan) in r["orders"].items():
        assert sorted(order.tolist()) == list(range(m)) and not order.flags.writeable, name
        assert makespan == pytest.approx(makespan_1f1b(fwd, bwd, order.tolist(), hop), rel=1e-12), name
        assert makespan >= optimum * (1 - 1e-12)
    assert r["orders"]["identity"][0].tolist() == list(range(m))
    assert r["orders"]["search"][1] <= min(r["orders"][k][1] for k in ("identity", "verl", "disttrain"))
    assert r["orders"][r["best"]][1] == min(v[1] for v in r["orders"].values())
    assert r["lower_bound"] <= optimum * (1 + 1e-12)
    # Deterministic, and one order asked for alone is the same order.
    assert mmbal.pipeline_orders(fwd, bwd, hop=hop)["orders"]["search"][0].tolist() == r["orders"]["search"][0].tolist()
    alone = mmbal.pipeline_orders(fwd.tolist(), bwd.tolist(), orders="disttrain", hop=hop)
    assert list(alone["orders"]) == ["disttrain"] and alone["best"] == "disttrain"
    assert alone["orders"]["disttrain"][0].tolist() == r["orders"]["disttrain"][0].tolist()


def test_pipeline_orders_other_schedules_and_bad_input():
    f = np.array([[3.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    b = 2 * f
    for schedule in ("gpipe", "interleaved:2"):
        r = mmbal.pipeline_orders(f, b, schedule=schedule)
        assert r["schedule"] == schedule and r["orders"][r["best"]][1] >= r["lower_bound"]
    one = mmbal.pipeline_orders(f, b, schedule="interleaved:1")
    assert one["orders"]["identity"][1] == mmbal.pipeline_orders(f, b)["orders"]["identity"][1]
    cases = [
        (lambda: mmbal.pipeline_orders([[1, -1]], [[1, 1]]), r"forward\[0\]\[1\]"),
        (lambda: mmbal.pipeline_orders([[1, 2]], [[1, float("nan")]]), r"backward\[0\]\[1\]"),
        (lambda: mmbal.pipeline_orders([[1, 2], [3]], [[1, 1], [1, 1]]), "forward: expected a stages x micro-batches"),
        (lambda: mmbal.pipeline_orders([1, 2], [1, 2]), "expected a non-empty 2-D array"),
        (lambda: mmbal.pipeline_orders([[1, 2]], [[1, 2, 3]]), "forward is 1 x 2 but backward is 1 x 3"),
        (lambda: mmbal.pipeline_orders(np.array([["a"]]), [[1]]), "forward: expected real numbers, got dtype <U1"),
        # NumPy converted these to float64 silently (session 30's second probe).
        (lambda: mmbal.pipeline_orders([["1", "2"]], [[1, 1]]), "forward: expected real numbers, got dtype <U1"),
        (lambda: mmbal.pipeline_orders([[True, False]], [[1, 1]]), "forward: expected real numbers, got dtype bool"),
        (lambda: mmbal.pipeline_orders([[1, None]], [[1, 1]]), "forward: expected real numbers, got dtype object"),
        (lambda: mmbal.pipeline_orders(f, b * 1j), "backward: expected real numbers, got dtype complex128"),
        (lambda: mmbal.pipeline_orders(np.ma.masked_array(f, f > 2), b), "forward: a masked array"),
        (lambda: mmbal.pipeline_orders(None, b), "forward: expected real numbers, got dtype object"),
        (lambda: mmbal.pipeline_orders(f, b, hop=10**400), "hop = .* is beyond a double"),
        (lambda: mmbal.pipeline_orders(f, b, hop=np.array([0.5])), "hop: expected a real number"),
        (lambda: mmbal.pipeline_orders(f, b, hop=1j), "hop: expected a real number"),
        (lambda: mmbal.pipeline_orders(f, b, orders=["fastest"]), "unknown order 'fastest'"),
        (lambda: mmbal.pipeline_orders(f, b, orders=[]), "orders: empty"),
        (lambda: mmbal.pipeline_orders(f, b, orders=5), "orders: expected a sequence"),
        (lambda: mmbal.pipeline_orders(f, b, schedule="zb"), "unknown schedule 'zb'"),
        (lambda: mmbal.pipeline_orders(f, b, hop=-1.0), "hop"),
        (lambda: mmbal.pipeline_orders(f, b, hop=True), "hop: expected a real number"),
        (lambda: mmbal.pipeline_orders(f, b, seed=-1), "seed = -1 is out of range"),
        (lambda: mmbal.pipeline_orders(np.ones((1, 20000)), np.ones((1, 20000))), "exceed"),
    ]
    for call, message in cases:
        with pytest.raises(mmbal.Error, match=message):
            call()


def synthetic_steps(rng, count, x=2e-7, y=1e-3, z=0.5, ranks=8):
    steps = []
    for _ in range(count):
        lengths = [rng.integers(100, 4000, int(rng.integers(2, 10))) for _ in range(ranks)]
        time = max(sum(x * int(v) ** 2 + y * int(v) + z for v in r) for r in lengths)
        steps.append((lengths, time))
    return steps


def test_fit_cost_recovers_an_exact_cost_and_the_window_refits_the_latest_steps():
    steps = synthetic_steps(np.random.default_rng(3), 40)
    fit = mmbal.fit_cost(steps)
    assert (fit.x, fit.y, fit.z) == pytest.approx((2e-7, 1e-3, 0.5), rel=1e-6)
    assert fit.error_max < 1e-9 and fit.cost.startswith("fitted:x=") and fit.iterations >= 0
    assert len(fit.initial) == 3 and min(fit.initial) >= 0
    # The spec balances like any cost: the loads are the fitted per-sample costs summed.
    lengths = np.concatenate(steps[0][0])
    a = mmbal.balance(lengths, 8, cost=fit.cost)
    for rank in range(8):
        mine = lengths[a.rank == rank].astype(float)
        assert a.loads[rank] == pytest.approx(np.sum(fit.x * mine**2 + fit.y * mine + fit.z), rel=1e-12)
    online = mmbal.OnlineFit(16)
    for lengths_by_rank, time in steps:
        online.add_step(lengths_by_rank, time)
    assert (online.window, online.size, online.steps_added) == (16, 16, 40)
    windowed = online.fit()
    direct = mmbal.fit_cost(steps[-16:])
    assert (windowed.x, windowed.y, windowed.z) == (direct.x, direct.y, direct.z)
    assert mmbal.fit_cost(steps).cost == fit.cost  # deterministic


def test_online_fit_pickles_as_a_checkpoint_and_resumes_identically():
    steps = synthetic_steps(np.random.default_rng(9), 30)
    for window in (8, 64):  # a full ring (its head mid-buffer) and a partial one
        live = mmbal.OnlineFit(window, temperature=1e-3)
        for lengths_by_rank, time in steps[:20]:
            live.add_step(lengths_by_rank, time)
        restored = pickle.loads(pickle.dumps(live))
        assert (restored.window, restored.size, restored.steps_added) == (live.window, live.size, 20)
        assert restored.fit().cost == live.fit().cost
        for lengths_by_rank, time in steps[20:]:  # both go on alike, the ring wrapping again
            live.add_step(lengths_by_rank, time)
            restored.add_step(lengths_by_rank, time)
            assert restored.fit().cost == live.fit().cost
        with pytest.raises(mmbal.Error, match="step 30, field 'step_time'"):  # the same arrival index
            restored.add_step([[10]], 0.0)
    assert pickle.loads(pickle.dumps(mmbal.OnlineFit(3))).size == 0  # no steps yet
    # A forged state is new input: refused with mmbal.Error naming the field.
    state = live._core.__getstate__()
    forged = [
        ((state[0], state[1], state[2]), "has 4 fields"),
        ((0, state[1], state[2], state[3]), "window = 0 is out of range"),
        ((2, state[1], state[2], state[3]), "steps for a window of 2"),
        ((state[0], state[1], 1, state[3]), "saved steps for a window of 64 after 1 steps added"),
        ((state[0], -1.0, state[2], state[3]), "temperature"),
        ((state[0], state[1], state[2], [(1.0, np.ones((2, 2)))]), r"steps\[0\].features must be a ranks x 3"),
        ((state[0], state[1], state[2], [(1.0, np.full((2, 3), -1.0))]), "step 29"),
        ((state[0], state[1], state[2], [(float("nan"), np.ones((2, 3)))]), "step_time"),
        ((state[0], state[1], state[2], "steps"), "steps must be a list"),
    ]
    for bad, message in forged:
        with pytest.raises(mmbal.Error, match=message):
            mmbal._core.OnlineFit.__new__(mmbal._core.OnlineFit).__setstate__(bad)


def test_should_balance_reasons_and_figures_by_hand():
    fit = mmbal.fit_cost(synthetic_steps(np.random.default_rng(4), 20))
    c = lambda v: fit.x * v * v + fit.y * v + fit.z  # noqa: E731
    skewed = [[3000, 3000, 2000], [100], [200, 100], [50]]
    loads = [sum(c(v) for v in r) for r in skewed]
    d = mmbal.should_balance(skewed, fit)
    assert d["balance"] and d["reason"] == "balance"
    assert d["max_load"] == pytest.approx(max(loads)) and d["mean_load"] == pytest.approx(np.mean(loads))
    assert d["largest_sample"] == pytest.approx(c(3000))
    assert d["imbalance"] == pytest.approx(max(loads) / np.mean(loads) - 1)
    assert d["gain_bound"] == pytest.approx(max(loads) / max(np.mean(loads), c(3000)) - 1)
    even = [[1000, 1000], [1000, 1000], [1000, 1000]]
    assert mmbal.should_balance(even, fit.cost)["reason"] == "below_threshold"
    assert mmbal.should_balance([[100000], [10], [10]], fit)["reason"] == "dominant_sample"
    assert mmbal.should_balance([[], []], fit)["reason"] == "no_load"
    assert not mmbal.should_balance(skewed, fit, threshold=10.0)["balance"]


def test_fit_and_trigger_bad_input():
    good = [([[10, 20], [30]], 1.0)]
    cases = [
        (lambda: mmbal.fit_cost([]), "no steps|steps"),
        (lambda: mmbal.fit_cost("steps"), "steps: expected a sequence"),
        (lambda: mmbal.fit_cost([([[10]], 0.0)]), "step 0"),
        (lambda: mmbal.fit_cost([([[10]], "1")]), r"steps\[0\].step_time: expected a real number"),
        (lambda: mmbal.fit_cost([([[10]], True)]), r"steps\[0\].step_time: expected a real number"),
        (lambda: mmbal.fit_cost([([[10]], np.array([1.0, 2.0]))]), r"steps\[0\].step_time: expected a real number"),
        (lambda: mmbal.fit_cost([([[10]], np.complex128(1 + 1j))]), r"steps\[0\].step_time: expected a real number"),
        (lambda: mmbal.fit_cost([([[10, -1]], 1.0)]), r"steps\[0\].ranks\[0\]\[1\] = -1 is out of range"),
        (lambda: mmbal.fit_cost([([[10]],)]), r"steps\[0\]: expected a \(ranks, step_time\) pair"),
        (lambda: mmbal.fit_cost(good, temperature=0.0), "temperature"),
        (lambda: mmbal.fit_cost(good, temperature=None), "temperature: expected a real number"),
        (lambda: mmbal.OnlineFit(0), "window = 0 is out of range"),
        (lambda: mmbal.OnlineFit().fit(), "no steps"),
        (lambda: mmbal.should_balance([[10]], "tokens"), "is not a fitted cost"),
        (lambda: mmbal.should_balance([], mmbal.fit_cost(good)), "no ranks"),
        (lambda: mmbal.should_balance([[10]], mmbal.fit_cost(good), threshold=-1.0), "threshold"),
        (lambda: mmbal.should_balance([[10]], mmbal.fit_cost(good), threshold=1j), "threshold: expected a real number"),
        # Loads beyond a double gave inf / NaN figures and "balance".
        (lambda: mmbal.should_balance([[2**32 - 1] * 100, [1]], "fitted:x=1e290,y=0,z=0"), "overflow a double"),
    ]
    for call, message in cases:
        with pytest.raises(mmbal.Error, match=message):
            call()
    online = mmbal.OnlineFit(4)
    online.add_step(*good[0])
    with pytest.raises(mmbal.Error, match="step 1, field 'step_time'"):  # named by its arrival index
        online.add_step([[10]], float("inf"))
    assert mmbal.fit_cost([([[10]], np.float32(2.0))]).cost == mmbal.fit_cost([([[10]], 2)]).cost  # NumPy scalars


def test_gpipe_lower_bound_is_linear_in_the_micro_batches():
    # It visited m^2 pairs to use m: 10^6 micro-batches on one stage ran for minutes.
    m = 2**20
    r = mmbal.pipeline_orders(np.ones((1, m)), np.ones((1, m)), orders="identity", schedule="gpipe")
    assert r["lower_bound"] == r["orders"]["identity"][1] == 2.0 * m


def test_online_fit_shared_by_threads_never_deadlocks(tmp_path):
    """Two threads on one OnlineFit deadlocked the process: the lock was taken with the GIL
    held, and fit() released the GIL under it. In a child process with a timeout."""
    from child_process import run_script

    run_script(
        tmp_path,
        "import threading, numpy as np, mmbal\n"
        "of = mmbal.OnlineFit(8)\n"
        "ranks = [np.arange(1, 50)] * 8\n"
        "def add():\n"
        "    for _ in range(2000):\n"
        "        of.add_step(ranks, 1.0)\n"
        "def fit():\n"
        "    for _ in range(200):\n"
        "        try:\n"
        "            assert of.fit().error_max >= 0\n"
        "        except mmbal.Error:\n"
        "            pass  # before the first step\n"
        "threads = [threading.Thread(target=f) for f in (add, add, fit)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "assert of.steps_added == 4000 and of.size == 8\n"
        "print('done')\n",
        timeout=120)
