"""Fuzzed scenario input: anything at all is either accepted or refused with an InputError."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(-5, 50), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)  # fmt: skip
_tables = st.sampled_from([*sc.TABLES, "sweep", "bogus"])


def _field_names(table: str) -> st.SearchStrategy[str]:
    known = list(sc.TABLES[table].model_fields) if table in sc.TABLES else ["x"]
    return st.one_of(st.sampled_from(known), st.text(min_size=1, max_size=8))


@st.composite
def scenario_dicts(draw):
    raw = {}
    for table in draw(st.lists(_tables, max_size=5, unique=True)):
        raw[table] = {
            draw(_field_names(table)): draw(_scalars) for _ in range(draw(st.integers(0, 4)))
        }
    if draw(st.booleans()):
        raw.setdefault("mechanism", {}).update(name="em", epsilon_per_km=4.0)
    return raw


def _accepted_or_refused_with_a_message(raw: dict) -> None:
    try:
        s = sc.from_dict(raw)
    except InputError as exc:
        assert str(exc)  # the message is never empty
        return
    assert s.get("mechanism.epsilon_per_km") > 0  # accepted scenarios are fully valid


_FUZZ = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


@settings(max_examples=120, **_FUZZ)  # 2,000 in the slow test below
@given(scenario_dicts())
def test_any_dict_is_accepted_or_refused_with_a_named_field(raw):
    _accepted_or_refused_with_a_message(raw)


@pytest.mark.slow
@settings(max_examples=2000, **_FUZZ)
@given(scenario_dicts())
def test_any_dict_is_accepted_or_refused_with_a_named_field_many(raw):
    _accepted_or_refused_with_a_message(raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_valid_toml_or_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "s.toml"
    path.write_bytes(data)
    try:
        sc.load(path)
    except InputError:
        return
    tomllib.loads(data.decode())  # only valid TOML can have been accepted
