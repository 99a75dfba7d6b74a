"""Adding an attack is its own module only: registered here, it runs from a scenario and
shows in ``mdpsim report``, the live page's charts and the batch explorer with no other edit
(docs/design.md, "What to edit to add ...")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mdpsim.attacks import Attack, LocationEstimate, Observation, register
from mdpsim.attacks.base import METRICS
from mdpsim.cli import main
from mdpsim.dashboard import batch_data, model_view
from mdpsim.simulation import columns
from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.scenario import from_dict


@register("prior_guess")
class PriorGuess(Attack):
    """Guesses every reporting user at the prior's most likely secret (a point estimate)."""

    def observe(self, obs: Observation) -> list[LocationEstimate]:
        users = obs.reporting
        guess = np.full(len(users), int(np.argmax(self.context.domain.prior)), dtype=np.int64)
        return [LocationEstimate(tick=obs.tick, users=users, guess=guess)]


TINY = """
[scenario]
name = "tiny"
seed = 3
ticks = 2
[domain]
n_points = 100
[users]
count = 10
[mechanism]
name = "em"
epsilon_per_km = 4.0
[attacks]
run = ["bayes", "prior_guess"]
"""


def test_every_attack_metric_has_a_column_label():
    assert set(METRICS) <= set(columns.ATTACK_METRICS)


@pytest.mark.slow
def test_a_new_attack_appears_in_the_report_and_the_batch_explorer(tmp_path, helsinki_walk):
    scenario = tmp_path / "tiny.toml"
    sweep = '"mechanism.name" = ["em", "laplace"]\n"mechanism.epsilon_per_km" = [3.0, 9.0]\n'
    scenario.write_text(f"{TINY}[sweep]\n{sweep}")
    store = tmp_path / "store"
    assert main(["batch", str(scenario), "--out", str(store), "--workers", "1"]) == 0
    assert main(["report", str(store)]) == 0
    summary = pd.read_csv(store / "report" / "summary.csv")
    assert summary["prior_guess_error_km_mean"].notna().all()
    md = (store / "report" / "summary.md").read_text()
    assert "prior_guess attack: expected error (km)" in md  # the "Utility and attacks" table
    assert "## prior_guess attack: expected error (km)" in md  # its pivot over eps
    batch = batch_data.load(store)
    assert "prior_guess_error_km" in batch_data.metrics(batch, over_ticks=False)
    assert "prior_guess_hit" in batch_data.metrics(batch, over_ticks=True)
    assert batch_data.labels(batch)["prior_guess_hit"] == "prior_guess attack: top-1 hit rate"


def test_a_new_attack_appears_in_the_live_pages_charts(helsinki_walk):
    import tomllib

    model = PrivacyModel(from_dict(tomllib.loads(TINY)), rng=3)
    model.run(2)
    ticks = model_view.history(model)
    panels = model_view.charts(ticks)
    assert "prior_guess_error_km" in panels["Attack expected error (km)"]
    assert "prior_guess_hit" in panels["Attack top-1 hit rate"]
    frame = model_view.chart_frame(ticks, panels["Attack expected error (km)"])
    assert frame["prior_guess_error_km"].notna().all()
