"""The component base of mechanisms, attacks and strategies (scikit-learn's estimator style).

A component's ``__init__`` takes its parameters by keyword (a mechanism takes ``epsilon``
first), validates them and stores each under its own name; ``get_params`` reads them back
from the signature, so ``make(name, **c.get_params())`` rebuilds it and ``repr`` shows them.
``*args`` / ``**kwargs`` are refused: they would hide parameters from ``get_params``. A
parameter renamed or folded into another stays in ``retired_params`` (refused, naming the new).
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar


class Component:
    """Parameters by name: :meth:`param_names`, :meth:`get_params`, ``repr``."""

    name: ClassVar[str] = "?"
    #: Parameters that were renamed or folded into another: old name -> what to write instead
    #: (``make`` refuses the old name with that one line).
    retired_params: ClassVar[dict[str, str]] = {}

    @classmethod
    def param_names(cls) -> list[str]:
        """Names of the ``__init__`` parameters, the ones ``make(name, **params)`` takes."""
        names: list[str] = []
        if cls.__init__ is object.__init__:  # no parameters of its own
            return names
        for p in inspect.signature(cls.__init__).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{cls.__name__}.__init__ must list its parameters, not *{p.name}")
            if p.name != "self":
                names.append(p.name)
        return names

    def get_params(self) -> dict[str, Any]:
        """Constructor parameters and their values."""
        return {name: getattr(self, name) for name in self.param_names()}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"
