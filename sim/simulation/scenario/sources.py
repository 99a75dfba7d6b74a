"""Scenarios from files, packaged names and dicts: :func:`load`, :func:`packaged`,
:func:`resolve`."""

from __future__ import annotations

import importlib.resources
import os
import tomllib
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from mdpsim.errors import InputError
from mdpsim.simulation.scenario.schema import Scenario, from_dict

PACKAGED = "mdpsim.scenarios"


def load(path: str | Path | Traversable) -> Scenario:
    """Read and validate a TOML scenario file (a path, or a packaged scenario's resource)."""
    p = path if isinstance(path, Traversable) else Path(path)
    if not p.is_file():
        raise InputError(f"scenario file {str(p)!r} not found")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8-sig"))  # a BOM is accepted
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"scenario file {str(p)!r} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"scenario file {str(p)!r} is not UTF-8 text: {exc}") from exc
    try:
        return from_dict(raw, path=str(p))
    except InputError as exc:
        raise InputError(f"{p}: {exc}") from None


def packaged() -> dict[str, Traversable]:
    """The scenarios shipped in the package ``mdpsim.scenarios``, by file stem (sorted)."""
    files = importlib.resources.files(PACKAGED)
    found = {f.name.removesuffix(".toml"): f for f in files.iterdir() if f.name.endswith(".toml")}
    return dict(sorted(found.items()))


ScenarioSource = str | os.PathLike[str] | dict[str, Any] | Scenario


def resolve(source: ScenarioSource) -> Scenario:
    """A scenario from what the CLI, the env, the dashboard and batch runs accept.

    ``source`` is a :class:`Scenario` (returned as is), a dict of tables (:func:`from_dict`),
    a path to a TOML file, or the name of a packaged scenario (``"helsinki_demo"``, see
    :func:`packaged`). A file that exists wins over a packaged scenario of the same name.
    """
    if isinstance(source, Scenario):
        return source
    if isinstance(source, dict):
        return from_dict(source)
    if not isinstance(source, str | os.PathLike):
        raise InputError(
            f"scenario={source!r} must be a TOML path, a packaged scenario name, a dict or a "
            "Scenario"
        )
    path = Path(source)
    if path.is_file():
        return load(path)
    shipped = packaged()
    name = str(source).removesuffix(".toml")
    if isinstance(source, str) and name in shipped:
        return load(shipped[name])
    raise InputError(
        f"scenario {str(source)!r} is neither a file nor a packaged scenario; packaged: "
        f"{', '.join(shipped)}"
    )
