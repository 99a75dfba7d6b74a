"""A griffe extension: Sphinx roles in docstrings become mkdocstrings cross-references.

The package's docstrings write ``:class:`InputError``` and ``:func:`~mdpsim.x.y``` (293 roles);
mkdocstrings would print them as literal text. At render time (never in the source files) each
role of ``class``/``func``/``meth``/``attr``/``mod``/``data``/``exc``/``obj`` becomes a link:

* the target is resolved against the object's class, module and the package's parents, the way
  Sphinx resolves short names, and a leading ``~`` shows only the last component;
* a target that resolves becomes an optional autoref (a link when that object has a page, plain
  code when it is private and unrendered);
* a target that resolves nowhere becomes a required ``[text][target]`` reference, so
  ``mkdocs build --strict`` (``make docs``) fails on it.

Loaded by mkdocs.yml (``extensions: [docs/_ext/sphinx_roles.py]``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|mod|data|exc|obj):`(~?)([\w.]+)(?:\(\))?`")


def _exists(collection: Any, path: str) -> bool:
    try:
        collection[path]
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return False
    return True


def _candidates(obj: griffe.Object, target: str) -> list[str]:
    scopes: list[str] = []
    node: griffe.Object | None = obj
    while node is not None:
        scopes.append(node.path)
        node = node.parent
    return [target, *(f"{scope}.{target}" for scope in scopes)]


def resolve(collection: Any, obj: griffe.Object, target: str) -> str | None:
    """The full path ``target`` names from ``obj``'s place, or ``None``."""
    for path in _candidates(obj, target):
        if _exists(collection, path):
            return path
    return None


def convert(text: str, collection: Any, obj: griffe.Object) -> str:
    """``text`` with every Sphinx role turned into a cross-reference (see the module)."""

    def one(m: re.Match[str]) -> str:
        tilde, target = m.group(2), m.group(3)
        shown = target.rsplit(".", 1)[-1] if tilde else target
        path = resolve(collection, obj, target)
        if path is None:
            return f"[`{shown}`][{target}]"
        return f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>'

    return ROLE.sub(one, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring of a loaded package (see the module)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        self._walk(pkg, loader.modules_collection, set())

    def _walk(self, obj: griffe.Object, collection: Any, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value, collection, obj)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, collection, seen)  # type: ignore[arg-type]
