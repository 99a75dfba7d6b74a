"""Parameter checks, one way for the whole library (scikit-learn's ``check_scalar`` style).

Every check returns the value in its canonical type (``int``, ``float``, ``bool``) and raises
one :class:`~mdpsim.errors.InputError` line naming the parameter and what would work, e.g.
``budget_aware: horizon_ticks=-1 must be an integer >= 0``. ``owner`` (a mechanism's, attack's
or strategy's name) prefixes the message when given. ``bool`` is never a number here, NaN
never passes a bound, and an unbounded float must still be finite unless ``finite=False``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

from mdpsim.errors import InputError

Boundaries = Literal["both", "neither", "left", "right"]

_KINDS: dict[type, tuple[tuple[type, ...], str]] = {
    int: ((int, np.integer), "an integer"),
    float: ((int, float, np.integer, np.floating), "a number"),
    bool: ((bool, np.bool_), "true or false"),
}


def _fail(owner: str, name: str, value: Any, what: str, error: type[Exception] = InputError):
    prefix = f"{owner}: " if owner else ""
    return error(f"{prefix}{name}={value!r} must be {what}")


def interval_text(
    min: float | None, max: float | None, include_boundaries: Boundaries = "both"
) -> str:
    """``>= 1``, ``> 0``, ``in (0, 1]``: the range a value must lie in, as a message says it."""
    low_closed = include_boundaries in ("both", "left")
    high_closed = include_boundaries in ("both", "right")
    if min is not None and max is not None:
        return f"in {'[' if low_closed else '('}{min:g}, {max:g}{']' if high_closed else ')'}"
    if min is not None:
        return f"{'>=' if low_closed else '>'} {min:g}"
    if max is not None:
        return f"{'<=' if high_closed else '<'} {max:g}"
    return ""


def check_scalar(
    value: Any,
    name: str,
    *,
    kind: type = float,
    min: float | None = None,
    max: float | None = None,
    include_boundaries: Boundaries = "both",
    finite: bool = True,
    owner: str = "",
    unit: str = "",
    error: type[Exception] = InputError,
) -> Any:
    """``value`` as ``kind`` (``int``, ``float`` or ``bool``), checked against the bounds.

    ``include_boundaries`` says which of ``min`` / ``max`` are allowed themselves; ``unit``
    (e.g. ``"per km"``) is named in the message; ``error`` is raised (an accountant raises
    :class:`~mdpsim.errors.PrivacyBudgetError`).
    """
    types, article = _KINDS[kind]
    problem = None
    if (kind is not bool and isinstance(value, bool | np.bool_)) or not isinstance(value, types):
        problem = "type"
    elif kind is bool:
        return bool(value)
    else:
        number = kind(value)
        low_closed = include_boundaries in ("both", "left")
        high_closed = include_boundaries in ("both", "right")
        if kind is float and (math.isnan(number) or (finite and math.isinf(number))):
            problem = "finite"
        else:
            below = min is not None and not (number >= min if low_closed else number > min)
            above = max is not None and not (number <= max if high_closed else number < max)
            problem = "bounds" if below or above else None
    if problem is None:
        return number
    # the message is built only on failure (checks run in every tick's accounting)
    bounds = interval_text(min, max, include_boundaries)
    what = " ".join(part for part in (article, bounds) if part)
    what += f" ({unit})" if unit else ""
    what += ", finite" if problem == "finite" and not bounds else ""
    raise _fail(owner, name, value, what, error)


def check_choice(value: Any, name: str, choices: Iterable[Any], *, owner: str = "") -> Any:
    """``value`` if it is one of ``choices`` (compared with ``==``)."""
    options = list(choices)
    if isinstance(value, bool) or value not in options:
        raise _fail(owner, name, value, f"one of {', '.join(repr(c) for c in options)}")
    return value


def check_optional(value: Any, name: str, **scalar: Any) -> Any:
    """``None`` as is, anything else through :func:`check_scalar` with ``scalar``."""
    return None if value is None else check_scalar(value, name, **scalar)


def check_epsilon(
    epsilon: Any, name: str = "epsilon", *, owner: str = "", error: type[Exception] = InputError
) -> float:
    """A privacy budget in 1/km: a finite number > 0."""
    return check_scalar(
        epsilon, name, min=0, include_boundaries="neither", owner=owner, unit="per km", error=error
    )


def check_positive_int(value: Any, name: str, *, minimum: int = 1, owner: str = "") -> int:
    """An integer at least ``minimum``."""
    return check_scalar(value, name, kind=int, min=minimum, owner=owner)


def check_probability(
    value: Any, name: str, *, include_boundaries: Boundaries = "neither", owner: str = ""
) -> float:
    """A number in ``(0, 1)`` (or with the boundaries ``include_boundaries`` allows)."""
    return check_scalar(
        value, name, min=0, max=1, include_boundaries=include_boundaries, owner=owner
    )


def check_margin(
    margin: Any, maximum: float, *, include_boundaries: Boundaries = "right", owner: str = ""
) -> float:
    """A release margin (a fraction of epsilon): in ``(0, maximum]`` unless told otherwise."""
    return check_scalar(
        margin, "margin", min=0, max=maximum, include_boundaries=include_boundaries, owner=owner
    )
