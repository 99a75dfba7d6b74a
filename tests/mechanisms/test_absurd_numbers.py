"""Absurd but finite numbers (issue 38, item 5): every registered mechanism, given an epsilon
(and its size and quality parameters) drawn from the whole positive float range, either
releases a matrix that passes the exact check or refuses with one InputError line naming the
parameter; never a traceback, an overflow or a solver's error. The ranges and their reasons:
``Mechanism.eps_diameter_range`` and docs/reliability.md ("Absurd numbers").

The default suite draws a few examples per mechanism on 12-place domains (derandomised: CI
draws the same ones every run); the slow version draws more.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdpsim.errors import InputError
from mdpsim.mechanisms import available, make
from mdpsim.mechanisms.base import mechanism_class
from mdpsim.privacy import verify

FLOAT_MAX = sys.float_info.max
USERS = np.array([0, 1, 1, 5])

#: Any positive finite float: hypothesis's own draw (edges, subnormals, the maximum) and a
#: log-uniform one (every decade from 1e-320 to 1e308 as likely).
POSITIVE = st.one_of(
    st.floats(min_value=0.0, max_value=FLOAT_MAX, exclude_min=True),
    st.builds(lambda e, m: m * 10.0**e, st.integers(-320, 307), st.floats(1.0, 9.99)),
)
#: Any integer from 1 to far beyond any memory.
COUNT = st.one_of(st.integers(1, 64), st.integers(1, 2**80))
#: The size and quality parameters of each mechanism, drawn like epsilon (a few kept in the
#: range a 12-place fit does in well under a second: interp's spacing below 300 m is minutes).
PARAMS: dict[str, dict[str, st.SearchStrategy]] = {
    "interp": {"spacing_m": st.one_of(st.floats(300.0, FLOAT_MAX), st.just(1e-300))},
    "panda": {"n_anchors": COUNT},
    "lp_a": {"grid": COUNT},
    "lp_medoids": {"n_outputs": COUNT},
    "copt": {"n_exempt": COUNT},
    "stackelberg": {"quality_km": POSITIVE},
}


def _params(name: str) -> st.SearchStrategy[dict]:
    drawn = PARAMS.get(name, {})
    base = dict(mechanism_class(name).conformance_params)
    return st.fixed_dictionaries(
        {key: st.one_of(st.just(value), drawn[key]) if key in drawn else st.just(value)
         for key, value in base.items()}
        | {key: value for key, value in drawn.items() if key not in base}
    )  # fmt: skip


def _fits_or_refuses(name: str, domain, eps: float, params: dict) -> None:
    try:
        mech = make(name, epsilon=eps, **params).fit(domain, users=USERS)
    except InputError as exc:
        line = str(exc)
        assert line and "\n" not in line, line
        assert any(key in line for key in ("epsilon", *params)), line
        return
    result = verify(mech.matrix_, mech.domain_.dist_xx, eps)
    assert result.passed, str(result)


def _check(name, domain, examples):
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(eps=POSITIVE, params=_params(name))
    def run(eps, params):
        _fits_or_refuses(name, domain, eps, params)

    run()


@pytest.fixture(scope="module", params=["road", "l2"])
def tiny_domain(request, walk_domain):
    """12 places of Helsinki's walkways, road and l2."""
    return walk_domain(12, 1, request.param)


@pytest.mark.parametrize("name", available())
def test_any_epsilon_fits_exactly_or_is_one_line(name, tiny_domain):
    _check(name, tiny_domain, 12)


@pytest.mark.slow
@pytest.mark.parametrize("name", available())
def test_any_epsilon_fits_exactly_or_is_one_line_wide(name, tiny_domain):
    _check(name, tiny_domain, 150)


EXTREME_EPS = (5e-324, 1e-300, 1e-10, 1e3, 1e6, 1e100, FLOAT_MAX)
EXTREME_PARAMS = {"spacing_m": (1e-300, FLOAT_MAX), "quality_km": (5e-324, 1e-12, FLOAT_MAX)}
EXTREME_COUNT = (2**31, 2**80)


def _extremes(name: str) -> list[dict]:
    base = dict(mechanism_class(name).conformance_params)
    cases = [base]
    for key in PARAMS.get(name, {}):
        for value in EXTREME_PARAMS.get(key, EXTREME_COUNT):
            cases.append(base | {key: value})
    return cases


@pytest.mark.parametrize("name", available())
def test_the_extremes_fit_exactly_or_are_one_line(name, tiny_domain):
    for params in _extremes(name):
        for eps in EXTREME_EPS if params == _extremes(name)[0] else (4.0, FLOAT_MAX):
            _fits_or_refuses(name, tiny_domain, eps, params)


@pytest.mark.parametrize("name", ["em", "lp", "laplace", "interp"])
@pytest.mark.parametrize("eps", [1e-300, 1e4, 1.7e308])
def test_the_refusal_names_epsilon_and_the_usable_range(name, eps, tiny_domain):
    with pytest.raises(InputError) as caught:
        make(name, epsilon=eps, **mechanism_class(name).conformance_params).fit(tiny_domain)
    line = str(caught.value)
    assert line.startswith(f"{name}: epsilon={eps:g} per km times the domain's diameter")
    assert "on this domain use epsilon in [" in line and "\n" not in line


CLI_TOML = """
[scenario]
name = "absurd"
seed = 1
ticks = 2
[domain]
n_points = 20
[users]
count = 3
[mechanism]
name = "{name}"
epsilon_per_km = {eps!r}
"""


@pytest.mark.parametrize("command", ["run", "attack", "batch"])  # frontier: --epsilons
@pytest.mark.parametrize(("name", "eps"), [("em", 1.7e308), ("dista_lp", 1e-300)])
def test_the_commands_refuse_an_absurd_epsilon_in_one_line(
    tmp_path, capsys, helsinki_walk, command, name, eps
):
    from mdpsim.cli import main

    path = tmp_path / "s.toml"
    path.write_text(CLI_TOML.format(name=name, eps=eps))
    out = tmp_path / "out"
    flags = {"batch": ["--workers", "1", "--no-progress"], "attack": ["--no-progress"]}
    assert main([command, str(path), "--out", str(out), *flags.get(command, [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "per km times the domain's diameter" in err, err
    assert not out.exists()
