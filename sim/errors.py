"""Exceptions shared across the library.

``InputError`` marks a user mistake (bad parameter, file, scenario): the CLI prints its
message and exits with status 2, without a traceback. :class:`PluginError` is the InputError of
a plug-in's code (mdpsim._core.component): it names the plug-in, the method and what went wrong, and
keeps the original exception as its ``__cause__`` (``MDPSIM_TRACEBACK=1`` or ``--traceback``
prints it). Everything else is a bug or a solver failure and keeps its traceback.
"""

import re


class InputError(ValueError):
    """Bad user input; the message names the parameter and what would work."""


class PluginError(InputError):
    """A plug-in (a component defined outside mdpsim) raised, or returned what its contract
    forbids; one line naming the plug-in, the method and the reason."""


class SolverError(RuntimeError):
    """An optimisation solver did not reach optimality; the message carries its status."""


class PrivacyBudgetError(ValueError):
    """A privacy accountant or filter refused a request (overspend, NaN, inf, negative)."""


def one_line(exc: BaseException) -> str:
    """``exc`` as ``Type: message`` on one line (for an InputError that wraps it), numpy
    scalar reprs such as ``np.float64(0.9)`` shown as their values."""
    return f"{type(exc).__name__}: {plain(str(exc))}"


_NUMPY_REPR = re.compile(r"\bnp\.(?:float|int|uint|bool|complex|str)\w*\(([^()]*)\)")


def plain(text: str) -> str:
    """``text`` on one line, numpy scalar reprs (``np.float64(0.9)``) replaced by values."""
    return _NUMPY_REPR.sub(r"\1", " ".join(text.split()))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with one line saying what finished and how to go on (the CLI prints it and
    exits with status 130)."""
