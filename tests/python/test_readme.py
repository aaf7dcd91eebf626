"""The README's Python example runs (CI keeps the documented example working)."""

import os
import re

README = os.path.join(os.environ.get("MMBAL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                      "README.md")


def test_readme_python_example_runs(capsys):
    text = open(README).read()
    section = text.split("## Use it from Python", 1)
    assert len(section) == 2, "README.md has no 'Use it from Python' section"
    blocks = re.findall(r"```python\n(.*?)```", section[1].split("\n## ", 1)[0], re.S)
    assert len(blocks) == 1, "the section must hold exactly one ```python block"
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "sample -> rank:" in out and "partitions:" in out
