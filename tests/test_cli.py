"""The mdpsim command line: subcommands, summaries, and user errors without tracebacks."""

from __future__ import annotations

import subprocess
import sys

from sim.cli import main


def test_help_lists_subcommands(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    for name in ("network", "domain", "demo"):
        assert name in out


def test_network_prints_size_length_and_extent(capsys):
    assert main(["network", "--source", "helsinki-test"]) == 0
    out = capsys.readouterr().out
    assert "nodes" in out and "road length" in out and "extent" in out


def test_domain_prints_size_metric_and_memory(capsys):
    assert main(["domain", "--source", "helsinki-test", "--n-points", "120"]) == 0
    out = capsys.readouterr().out
    assert "120" in out and "road" in out and "MiB" in out


def test_user_errors_exit_2_with_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "sim.cli", "domain", "--source", "helsinki-test",
         "--spacing-m", "-1"],
        capture_output=True,
        text=True,
        env={"MDPSIM_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "spacing_m=-1.0" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_file_exits_2(capsys, tmp_path):
    assert main(["network", "--source", str(tmp_path / "x.osm.pbf")]) == 2
    assert "file not found" in capsys.readouterr().err
