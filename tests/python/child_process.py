"""Runs a Python script in a child process with this interpreter and the test's module path,
for tests whose failure mode is a crash or a hang of the whole process (a race under released
GIL, a deadlock): the child's exit status and output are the result, its timeout the bound."""

import os
import subprocess
import sys


def run_script(tmp_path, source: str, timeout: float) -> None:
    """Writes `source` to a file under `tmp_path`, runs it, and asserts it exited 0 and printed
    "done" (its last statement must print it) within `timeout` seconds."""
    script = tmp_path / "child.py"
    script.write_text(source)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert p.returncode == 0 and "done" in p.stdout, (p.returncode, p.stderr[-2000:])
