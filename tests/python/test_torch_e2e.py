"""End to end: examples/torch_step/train.py trains a tiny multimodal model on 4 gloo processes,
balanced by mmbal.torch vs unbalanced on the same data; the loss, the per-sample losses and
every parameter's gradient must agree (float64, relative 1e-6) at every step, and some phase
must leave a rank with nothing (the example exits 1 otherwise)."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SOURCE_DIR = pathlib.Path(os.environ.get("MMBAL_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
EXAMPLE = SOURCE_DIR / "examples" / "torch_step" / "train.py"


@pytest.mark.parametrize("engine, prefetch", [("orchestrator", False), ("python", False), ("orchestrator", True)])
def test_balanced_step_equals_unbalanced_step_on_4_gloo_processes(engine, prefetch):
    cmd = [sys.executable, str(EXAMPLE), "--ranks", "4", "--steps", "3", "--engine", engine, "--check"] + (["--prefetch"] if prefetch else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    steps = re.findall(r"^step (\d+): loss ([0-9.]+) \(balanced ([0-9.]+)\); worst relative difference ([0-9.e+-]+)", out, re.M)
    assert [int(s[0]) for s in steps] == [0, 1, 2], out
    for _, plain, balanced, worst in steps:
        assert abs(float(plain) - float(balanced)) <= 1e-6 * abs(float(plain))
        assert float(worst) <= 1e-6
    # loads before/after are printed per phase; the LLM phase's maximum drops
    for before, after in re.findall(r"^\s+llm: before \[([^\]]*)\]  after \[([^\]]*)\]", out, re.M):
        b = [float(v) for v in before.split(",")]
        a = [float(v) for v in after.split(",")]
        assert abs(sum(a) - sum(b)) <= 0.05 * (len(a) + len(b))  # printed with one decimal
        assert max(a) < max(b)
