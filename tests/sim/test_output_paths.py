"""Output paths checked before any work, writes that fail after it, flags validated as the
fields they override, and Ctrl-C as one line (issue 38, items 2, 3 and 6).

Tests run as root, for whom permission bits do not stop a write, so a read-only folder is
simulated: ``tempfile.mkstemp`` (the probe write of :mod:`mdpsim._core.outputs`) raises
``OSError(EROFS)`` for the folder, as a read-only mount does for anyone.
"""

from __future__ import annotations

import errno
import json
import tempfile
from pathlib import Path

import pytest

from mdpsim.cli import main

TOML = """
[scenario]
name = "tiny"
seed = 1
ticks = 2
[domain]
n_points = 60
[users]
count = 5
[mechanism]
name = "em"
epsilon_per_km = 4.0
"""

SWEEP = """
[sweep]
"mechanism.epsilon_per_km" = [2.0, 6.0]
"""


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(TOML)
    return path


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if a command loads a network (the checks must come first)."""
    import mdpsim.experiments.harness
    import mdpsim.simulation.world

    def refuse(*args, **kwargs):
        raise AssertionError("the network was loaded before the output path was checked")

    for module in (mdpsim.simulation.world, mdpsim.experiments.harness):
        monkeypatch.setattr(module, "load_graph", refuse)


def _read_only(monkeypatch, folder: Path) -> None:
    mkstemp = tempfile.mkstemp

    def probe(*args, dir=None, **kwargs):  # mkstemp's own name
        if dir is not None and Path(dir).resolve().is_relative_to(folder.resolve()):
            raise OSError(errno.EROFS, "Read-only file system", str(dir))
        return mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", probe)


def _commands(scenario: Path, batch_scenario: Path) -> dict[str, list[str]]:
    return {
        "run": ["run", str(scenario)],
        "batch": ["batch", str(batch_scenario), "--workers", "1", "--no-progress"],
        "attack": ["attack", str(scenario), "--no-progress"],
        "frontier": ["frontier", str(scenario)],
    }


@pytest.mark.parametrize("command", ["run", "batch", "attack", "frontier", "report"])
@pytest.mark.parametrize("case", ["empty", "a file", "under a file", "read-only", "file --force"])
def test_a_bad_output_path_is_one_line_before_the_network_loads(
    tmp_path, scenario, capsys, monkeypatch, no_network, command, case
):
    batch_scenario = tmp_path / "b.toml"
    batch_scenario.write_text(TOML + SWEEP)
    blocker = tmp_path / "a_file.txt"
    blocker.write_text("mine")
    readonly = tmp_path / "ro"
    readonly.mkdir()
    out = {
        "empty": "",
        "a file": str(blocker),
        "under a file": str(blocker / "sub"),
        "read-only": str(readonly / "out"),
        "file --force": str(blocker),
    }[case]
    if case == "read-only":
        _read_only(monkeypatch, readonly)
    if command == "report":
        argv = ["report", str(tmp_path / "no_store_needed"), "--out", out]
    else:
        argv = [*_commands(scenario, batch_scenario)[command], "--out", out]
        if case == "file --force" and command != "batch":
            argv.append("--force")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --out "), err
    why = {
        "empty": "is empty",
        "a file": "is a file",
        "under a file": "is a file, so the folder cannot be made",
        "read-only": "Read-only file system",
        "file --force": "is a file",
    }[case]
    assert why in err, err
    assert blocker.read_text() == "mine" and list(readonly.iterdir()) == []


def test_export_to_a_read_only_folder_is_refused_before_the_run(
    tmp_path, scenario, capsys, monkeypatch, no_network
):
    readonly = tmp_path / "ro"
    readonly.mkdir()
    _read_only(monkeypatch, readonly)
    out = tmp_path / "run"
    argv = ["run", str(scenario), "--out", str(out)]
    assert main([*argv, "--export", "geojson", str(readonly / "t.geojson")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--export geojson" in err and "Read-only" in err
    assert main([*argv, "--export", "geojson", ""]) == 2
    assert "is empty" in capsys.readouterr().err
    assert not out.exists()


def test_a_full_disk_after_the_run_leaves_no_folder_and_says_so(
    tmp_path, scenario, capsys, monkeypatch, helsinki_walk
):
    import pandas as pd

    def full(self, path, *args, **kwargs):
        Path(path).write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    out = tmp_path / "run"
    assert main(["run", str(scenario), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: cannot write '{out}'") and "No space left" in err
    assert "no partial results are kept" in err
    assert not out.exists() and [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ---------------------------------------------------------------------- flags
TICKS = [
    (["--ticks", "0"], "--ticks 0: field scenario.ticks = 0 must be >= 1"),
    (
        ["--ticks", "99999999999999999999999"],
        "field scenario.ticks = 99999999999999999999999 must be <= 1000000",
    ),
]
SEEDS = [
    (["--seed", "-1"], "--seed -1: field scenario.seed = -1 must be >= 0"),
    (["--seed", str(2**64)], f"field scenario.seed = {2**64} must be <= {2**63 - 1}"),
]


@pytest.mark.parametrize(
    ("command", "flags", "message"),
    [("run", *case) for case in SEEDS + TICKS]
    + [(command, *case) for command in ("batch", "attack") for case in TICKS],
)
def test_a_flag_is_checked_as_the_field_it_overrides(
    tmp_path, scenario, capsys, no_network, flags, message, command
):
    batch_scenario = tmp_path / "b.toml"
    batch_scenario.write_text(TOML + SWEEP)
    out = tmp_path / "out"
    argv = [*_commands(scenario, batch_scenario)[command], "--out", str(out), *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_the_file_says_the_same_as_the_flag(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(TOML.replace("seed = 1", "seed = -1"))
    assert main(["run", str(path)]) == 2
    from_file = capsys.readouterr().err.split(": ", 2)[2]
    good = tmp_path / "good.toml"
    good.write_text(TOML)
    assert main(["run", str(good), "--seed", "-1"]) == 2
    assert capsys.readouterr().err.split(": ", 2)[2] == from_file


def test_summary_records_the_seed_and_ticks_the_run_used(tmp_path, scenario, helsinki_walk):
    out = tmp_path / "run"
    assert main(["run", str(scenario), "--out", str(out), "--seed", "5", "--ticks", "3"]) == 0
    doc = json.loads((out / "summary.json").read_text())
    assert doc["scenario"]["scenario"]["seed"] == 5 and "seed" not in doc
    assert doc["scenario"]["scenario"]["ticks"] == doc["summary"]["ticks"] == 3


# ---------------------------------------------------------------------- Ctrl-C
def _interrupt_at_tick(monkeypatch, tick: int) -> None:
    from mdpsim.simulation.model import PrivacyModel

    step = PrivacyModel.step

    def interrupted(self, *args, **kwargs):
        if self.tick + 1 >= tick:
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(PrivacyModel, "step", interrupted)


def test_ctrl_c_during_a_run_is_one_line_and_exit_130(
    tmp_path, scenario, capsys, monkeypatch, helsinki_walk
):
    _interrupt_at_tick(monkeypatch, 2)
    out = tmp_path / "run"
    assert main(["run", str(scenario), "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("interrupted: run interrupted after 1 of 2 ticks; nothing was written")
    assert not out.exists()


def test_ctrl_c_during_an_attack_evaluation_is_one_line_and_exit_130(
    tmp_path, scenario, capsys, monkeypatch, helsinki_walk
):
    _interrupt_at_tick(monkeypatch, 2)
    out = tmp_path / "attacks"
    assert main(["attack", str(scenario), "--out", str(out), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert err == (
        "interrupted: attack evaluation interrupted after 0 of 1 runs; nothing was written: "
        "run the same command again (same seeds, same results)\n"
    )
    assert not out.exists()
