"""Exceptions shared across the library.

``InputError`` marks a user mistake (bad parameter, file, scenario): the CLI prints its
message and exits with status 2, without a traceback. Everything else is a bug or a solver
failure and keeps its traceback.
"""


class InputError(ValueError):
    """Bad user input; the message names the parameter and what would work."""


class SolverError(RuntimeError):
    """An optimisation solver did not reach optimality; the message carries its status."""


class PrivacyBudgetError(ValueError):
    """A privacy accountant or filter refused a request (overspend, NaN, inf, negative)."""


def one_line(exc: BaseException) -> str:
    """``exc`` as ``Type: message`` on one line (for an InputError that wraps it)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
