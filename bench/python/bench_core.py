"""Speed of the Python package against same-run baselines (run by hand; see bench/RESULTS.md).

    PYTHONPATH=build/<dir>/python /usr/bin/python3 bench/python/bench_core.py [--python-kk]

Measures (issue 10 goals):
- call overhead of mmbal.balance for 64 items (goal <= 20 us per call);
- mmbal.balance at 65,536 items vs the same C++ work timed inside the module
  (_core.time_balance: solve + loads + lower bound on already converted input; goal <= 2x);
- mmbal.balanced_partitions at 8,192 items into 128 parts beside numpy.argsort of the same
  lengths (the ratio is the figure); --python-kk also times verl's pure-Python Karmarkar-Karp;
- mmbal.fit_cost of 1,000 steps x 64 ranks x 8 samples (arrays and lists in) beside the C++ fit
  alone on the converted steps (_core.time_fit), and OnlineFit.add_step of one such step
  (no goal: the figure is the conversion's share).
Every figure is a best-of over repeats (the C++ side likewise); the machine may be shared.
"""

import argparse
import sys
import time

import numpy as np

import mmbal
from mmbal import _core


def per_call(fn, number, repeats=7):
    """Best over `repeats` of the mean seconds per call over `number` calls (the same statistic
    as _core.time_balance's best-of, so shared-machine noise hits both sides alike)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def lengths(n, seed=0):
    """Log-normal sequence lengths (median ~1.1 K tokens, clipped to [1, 32 K])."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(7.0, 1.0, n), 1, 32768).astype(np.int64)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python-kk", action="store_true", help="also time verl's pure-Python KK (slow)")
    args = parser.parse_args()
    print(f"mmbal {mmbal.__file__}, numpy {np.__version__}, python {sys.version.split()[0]}")

    small = lengths(64)
    small32 = small.astype(np.int32)
    # The call overhead with `lpt` named: the default (`algorithm=None`) is the cost's
    # best-quality setting since session 31, `lpt+refine`, whose search dominates at 64 items.
    t_small = per_call(lambda: mmbal.balance(small, 8, algorithm="lpt"), 20000)
    t_small32 = per_call(lambda: mmbal.balance(small32, 8, algorithm="lpt"), 20000)
    t_small_cpp = _core.time_balance(small, 8, "lpt", "tokens", 20000)
    print(f"balance, 64 items, d=8, lpt/tokens: {t_small * 1e6:.2f} us per call (int64 in), "
          f"{t_small32 * 1e6:.2f} us (int32 in); C++ work alone {t_small_cpp * 1e6:.2f} us  [goal <= 20 us]")
    t_default = per_call(lambda: mmbal.balance(small, 8), 2000)
    t_default_cpp = _core.time_balance(small, 8, None, "tokens", 2000)
    print(f"balance, 64 items, d=8, the default (algorithm=None)/tokens: {t_default * 1e6:.2f} us per call; "
          f"C++ work alone {t_default_cpp * 1e6:.2f} us")

    big = lengths(65536)
    for algorithm, cost in (("lpt", "tokens"), ("lpt", "attention:alpha=1,beta=1.54e-5"), ("lpt+refine", "tokens")):
        t_py = per_call(lambda: mmbal.balance(big, 64, algorithm=algorithm, cost=cost), 1, repeats=30)
        t_cpp = _core.time_balance(big, 64, algorithm, cost, 30)
        print(f"balance, 65,536 items, d=64, {algorithm}/{cost}: Python {t_py * 1e3:.3f} ms, "
              f"C++ {t_cpp * 1e3:.3f} ms, ratio {t_py / t_cpp:.2f}x  [goal <= 2x]")

    verl_like = [int(24576 * x + x * x) for x in lengths(8192, seed=1)]  # verl's workload estimate
    arr = np.array(verl_like, dtype=np.int64)
    t_sort = per_call(lambda: np.argsort(arr), 1, repeats=200)
    for equal_size in (False, True):
        t_bp = per_call(lambda: mmbal.balanced_partitions(verl_like, 128, equal_size), 1, repeats=10)
        t_bp_np = per_call(lambda: mmbal.balanced_partitions(arr, 128, equal_size), 1, repeats=10)
        print(f"balanced_partitions, 8,192 items -> 128 parts, equal_size={equal_size}: "
              f"{t_bp * 1e3:.2f} ms (list in), {t_bp_np * 1e3:.2f} ms (ndarray in); "
              f"numpy.argsort {t_sort * 1e3:.3f} ms; ratio {t_bp_np / t_sort:.0f}x")

    rng = np.random.default_rng(2)
    steps = []
    for _ in range(1000):
        ranks = [rng.integers(100, 4000, 8) for _ in range(64)]
        steps.append((ranks, max(float(np.sum(2e-7 * r.astype(float) ** 2 + 1e-3 * r + 0.5)) for r in ranks)))
    as_lists = [([r.tolist() for r in ranks], t) for ranks, t in steps]
    t_fit = per_call(lambda: mmbal.fit_cost(steps), 1, repeats=5)
    t_fit_lists = per_call(lambda: mmbal.fit_cost(as_lists), 1, repeats=5)
    t_fit_cpp = _core.time_fit(steps, 5)
    online = mmbal.OnlineFit(64)
    t_add = per_call(lambda: online.add_step(*steps[0]), 200)
    print(f"fit_cost, 1,000 steps x 64 ranks: {t_fit * 1e3:.1f} ms (arrays in), {t_fit_lists * 1e3:.1f} ms "
          f"(lists in); C++ fit alone {t_fit_cpp * 1e3:.1f} ms, ratio {t_fit / t_fit_cpp:.1f}x; "
          f"OnlineFit.add_step (64 ranks) {t_add * 1e6:.1f} us")

    if args.python_kk:
        sys.path.insert(0, "tests/python")
        from test_partitions import reference_kk

        t0 = time.perf_counter()
        reference_kk(verl_like, 128, False)
        print(f"verl's pure-Python KK, same input, equal_size=False: {time.perf_counter() - t0:.2f} s (one run)")


if __name__ == "__main__":
    main()
