"""Every numeric flag of every command, at the extremes (issue 38, item 3): a value is refused
in one line with exit 2 before any work (no network read, nothing written), or accepted (the
command goes on to load its network, which the test stops there). Never a traceback.

Negative, NaN and infinite values are refused by every flag, 0 by all but the seeds and
``--n-outputs`` (0: Y = X, as in a scenario), an
integer past any memory by the integer flags; 1e308 and 1.5 may be refused or accepted (an
epsilon of 1e308 passes the field's rule and is refused by the fit, on the domain it is too
large for: docs/reliability.md, "Absurd numbers").

The flags are read from the parser, so a new numeric flag is swept too; comma-separated
number lists (``--epsilons``, ``--qualities``) are swept with each extreme in the list.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from mdpsim.cli import build_parser, main

EXTREMES = ["-1", "0", "nan", "inf", "-inf", "1e308", "99999999999999999999999", "1.5"]
LISTS = {"--epsilons", "--qualities"}
TOML = """
[scenario]
name = "flags"
seed = 1
ticks = 2
[domain]
n_points = 20
[users]
count = 3
[mechanism]
name = "em"
epsilon_per_km = 4.0
"""
SWEEP = '[sweep]\n"mechanism.epsilon_per_km" = [2.0, 6.0]\n'


class Reached(BaseException):
    """The command got past its checks to the work (a network load or a server start)."""


def _numeric_flags() -> list[tuple[str, str]]:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = []
    for command, sub in subs.choices.items():
        for action in sub._actions:
            names = [o for o in action.option_strings if o.startswith("--")]
            if names and (action.type in (int, float) or names[0] in LISTS):
                flags.append((command, names[0]))
    return flags


FLAGS = _numeric_flags()


def _argv(command: str, tmp_path: Path) -> list[str]:
    scenario = tmp_path / "s.toml"
    scenario.write_text(TOML)
    sweep = tmp_path / "b.toml"
    sweep.write_text(TOML + SWEEP)
    out = ["--out", str(tmp_path / "out")]
    return {
        "run": ["run", str(scenario), *out],
        "batch": ["batch", str(sweep), *out, "--workers", "1", "--no-progress"],
        "attack": ["attack", str(scenario), *out, "--no-progress"],
        "frontier": ["frontier", str(scenario), *out],
        "mobility": ["mobility", str(scenario), *out],
        "audit": ["audit", "em"],
        "bound": ["bound", "--epsilon", "4"],
        "domain": ["domain"],
        "dashboard": ["dashboard"],
    }[command]


@pytest.fixture
def stop_at_the_work(monkeypatch):
    """Every way a command reaches its work raises :class:`Reached`."""
    import subprocess

    import mdpsim.experiments.harness
    import mdpsim.geo.network
    import mdpsim.simulation.world

    def reached(*args, **kwargs):
        raise Reached

    for module in (mdpsim.simulation.world, mdpsim.experiments.harness):
        monkeypatch.setattr(module, "load_graph", reached)
    monkeypatch.setattr(mdpsim.geo.network, "load_network", reached)
    monkeypatch.setattr(subprocess, "call", reached)
    monkeypatch.setattr(subprocess, "Popen", reached)  # mdpsim dashboard's Streamlit


def _must_refuse(command: str, flag: str, value: str) -> bool:
    if value in ("-1", "nan", "inf", "-inf"):
        return True
    if value == "0":
        return flag not in ("--seed", "--n-outputs")
    is_int = next(
        a.type is int
        for a in _subparser(command)._actions
        if flag in a.option_strings
    )  # fmt: skip
    return value == "99999999999999999999999" and is_int


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subs.choices[command]


def test_the_sweep_covers_the_flags_the_issue_names():
    assert {("audit", "--seed"), ("frontier", "--qualities"), ("frontier", "--epsilons")} <= set(
        FLAGS
    )
    assert len(FLAGS) >= 25


@pytest.mark.parametrize("value", EXTREMES)
@pytest.mark.parametrize(("command", "flag"), FLAGS)
def test_a_numeric_flag_is_refused_in_one_line_or_accepted(
    command, flag, value, tmp_path, capsys, stop_at_the_work
):
    argv = _argv(command, tmp_path)
    if flag in argv:  # bound's --epsilon: the flag under test replaces the default one
        at = argv.index(flag)
        del argv[at : at + 2]
    given = f"4,{value}" if flag in LISTS else value
    try:
        code = main([*argv, f"{flag}={given}"])
    except Reached:  # accepted: the command went on to its work
        assert not _must_refuse(command, flag, value), f"{flag}={given} reached the work"
        return
    except SystemExit as exc:  # argparse: not a number of the flag's type, in one line too
        code = exc.code
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert err[0].startswith(f"error: mdpsim {command}: argument {flag}"), err
        return
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert flag in err[0] or flag.lstrip("-").replace("-", "_") in err[0], err
    assert not (tmp_path / "out").exists()
