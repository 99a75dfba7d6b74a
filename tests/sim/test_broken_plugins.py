"""Every plug-in mistake is one line and exit 2, in every command that takes the plug-in, and
nothing is written (docs/reliability.md, "Plug-in mistakes"). The corpus is
tests/sim/broken_plugins.py, plus a lying sampler, a module that cannot be imported and a
network entry point that raises, written here."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdpsim import attacks, mechanisms
from mdpsim.agents import strategies
from mdpsim.cli import main
from mdpsim.errors import PluginError

HERE = Path(__file__).resolve().parent
MECHANISMS = [
    ("FitRaises", "_fit raised ValueError: no solution at 0.25 (second line)"),
    ("WrongShape", "the fit produced a (30, 31) matrix for a 30x30 domain"),
    ("NaNMatrix", "negative or non-finite probabilities"),
    ("RowsSumTo09", "of the fit's matrix sums to 0.899"),
    ("NotPrivate", "fit refused: NotPrivate released a matrix that is not 5/km-mDP"),
    ("MatrixOnly", "_fit must return (matrix, info dict)"),
    ("InfoNotADict", "the fit's info is list, not a dict"),
    ("GuaranteeRaises", "report_guarantee raised AttributeError: epsilon_pt"),
    ("GuaranteeIsAString", "report_guarantee returned 'pure 5', not a guarantee (PureMDP, PMDP"),
    ("SizeCheckRaises", "check_domain_size raised KeyError: 30"),
    ("InitRaises", "cannot be built: RuntimeError: licence file not found"),
    ("lying_sampler:Liar", "Liar defines sample_many, which only mdpsim may"),
    ("import_error:Anything", "ModuleNotFoundError: No module named 'gurobipy_not_installed"),
]
ATTACKS = [
    ("NoObserve", "cannot be built: TypeError: Can't instantiate abstract class NoObserve"),
    ("ObserveRaises", "observe raised IndexError: index 7 is out of bounds"),
    ("StartRaises", "start raised TypeError: unexpected context"),
    ("ReleaseRaises", "release raised ZeroDivisionError: division by zero"),
    ("FinishRaises", "finish raised MemoryError: out of memory"),
    ("OneGuessTooFew", "observe returned estimate 0: (2,) guesses for 3 users"),
    ("GuessOutOfRange", "observe returned estimate 0: guesses outside [0, 30)"),
    ("FloatGuesses", "observe returned estimate 0: guesses of dtype float64"),
    ("NaNPosterior", "observe returned estimate 0: a posterior with negative or non-finite"),
    ("PosteriorSumsTo2", "observe returned estimate 0: posterior rows that do not sum to 1 (off"),
    (
        "TabulatedIndexOutOfRange",
        "observe returned estimate 0: a tabulated posterior index outside [0, 2)",
    ),
    ("ObserveReturnsNone", "observe returned NoneType, not a list of estimates"),
]
STRATEGIES = [
    ("report", "DecideRaises", "decide raised ValueError: budget table missing"),
    ("report", "DecideWrongShape", "decide returned an array of shape (4,), not (3,)"),
    ("report", "DecideInts", "decide returned an array of dtype int64, not of one bool per"),
    ("pseudonyms", "FloatPseudonyms", "names returned an array of dtype float64, not of one"),
    ("refresh", "DueIsAString", "due returned str, not a bool"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The corpus importable (its folder and a folder of the modules written here on
    sys.path, a fake distribution's network entry point); registries cleaned up after."""
    extra = tmp_path_factory.mktemp("broken")
    (extra / "lying_sampler.py").write_text(
        textwrap.dedent(
            '''
            import numpy as np
            from mdpsim.mechanisms import Mechanism
            from mdpsim.mechanisms.em import exponential_matrix

            class Liar(Mechanism):
                """A certified matrix, and a "fast path" that reports the truth."""

                def _fit(self, domain):
                    return exponential_matrix(domain.dist_xy, self.epsilon), {}

                def sample_many(self, indices, rng):
                    return np.asarray(indices)
            '''
        )
    )
    (extra / "import_error.py").write_text("import gurobipy_not_installed_here\n")
    dist = extra / "broken_net-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-net\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[mdpsim.networks]\nbroken_net = broken_plugins:no_network\n"
        "[mdpsim.mechanisms]\ngood_mech = broken_plugins:FitRaises\n"
        "bad_mech = import_error:Anything\n"
    )
    sys.path[:0] = [str(HERE), str(extra)]
    registries = [mechanisms.base._MECHANISMS, attacks.base._ATTACKS,
                  *strategies.REGISTRIES.values()]  # fmt: skip
    for r in registries:
        r.refresh_plugins()
    yield
    for folder in (HERE, extra):
        sys.path.remove(str(folder))
    for name in ("broken_plugins", "lying_sampler", "import_error"):
        sys.modules.pop(name, None)
    for r in registries:
        r.refresh_plugins()
        for name in [n for n in r._classes if ":" in n]:
            r._classes.pop(name)


