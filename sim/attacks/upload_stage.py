"""The upload-stage attack through the contract: locate each user from its DistA-LP upload.

The inference itself (sim/mechanisms/dista_lp/locate.py, run by the mechanism on what the server
received: ``info_["upload_guess"]``, one output index per upload) belongs to the DistA-LP
work; this adapter hands the guesses to the scorer as point estimates about the release's tick.
"""

from __future__ import annotations

import numpy as np

from mdpsim.attacks.base import Attack, LocationEstimate, Observation, Release, register


@register("upload")
class UploadStage(Attack):
    """Guess where each uploading user is from its upload alone."""

    def __init__(self) -> None:
        self.pending_: list[LocationEstimate] = []

    def release(self, release: Release) -> None:
        """One guess per slot that uploaded (mechanisms without uploads: nothing)."""
        if release.uploads is None:
            return
        guesses = np.asarray(release.mechanism.info_["upload_guess"], dtype=np.int64)
        users = np.flatnonzero(release.uploads >= 0)
        guess = guesses[release.uploads[users]]
        self.pending_.append(
            LocationEstimate(tick=release.tick, users=users, guess=guess, space="y")
        )

    def observe(self, obs: Observation) -> list[LocationEstimate]:
        """The guesses of the release made at this tick."""
        ready = [e for e in self.pending_ if e.tick == obs.tick]
        self.pending_ = [e for e in self.pending_ if e.tick != obs.tick]
        return ready
