"""The upload-stage attack through the contract: locate each user from its DistA-LP upload.

The inference itself (:func:`sim.attacks.upload.upload_location_estimate`) belongs to the
DistA-LP work; this adapter feeds it every upload of a release and hands the guesses (output
indices) to the scorer as point estimates about the release's tick.
"""

from __future__ import annotations

import numpy as np

from sim.attacks.base import Attack, LocationEstimate, Observation, Release, register
from sim.attacks.upload import upload_location_estimate


@register("upload")
class UploadStage(Attack):
    """Guess where each uploading user is from its reconstructed distance block."""

    def __init__(self) -> None:
        self.pending_: list[LocationEstimate] = []

    def release(self, release: Release) -> None:
        """One guess per slot that uploaded (mechanisms without uploads: nothing)."""
        if release.uploads is None:
            return
        blocks = release.mechanism.info_["server_blocks"]
        users = np.flatnonzero(release.uploads >= 0)
        guess = np.array(
            [upload_location_estimate(blocks[b]["dy"]) for b in release.uploads[users]],
            dtype=np.int64,
        )
        self.pending_.append(
            LocationEstimate(tick=release.tick, users=users, guess=guess, space="y")
        )

    def observe(self, obs: Observation) -> list[LocationEstimate]:
        """The guesses of the release made at this tick."""
        ready = [e for e in self.pending_ if e.tick == obs.tick]
        self.pending_ = [e for e in self.pending_ if e.tick != obs.tick]
        return ready
