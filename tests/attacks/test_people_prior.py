"""[attacks] people_prior: the tracking attack starts from the people model's public structure."""

from __future__ import annotations

import numpy as np
import pytest

from mdpsim.errors import InputError
from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.public_prior import people_prior
from mdpsim.simulation.scenario import load

TOML = """
[scenario]
name = "prior"
seed = 5
ticks = 6
tick_seconds = 300
[network]
source = "helsinki-test"
[domain]
n_points = 60
[users]
count = 40
[mobility]
model = "{model}"
[mechanism]
name = "em"
epsilon_per_km = 1.0
[queries]
every_ticks = 0
[attacks]
run = ["tracking"]
people_prior = {granted}
"""


def _load(tmp_path, model="epr", granted="true"):
    path = tmp_path / "s.toml"
    path.write_text(TOML.format(model=model, granted=granted))
    return load(path)


def test_the_prior_mixes_housing_and_activity_by_the_diarys_hour():
    housing, activity, domain = np.array([1.0, 0, 0]), np.array([0, 0, 1.0]), np.ones(3) / 3
    at_home = [1.0 if h < 6 else 0.0 for h in range(24)]
    night = people_prior(housing, activity, at_home, domain, tick_seconds=60, start_hour=0.0)
    day = people_prior(housing, activity, at_home, domain, tick_seconds=60, start_hour=12.0)
    assert night.argmax() == 0 and day.argmax() == 2 and night.min() > 0  # nobody ruled out
    assert night.sum() == pytest.approx(1.0) and day.sum() == pytest.approx(1.0)


def test_people_prior_without_the_people_model_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"attacks\.people_prior.*model = \"epr\""):
        _load(tmp_path, model="waypoints")


def test_granted_the_tracking_attack_starts_from_it_and_not_otherwise(tmp_path):
    for granted in ("true", "false"):
        model = PrivacyModel(_load(tmp_path, granted=granted), rng=5)
        attack = model.server.attacks.attacks["tracking"]
        context = attack.context
        if granted == "true":
            np.testing.assert_allclose(attack.prior_, context.public_prior)
            assert not np.allclose(attack.prior_, model.domain.prior)
        else:
            assert context.public_prior is None
            np.testing.assert_array_equal(attack.prior_, model.domain.prior)
        model.run(1)
        assert np.isfinite(model.log.ticks[-1]["tracking_error_km"])