def _path(name: str) -> str:
    return name if ":" in name else f"broken_plugins:{name}"


@pytest.fixture(scope="module")
def world(make_scenario):
    return make_scenario.but(
        scenario={"name": "broken", "seed": 2, "ticks": 2},
        domain={"n_points": 30},
        users={"count": 3},
        mechanism={"name": "em", "epsilon_per_km": 5.0},
        queries={"every_ticks": 0},
        attacks={"run": ["bayes"]},
    )


def _write(tmp_path: Path, tables: dict) -> str:
    lines = []
    for table, fields in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    path = tmp_path / "s.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _refused(capsys, argv: list[str], why: str, out: Path | None = None) -> None:
    """``mdpsim ARGV`` exits 2 with one ``error:`` line containing ``why``, writes nothing."""
    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("error:")]
    assert code == 2, (argv, err)
    assert len(lines) == 1 and why in lines[0], err
    assert "Traceback" not in err and "np.float64" not in err, err
    shown = [line.rsplit("\r", 1)[-1] for line in err.split("\n")]  # what a terminal shows
    assert not any("%|" in line for line in shown), f"a progress bar is left above: {err!r}"
    if out is not None:
        assert not out.exists(), f"{argv} wrote {out}"


@pytest.mark.parametrize(("name", "why"), MECHANISMS)
def test_a_broken_mechanism_is_one_line_in_run_and_attack(
    corpus, world, tmp_path, capsys, name, why
):
    path = _write(tmp_path, world.raw(mechanism={"name": _path(name)}))
    out = tmp_path / "out"
    _refused(capsys, ["run", path, "--out", str(out)], why, out)
    _refused(capsys, ["attack", path, "--out", str(out), "--no-progress"], why, out)


#: frontier and audit reach a mechanism through the same checked fit as run and attack; two
#: mistakes (raising, a wrong shape) run in the default suite, every one in CI's slow run
FRONTIER_AUDIT = [
    case if i < 2 else pytest.param(*case, marks=pytest.mark.slow)
    for i, case in enumerate(MECHANISMS)
]


@pytest.mark.parametrize(("name", "why"), FRONTIER_AUDIT)
def test_a_broken_mechanism_is_one_line_in_frontier_and_audit(
    corpus, world, tmp_path, capsys, name, why
):
    path = _write(tmp_path, world.raw(mechanism={"name": _path(name)}))
    out = tmp_path / "out"
    flags = ["--mechanisms", _path(name), "--epsilons", "5", "--qualities", "0.5"]
    _refused(capsys, ["frontier", path, "--out", str(out), *flags], why, out)
    small = ["--epsilon", "5", "--source", "helsinki-test", "--n-points", "30", "--samples"]
    _refused(capsys, ["audit", _path(name), *small, "20000"], why.replace("5/km", "5/km"))


@pytest.mark.parametrize(("name", "why"), MECHANISMS[:3] + MECHANISMS[-2:])
def test_a_broken_mechanism_is_one_line_in_batch(corpus, world, tmp_path, capsys, name, why):
    """Found at load or in the tasks: no task finished, so no store is kept (docs/batch.md)."""
    path = _write(tmp_path, world.raw(mechanism={"name": _path(name)}))
    store = tmp_path / "store"
    code = main(["batch", path, "--out", str(store), "--workers", "1", "--no-progress"])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1, lines  # the error line alone
    assert lines[0].startswith("error:") and why in lines[0] and "np.float64" not in lines[0]
    assert not store.exists(), "no store of a batch in which no task finished"


