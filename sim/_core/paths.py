"""The one meaning of "the repository" in code: the clone mdpsim runs from, if any."""

from __future__ import annotations

from pathlib import Path

#: sim/_core/paths.py -> the clone's root (sim/ is the package ``mdpsim``).
_CANDIDATE = Path(__file__).resolve().parents[2]


def source_checkout() -> Path | None:
    """The root of the clone this package runs from (an editable install), or None when
    mdpsim is installed as a package (a wheel has no docs/ and no pyproject.toml)."""
    if (_CANDIDATE / "pyproject.toml").is_file() and (_CANDIDATE / "docs").is_dir():
        return _CANDIDATE
    return None
