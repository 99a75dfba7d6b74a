"""Home and work inference: known answers on hand-made routines, chance without information."""

from __future__ import annotations

import numpy as np
import pytest
from routine_driver import TICK_SECONDS, feed, routine
from test_attacks_contract import Identity, Uniform

from mdpsim.attacks import make
from mdpsim.attacks.home_work import (
    NIGHT,
    OTHER,
    WORK,
    anonymity_sets,
    true_home_work,
    window_of_ticks,
)
from mdpsim.errors import InputError

N_USERS, TICKS = 30, 72  # three days from Monday 01:00


@pytest.fixture(scope="module")
def domain(walk_domain):
    return walk_domain(100, 2)


@pytest.fixture(scope="module")
def people(domain):
    return routine(domain.n_x, N_USERS, TICKS, seed=3)


def test_windows_follow_the_clock():
    # tick 0 at Friday 21:00: 22:00 and 06:00 are night, 07:00 is not, Saturday 10:00 is not
    # work, Monday 10:00 is
    ticks = np.array([0, 1, 9, 10, 13, 61])
    got = window_of_ticks(ticks, 3600.0, 4 * 24 + 21)
    np.testing.assert_array_equal(got, [OTHER, NIGHT, NIGHT, OTHER, OTHER, WORK])


def test_true_home_and_work_are_the_most_frequent_night_and_day_places(people):
    trace, home, work = people
    t_home, t_work = true_home_work(trace, np.arange(1, TICKS + 1), TICK_SECONDS, 0.0)
    np.testing.assert_array_equal(t_home, home)
    np.testing.assert_array_equal(t_work, work)


def test_a_perfect_mechanism_finds_every_home_and_work(domain, people):
    trace, _, _ = people
    specs = [{"name": "home_work", "match_km": 0.01}]
    suite, final = feed(domain, Identity().fitted_by_hand(domain), trace, specs)
    s = suite.summary().iloc[0]
    assert s["hit"] == 1.0 and s["error_km"] == 0.0
    assert s["work_hit"] == 1.0 and s["work_error_km"] == 0.0 and s["pair_hit"] == 1.0
    assert s["anonymity_set"] == 1.0 and s["unique"] == 1.0  # distinct homes: each pair unique
    assert len(final["home_work"][0].users) == N_USERS


def test_a_uniform_mechanism_does_no_better_than_chance(domain, people):
    trace, _, _ = people
    suite, _ = feed(domain, Uniform(epsilon=1.0).fit(domain), trace, [{"name": "home_work"}])
    s = suite.summary().iloc[0]
    # every pseudonym's density is the prior: one home for all, right for few users
    assert s["hit"] <= 0.15 and s["work_hit"] <= 0.15 and s["error_km"] > 0.3


def test_anonymity_set_counts_true_pairs_near_the_inferred_one():
    dist = np.array([[0.0, 0.1, 1.0], [0.1, 0.0, 1.0], [1.0, 1.0, 0.0]])
    true_home, true_work = np.array([0, 1, 2]), np.array([2, 2, 0])
    got = anonymity_sets(np.array([0, 2]), np.array([2, 2]), true_home, true_work, dist, 0.2)
    np.testing.assert_array_equal(got, [2, 0])  # (0 or 1, 2) twice; nobody lives at 2, works at 2


def test_same_seed_same_scores(domain, people):
    trace, _, _ = people
    mech = make_em(domain)
    runs = [feed(domain, mech, trace, [{"name": "home_work"}])[1] for _ in range(2)]
    a, b = (r["home_work"][0].values for r in runs)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def make_em(domain):
    from mdpsim.mechanisms import make as make_mechanism

    return make_mechanism("em", epsilon=4.0).fit(domain)


def test_bad_match_km_is_refused():
    with pytest.raises(InputError, match="match_km"):
        make("home_work", match_km=0.0)


PEOPLE_TOML = """
[scenario]
name = "tiny_day"
seed = 2
ticks = 40
tick_seconds = 1800
start_hour = 1.0
[network]
source = "helsinki-test"
[domain]
n_points = 50
[users]
count = 10
dwell_ticks = [2, 6]
personal_places = 2
[mechanism]
name = "em"
epsilon_per_km = 8.0
[queries]
every_ticks = 0
[attacks]
run = ["bayes", "home_work", "uniqueness"]
[strategies]
budget = {name = "cgp", rho_per_km2 = 100000.0}
"""


