"""The docs say what the code does: every python block runs, every command and module path the
README and docs/ name exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from mdpsim.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
#: Pages whose python blocks a test of their own runs (with the setup they need).
RUN_ELSEWHERE = {
    "docs/env.md": "tests/sim/test_env.py",
    "docs/plugins.md": "tests/sim/test_plugin_docs.py",
}
#: Names in `mdpsim.` form that are not modules: entry-point groups plug-ins register in.
ENTRY_POINT_GROUPS = {"mdpsim.mechanisms", "mdpsim.attacks", "mdpsim.networks", "mdpsim.strategies"}
PATH = re.compile(
    r"(?<![\w./-])((?:sim|agents|dashboard|bench|tests|scenarios|tools)/[\w./-]*[\w/])"
)
DOTTED = re.compile(r"(?<![\w.])(mdpsim(?:\.\w+)+)")


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def _rel(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@pytest.mark.parametrize(
    "page",
    [
        p
        for p in PAGES
        if _python_blocks(p)
        and _rel(p) not in RUN_ELSEWHERE
        and not _rel(p).startswith("docs/api/")  # tests/sim/test_api_examples.py runs them
    ],
    ids=_rel,
)
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for block in _python_blocks(page):
        exec(compile(block, str(page), "exec"), {"__name__": "__doc_block__"})


def test_pages_with_their_own_tests_are_run_there():
    for page, test in RUN_ELSEWHERE.items():
        assert _python_blocks(REPO / page), page
        assert page.rsplit("/", 1)[1] in (REPO / test).read_text(encoding="utf-8"), test


def test_the_readme_lists_every_command():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## The command line\n\n```text\n(.*?)```", text, flags=re.S).group(1)
    listed = set(re.findall(r"^mdpsim (\w+)", block, flags=re.M))
    commands = set(build_parser()._subparsers._group_actions[0].choices)
    assert listed == commands


def test_every_path_the_docs_name_exists():
    missing = {
        f"{_rel(page)}: {path}"
        for page in PAGES
        for path in PATH.findall(page.read_text(encoding="utf-8"))
        if not any(REPO.joinpath(path).exists() for path in (path, path.rstrip(".")))
        and "*" not in path
    }
    assert not missing, sorted(missing)


def _resolves(dotted: str) -> bool:
    if dotted in ENTRY_POINT_GROUPS or dotted.startswith("mdpsim.strategies."):
        return True
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_module_the_docs_name_exists():
    missing = {
        f"{_rel(page)}: {dotted}"
        for page in PAGES
        for dotted in DOTTED.findall(page.read_text(encoding="utf-8"))
        if not _resolves(dotted.rstrip("."))
    }
    assert not missing, sorted(missing)
