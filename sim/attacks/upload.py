"""Upload-stage attack: locating a user from its (perturbed, reconstructed) surrogate upload.

A DistA-LP upload lets the server rebuild ``A_dy``, the distances from the user's
neighbourhood (whose rows are permuted) to every public output ``y_k``. Permutation hides
which row is which, not where the neighbourhood is: the output with the smallest average
reconstructed distance to the neighbourhood's rows is the server's guess of the user's place.
"""

from __future__ import annotations

import numpy as np


def upload_location_estimate(dy_reconstructed_km: np.ndarray) -> int:
    """Index of the output closest on average to the uploaded neighbourhood."""
    dy = np.asarray(dy_reconstructed_km, dtype=float)
    if dy.ndim != 2 or dy.size == 0:
        raise ValueError("dy block must be a non-empty (n_local, K) array")
    return int(np.argmin(dy.mean(axis=0)))
