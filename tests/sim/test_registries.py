"""One registry style (issue 50 item 4): every table a plug-in or a new built-in extends is a
``Catalog`` (a ``Registry`` for components); no module keeps a public dict that code fills by
name at import time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mdpsim._core.registry import Catalog, Registry
from mdpsim.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sim", "agents", "dashboard")


def _empty_public_dicts(path: Path) -> list[str]:
    """Module-level public names bound to an empty dict literal (a table filled later)."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = [t for t in node.targets if isinstance(t, ast.Name)], node.value
        else:
            continue
        if isinstance(value, ast.Dict) and not value.keys:
            found += [t.id for t in targets if not t.id.startswith("_")]
    return found


def test_no_public_table_is_a_plain_dict_filled_by_name():
    offenders = {
        str(path.relative_to(ROOT)): names
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (names := _empty_public_dicts(path))
    }
    assert offenders == {}


def test_a_catalog_files_entries_once_and_names_what_it_has():
    catalog: Catalog[int] = Catalog("colour", hint="add one with register")
    catalog.register("red")(1)
    catalog.add("blue", 2)
    assert catalog.available() == ["red", "blue"] and catalog.get("blue") == 2
    assert "red" in catalog and len(catalog) == 2 and list(catalog) == ["red", "blue"]
    with pytest.raises(ValueError, match="colour 'red' registered twice"):
        catalog.add("red", 3)
    with pytest.raises(InputError, match=r"unknown colour 'green'; available: red, blue \(add"):
        catalog.get("green")
    catalog.remove("red")
    assert catalog.available() == ["blue"]


def test_the_registries_are_catalogs():
    from mdpsim.attacks.base import SCORERS
    from mdpsim.attacks.tracking import TRACKING_METHODS
    from mdpsim.env.prior_answers import PRIOR_ANSWERS
    from mdpsim.mechanisms.dista_lp.surrogates import SURROGATES
    from mdpsim.mechanisms.dista_lp.uploads import SCHEMES
    from mdpsim.queries.kinds import QUERY_FIELDS, QUERY_KINDS

    assert issubclass(Registry, Catalog)
    tables = (TRACKING_METHODS, PRIOR_ANSWERS, QUERY_KINDS, QUERY_FIELDS, SCORERS, SURROGATES,
              SCHEMES)  # fmt: skip
    for table in tables:
        assert isinstance(table, Catalog)
    assert {"range", "kde", "knn"} <= set(QUERY_KINDS.available())
    assert {"range", "kde", "knn"} <= set(PRIOR_ANSWERS)  # (and a test module's kinds)
    assert set(QUERY_KINDS) == set(QUERY_FIELDS)  # every kind has its fields
