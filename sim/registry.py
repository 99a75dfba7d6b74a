"""Named constructors: ``register(name)``, ``make(name, **params)``, ``available()``.

One registry per strategy kind, one for the attacks and one for the mechanisms. A strategy or
attack is named in the scenario with its parameters, e.g. ``{name = "budget_aware"}``;
:meth:`Registry.make` builds it and turns a wrong name or parameter into one
:class:`~mdpsim.errors.InputError` line that names the kind and what would work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mdpsim.component import Component
from mdpsim.errors import InputError


class Registry[T: Component]:
    """Named constructors of one kind (``kind`` is used in error messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._classes: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: make ``cls`` available as ``make(name, ...)``."""

        def deco(cls: type[T]) -> type[T]:
            if name in self._classes:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            cls.name = name
            self._classes[name] = cls
            return cls

        return deco

    def available(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._classes)

    def get(self, name: str) -> type[T]:
        """The class registered as ``name``."""
        cls = self._classes.get(name)
        if cls is None:
            raise InputError(
                f"unknown {self.kind} {name!r}; available: {', '.join(self.available())}"
            )
        return cls

    def make(self, name: str, **params: Any) -> T:
        """Build ``name`` with ``params`` (keyword arguments of its constructor)."""
        cls = self.get(name)
        accepted = cls.param_names()
        unknown = [p for p in params if p not in accepted]
        if unknown:
            allowed = ", ".join(accepted) or "none"
            raise InputError(
                f"{self.kind} {name!r} has no parameter {unknown[0]!r}; parameters: {allowed}"
            )
        return cls(**params)

    def from_spec(self, spec: str | dict[str, Any] | T) -> T:
        """A strategy from a name, a ``{name = ..., **params}`` table, or an instance as is."""
        if isinstance(spec, str):
            return self.make(spec)
        if isinstance(spec, dict):
            params = dict(spec)
            name = params.pop("name", None)
            if not isinstance(name, str):
                raise InputError(
                    f"a {self.kind} table needs a name; available: {', '.join(self.available())}"
                )
            return self.make(name, **params)
        if any(isinstance(spec, cls) for cls in self._classes.values()):
            return spec
        raise InputError(f"{spec!r} is not a {self.kind} (a name, a table or an instance)")