def test_a_batch_keeps_its_finished_tasks_when_a_plug_in_fails_in_others(
    corpus, world, tmp_path, capsys
):
    """Some tasks finished: the store keeps them and failures.json the others (--resume
    retries those), and the exit is 2 with the plug-in's line."""
    path = Path(_write(tmp_path, world.raw()))
    sweep = '"mechanism.name" = ["em", "broken_plugins:FitRaises"]'
    path.write_text(path.read_text() + f"[sweep]\n{sweep}\n")
    store = tmp_path / "store"
    code = main(["batch", str(path), "--out", str(store), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and MECHANISMS[0][1] in errors[0], err
    assert len(list(store.glob("tasks/*.parquet"))) >= 1
    assert len(json.loads((store / "failures.json").read_text())) == 1


@pytest.mark.parametrize(("name", "why"), ATTACKS)
def test_a_broken_attack_is_one_line_in_run_and_attack(corpus, world, tmp_path, capsys, name, why):
    """``mdpsim attack`` alone keeps what succeeded (item 3): the other attack's tables are
    written, the failure is in failures.json, exit 3. An attack that cannot be built is
    refused before anything runs."""
    path = _write(tmp_path, world.raw(attacks={"run": ["bayes", _path(name)]}))
    out = tmp_path / "out"
    if name != "FinishRaises":  # mdpsim run scores per tick; finish is the harness's
        _refused(capsys, ["run", path, "--out", str(out)], why, out)
    if name == "NoObserve":
        _refused(capsys, ["attack", path, "--out", str(out), "--no-progress"], why, out)
        return
    assert main(["attack", path, "--out", str(out), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert f"failed: mechanism em eps 5 repetition 0 attack {_path(name)}: " in err and why in err
    failures = json.loads((out / "failures.json").read_text())
    assert list(failures) == [f"mechanism em eps 5 repetition 0 attack {_path(name)}"]
    summary = pd.read_parquet(out / "attacks.parquet")
    assert list(summary["attack"]) == ["bayes"]


def test_attack_keeps_the_mechanisms_that_succeeded(corpus, world, tmp_path, capsys):
    path = _write(tmp_path, world.raw())
    out = tmp_path / "out"
    flags = ["--mechanisms", "em,broken_plugins:FitRaises,laplace", "--no-progress"]
    assert main(["attack", path, "--out", str(out), *flags]) == 3
    err = capsys.readouterr().err
    where = "mechanism broken_plugins:FitRaises eps 5 repetition 0"
    assert f"failed: {where}: mdpsim.errors.PluginError: " in err
    summary = pd.read_parquet(out / "attacks.parquet")
    assert sorted(set(summary["mechanism"])) == ["em", "laplace"]
    failures = json.loads((out / "failures.json").read_text())
    assert (
        "_fit raised ValueError"
        in failures["mechanism broken_plugins:FitRaises eps 5 repetition 0"]
    )


@pytest.mark.parametrize(("kind", "name", "why"), STRATEGIES)
def test_a_broken_strategy_is_one_line_in_run_and_the_env(
    corpus, world, tmp_path, capsys, kind, name, why
):
    from mdpsim.env import parallel_env

    raw = world.raw(strategies={kind: _path(name)})
    out = tmp_path / "out"
    _refused(capsys, ["run", _write(tmp_path, raw), "--out", str(out)], why, out)
    with pytest.raises(PluginError, match=why.replace("(", r"\(").replace(")", r"\)")) as info:
        env = parallel_env(raw)
        env.reset(seed=0)
        while env.agents:
            env.step(env.strategy_actions())
    assert "\n" not in str(info.value)


def test_a_network_plug_in_that_raises_is_one_line(corpus, world, tmp_path, capsys):
    path = _write(tmp_path, world.raw(network={"source": "broken_net"}))
    out = tmp_path / "out"
    why = "gave no file path: FileNotFoundError: extract.osm.pbf"
    _refused(capsys, ["run", path, "--out", str(out)], why, out)


def test_the_traceback_switch_shows_the_plug_in_s_own_frame(
    corpus, world, tmp_path, capsys, monkeypatch
):
    path = _write(tmp_path, world.raw(mechanism={"name": _path("FitRaises")}))
    assert main(["--traceback", "run", path, "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "broken_plugins.py" in err and 'raise ValueError(f"no' in err
    monkeypatch.setenv("MDPSIM_TRACEBACK", "1")
    assert main(["run", path, "--out", str(tmp_path / "b")]) == 2
    assert "broken_plugins.py" in capsys.readouterr().err


def test_a_lying_sampler_cannot_release_the_truth(corpus, world, tmp_path):
    """Item 1: defining sample_many is refused when the class is created, and a sampler put
    on an instance is never called: the players draw from the certified matrix."""
    from mdpsim.mechanisms import Mechanism
    from mdpsim.mechanisms.em import exponential_matrix
    from mdpsim.simulation.model import PrivacyModel
    from mdpsim.simulation.scenario import from_dict

    for method in ("fit", "sample", "sample_many", "expected_loss"):
        with pytest.raises(TypeError, match=f"Sneaky defines {method}, which only mdpsim may"):
            type("Sneaky", (Mechanism,), {"_fit": lambda self, d: None, method: lambda s: 0})

    class PatchesItself(Mechanism):
        def _fit(self, domain):
            self.sample_many = lambda indices, rng: np.asarray(indices)  # the truth
            return exponential_matrix(domain.dist_xy, self.epsilon), {}

    mechanisms.register("patches_itself")(PatchesItself)
    try:
        scenario = from_dict(world.raw(mechanism={"name": "patches_itself"}, users={"count": 40}))
        model = PrivacyModel(scenario, rng=0)
        model.run(2)
        reports = model.server.collect_reports(np.ones(40, dtype=bool))
        assert (reports.outputs != reports.secrets).mean() > 0.3  # EM at 5/km, not the truth
        model.server.mechanism.matrix_ = np.eye(30)  # replaced after the fit: refused
        with pytest.raises(PluginError, match="matrix_ is not the matrix fit certified"):
            model.server.collect_reports(np.ones(40, dtype=bool))
    finally:
        mechanisms.base._MECHANISMS._classes.pop("patches_itself")


def test_plugins_lists_every_discovered_component(corpus, capsys):
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"good_mech +mechanism +broken-net +broken_plugins:FitRaises +ok", out), out
    bad = [line for line in out.splitlines() if line.startswith("bad_mech ")]
    assert len(bad) == 1 and re.match(r"bad_mech +mechanism +broken-net +import_error:", bad[0])
    assert "error: mechanism 'bad_mech' (entry point import_error:Anything) cannot be " in bad[0]
    assert "ModuleNotFoundError" in bad[0]
    assert re.search(r"broken_net +network +broken-net +broken_plugins:no_network", out), out


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and re.fullmatch(r"mdpsim \S+\n", capsys.readouterr().out)


def test_a_guarantee_refused_for_its_type_is_named_as_what_it_is(helsinki_test_walk):
    from mdpsim.geo.domain import Domain
    from mdpsim.mechanisms import Mechanism
    from mdpsim.mechanisms.em import exponential_matrix
    from mdpsim.privacy import PrivacyViolation
    from mdpsim.privacy.guarantees import PureMDP

    class Odd(PureMDP):
        kind = "odd"  # a PureMDP that says it is something else

    class SaysOdd(Mechanism):
        def _fit(self, domain):
            return exponential_matrix(domain.dist_xy, self.epsilon), {}

        @property
        def report_guarantee(self):
            return Odd(self.epsilon)

    domain = Domain.from_network(helsinki_test_walk, n_points=20, seed=1)
    with pytest.raises(
        PrivacyViolation, match="a Odd of kind 'odd', not 'pure', cannot be"
    ) as info:
        SaysOdd(4.0).fit(domain)
    assert "PmDP" not in str(info.value)
