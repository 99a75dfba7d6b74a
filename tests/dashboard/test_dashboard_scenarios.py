"""The live page lists a user's own scenarios: ``mdpsim dashboard --scenarios DIR`` puts the
folder in ``$MDPSIM_SCENARIOS``, and the picker lists its TOML files beside the packaged ones."""

from __future__ import annotations

import os

from mdpsim.cli import main
from mdpsim.dashboard import resources
from mdpsim.dashboard.launch import streamlit_env
from mdpsim.simulation import scenario as sc


def test_a_folders_scenarios_are_listed_beside_the_packaged_ones(tmp_path, monkeypatch):
    (tmp_path / "mine.toml").write_text('[mechanism]\nname = "em"\nepsilon_per_km = 2.0\n')
    (tmp_path / "helsinki_demo.toml").write_text('[mechanism]\nname = "em"\nepsilon_per_km = 3.0\n')
    monkeypatch.setenv(resources.SCENARIOS_ENV, str(tmp_path))
    files = resources.scenario_files()
    assert set(sc.packaged()) <= set(files) and "mine" in files
    assert resources.load_scenario("mine").mechanism.epsilon_per_km == 2.0
    assert resources.load_scenario("helsinki_demo").mechanism.epsilon_per_km == 3.0  # folder wins


def test_the_cli_passes_the_folders_to_streamlit(tmp_path, capsys):
    env = streamlit_env([str(tmp_path), str(tmp_path / "b")])
    assert env[resources.SCENARIOS_ENV].split(os.pathsep) == [str(tmp_path), str(tmp_path / "b")]
    assert main(["dashboard", "--scenarios", str(tmp_path / "missing")]) == 2
    assert "--scenarios" in capsys.readouterr().err