def test_mdpsim_run_and_attack_report_home_work_and_uniqueness(tmp_path):
    import json

    import pandas as pd

    from mdpsim.cli import main

    path = tmp_path / "day.toml"
    path.write_text(PEOPLE_TOML)
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 0
    attacks = json.loads((tmp_path / "run" / "summary.json").read_text())["attacks"]
    assert set(attacks) == {"home_work", "uniqueness"}  # bayes has nothing at the end
    assert 0 <= attacks["home_work"]["work_hit"] <= 1 and attacks["home_work"]["anonymity_set"] >= 0
    assert attacks["uniqueness"]["chance"] == pytest.approx(1 / 10)
    out = tmp_path / "attack"
    assert main(["attack", str(path), "--out", str(out), "--no-progress"]) == 0
    table = pd.read_parquet(out / "attacks.parquet").set_index("attack")
    for column in ("work_hit", "anonymity_set", "unique"):
        assert table.loc["home_work", column] == attacks["home_work"][column]  # same run, same seed
    assert "linked_k4" in (out / "attacks.md").read_text()


EPR_TOML = """
[scenario]
name = "epr_days"
seed = 4
ticks = 192
tick_seconds = 900
[network]
source = "helsinki-test"
[domain]
n_points = 60
[users]
count = 30
[mobility]
model = "epr"
[mechanism]
name = "em"
epsilon_per_km = 20.0
[queries]
every_ticks = 0
[attacks]
run = ["home_work"]
[strategies]
budget = {name = "cgp", rho_per_km2 = 1000000.0}
"""


def test_the_truths_rule_finds_the_people_models_declared_homes(tmp_path):
    from mdpsim.simulation.model import PrivacyModel
    from mdpsim.simulation.scenario import load

    path = tmp_path / "epr.toml"
    path.write_text(EPR_TOML)
    scenario = load(path)
    model = PrivacyModel(scenario, rng=4)
    model.run(scenario.scenario.ticks)
    suite = model.server.attacks
    ticks = np.array(sorted(suite.truth.positions))
    home, _ = true_home_work(suite.truth.trace(), ticks, 900.0, 0.0)
    declared = model.population.home
    assert np.mean(home == declared) >= 0.9  # nights at home: the night mode is the home
    s = suite.finish()["home_work"][0]  # at 20 / km on 60 secrets the attack mostly finds them
    assert np.nanmean(s.values["hit"]) >= 0.5


def test_peeking_mid_run_changes_nothing(domain, people):
    from mdpsim.attacks.base import Context, Observation, Release
    from mdpsim.attacks.suite import AttackSuite
    from mdpsim.privacy.sampling import sample_rows

    trace, _, _ = people
    mech = make_em(domain)
    finals = []
    for peek in (False, True):
        suite = AttackSuite.from_specs([{"name": "home_work"}, {"name": "uniqueness"}])
        suite.start(Context(domain=domain, n_users=N_USERS, seed=1, tick_seconds=TICK_SECONDS))
        suite.release(Release(tick=1, mechanism=mech))
        rng = np.random.default_rng(2)
        pseudonyms = np.arange(N_USERS, dtype=np.int64)
        for t, secrets in enumerate(trace, start=1):
            outputs = sample_rows(mech.matrix_, secrets, rng).astype(np.int64)
            suite.observe(Observation(tick=t, outputs=outputs, pseudonyms=pseudonyms), secrets)
            if peek and t == TICKS // 2:
                seen = suite.peek().set_index("attack")
                assert set(seen.index) == {"home_work", "uniqueness"} and suite.table().empty
        finals.append(suite.finish())
    for label in ("home_work", "uniqueness"):
        a, b = (f[label][0].values for f in finals)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])


def test_the_live_page_shows_the_whole_run_attacks_so_far(tmp_path):
    from mdpsim.dashboard import model_view as mv
    from mdpsim.simulation.model import PrivacyModel
    from mdpsim.simulation.scenario import load

    path = tmp_path / "day.toml"
    path.write_text(PEOPLE_TOML)
    model = PrivacyModel(load(path), rng=2)
    assert mv.whole_run(model).empty  # no tick yet
    model.run(30)
    table = mv.whole_run(model).set_index("attack")
    assert list(table.index) == ["home_work", "uniqueness"]  # bayes has no whole-run score
    assert {"hit", "anonymity_set", "linked_k4", "chance"} <= set(table.columns)
    assert table.loc["uniqueness", "chance"] == pytest.approx(1 / 10)


def test_each_pseudonym_is_scored_against_its_own_period(domain, people):
    trace, _, _ = people  # new pseudonyms on Tuesday 01:00: both halves have nights and work
    specs = [{"name": "home_work", "match_km": 0.01}]
    suite, final = feed(domain, Identity().fitted_by_hand(domain), trace, specs, change_at=25)
    scores = final["home_work"][0]
    assert len(scores.users) == 2 * N_USERS and sorted(set(scores.users)) == list(range(N_USERS))
    assert np.all(scores.values["hit"] == 1.0) and np.all(scores.values["work_hit"] == 1.0)
