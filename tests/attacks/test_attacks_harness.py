"""Places, linkage and upload attacks; the [attacks] table; the `mdpsim attack` harness."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from attack_driver import draw_world, run
from test_attacks_contract import Identity, Uniform

from mdpsim.attacks import Context, Observation, Release, make
from mdpsim.attacks.base import Truth
from mdpsim.attacks.places import true_places
from mdpsim.cli import main
from mdpsim.errors import InputError


@pytest.fixture(scope="module")
def world(walk_domain):
    return draw_world(
        walk_domain(120, 2),
        n_users=40,
        ticks=80,
        seed=1,
        n_places=30,
        speed_mps=1.4,
        tick_seconds=60.0,
        dwell_ticks=(3, 8),
        personal_places=3,
    )


def test_true_places_rank_stays_by_time_and_skip_passing_through():
    trace = np.array([[5, 5, 5, 1, 2, 2, 5, 5, 9]]).T  # home 5 (5 ticks), then 2; 1 and 9 pass
    (places,) = true_places(trace, min_stay_ticks=2)
    np.testing.assert_array_equal(places, [5, 2])


def test_places_of_exact_reports_find_every_home(world):
    mech = Identity().fitted_by_hand(world.domain)
    s = run(world, mech, [{"name": "places", "k": 3}]).summary().iloc[0]
    assert s["hit"] == 1.0 and s["error_km"] == 0.0
    assert s["recall_at_k"] > 0.9


def test_places_of_uninformative_reports_are_mostly_wrong(world):
    mech = Uniform(epsilon=1.0).fit(world.domain)
    s = run(world, mech, [{"name": "places", "k": 3}]).summary().iloc[0]
    assert s["hit"] < 0.3 and s["precision_at_k"] < 0.3


def test_linkage_beats_chance_with_exact_reports_and_not_without(world):
    specs = [{"name": "linkage"}]
    exact = run(world, Identity().fitted_by_hand(world.domain), specs, pseudonym_change_tick=41)
    blind = run(world, Uniform(epsilon=1.0).fit(world.domain), specs, pseudonym_change_tick=41)
    e, b = exact.summary().iloc[0], blind.summary().iloc[0]
    assert e["chance"] == pytest.approx(1 / 40)
    assert e["hit"] > 10 * e["chance"]
    assert b["hit"] < 4 * b["chance"]  # ties broken at random: near chance


def test_linkage_scores_against_the_pseudonym_history():
    truth = Truth()
    truth.record(1, np.array([0, 1]), np.array([10, 11]), None)
    truth.record(2, np.array([0, 1]), np.array([21, 20]), None)
    from mdpsim.attacks.base import LinkEstimate, score

    est = LinkEstimate(
        period_a=(1, 1), period_b=(2, 2), pseudonyms_a=np.array([10, 11]),
        pseudonyms_b=np.array([20, 21]), linked=np.array([11, 11]),
        posterior=np.array([[0.5, 0.5], [0.5, 0.5]]),
    )  # fmt: skip
    s = score(est, truth, None)
    np.testing.assert_array_equal(s.values["hit"], [1.0, 0.0])  # 20 is slot 1 = pseudonym 11


class _Uploads:
    """A stand-in for a fitted DistA-LP: the server's guesses from two uploads."""

    def __init__(self, domain):
        self.domain_ = domain
        self.matrix_ = np.eye(domain.n_x)
        self.info_ = {"upload_guess": np.array([7, 3])}


def test_upload_attack_guesses_each_uploader_through_the_contract(road_domain_small):
    attack = make("upload")
    attack.start(Context(domain=road_domain_small, n_users=3))
    mech = _Uploads(road_domain_small)
    attack.release(Release(tick=4, mechanism=mech, uploads=np.array([1, -1, 0])))
    (est,) = attack.observe(Observation(tick=4, outputs=np.zeros(3, int), pseudonyms=np.arange(3)))
    np.testing.assert_array_equal(est.users, [0, 2])
    np.testing.assert_array_equal(est.guess, [3, 7])
    assert est.space == "y"
    assert (
        attack.observe(Observation(tick=5, outputs=np.zeros(3, int), pseudonyms=np.arange(3))) == []
    )


