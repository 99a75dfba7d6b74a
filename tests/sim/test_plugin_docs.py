"""docs/plugins.md: its Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def test_the_plugin_docs_example_runs(helsinki_test_walk, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {"__name__": "plugins_doc"})
    assert "Truthful at eps 0.5/km, road: fit raised PrivacyViolation" in capsys.readouterr().out
