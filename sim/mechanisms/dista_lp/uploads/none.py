"""``upload="none"``: nobody uploads; the server plans for the public prior over all of X.

Pure ``epsilon``-mDP, all of it for the report (docs/dista_lp.md, "Upload modes").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mdpsim.mechanisms.dista_lp.locate import prior_guess
from mdpsim.mechanisms.dista_lp.uploads.base import Uploaded, UploadScheme


@dataclass(kw_only=True, repr=False, eq=False)
class NoUpload(UploadScheme):
    """No upload: the prior is the plan's weight, the prior's own guess the server's."""

    mode = "none"
    planners = ("lp_medoids", "blocks")
    takes_uploads = False

    def budgets(self) -> tuple[float, float]:
        return 0.0, self.eps

    def guarantee(self, audit=None) -> None:
        return None

    def upload(self, domain, users, rng, *, calibrations, margin) -> Uploaded:
        guesses = np.full(len(users), prior_guess(domain))
        return Uploaded(domain.prior, guesses, info={"bytes_up": [0] * len(users)})
