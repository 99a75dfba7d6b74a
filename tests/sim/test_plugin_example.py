"""The example plug-in that ships with mdpsim (its own pyproject.toml), written out by
``mdpsim plugins --example DIR`` and installed with pip, as a user would: its mechanism runs
in `mdpsim run` and `mdpsim attack`, its attack shows in the tables, its strategy plays in
the env, and mdpsim.testing's checks pass on each."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from mdpsim import attacks, mechanisms
from mdpsim.agents import strategies
from mdpsim.cli import main
from mdpsim.env import parallel_env


@pytest.fixture(scope="module")
def plugin_world(make_scenario):
    """The plug-ins' scenario: their mechanism, attack and report strategy."""
    return make_scenario.but(
        scenario={"name": "plugin", "seed": 2, "ticks": 3},
        domain={"n_points": 30},
        users={"count": 3},
        mechanism={"name": "coin_em", "epsilon_per_km": 5.0},
        queries={"every_ticks": 0},
        attacks={"run": ["bayes", "mode_guess"]},
        strategies={"report": "every_other"},
    )


REGISTRIES = [mechanisms.base._MECHANISMS, attacks.base._ATTACKS, *strategies.REGISTRIES.values()]


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """``mdpsim plugins --example`` writes the example; pip installs it (no dependencies, no
    download) into a folder put on sys.path."""
    src = tmp_path_factory.mktemp("src") / "example"
    assert main(["plugins", "--example", str(src)]) == 0
    assert (src / "pyproject.toml").is_file() and (src / "src" / "mdpsim_example").is_dir()
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    flags = ["--no-deps", "--no-build-isolation", "--no-index", "--target", str(target)]
    subprocess.run([*pip, *flags, str(src)], check=True, capture_output=True, timeout=300)
    sys.path.insert(0, str(target))
    for r in REGISTRIES:
        r.refresh_plugins()
    yield importlib.import_module("mdpsim_example")
    sys.path.remove(str(target))
    sys.modules.pop("mdpsim_example", None)
    for r in REGISTRIES:
        r.refresh_plugins()
        for name in ("coin_em", "mode_guess", "every_other"):
            r._classes.pop(name, None)


def test_the_example_is_written_only_into_a_new_folder(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    assert main(["plugins", "--example", str(tmp_path / "taken")]) == 2
    assert "--example" in capsys.readouterr().err and not any((tmp_path / "taken").iterdir())
    assert main(["plugins", "--example", str(tmp_path / "no" / "such")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_the_entry_points_are_listed(example):
    assert "coin_em" in mechanisms.available()
    assert "mode_guess" in attacks.available()
    assert "every_other" in strategies.REGISTRIES["report"].available()


def test_the_checks_pass_on_each(example, helsinki_test_walk):
    from mdpsim.testing import check_attack, check_mechanism, check_strategy

    check_mechanism(example.CoinEM)
    check_attack(example.ModeGuess)
    check_strategy(example.EveryOther)


def test_its_mechanism_and_attack_run_in_mdpsim_run(example, tmp_path, capsys, plugin_world):
    path = tmp_path / "plugin.toml"
    path.write_text(_toml(plugin_world.raw()))
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["scenario"]["mechanism"]["name"] == "coin_em"
    assert main(["run", str(path), "--out", str(tmp_path / "bad"), "--seed", "1"]) == 0
    bad = plugin_world.raw(mechanism={"params": {"nope": 1}})
    path.write_text(_toml(bad))
    assert main(["run", str(path)]) == 2
    assert "mechanism 'coin_em' has no parameter 'nope'" in capsys.readouterr().err


def test_its_mechanism_and_attack_show_in_mdpsim_attack(example, tmp_path, capsys, plugin_world):
    path = tmp_path / "plugin.toml"
    path.write_text(_toml(plugin_world.raw()))
    out = tmp_path / "attack"
    assert main(["attack", str(path), "--mechanisms", "coin_em,em", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "coin_em" in table and "mode_guess" in table


def test_its_strategy_plays_in_the_env(example, plugin_world):
    env = parallel_env(plugin_world.raw(strategies=None), strategies={"report": "every_other"})
    env.reset()
    assert type(env.game.model.strategies.report).__name__ == "EveryOther"
    wants = []  # what the strategy has each user do, tick by tick
    while env.agents:
        actions = env.strategy_actions()
        wants.append([int(actions[f"user_{u}"]) for u in range(3)])
        env.step(actions)
    assert wants == [[0, 0, 0], [1, 1, 1], [0, 0, 0]]  # ticks 1, 2, 3: even ticks report


def _toml(tables: dict) -> str:
    lines = []
    for table, fields in tables.items():
        lines.append(f"[{table}]")
        for key, value in fields.items():
            if isinstance(value, dict):
                inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{{inner}}}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"
