"""The layout a newcomer reads: a root that names the architecture, small modules, and a static
view of the whole package that the tools (mypy, import-linter, pyright) read and that is never
stale. The import layers themselves are import-linter's contracts (pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import mdpsim

REPO = Path(__file__).resolve().parents[2]
MAX_ROOT_NAMES = 14
MAX_MODULE_LINES = 600


def _root_names() -> set[str]:
    sim = {
        p.stem
        for p in (REPO / "sim").iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    return {n for n in sim if not n.startswith("_")} | {"agents", "dashboard", "scenarios"}


def test_the_root_has_at_most_14_public_names():
    names = _root_names()
    assert len(names) <= MAX_ROOT_NAMES, sorted(names)
    assert {"geo", "privacy", "mechanisms", "simulation", "experiments", "agents"} <= names


def test_every_root_package_has_a_place_in_the_layers():
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in contracts["contracts"] if c["type"] == "layers"]
    placed = {
        part.strip().split(".")[0]
        for layer in layers["layers"]
        for part in layer.replace("|", ":").split(":")
    }
    packages = _root_names() - {"scenarios"} | {"_core", "__main__"}
    assert packages <= placed, sorted(packages - placed)


def test_no_module_is_over_600_lines():
    long = {
        str(p.relative_to(REPO)): n
        for folder in ("sim", "agents", "dashboard")
        for p in (REPO / folder).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long


def test_the_static_view_of_the_package_is_up_to_date():
    check = subprocess.run(
        [sys.executable, str(REPO / "tools" / "static_view.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


def test_the_package_imports_from_its_folders():
    assert Path(mdpsim.__file__).resolve().parent == REPO / "sim"
