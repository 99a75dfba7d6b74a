"""Dependencies point one way: agents/ and dashboard/ use sim/, sim/ never imports them.

The one exception is the program's entry point: ``mdpsim dashboard`` (sim/cli.py) starts the
dashboard's launcher; no simulation code depends on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).resolve().parents[2] / "sim"
ENTRY_POINT = {"sim/cli.py": ["dashboard"]}


def _room(module: str) -> str:
    """``agents`` for ``mdpsim.agents...`` (also ``dashboard``), else the top-level name."""
    parts = module.split(".")
    return parts[1] if parts[0] == "mdpsim" and len(parts) > 1 else parts[0]


def _imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):  # every import, at module level or inside a function
        if isinstance(node, ast.Import):
            names |= {_room(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(_room(node.module))
    return names


def test_sim_never_imports_agents_or_dashboard():
    offenders = {
        str(p.relative_to(SIM.parent)): sorted(_imported_top_levels(p) & {"agents", "dashboard"})
        for p in SIM.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == ENTRY_POINT
