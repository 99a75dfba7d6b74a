"""Scenarios by name: the packaged TOML files (importlib.resources), a path winning over a name,
and the one resolver (``mdpsim.simulation.scenario.resolve``) behind the CLI, the env and the
dashboard."""

from __future__ import annotations

import json

import pytest

from mdpsim.cli import main
from mdpsim.env import parallel_env, single_agent_env
from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc


@pytest.fixture(scope="module")
def small(make_scenario):
    """Two users, one attack: the smallest scenario that runs."""
    return make_scenario.but(
        scenario={"name": "lookup", "seed": 1, "ticks": 2},
        domain={"n_points": 30},
        users={"count": 2},
        queries={"every_ticks": 0},
        attacks={"run": ["bayes"]},
    )


def test_packaged_lists_every_shipped_toml_by_stem():
    names = sc.packaged()
    assert {"helsinki_demo", "attack", "mechanism_compare"} <= set(names)
    assert all(f.name == f"{stem}.toml" for stem, f in names.items())


def test_a_packaged_name_resolves_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo = sc.resolve("helsinki_demo")
    assert demo.scenario.name == "helsinki_demo"
    assert sc.resolve("helsinki_demo.toml") == demo


def test_a_file_wins_over_the_packaged_scenario_of_the_same_name(tmp_path, monkeypatch, small):
    monkeypatch.chdir(tmp_path)
    local = small.raw(scenario={"name": "mine"})
    (tmp_path / "helsinki_demo").write_text(_toml(local))
    assert sc.resolve("helsinki_demo").scenario.name == "mine"


def test_dict_and_scenario_pass_through(small):
    s = sc.resolve(small.raw())
    assert s == small()
    assert sc.resolve(s) is s


@pytest.mark.parametrize(
    "source, words",
    [
        ("no_such_scenario", "neither a file nor a packaged scenario; packaged: attack"),
        ("missing/dir.toml", "neither a file nor a packaged scenario"),
        (3, "must be a TOML path, a packaged scenario name, a dict or a Scenario"),
    ],
)
def test_a_wrong_source_is_one_line_naming_the_choices(source, words):
    with pytest.raises(InputError, match=words) as info:
        sc.resolve(source)
    assert "\n" not in str(info.value)


def test_cli_runs_a_path_and_lists_the_packaged_names_on_a_miss(
    tmp_path, monkeypatch, capsys, small
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(_toml(small.raw()))
    assert main(["run", "s.toml", "--ticks", "1", "--out", "by-path"]) == 0
    summary = json.loads((tmp_path / "by-path" / "summary.json").read_text())
    assert summary["scenario"]["scenario"]["name"] == "lookup"
    assert main(["run", "no_such_scenario"]) == 2
    assert "packaged: attack, " in capsys.readouterr().err


@pytest.mark.slow
def test_cli_demo_and_run_by_name_outside_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "helsinki_demo", "--ticks", "2", "--out", "named"]) == 0
    assert (tmp_path / "named" / "ticks.parquet").is_file()
    assert main(["demo", "--out", "demo"]) == 0
    assert (tmp_path / "demo" / "summary.json").is_file()


def test_the_env_takes_a_path_a_dict_or_a_scenario(tmp_path, small):
    path = tmp_path / "s.toml"
    path.write_text(_toml(small.raw()))
    for source in (str(path), path, small.raw(), small()):
        env = parallel_env(source)
        assert env.possible_agents == ["server", "user_0", "user_1"]
    assert single_agent_env(str(path), agent="user_1").agent == "user_1"
    with pytest.raises(InputError, match="neither a file nor a packaged scenario"):
        parallel_env("no_such_scenario")


def test_the_env_takes_a_packaged_name(helsinki_walk):
    env = parallel_env("helsinki_demo", users__count=2)
    assert env.possible_agents == ["server", "user_0", "user_1"]


def _toml(tables: dict) -> str:
    """Tables of scalars and lists as TOML text (enough for these scenarios)."""
    lines = []
    for table, fields in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"
