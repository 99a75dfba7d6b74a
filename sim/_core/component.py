"""The component base of mechanisms, attacks and strategies (scikit-learn's estimator style).

A component's ``__init__`` takes its parameters by keyword (a mechanism takes ``epsilon``
first), validates them and stores each under its own name; ``get_params`` reads them back
from the signature, so ``make(name, **c.get_params())`` rebuilds it and ``repr`` shows them.
``*args`` / ``**kwargs`` are refused: they would hide parameters from ``get_params``. A
parameter renamed or folded into another stays in ``retired_params`` (refused, naming the new).

A component class defined outside the ``mdpsim`` package is a **plug-in** (an installed
distribution's, a test's, a notebook's). Every method or property of a plug-in that overrides
one of its mdpsim base classes (``_fit``, ``observe``, ``decide``, ...) is guarded when the class
is created: an exception it raises becomes one :class:`~mdpsim.errors.PluginError` line naming
the plug-in, the method and the original exception (kept as ``__cause__``), and what it returns
is checked by the base's ``return_checks`` (one line naming the plug-in too). docs/plugins.md.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from mdpsim.errors import InputError, PluginError, one_line, plain

#: ``check(result, *args, **kwargs) -> problem or None`` of a method's return value.
ReturnCheck = Callable[..., str | None]


def is_plugin(cls: type) -> bool:
    """Whether ``cls`` is defined outside the mdpsim package."""
    return cls.__module__.partition(".")[0] != "mdpsim"


def describe(cls: type) -> str:
    """``"attack plug-in 'mode_guess' (mdpsim_example:ModeGuess)"``: how messages name it."""
    kind = getattr(cls, "component_kind", "component")
    name = getattr(cls, "name", "?")
    where = f"{cls.__module__}:{cls.__qualname__}"
    if name in ("?", None, where):
        return f"{kind} plug-in {where}"
    return f"{kind} plug-in {name!r} ({where})"


def contract_error(cls: type, message: str) -> Exception:
    """The exception for a broken contract: a :class:`PluginError` naming a plug-in, a
    ``RuntimeError`` (a bug, with its traceback) for mdpsim's own classes."""
    if is_plugin(cls):
        return PluginError(f"{describe(cls)}: {plain(message)}")
    return RuntimeError(message)


class Component:
    """Parameters by name: :meth:`param_names`, :meth:`get_params`, ``repr``."""

    name: ClassVar[str] = "?"
    #: Parameters that were renamed or folded into another: old name -> what to write instead
    #: (``make`` refuses the old name with that one line).
    retired_params: ClassVar[dict[str, str]] = {}
    #: What messages call a component of this base ("mechanism", "attack", "report policy").
    component_kind: ClassVar[str] = "component"
    #: Checks of what a plug-in's methods return, by method name (see the module docstring).
    return_checks: ClassVar[dict[str, ReturnCheck]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if is_plugin(cls):
            _guard_overrides(cls)

    @classmethod
    def param_names(cls) -> list[str]:
        """Names of the ``__init__`` parameters, the ones ``make(name, **params)`` takes."""
        if cls.__init__ is object.__init__:  # no parameters of its own
            return []
        return list(_init_params(cls.__init__, cls.__name__))

    def get_params(self) -> dict[str, Any]:
        """Constructor parameters and their values."""
        return {name: getattr(self, name) for name in self.param_names()}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


@functools.cache
def _init_params(init: Callable, owner: str) -> tuple[str, ...]:
    """The parameter names of ``init`` (an ``__init__``), read from its signature once (every
    environment reset builds its components, and ``inspect.signature`` is slow)."""
    names = []
    for p in inspect.signature(init).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{owner}.__init__ must list its parameters, not *{p.name}")
        if p.name != "self":
            names.append(p.name)
    return tuple(names)


def _guard_overrides(cls: type) -> None:
    """Wrap the plug-in's overrides of its mdpsim bases' methods and properties."""
    ours = {n for base in cls.__mro__[1:] if not is_plugin(base) for n in vars(base)}
    for attr, value in list(vars(cls).items()):
        if attr.startswith("__") or attr not in ours:
            continue
        if isinstance(value, property) and value.fget is not None:
            fget = _guarded(value.fget, attr)
            setattr(cls, attr, property(fget, value.fset, value.fdel, value.__doc__))
        elif inspect.isfunction(value):
            setattr(cls, attr, _guarded(value, attr))


def _guarded(fn: Callable, method: str) -> Callable:
    @functools.wraps(fn)
    def guarded(self, *args, **kwargs):
        try:
            result = fn(self, *args, **kwargs)
        except PluginError:
            raise
        except Exception as exc:  # the plug-in's code: any failure is its own
            raise PluginError(f"{describe(type(self))}: {method} raised {one_line(exc)}") from exc
        check = type(self).return_checks.get(method)
        problem = None if check is None else check(result, *args, **kwargs)
        if problem is not None:
            raise PluginError(f"{describe(type(self))}: {method} returned {plain(problem)}")
        return result

    return guarded


def build(cls: type, params: dict[str, Any]) -> Any:
    """``cls(**params)``; a plug-in that cannot be built (abstract methods left, its
    ``__init__`` raised) is one :class:`PluginError` line. An ``InputError`` of its
    parameter checks stays as it is (a bad parameter is the user's)."""
    if not is_plugin(cls):
        return cls(**params)
    try:
        return cls(**params)
    except InputError:
        raise
    except Exception as exc:
        raise PluginError(f"{describe(cls)}: cannot be built: {one_line(exc)}") from exc


def array_problem(value: Any, shape: tuple[int, ...], kinds: str, what: str) -> str | None:
    """Why ``value`` is not a numpy array of ``shape`` whose dtype kind is one of ``kinds``
    (``"b"`` bool, ``"iu"`` integers, ``"f"`` floats), or ``None``."""
    import numpy as np

    if not isinstance(value, np.ndarray):
        return f"{type(value).__name__}, not a numpy array of {what}"
    if value.shape != shape:
        return f"an array of shape {value.shape}, not {shape} ({what})"
    if value.dtype.kind not in kinds:
        return f"an array of dtype {value.dtype}, not of {what}"
    return None


def bool_problem(value: Any, what: str) -> str | None:
    """Why ``value`` is not a bool (numpy's included), or ``None``."""
    import numpy as np

    if isinstance(value, bool | np.bool_):
        return None
    return f"{type(value).__name__}, not a bool ({what})"
