"""Build (or check) the static view of the package: ``.typecheck/mdpsim``.

setup.py maps four folders into the one import root ``mdpsim`` (sim/ is ``mdpsim``, agents/
``mdpsim.agents``, dashboard/ ``mdpsim.dashboard``, scenarios/ ``mdpsim.scenarios``). The
editable install serves that mapping through an import hook, which static tools cannot follow.
This script mirrors it as a tree of real folders and symbolic links to the source files, so that
mypy (``mypy_path``), import-linter (``PYTHONPATH``) and pyright (``extraPaths``) see the whole
package as it is installed. ``make venv`` and ``make lint`` run it; ``--check`` exits 1 when the
view is stale (a module added, moved or removed since it was built), as tests/sim/test_layout.py
does.

usage: python tools/static_view.py [--check]
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VIEW = REPO / ".typecheck"
SUFFIXES = {".py", ".typed", ".toml"}


def roots() -> dict[str, str]:
    """setup.py's ``ROOTS`` (import name -> folder), read without running setup()."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "ROOTS":
            return ast.literal_eval(node.value)
    raise SystemExit("setup.py has no ROOTS mapping")


def wanted() -> dict[Path, Path]:
    """Link path in the view -> the source file it points at."""
    links: dict[Path, Path] = {}
    mapping = roots()
    nested = [folder for name, folder in mapping.items() if name != "mdpsim"]
    for name, folder in mapping.items():
        base = VIEW.joinpath(*name.split("."))
        src = REPO / folder
        others = [p.parent for p in src.rglob("pyproject.toml")]  # distributions of their own
        for path in sorted(src.rglob("*")):
            if path.suffix not in SUFFIXES or "__pycache__" in path.parts:
                continue
            if any(path.is_relative_to(other) for other in others):
                continue
            links[base / path.relative_to(src)] = path
    assert all(not (REPO / "sim" / f).exists() for f in nested), "a mapped folder shadows sim/"
    return links


def stale() -> list[str]:
    """What differs between the view on disk and the one setup.py's mapping gives."""
    links = wanted()
    on_disk = {p for p in VIEW.rglob("*") if p.is_symlink()} if VIEW.is_dir() else set()
    problems = [f"missing {p.relative_to(VIEW)}" for p in sorted(set(links) - on_disk)]
    problems += [f"extra {p.relative_to(VIEW)}" for p in sorted(on_disk - set(links))]
    problems += [
        f"wrong target {p.relative_to(VIEW)}"
        for p in sorted(set(links) & on_disk)
        if p.resolve() != links[p].resolve()
    ]
    return problems


def build() -> None:
    shutil.rmtree(VIEW, ignore_errors=True)
    for link, target in wanted().items():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(target, link.parent))


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        found = stale()
        if found:
            print(f"the static view is stale ({found[0]}, ...): run `make view`", file=sys.stderr)
        sys.exit(1 if found else 0)
    build()
