"""``upload="location"``: each user releases one secret drawn from the EM over X.

At ``eps_up = upload_share * epsilon`` (exact ``eps_up``-mDP); the server weights every secret
by the summed posteriors of the releases and plans for that. Pure ``eps_up + eps_pt``-mDP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mdpsim._core.validation import check_scalar
from mdpsim.mechanisms.dista_lp.full_domain import em_matrix
from mdpsim.mechanisms.dista_lp.locate import bayes_guess, location_posterior
from mdpsim.mechanisms.dista_lp.uploads.base import BYTES_PER_FLOAT, Uploaded, UploadScheme
from mdpsim.privacy.guarantees import PureMDP
from mdpsim.privacy.sampling import sample_rows

DEFAULT_UPLOAD_SHARE = 0.1


@dataclass(kw_only=True, repr=False, eq=False)
class LocationUpload(UploadScheme):
    """One EM location per user; ``upload_share`` is ``eps_up / epsilon``, in (0, 1)."""

    mode = "location"
    planners = ("lp_medoids", "blocks")

    upload_share: float = DEFAULT_UPLOAD_SHARE

    def __post_init__(self) -> None:
        super().__post_init__()
        self.upload_share = check_scalar(
            self.upload_share, "upload_share", min=0, max=1, include_boundaries="neither",
            owner="dista_lp",
        )  # fmt: skip

    def budgets(self) -> tuple[float, float]:
        share = self.upload_share
        return share * self.eps, (1.0 - share) * self.eps

    def guarantee(self, audit=None) -> PureMDP:
        return PureMDP(self.budgets()[0], note="EM over X at eps_up")

    def upload(self, domain, users, rng, *, calibrations, margin) -> Uploaded:
        """Each user releases ``x~ ~ EM_X(eps_up)``; the server's weights are the summed
        posteriors, its guess of each user their Bayes output."""
        eps_up = self.budgets()[0]
        released = sample_rows(em_matrix(domain.dist_xx, eps_up), users, rng)
        weights = np.zeros(domain.n_x)
        guesses = np.empty(len(users), dtype=np.int64)
        for m, r in enumerate(released):
            post = location_posterior(int(r), domain, eps_up)
            weights += post
            guesses[m] = bayes_guess(post, domain.dist_xy)
        info = {"released_locations": released, "bytes_up": [BYTES_PER_FLOAT] * len(users)}
        return Uploaded(weights, guesses, info=info)
