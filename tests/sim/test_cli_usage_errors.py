"""A mistake argparse finds (an unknown command, a missing argument, a value of the wrong
type, two options that exclude each other) is one ``error:`` line naming the command and its
help, exit 2, as every other bad input is (README: exit codes) -- not the usage block."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mdpsim.cli import main


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["frobnicate"], "error: mdpsim: argument COMMAND: invalid choice: 'frobnicate'"),
        (["run"], "error: mdpsim run: the following arguments are required: scenario"),
        (["run", "x", "--seed", "abc"], "error: mdpsim run: argument --seed: invalid int value"),
        (["bound"], "error: mdpsim bound: the following arguments are required: --epsilon"),
        (["batch", "x", "--workers", "2", "--dask-workers", "2"], "not allowed with argument"),
        (["network", "--network-type", "bike"], "invalid choice: 'bike'"),
    ],
)
def test_an_argument_mistake_is_one_line_naming_the_help(argv, words, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    assert info.value.code == 2 and captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], captured.err
    command = "mdpsim" if argv[0] == "frobnicate" else f"mdpsim {argv[0]}"
    assert lines[0].endswith(f"; see `{command} --help`")


def test_the_console_command_exits_2_with_the_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "mdpsim", "run", "helsinki_demo", "--ticks", "two"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "invalid int value: 'two'" in proc.stderr
    assert "usage:" not in proc.stderr and "Traceback" not in proc.stderr
