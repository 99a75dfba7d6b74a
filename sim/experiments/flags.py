"""The CLI's numeric flags, checked before any work (issue 38, item 3; docs/reliability.md).

A flag that stands for a scenario field (``--seed``, ``--ticks``, ``--n-points``,
``--n-outputs``, ``--epsilon`` / ``--epsilons``) is checked by that field's rule, with the
scenario file's own line after the flag, in every command, also in those that read no
scenario (``audit``, ``bound``, ``domain``): they are checked on a reference scenario. A
domain's size must also fit in memory (:func:`~mdpsim.geo.domain.check_memory`). The other
numeric flags have their bounds here (:data:`RULES`); the batch backend's own
(``--workers``, ``--connect-timeout``, ...) are checked by ``backends.check_options``.
"""

from __future__ import annotations

import argparse
from functools import cache
from typing import Any

from mdpsim._core.validation import check_scalar
from mdpsim.errors import InputError

#: flag -> the scenario field whose rule it follows
FIELDS = {
    "--seed": "scenario.seed",
    "--ticks": "scenario.ticks",
    "--n-points": "domain.n_points",
    "--n-outputs": "domain.n_outputs",
    "--epsilon": "mechanism.epsilon_per_km",
    "--epsilons": "mechanism.epsilon_per_km",
    "--users": "users.count",
    "--tick-seconds": "scenario.tick_seconds",
}
#: Comma-separated lists of numbers: each value is checked.
LISTS = ("--epsilons", "--qualities")
_POSITIVE: dict[str, Any] = {"min": 0, "include_boundaries": "neither"}
#: flag -> :func:`~mdpsim._core.validation.check_scalar`'s bounds (beyond them: a typo)
RULES: dict[str, dict[str, Any]] = {
    "--samples": {"kind": int, "min": 1, "max": 10**12, "unit": "draws"},
    "--candidates": {"kind": int, "min": 1, "max": 10_000},
    "--alpha": {"min": 0, "max": 1, "include_boundaries": "neither"},
    "--rounds": {"kind": int, "min": 1, "max": 1_000},
    "--repetitions": {"kind": int, "min": 1, "max": 10_000},
    "--spacing-m": {**_POSITIVE, "unit": "m"},
    "--grid-cell-m": {**_POSITIVE, "unit": "m"},
    "--qualities": {**_POSITIVE, "unit": "km"},
    "--days": {**_POSITIVE, "max": 3660, "unit": "days"},
    "--resolution-m": {**_POSITIVE, "unit": "m"},
    "--port": {"kind": int, "min": 1, "max": 65_535, "unit": "a TCP port"},
}
_REFERENCE = {"scenario": {"name": "flags"}, "mechanism": {"name": "em", "epsilon_per_km": 1.0}}


def check_flags(args: argparse.Namespace) -> None:
    """Refuse a bad numeric flag of ``args`` (parsed by ``mdpsim.cli``) in one line."""
    for flag in (*FIELDS, *RULES):
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is None:
            continue
        for one in _values(flag, value):
            if flag in FIELDS:
                check_field(flag, one)
            else:
                check_scalar(one, flag, **RULES[flag])
    n_points, n_outputs = getattr(args, "n_points", None), getattr(args, "n_outputs", None)
    if n_points or n_outputs:
        from mdpsim.geo.domain import check_memory

        try:  # the outputs are a coarser set of places: at most as many as the secrets
            check_memory(max(n_points or 0, n_outputs or 0), n_outputs or None)
        except InputError as exc:
            flag = "--n-points" if (n_points or 0) >= (n_outputs or 0) else "--n-outputs"
            raise InputError(
                f"{flag} {n_points if flag == '--n-points' else n_outputs}: {exc}"
            ) from None


def check_field(flag: str, value: Any) -> None:
    """``value`` checked by the rule of the field ``flag`` stands for (one line, after the
    flag: ``--seed -1: field scenario.seed = -1 must be >= 0 (...)``)."""
    try:
        _reference().replace(**{FIELDS[flag]: value})
    except InputError as exc:
        raise InputError(f"{flag} {value}: {exc}") from None


def _values(flag: str, value: Any) -> list[Any]:
    """The flag's numbers: a list flag's comma-separated values (words left to the command,
    which names them), else the value."""
    if flag not in LISTS:
        return [value]
    numbers = []
    for word in str(value).split(","):
        try:
            numbers.append(float(word))
        except ValueError:
            continue
    return numbers


@cache
def _reference():
    from mdpsim.simulation import scenario

    return scenario.from_dict(_REFERENCE)


def csv_list(text: str | None, kind: type, flag: str) -> list | None:
    """A comma-separated flag value as a list of ``kind`` (``None`` if not given)."""
    if text is None:
        return None
    try:
        values = [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{flag}={text!r} must be a comma-separated list") from None
    if not values:
        raise InputError(f"{flag}={text!r} lists nothing")
    return values
