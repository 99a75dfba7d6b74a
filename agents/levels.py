"""What the attacks see when users report at one of several eps levels (``[game]``).

A report made at level ``l`` is the pair ``(l, y)``: the level is visible to the server (it is
the level charged). :class:`LevelStack` is the release the attacks are handed: one column per
pair, ``l * K + y``, holding ``Z_l[x, y] / L``. Its posterior for ``(l, y)`` is the posterior
of ``y`` under ``Z_l`` (the ``1 / L`` cancels), so every attack built on the released matrix
(single-report Bayes, tracking, places, linkage) reads each report through its own level's
mechanism. The ``1 / L`` makes the rows sum to one: it is the matrix of a user who picks its
level independently of its secret, the assumption under which the level tells nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from mdpsim.geo.domain import Domain
from mdpsim.mechanisms import Mechanism
from mdpsim.privacy.guarantees import Guarantee
from mdpsim.privacy.release import CertifiedRelease


@dataclass(frozen=True, eq=False)
class LevelStack:
    """The levels' matrices side by side (see the module docstring), as an attack reads a
    mechanism: ``matrix_``, ``domain_``, ``report_guarantee``, ``info_``, ``uploads_``."""

    matrix_: np.ndarray  # (N, L K)
    domain_: Domain
    report_guarantee: Guarantee  # the largest level's: no report leaks more
    info_: dict = field(default_factory=dict)
    uploads_: None = None

    @classmethod
    def of(
        cls,
        mechanisms: Sequence[Mechanism],
        releases: Sequence[CertifiedRelease] | None = None,
    ) -> Mechanism:
        """The stack of fitted ``mechanisms`` (one per level, same domain, no uploads); with
        ``releases`` (one per level, what the reports are drawn from), their certified
        matrices and guarantees, not the instances' attributes."""
        if releases is None:
            matrices = [m.matrix_ for m in mechanisms]
            guarantees = [m.report_guarantee for m in mechanisms]
        else:
            matrices = [r.matrix for r in releases]
            guarantees = [r.report_guarantee or m.report_guarantee
                          for m, r in zip(mechanisms, releases, strict=True)]  # fmt: skip
        matrix = np.hstack(matrices) / len(mechanisms)
        top = max(range(len(mechanisms)), key=lambda i: mechanisms[i].epsilon)
        stack = cls(matrix_=matrix, domain_=mechanisms[0].domain_,
                    report_guarantee=guarantees[top])  # fmt: skip
        return cast(Mechanism, stack)  # attacks read only the attributes above
