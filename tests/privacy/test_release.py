"""Issue 47 item 7: what is released is drawn by mdpsim from a copy it holds.

Five plug-ins fit the honest EM matrix (certified) and then try to make every report the true
location through what the instance can reach: (a) a property that plants a sampler in the
private attribute the draws once read, (b) a descriptor under that name, (c)
``__getattribute__``, (d) ``matrix_`` changed in place after the fit, (e) ``sample`` /
``sample_many`` of their own (refused when the class is created; patched onto the class
afterwards); a sixth states a smaller report guarantee once fitted. Through ``run``,
``attack``, the env, ``audit`` and ``check_mechanism`` every report is the one the built-in
``em`` draws with the same seed (so not the truth), each is charged, and the Bayes bound is
scored, against the matrix and guarantee the exact check certified.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdpsim import mechanisms
from mdpsim.cli import main
from mdpsim.errors import InputError
from mdpsim.mechanisms import fit_release, make
from mdpsim.privacy.release import CertifiedRelease
from mdpsim.privacy.sampling import sample_rows

PLUGINS = '''
import numpy as np
from mdpsim.mechanisms import Mechanism
from mdpsim.mechanisms.em import exponential_matrix
from mdpsim.privacy.guarantees import PureMDP


def _nearest(mech, rows):
    """The output at each secret: the true location."""
    domain = object.__getattribute__(mech, "domain_")
    return np.argmin(domain.dist_xy[np.asarray(rows)], axis=1)


class _Truth:
    """A sampler that passes the old check (its matrix is the certified one) and reports the
    truth."""

    def __init__(self, mech):
        self.mech = mech

    @property
    def matrix(self):
        return object.__getattribute__(self.mech, "matrix_")

    def draw(self, rows, rng):
        return _nearest(self.mech, rows)


class _Honest(Mechanism):
    def _fit(self, domain):
        return exponential_matrix(domain.dist_xy, self.epsilon), {}


class ViaProperty(_Honest):
    """(a) a property read in every fit plants the sampler."""

    @property
    def takes_uploads(self):
        self._Mechanism__sampler = _Truth(self)
        return False


class _Planted:
    def __get__(self, mech, owner=None):
        return self if mech is None else _Truth(mech)

    def __set__(self, mech, value):
        pass


class ViaDescriptor(_Honest):
    """(b) a data descriptor under the private sampler's name."""

    _Mechanism__sampler = _Planted()


class ViaGetattribute(_Honest):
    """(c) every attribute lookup goes through the plug-in."""

    def __getattribute__(self, name):
        if name == "_Mechanism__sampler":
            return _Truth(self)
        if name == "sample_many":
            return lambda indices, rng: _nearest(self, indices)
        if name == "sample":
            return lambda i, rng: int(_nearest(self, [i])[0])
        return object.__getattribute__(self, name)


class ViaMutation(_Honest):
    """(d) the certified matrix_ itself is made one-hot at the truth once fitted (by the
    guarantee properties the run and check_mechanism read after the fit)."""

    def _poison(self):
        matrix = self.__dict__.get("matrix_")
        if matrix is not None and matrix.flags.owndata:
            truth = np.zeros_like(matrix)
            truth[np.arange(len(matrix)), _nearest(self, np.arange(len(matrix)))] = 1.0
            matrix.setflags(write=True)
            matrix[:] = truth

    @property
    def guarantee(self):
        self._poison()
        return super().guarantee

    @property
    def upload_guarantee(self):
        self._poison()
        return None


class ClaimsLessLater(_Honest):
    """A report guarantee of eps / 10 once fitted: cheaper reports, a stricter Bayes bound."""

    @property
    def report_guarantee(self):
        fitted = "matrix_" in self.__dict__
        return PureMDP(self.epsilon / 10 if fitted else self.epsilon)


class ViaPatch(_Honest):
    """(e) sample and sample_many put on the class after it was created."""


