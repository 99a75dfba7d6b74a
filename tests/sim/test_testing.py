"""mdpsim.testing: the public conformance checks pass on mdpsim's own components and name
the rule a broken one breaks."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim import attacks, mechanisms
from mdpsim.agents import strategies
from mdpsim.mechanisms import Mechanism
from mdpsim.testing import check_attack, check_mechanism, check_strategy

FAST_MECHANISMS = ("em", "laplace")


@pytest.mark.parametrize("name", FAST_MECHANISMS)
def test_check_mechanism_passes_on_built_ins(name, helsinki_test_walk):
    check_mechanism(mechanisms.mechanism_class(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in mechanisms.available() if n not in FAST_MECHANISMS])
def test_check_mechanism_passes_on_every_built_in(name, helsinki_test_walk):
    check_mechanism(mechanisms.mechanism_class(name))


def _built_ins(registry) -> list:
    """The classes mdpsim itself registers (not a plug-in another test installed)."""
    return [c for c in registry._classes.values() if c.__module__.startswith("mdpsim.")]


@pytest.mark.parametrize("cls", _built_ins(attacks.base._ATTACKS))
def test_check_attack_passes_on_every_built_in(cls):
    check_attack(cls)


@pytest.mark.parametrize("cls", [c for r in strategies.REGISTRIES.values() for c in _built_ins(r)])
def test_check_strategy_passes_on_every_built_in(cls):
    check_strategy(cls)


class Leaky(Mechanism):
    """Reports the truth: no privacy."""

    def _fit(self, domain):
        return np.eye(domain.n_x, domain.n_y), {}


def test_a_leaky_mechanism_fails_naming_the_check(helsinki_test_walk):
    with pytest.raises(
        AssertionError, match="Leaky at eps 0.5/km, road: fit raised PrivacyViolation"
    ):
        check_mechanism(Leaky)


def test_a_non_subclass_is_refused():
    with pytest.raises(AssertionError, match="is not an Attack"):
        check_attack(Leaky)
    with pytest.raises(AssertionError, match="subclasses none of"):
        check_strategy(Leaky)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("OneGuessTooFew", r"OneGuessTooFew.observe returned estimate 0: \(\d+,\) guesses for"),
        ("GuessOutOfRange", r"GuessOutOfRange.observe returned estimate 0: guesses outside"),
        ("FloatGuesses", "FloatGuesses.observe returned estimate 0: guesses of dtype float64"),
        ("NaNPosterior", "NaNPosterior.observe returned estimate 0: a posterior with negative"),
        (
            "PosteriorSumsTo2",
            r"PosteriorSumsTo2.observe returned estimate 0: posterior rows that do",
        ),
        ("ObserveReturnsNone", "ObserveReturnsNone.observe returned NoneType, not a list"),
        ("ObserveRaises", "ObserveRaises.observe raised IndexError: index 7"),
        ("FinishRaises", "FinishRaises.finish raised MemoryError: out of memory"),
        ("StartRaises", "StartRaises: start/release raised TypeError: unexpected context"),
    ],
)
def test_check_attack_refuses_what_the_run_refuses(name, why, helsinki_test_walk):
    import broken_plugins  # tests/sim/broken_plugins.py: the corpus of broken plug-ins

    with pytest.raises(AssertionError, match=why):
        check_attack(getattr(broken_plugins, name))


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("DecideWrongShape", r"decide returned an array of shape \(7,\), not \(6,\)"),
        ("DecideInts", "decide returned an array of dtype int64, not of one bool per user"),
        ("DecideRaises", "DecideRaises.decide raised ValueError: budget table missing"),
        ("FloatPseudonyms", "names returned an array of dtype float64"),
        ("DueIsAString", "due returned str, not a bool"),
    ],
)
def test_check_strategy_refuses_what_the_run_refuses(name, why):
    import broken_plugins

    with pytest.raises(AssertionError, match=why):
        check_strategy(getattr(broken_plugins, name))
