"""What the command line tells about its outputs, and what it refuses: `mdpsim demo --out` an
existing folder, the files `mdpsim run` lists, and a report refusal that names no flag the
user did not give."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import SMALL_RUN_TOML as TOML

from mdpsim.cli import main


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(TOML)
    return path


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _one_error(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1, err
    return lines[0]


def test_demo_does_not_replace_an_earlier_run_named_by_out_without_force(
    tmp_path, scenario, capsys
):
    out = tmp_path / "prior"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    before = _digest(out)
    line = _one_error(capsys, ["demo", "--out", str(out)])
    assert "exists; choose another --out or --force" in line
    assert _digest(out) == before


@pytest.mark.parametrize("per_user", [True, False])
def test_run_lists_the_files_it_wrote(tmp_path, scenario, capsys, per_user):
    scenario.write_text(TOML + f"[output]\nper_user = {str(per_user).lower()}\n")
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("outputs"))
    written = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert ("users.parquet" in written) is per_user
    assert line.endswith(f"({', '.join(sorted(written, key=lambda n: n != 'summary.json'))})")


def test_report_refusal_names_no_flag_the_user_did_not_give(tmp_path, scenario, capsys):
    store = tmp_path / "store"
    assert main(["batch", str(scenario), "--out", str(store), "--workers", "1"]) == 0
    assert main(["report", str(store)]) == 0
    (store / "report" / "mine.txt").write_text("mine")
    capsys.readouterr()
    before = _digest(store)
    line = _one_error(capsys, ["report", str(store)])
    assert "--out refuses" not in line and "holds 'mine.txt'" in line, line
    assert _digest(store) == before
    line = _one_error(capsys, ["report", str(store), "--out", str(store / "report")])
    assert line.startswith("error: --out refuses"), line


def test_force_names_a_batch_store_as_one_and_leaves_it(tmp_path, scenario, capsys):
    store = tmp_path / "store"
    assert main(["batch", str(scenario), "--out", str(store), "--workers", "1"]) == 0
    before = _digest(store)
    capsys.readouterr()
    line = _one_error(capsys, ["run", str(scenario), "--out", str(store), "--force"])
    assert "is a batch store" in line and "did not write" not in line, line
    assert _digest(store) == before


def _strict(text: str):
    """JSON as a strict parser (jq, JavaScript) reads it: NaN and Infinity are not JSON."""

    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_summary_json_is_standard_json_with_null_for_a_metric_no_tick_had(
    tmp_path, scenario, capsys
):
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = _strict((out / "summary.json").read_text())["summary"]
    assert "tracking_leakage_per_km           nan" in printed  # the table still says nan
    assert "tracking_leakage_per_km" in summary and summary["tracking_leakage_per_km"] is None
    assert isinstance(summary["bayes_leakage_per_km"], float)


def test_mobility_json_is_standard_json(tmp_path, scenario):
    out = tmp_path / "mobility"
    argv = ["mobility", str(scenario), "--out", str(out), "--users", "4", "--days", "1"]
    assert main(argv) == 0
    result = _strict((out / "mobility.json").read_text())
    assert None in result["values"].values()  # a measure a one-day run cannot take


def test_the_plugin_walkthrough_names_the_attack_in_the_scenario():
    """docs/plugins.md's steps after installing the example: its attack shows in the tables
    only if the scenario's [attacks] run names it, so the steps say so."""
    root = Path(__file__).resolve().parents[2]
    text = " ".join((root / "docs" / "plugins.md").read_text().split())
    at = text.index("After `mdpsim plugins --example my_plugin && pip install ./my_plugin`")
    assert '`[attacks] run = ["bayes", "mode_guess"]`' in text[at : at + 400]


@pytest.mark.parametrize(
    ("key", "choices"),
    [
        ("mechanism.epsilon", "fields of [mechanism]: name, epsilon_per_km,"),
        ("mechanizm.epsilon_per_km", "tables: scenario, network, domain,"),
    ],
)
def test_a_sweep_key_that_is_no_field_names_what_to_write(tmp_path, capsys, key, choices):
    path = tmp_path / "sweep.toml"
    path.write_text(TOML + f'[sweep]\n"{key}" = [2.0, 6.0]\n')
    out = tmp_path / "store"
    line = _one_error(capsys, ["batch", str(path), "--out", str(out), "--workers", "1"])
    assert f"sweep key '{key}' is not a scenario field; {choices}" in line, line
    assert not out.exists()


def test_a_geojson_export_is_named_after_its_file(tmp_path, scenario):
    """Not after the temporary file it is written to first (".traces.geojson")."""
    path = tmp_path / "traces.geojson"
    argv = ["run", str(scenario), "--out", str(tmp_path / "out"), "--export", "geojson", str(path)]
    assert main(argv) == 0
    assert json.loads(path.read_text())["name"] == "traces"