ViaPatch.sample_many = lambda self, indices, rng: _nearest(self, indices)
ViaPatch.sample = lambda self, i, rng: int(_nearest(self, [i])[0])
'''

ROUTES = ["ViaProperty", "ViaDescriptor", "ViaGetattribute", "ViaMutation", "ViaPatch",
          "ClaimsLessLater"]  # fmt: skip
EPS = 3.0


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    """The plug-ins importable as ``release_routes:Name``; registries cleaned up after."""
    folder = tmp_path_factory.mktemp("routes")
    (folder / "release_routes.py").write_text(textwrap.dedent(PLUGINS))
    sys.path.insert(0, str(folder))
    yield
    sys.path.remove(str(folder))
    sys.modules.pop("release_routes", None)
    registry = mechanisms.base._MECHANISMS
    for name in [n for n in registry._classes if n.startswith("release_routes:")]:
        registry._classes.pop(name)


@pytest.fixture(scope="module")
def world(make_scenario):
    return make_scenario.but(
        scenario={"name": "routes", "seed": 4, "ticks": 3},
        domain={"n_points": 30},
        users={"count": 12},
        mechanism={"name": "em", "epsilon_per_km": EPS},
        queries={"every_ticks": 0},
        attacks={"run": ["bayes"]},
    )


def _write(path: Path, tables: dict) -> str:
    lines = []
    for table, fields in tables.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _run(tmp_path: Path, world, name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``mdpsim run`` with mechanism ``name``: its users and ticks tables."""
    scenario = _write(
        tmp_path / f"{name.replace(':', '_')}.toml", world.raw(mechanism={"name": name})
    )
    out = tmp_path / f"out_{name.replace(':', '_')}"
    assert main(["run", scenario, "--out", str(out)]) == 0
    return pd.read_parquet(out / "users.parquet"), pd.read_parquet(out / "ticks.parquet")


@pytest.fixture(scope="module")
def honest_run(tmp_path_factory, world):
    return _run(tmp_path_factory.mktemp("honest"), world, "em")


@pytest.fixture(scope="module")
def domain(helsinki_test_walk):
    from mdpsim.geo.domain import Domain

    return Domain.from_network(helsinki_test_walk, n_points=25, seed=3)


def _truth(domain, secrets) -> np.ndarray:
    return np.argmin(domain.dist_xy[np.asarray(secrets)], axis=1)


# ---------------------------------------------------------------------- the release itself
def test_the_release_draws_the_bytes_of_the_exact_sampler_from_its_own_copy(domain):
    mech = make("em", epsilon=EPS)
    release = fit_release(mech, domain)
    rows = np.random.default_rng(0).integers(0, domain.n_x, 500)
    assert np.array_equal(
        release.draw(rows, np.random.default_rng(9)),
        sample_rows(mech.matrix_, rows, np.random.default_rng(9)),
    )
    assert np.array_equal(  # a few rows at a time: the same bytes as before (RowSampler)
        release.draw(rows[:5], np.random.default_rng(2)),
        mech.sample_many(rows[:5], np.random.default_rng(2)),
    )
    assert release.matrix is not mech.matrix_ and not np.shares_memory(release.matrix, mech.matrix_)
    assert str(release.report_guarantee) == f"{EPS:g}/km-mDP (pure)"
    with pytest.raises(ValueError, match="read-only"):
        release.matrix[0, 0] = 1.0
    with pytest.raises(AttributeError, match="read-only"):
        release._matrix = np.eye(domain.n_x)  # type: ignore[misc]
    with pytest.raises(Exception, match=r"secret indices must lie in \[0, 25\)"):
        release.draw([25], np.random.default_rng(0))


def test_a_defined_sample_is_still_refused_when_the_class_is_created():
    for method in ("sample", "sample_many"):
        with pytest.raises(TypeError, match=f"Own defines {method}, which only mdpsim may"):
            type("Own", (mechanisms.Mechanism,), {"_fit": lambda s, d: None, method: None})


# ---------------------------------------------------------------------- every path, each route
@pytest.mark.parametrize("route", ROUTES)
def test_run_draws_from_the_certified_copy(routes, world, tmp_path, honest_run, route):
    users, ticks = _run(tmp_path, world, f"release_routes:{route}")
    honest_users, honest_ticks = honest_run
    # the same reports as the built-in em with the same seed: drawn from the certified matrix
    assert np.array_equal(users["reported_output"], honest_users["reported_output"])
    assert (users["report_loss_km"].dropna() > 0).mean() > 0.3  # not the true locations
    # the Bayes bound is scored against the matrix the reports came from: held, and the same
    assert ticks["bayes_bound_violation"].fillna(0).eq(0).all()
    # ... and each report charged what its matrix was certified against
    for column in ("bayes_hit", "bayes_error_km", "bayes_leakage_per_km", "bayes_bound_violation",
                   "report_cost", "report_epsilon_per_km"):  # fmt: skip
        assert np.array_equal(ticks[column], honest_ticks[column], equal_nan=True), column


@pytest.mark.parametrize("route", ROUTES)
def test_attack_draws_from_the_certified_copy(routes, world, tmp_path, route):
    scenario = _write(tmp_path / "s.toml", world.raw())
    out = tmp_path / "out"
    flags = ["--mechanisms", f"em,release_routes:{route}", "--no-progress"]
    assert main(["attack", scenario, "--out", str(out), *flags]) == 0
    summary = pd.read_parquet(out / "attacks.parquet")
    honest, plugin = (summary[summary["mechanism"] == m] for m in ("em", f"release_routes:{route}"))
    assert len(honest) == len(plugin) == 1
    for column in ("hit", "error_km", "leakage_per_km", "bound_violation"):
        assert np.array_equal(honest[column].to_numpy(), plugin[column].to_numpy()), column
    assert plugin["bound_violation"].iloc[0] == 0
    assert plugin["hit"].iloc[0] < 0.9  # the truth would be found every time


@pytest.mark.parametrize("route", ROUTES)
def test_the_env_draws_from_the_certified_copy(routes, world, route):
    from mdpsim.env import parallel_env

    def outputs(name: str) -> list[np.ndarray]:
        env = parallel_env(world.raw(mechanism={"name": name}))
        env.reset(seed=0)
        got = []
        while env.agents:
            env.step(env.strategy_actions())
            got.append(env.model.last_reports.outputs.copy())
        last = env.model.last_reports
        if name != "em":
            assert not np.array_equal(last.outputs, _truth(env.model.domain, last.secrets))
        return got

    honest, plugin = outputs("em"), outputs(f"release_routes:{route}")
    assert len(plugin) == 3
    assert all(np.array_equal(a, b) for a, b in zip(honest, plugin, strict=True))


@pytest.mark.parametrize("route", ROUTES)
def test_audit_draws_from_the_certified_copy(routes, route, capsys):
    small = ["--epsilon", str(EPS), "--source", "helsinki-test", "--n-points", "25"]
    assert main(["audit", f"release_routes:{route}", *small, "--samples", "300000"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_audit_of_a_matrix_changed_after_the_fit_draws_from_the_copy(routes, domain):
    """(d) with the change made between the fit and the draws, whatever triggers it."""
    from mdpsim.experiments.audit_target import audited_mechanism
    from mdpsim.privacy.audit import audit, mechanism_sampler

    target, _ = audited_mechanism("release_routes:ViaMutation", epsilon=EPS, domain=lambda: domain)
    target.mechanism.guarantee  # noqa: B018 -- the plug-in's matrix_ is now the truth
    assert target.mechanism.matrix_.max(axis=1).min() == 1.0
    draws = target.sample_many(np.arange(domain.n_x), np.random.default_rng(0))
    assert not np.array_equal(draws, _truth(domain, np.arange(domain.n_x)))
    result = audit(mechanism_sampler(target), domain.dist_xx, EPS, total_samples=300_000)
    assert result.passed, result.lines()


@pytest.mark.parametrize("route", ROUTES)
def test_check_mechanism_draws_from_the_certified_copy(routes, route):
    import release_routes

    from mdpsim.testing import check_mechanism

    check_mechanism(getattr(release_routes, route))  # samples of row 3 match the matrix


def test_check_mechanism_refuses_a_matrix_that_is_not_the_certified_one():
    from mdpsim.mechanisms.em import exponential_matrix
    from mdpsim.testing import check_mechanism

    class Fakes(mechanisms.Mechanism):
        def _fit(self, domain):
            return exponential_matrix(domain.dist_xy, self.epsilon), {}

        def __getattribute__(self, name):
            if name == "matrix_":
                matrix = object.__getattribute__(self, "matrix_")
                return np.eye(*matrix.shape)
            return object.__getattribute__(self, name)

    with pytest.raises(AssertionError, match="matrix_ is not the matrix fit certified"):
        check_mechanism(Fakes)


def test_a_release_outlives_what_the_instance_does_later(domain):
    """The caller's release, not the instance, is what the reports come from."""
    mech = make("em", epsilon=EPS)
    release = fit_release(mech, domain)
    before = release.draw(np.arange(25), np.random.default_rng(1))
    mech.matrix_.setflags(write=True)
    mech.matrix_[:] = np.eye(25)
    mech.__dict__["_Mechanism__sampler"] = None
    assert np.array_equal(release.draw(np.arange(25), np.random.default_rng(1)), before)
    assert isinstance(release, CertifiedRelease)


@pytest.mark.slow
def test_a_batch_on_two_workers_draws_from_the_certified_copy(routes, world, tmp_path):
    """The issue's batch case: the tasks run in worker processes (a fresh ``mdpsim`` process,
    so its workers import the plug-ins from PYTHONPATH)."""
    import os
    import subprocess

    import release_routes

    names = ["em", *(f"release_routes:{r}" for r in ("ViaGetattribute", "ViaMutation",
                                                    "ClaimsLessLater"))]  # fmt: skip
    sweep = json.dumps(names)
    scenario = Path(_write(tmp_path / "s.toml", world.raw()))
    scenario.write_text(scenario.read_text() + f'[sweep]\n"mechanism.name" = {sweep}\n')
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(Path(release_routes.__file__).parent)}
    argv = ["batch", str(scenario), "--out", str(store), "--workers", "2", "--no-progress"]
    proc = subprocess.run([sys.executable, "-m", "mdpsim", *argv], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ticks = [pd.read_parquet(store / "tasks" / f"{i:04d}.parquet") for i in range(len(names))]
    users = [pd.read_parquet(store / "tasks" / f"{i:04d}.users.parquet") for i in range(len(names))]
    assert [t["mechanism.name"].iloc[0] for t in ticks] == names
    for task in range(len(names)):  # each task has its own seed: the truth would show as
        where = names[task]  # no loss and every guess a hit; the em tasks' cost and bound
        assert (users[task]["report_loss_km"].dropna() > 0).mean() > 0.3, where
        assert ticks[task]["bayes_hit"].mean() < 0.9, where
        assert ticks[task]["bayes_bound_violation"].eq(0).all(), where
        assert np.array_equal(ticks[task]["report_cost"], ticks[0]["report_cost"]), where


@pytest.mark.parametrize("n", [1, 3, 16, 17, 40])
def test_a_draw_refuses_the_indices_the_array_check_refused(n):
    # the bounds read as Python ints for a few indices, by numpy for more: the same refusals
    release = CertifiedRelease(np.full((4, 2), 0.5))
    rng = np.random.default_rng(0)
    for bad in (-1, 4, 99):
        idx = np.zeros(n, dtype=np.int64)
        idx[n // 2] = bad
        with pytest.raises(InputError, match="secret indices"):
            release.draw(idx, rng)
    ok = np.arange(n) % 4
    assert release.draw(ok, rng).shape == (n,)
    assert release.draw(np.zeros(0, dtype=np.int64), rng).shape == (0,)
