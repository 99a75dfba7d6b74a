"""Named constructors: ``register(name)``, ``make(name, **params)``, ``available()``.

One registry per strategy kind, one for the attacks and one for the mechanisms. A strategy or
attack is named in the scenario with its parameters, e.g. ``{name = "budget_aware"}``;
:meth:`Registry.make` builds it and turns a wrong name or parameter into one
:class:`~mdpsim.errors.InputError` line that names the kind and what would work.

Plug-ins (docs/plugins.md): a registry opened with :meth:`Registry.open_to_plugins` also
offers the entry points of its group (``mdpsim.mechanisms``, ``mdpsim.attacks``,
``mdpsim.strategies.<kind>``), read with importlib.metadata and imported only when asked for,
and takes ``"package.module:Name"`` wherever it takes a name. A plug-in that cannot be imported
or is not a subclass of the registry's base is an InputError naming it when it is asked for;
it never takes the built-ins down. An entry point with a built-in's name is ignored, with a
warning.

Every other table a new built-in extends (query kinds, their prior answers, tracking methods,
DistA-LP's surrogate families and upload schemes) is a :class:`Catalog`: the same
``register(name)`` / ``available()`` / ``get(name)`` and the same one-line error, for entries
that are functions or classes built elsewhere. :class:`Registry` is the catalog of components,
with plug-ins and :meth:`Registry.make`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

from mdpsim._core.component import Component, build, describe, is_plugin
from mdpsim.errors import InputError, PluginError, one_line

#: ``"package.module:Name"`` marks a class given by its import path, not a registered name.
IMPORT_SEP = ":"


class Catalog[V]:
    """Named entries of one kind (``kind`` is used in error messages), in registration order.

    ``register(name)`` is a decorator that files a function or class under ``name`` (refusing
    a name twice); ``get(name)`` returns it, or raises one :class:`InputError` line naming the
    kind and what is available."""

    def __init__(self, kind: str, *, hint: str = "") -> None:
        self.kind = kind
        self.hint = hint  # appended to the unknown-name line: how to add one
        self._entries: dict[str, V] = {}

    def register(self, name: str) -> Callable[[V], V]:
        """Decorator: file the decorated function or class under ``name``."""

        def deco(entry: V) -> V:
            self.add(name, entry)
            return entry

        return deco

    def add(self, name: str, entry: V) -> None:
        """File ``entry`` under ``name`` (a name already taken raises ``ValueError``)."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's or a session's own entry; unknown names are ignored)."""
        self._entries.pop(name, None)

    def available(self) -> list[str]:
        """The names, in registration order."""
        return list(self._entries)

    def get(self, name: str) -> V:
        """The entry filed under ``name``; one InputError line naming what is available."""
        if name not in self._entries:
            raise InputError(
                f"unknown {self.kind} {name!r}; available: {', '.join(self._entries) or 'none'}"
                + (f" ({self.hint})" if self.hint else "")
            )
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __getitem__(self, name: str) -> V:
        return self._entries[name]  # a KeyError, as a mapping's: get() is the one-line form

    def keys(self):
        """The names, in registration order (``{**catalog}`` copies it into a dict)."""
        return self._entries.keys()

    def __iter__(self):
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def items(self):
        """``(name, entry)`` pairs in registration order."""
        return self._entries.items()

    def values(self):
        """The entries in registration order."""
        return self._entries.values()


