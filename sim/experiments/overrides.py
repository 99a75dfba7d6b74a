"""CLI flags: those that override scenario fields, validated as those fields (one rule, one
message), and ``--out``, checked before any work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdpsim._core.guards import check_not_input, input_paths
from mdpsim._core.outputs import new_folder
from mdpsim.errors import InputError
from mdpsim.experiments.flags import FIELDS
from mdpsim.simulation.scenario import Scenario


def apply(scenario: Scenario, flags: dict[str, Any]) -> Scenario:
    """``scenario`` with the given flags' values (``--seed``, ``--ticks``: the fields of
    :data:`~mdpsim.experiments.flags.FIELDS`), validated as the fields they override: the same
    rule and the same one line as in a scenario file, after the flag's name."""
    for flag, value in flags.items():
        if value is None:
            continue
        try:
            scenario = scenario.replace(**{FIELDS[flag]: value})
        except InputError as exc:
            raise InputError(f"{flag} {value}: {exc}") from None
    return scenario


def out_or(out: str | None, default: str) -> str:
    """``--out`` as given (an empty one is refused by the path checks), else ``default``."""
    return default if out is None else out


def check_out(out: str | None, *, force: bool, wrote: str) -> None:
    """A given ``--out`` checked before the network is read (the default: once it is named);
    ``wrote``: the command that will write it (``"mdpsim run"``)."""
    if out is not None:
        new_folder(out, overwrite=force, wrote=wrote)


def folder(
    out: str | None, default: str, force: bool, scenario: Scenario | None = None, *, wrote: str
) -> Path:
    """The output folder (``--out`` or ``default``), checked (:func:`new_folder`) and, given
    the ``scenario``, neither one of its inputs nor a folder holding one."""
    path = new_folder(out_or(out, default), overwrite=force, wrote=wrote)
    if scenario is not None:
        check_not_input(path, input_paths(scenario), flag="--out")
    return path