@pytest.fixture(scope="module")
def attacks_of(make_scenario):
    """``attacks_of(**fields)``: an EM scenario whose ``[attacks]`` table is ``fields``."""
    base = make_scenario.but(scenario=None, network=None, mechanism={"epsilon_per_km": 4.0})
    return lambda **attacks: base(attacks=attacks)


def test_attacks_table_builds_labelled_specs_and_refuses_the_old_switches(attacks_of):
    sc = attacks_of(
        run=["bayes", "viterbi", "upload"],
        params={"viterbi": {"attack": "tracking", "method": "viterbi"}},
    )
    assert sc.attacks.specs() == [
        {"name": "bayes", "label": "bayes"},
        {"name": "tracking", "label": "viterbi", "method": "viterbi"},
        {"name": "upload", "label": "upload"},
    ]
    assert [s["name"] for s in attacks_of().attacks.specs()] == ["bayes", "tracking", "upload"]
    for switch in ("tracking", "upload"):  # one way to say it: attacks.run
        line = f"attacks.{switch} is gone: attacks.run lists the attacks that run; leave '{switch}'"
        with pytest.raises(InputError, match=line):
            attacks_of(**{switch: False})
        with pytest.raises(InputError, match=line):
            attacks_of(run=["bayes"]).replace(**{f"attacks.{switch}": False})


@pytest.mark.parametrize(
    ("attacks", "message"),
    [
        ({"run": ["bayes", "bayes"]}, "attacks.run lists a label twice"),
        ({"run": ["bayes"], "params": {"x": {}}}, "attacks.params has 'x'"),
        ({"run": ["nope"]}, "attacks.run: unknown attack 'nope'"),
        ({"run": ["t"], "params": {"t": {"attack": "tracking", "lag_ticks": 0}}},
         "attacks.params.t: tracking: lag_ticks=0"),
    ],
)  # fmt: skip
def test_attacks_table_refuses_bad_specs_in_one_line(attacks, message, attacks_of):
    with pytest.raises(InputError, match=message):
        attacks_of(**attacks)


ATTACK_TOML = """
[scenario]
name = "tiny"
seed = 1
ticks = 8
[network]
source = "helsinki-test"
[domain]
n_points = 50
[users]
count = 12
personal_places = 2
[mechanism]
name = "em"
epsilon_per_km = 4.0
[attacks]
run = ["bayes", "smooth", "places", "linkage"]
params.smooth = { attack = "tracking", method = "smooth", lag_ticks = 2 }
[strategies]
pseudonyms = {name = "change_at", tick = 5}
[sweep]
"mechanism.epsilon_per_km" = [2.0, 8.0]
"""


def test_mdpsim_attack_writes_table_markdown_and_heatmap(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(ATTACK_TOML)
    out = tmp_path / "out"
    args = ["attack", str(path), "--out", str(out), "--mechanisms", "em,rmp", "--no-progress"]
    assert main(args) == 0
    table = pd.read_parquet(out / "attacks.parquet")
    assert set(table["mechanism"]) == {"em", "rmp"}
    assert set(table["epsilon_per_km"]) == {2.0, 8.0}
    assert set(table["attack"]) == {"bayes", "smooth", "places", "linkage"}
    assert {"hit", "error_km", "entropy_bits"} <= set(table.columns)
    assert (out / "attack_success.png").stat().st_size > 1000
    assert "| em | 8 | bayes |" in (out / "attacks.md").read_text()
    ticks = pd.read_parquet(out / "attacks_ticks.parquet")
    assert set(ticks.loc[ticks["attack"] == "smooth", "tick"]) == set(range(1, 9))
    assert main(args) == 2  # exists: --force needed
    assert "exists" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mechanisms", "em,nope"], "--mechanisms: unknown mechanism 'nope'; available: "),
        (["--epsilons", "4,x"], "--epsilons='4,x' must be a comma-separated list"),
        (["--epsilons", "-1"], "--epsilons"),
        (["--repetitions", "0"], "--repetitions=0 must be an integer in [1, 10000]"),
    ],
)
def test_mdpsim_attack_bad_arguments_exit_2_in_one_line(tmp_path, capsys, flags, message):
    path = tmp_path / "tiny.toml"
    path.write_text(ATTACK_TOML)
    assert main(["attack", str(path), "--out", str(tmp_path / "o"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
