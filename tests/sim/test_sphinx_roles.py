"""docs/_ext/sphinx_roles.py: Sphinx roles render as cross-references (issue 50 item 1)."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sphinx_roles", ROOT / "docs/_ext/sphinx_roles.py")
assert _spec is not None and _spec.loader is not None
roles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(roles)

# a module mdpsim.m holding class C with method f, and mdpsim.errors.InputError
KNOWN = {"mdpsim", "mdpsim.m", "mdpsim.m.C", "mdpsim.m.C.f", "mdpsim.errors.InputError"}
_pkg = SimpleNamespace(path="mdpsim", parent=None)
_mod = SimpleNamespace(path="mdpsim.m", parent=_pkg)
_cls = SimpleNamespace(path="mdpsim.m.C", parent=_mod)


def _convert(text, obj=_cls):
    return roles.convert(text, {k: object() for k in KNOWN}, obj)


def test_a_short_name_resolves_against_the_class_and_module():
    out = _convert("see :meth:`f` and :class:`C`")
    assert 'identifier="mdpsim.m.C.f"' in out and 'identifier="mdpsim.m.C"' in out
    assert ":meth:" not in out and ":class:" not in out


def test_a_tilde_shows_the_last_component_of_a_full_path():
    out = _convert(":class:`~mdpsim.errors.InputError`")
    assert out.endswith("<code>InputError</code></autoref>")


def test_a_name_that_resolves_nowhere_is_a_required_reference_strict_mkdocs_refuses():
    assert _convert(":func:`mdpsim.nowhere`") == "[`mdpsim.nowhere`][mdpsim.nowhere]"
