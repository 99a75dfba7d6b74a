"""Names in the docs that cannot go stale (issue 50 item 2).

docs/*.md, README.md and every module's text under sim/, agents/ and dashboard/ are read; a
dotted ``mdpsim.`` name must import or resolve as an attribute, a repository path (``sim/...``,
``docs/...``, ``bench/...``, ``scenarios/...``, ``tests/...``) must exist, and a ``--flag`` on
an ``mdpsim`` command line must be defined by the CLI's parser.
"""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted(p for d in ("sim", "agents", "dashboard") for p in (ROOT / d).rglob("*.py"))

# ``mdpsim.`` followed by identifiers; a trailing ``.<kind>`` or ``.*`` is a pattern, not a name
DOTTED = re.compile(r"(?<![\w./-])mdpsim(?:\.[A-Za-z_]\w*)+(?![\w<*(-])(?!\.[<*])")
PATH = re.compile(
    r"(?<![\w./-])((?:sim|docs|bench|scenarios|tests)/[\w./-]*\w\.(?:py|md|toml|json|yml))"
)
COMMAND = re.compile(r"(?:^|[`$])\s*mdpsim\s+([a-z][\w-]*)([^`\n|]*)", re.M)
FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")


def _entry_point_groups() -> set[str]:
    """The plug-in groups the code reads: names, not modules."""
    from mdpsim.agents.strategies import REGISTRIES
    from mdpsim.attacks import _ATTACKS
    from mdpsim.geo.network import NETWORK_GROUP
    from mdpsim.mechanisms import _MECHANISMS

    groups = {r.group for r in [*REGISTRIES.values(), _ATTACKS, _MECHANISMS]}
    return {g for g in groups if g} | {NETWORK_GROUP, "mdpsim.strategies"}


def _has(obj: object, attr: str) -> bool:
    fields = getattr(obj, "__dataclass_fields__", {})
    return hasattr(obj, attr) or attr in fields or attr in getattr(obj, "__annotations__", {})


def _resolves(name: str) -> bool:
    if name in _entry_point_groups():
        return True
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not _has(obj, attr):
                return False
            obj = getattr(obj, attr, None)
        return True
    return False


def _texts():
    for path in [*DOCS, *SOURCES]:
        yield path, path.read_text(encoding="utf-8")


def _dotted_names() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path, text in _texts():
        for m in DOTTED.finditer(text):
            name = m.group(0).rstrip(".")
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_dotted_mdpsim_name_resolves():
    stale = {n: sorted(w) for n, w in _dotted_names().items() if not _resolves(n)}
    assert stale == {}


def test_every_repository_path_exists():
    stale: dict[str, list[str]] = {}
    for path, text in _texts():
        for m in PATH.finditer(text):
            target = m.group(1)
            if not (ROOT / target).exists():
                stale.setdefault(target, []).append(str(path.relative_to(ROOT)))
    assert stale == {}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from mdpsim.experiments.cli_parser import build_parser

    top = build_parser()
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {"": top, **subs.choices}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_every_cli_flag_in_the_docs_exists():
    parsers = _parsers()
    stale: dict[str, set[str]] = {}
    for path, text in _texts():
        if path.suffix != ".md":
            continue
        for m in COMMAND.finditer(text):
            command, rest = m.group(1), m.group(2)
            known = _flags(parsers[""]) | _flags(parsers.get(command, parsers[""]))
            for flag in FLAG.findall(rest):
                if flag not in known:
                    stale.setdefault(f"mdpsim {command} {flag}", set()).add(path.name)
    assert stale == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see mdpsim.nowhere.thing", True),
        ("`mdpsim.strategies.<kind>`", False),
        ("mdpsim.errors.InputError", True),
    ],
)
def test_the_dotted_pattern_finds_names_and_skips_patterns(text, expected):
    assert bool(DOTTED.search(text)) is expected
    if expected:
        assert _resolves(DOTTED.search(text).group(0)) is ("nowhere" not in text)


def test_every_python_file_named_in_the_docs_exists():
    """A file named in backticks (``lp/solver.py``) is some repository file's path tail.

    An absolute path (``/tmp/x.py``) is one machine's file and never matches.
    """
    tails = {
        "/".join(p.relative_to(ROOT).parts[-k:])
        for p in ROOT.rglob("*.py")
        if ".venv" not in p.parts and ".typecheck" not in p.parts
        for k in range(1, len(p.relative_to(ROOT).parts) + 1)
    }
    stale: dict[str, set[str]] = {}
    for path in DOCS:
        for name in re.findall(r"`([\w/]+\.py)`", path.read_text(encoding="utf-8")):
            # an installed path (mdpsim/dashboard/app.py) is the repository's dashboard/app.py
            if name.removeprefix("mdpsim/") not in tails:
                stale.setdefault(name, set()).add(path.name)
    assert stale == {}
