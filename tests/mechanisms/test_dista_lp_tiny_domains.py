"""DistA-LP's surrogate uploads on the tiny road domains the scenario generator found failing
(tests/sim/test_scenario_runs.py, docs/reliability.md)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CHEAP_STRICT

from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.mechanisms import make
from mdpsim.privacy import verify
from mdpsim.simulation import scenario as sc


@pytest.mark.parametrize("upload", ["strict", "paper"])
def test_fewer_outputs_than_the_svd_rank_upload_and_reconstruct(helsinki_test_walk, upload):
    # found by the generator: 20 points, 2 outputs; the upload recorded dy's rank (2, clipped
    # by its 2 columns) and the server rebuilt dx (20 x 20, rank 5) at rank 2: "upload block
    # 'dx' has (205,) parameters, not 82". Here 8 points (neighbourhoods of 8), to be quick:
    # dx 8 x 8 at rank 5 has 85 parameters, the server expected 34 (rank 2) before the fix
    domain = Domain.from_network(helsinki_test_walk, n_points=8, n_outputs=2, seed=1)
    # strict at the cheap calibration (its default one took 13 s here; the shapes are the point)
    params = CHEAP_STRICT if upload == "strict" else {"n_neighbours": 8}
    mech = make("dista_lp", epsilon=4.0, upload=upload, **params)
    mech.fit(domain, users=np.arange(5), rng=np.random.default_rng(0))
    eps_pt = mech.report_guarantee.epsilon_per_km
    assert mech.matrix_.shape == (8, 2)
    assert verify(mech.matrix_, domain.dist_xx, eps_pt).passed


@pytest.mark.parametrize("upload", ["strict", "paper"])
def test_a_neighbourhood_larger_than_the_domain_is_refused_at_load(upload):
    # found by the generator: accepted, then "n_neighbours=20 exceeds the 2 secrets" at the fit
    raw = {
        "mechanism": {"name": "dista_lp", "epsilon_per_km": 4.0, "params": {"upload": upload}},
        "domain": {"n_points": 2},
    }
    with pytest.raises(InputError, match=r"mechanism\.params.*n_neighbours=20 exceeds the 2"):
        sc.from_dict(raw)
    raw["mechanism"]["params"].update(n_neighbours=2, rank=2)
    assert sc.from_dict(raw).mechanism.params["n_neighbours"] == 2
    with pytest.raises(InputError, match=r"n_neighbours=20 exceeds the 12 secrets"):
        make("dista_lp", epsilon=4.0, upload=upload).check_domain_size(12, 12)