class Registry[T: Component](Catalog[type[T]]):
    """Named constructors of one kind (``kind`` is used in error messages): a catalog of
    component classes, open to plug-ins, that builds them (:meth:`make`)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self._classes = self._entries
        self.group: str | None = None
        self.base: type | None = None
        self._entry_points: dict[str, importlib.metadata.EntryPoint] | None = None

    def open_to_plugins(self, group: str, base: type) -> None:
        """Offer the entry points of ``group`` too; plug-ins must subclass ``base``."""
        self.group, self.base = group, base
        self._entry_points = None

    def plugins(self) -> dict[str, importlib.metadata.EntryPoint]:
        """The group's entry points by name (read once; :meth:`refresh_plugins` re-reads)."""
        if self.group is None:
            return {}
        if self._entry_points is None:
            found: dict[str, importlib.metadata.EntryPoint] = {}
            for ep in importlib.metadata.entry_points(group=self.group):
                where = f"{ep.value} of {ep.dist.name if ep.dist else 'an unknown distribution'}"
                if ep.name in self._classes:
                    warnings.warn(
                        f"{self.kind} plug-in {ep.name!r} ({where}) has a built-in's name; "
                        "ignored (rename its entry point)",
                        stacklevel=2,
                    )
                elif ep.name not in found:
                    found[ep.name] = ep
            self._entry_points = found
        return self._entry_points

    def refresh_plugins(self) -> None:
        """Read the entry points again (after installing a plug-in into this process)."""
        importlib.invalidate_caches()
        self._entry_points = None

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
        """Registered names in registration order, then the plug-ins' (not imported yet)."""
        return [*self._classes, *(n for n in self.plugins() if n not in self._classes)]

    def get(self, name: str) -> type[T]:
        """The class registered as ``name``, a plug-in's, or one at ``"package.module:Name"``."""
        cls = self._classes.get(name)
        if cls is not None:
            return cls
        if name in self.plugins():
            ep = self.plugins()[name]
            cls = self._checked(name, lambda: ep.load(), f"entry point {ep.value}")
        elif IMPORT_SEP in name and self.base is not None:
            cls = self._checked(name, lambda: _import(name), "an import path")
        else:
            raise InputError(
                f"unknown {self.kind} {name!r}; available: {', '.join(self.available())}"
                + (" (or package.module:Name)" if self.base is not None else "")
            )
        if cls not in self._classes.values():  # a built-in by its import path keeps its name
            cls.name = name
        self._classes[name] = cls
        return cls

    def _checked(self, name: str, load: Callable[[], Any], what: str) -> type[T]:
        """Import a plug-in; any failure is one InputError line naming it."""
        try:
            cls = load()
        except Exception as exc:  # the plug-in's own code: any failure is its problem
            raise InputError(
                f"{self.kind} {name!r} ({what}) cannot be imported: {one_line(exc)}"
            ) from exc
        assert self.base is not None
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise InputError(
                f"{self.kind} {name!r} ({what}) is {cls!r}, not a subclass of "
                f"{self.base.__module__}.{self.base.__qualname__}"
            )
        return cls  # type: ignore[return-value]

    def make(self, name: str, **params: Any) -> T:
        """Build ``name`` with ``params`` (keyword arguments of its constructor)."""
        cls = self.get(name)
        for old in params:
            if (new := cls.retired_params.get(old)) is not None:
                raise InputError(f"{self.kind} {name!r}: parameter {old!r} is gone; use {new}")
        try:
            accepted = cls.param_names()
        except TypeError as exc:  # *args / **kwargs in its __init__
            if not is_plugin(cls):
                raise
            raise PluginError(f"{describe(cls)}: {exc}") from exc
        unknown = [p for p in params if p not in accepted]
        if unknown:
            allowed = ", ".join(accepted) or "none"
            raise InputError(
                f"{self.kind} {name!r} has no parameter {unknown[0]!r}; parameters: {allowed}"
            )
        return build(cls, params)

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
        if any(isinstance(spec, cls) for cls in self._classes.values()) or (
            self.base is not None and isinstance(spec, self.base)
        ):
            return spec
        raise InputError(f"{spec!r} is not a {self.kind} (a name, a table or an instance)")


def _import(path: str) -> Any:
    """The object at ``"package.module:Name"`` (the current folder is importable, as for
    ``python -m``)."""
    module_name, _, attr = path.partition(IMPORT_SEP)
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not package.module:Name")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
