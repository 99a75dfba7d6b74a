"""docs/plugins.md: its Python examples run as written, and the complete example's code is
the example shipped with mdpsim (sim/examples/plugin_example)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
EXAMPLE = DOC.parents[1] / "sim" / "examples" / "plugin_example" / "src" / "mdpsim_example"
EXAMPLE = EXAMPLE / "__init__.py"


def test_the_plugin_docs_example_runs(helsinki_test_walk, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {"__name__": "plugins_doc"})
    assert "Truthful at eps 0.5/km, road: fit raised PrivacyViolation" in capsys.readouterr().out


def test_the_complete_example_in_the_docs_is_the_plugin_example_and_passes_the_checks(
    helsinki_test_walk,
):
    from mdpsim.testing import check_attack, check_mechanism, check_strategy

    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    code = EXAMPLE.read_text(encoding="utf-8")
    assert code in blocks, "docs/plugins.md no longer shows the shipped example's code"
    names: dict = {"__name__": "plugins_doc_example"}
    exec(compile(code, str(DOC), "exec"), names)
    check_mechanism(names["CoinEM"])
    check_attack(names["ModeGuess"])
    check_strategy(names["EveryOther"])
