"""What every report is drawn from: a copy of the certified matrix that mdpsim's caller holds.

``mdpsim.mechanisms.fit_release(mechanism, domain, ...)`` fits a mechanism, certifies the
matrix its ``_fit`` returned (the exact check) and hands that matrix, as a local value and
never read back from the instance, to a :class:`CertifiedRelease`. The release copies it into
a read-only array it owns and draws from it with mdpsim's exact sampler
(:class:`~mdpsim.privacy.sampling.RowSampler`: the same draws, byte for byte, as
``sample_rows`` on that matrix). The release belongs to the caller (the server, the env
through the server, ``mdpsim audit``, ``check_mechanism``); the mechanism instance holds no
reference to it, so nothing its class defines (an attribute, a property, a descriptor,
``__getattribute__``, a ``sample`` of its own, a ``matrix_`` changed after the fit) reaches
what is drawn. docs/plugins.md, "What mdpsim guards".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mdpsim.errors import InputError
from mdpsim.privacy.sampling import RowSampler

if TYPE_CHECKING:
    from mdpsim.privacy.guarantees import Guarantee


class CertifiedRelease:
    """A read-only copy of a certified ``(N, K)`` matrix and the exact sampler over it.

    Parameters
    ----------
    matrix
        The row-stochastic matrix ``Z[i, k] = Pr[y_k | x_i]`` the exact check certified
        (copied: later changes to the caller's array do not reach the release).
    report_guarantee
        The guarantee it was certified against (what one report costs), or ``None``.
    verified_epsilon
        The smallest eps (1/km) the exact check found it satisfies (``None``: not checked).
    """

    __slots__ = ("_matrix", "_report_guarantee", "_sampler", "_verified_epsilon")
    _matrix: np.ndarray
    _sampler: RowSampler
    _report_guarantee: Guarantee | None
    _verified_epsilon: float | None

    def __init__(
        self,
        matrix: np.ndarray,
        *,
        report_guarantee: Guarantee | None = None,
        verified_epsilon: float | None = None,
    ) -> None:
        owned = np.array(matrix, dtype=np.float64, copy=True, order="C")
        if owned.ndim != 2 or 0 in owned.shape:
            raise InputError(f"a release needs an (N, K) matrix, not shape {owned.shape}")
        owned.setflags(write=False)
        object.__setattr__(self, "_matrix", owned)
        object.__setattr__(self, "_sampler", RowSampler(owned))
        object.__setattr__(self, "_report_guarantee", report_guarantee)
        object.__setattr__(self, "_verified_epsilon", verified_epsilon)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"CertifiedRelease is read-only ({name})")

    @property
    def matrix(self) -> np.ndarray:
        """The certified matrix (a read-only view of the release's own copy)."""
        view = self._matrix.view()
        view.setflags(write=False)
        return view

    @property
    def shape(self) -> tuple[int, int]:
        """``(secrets, outputs)``."""
        n_x, n_y = self._matrix.shape
        return int(n_x), int(n_y)

    @property
    def report_guarantee(self) -> Guarantee | None:
        """The guarantee the matrix was certified against (what one report costs)."""
        return self._report_guarantee

    @property
    def verified_epsilon(self) -> float | None:
        """The eps (1/km) the exact check certified."""
        return self._verified_epsilon

    def draw(self, secrets, rng: np.random.Generator) -> np.ndarray:
        """One report (output index) per secret index in ``secrets``, drawn exactly from the
        release's copy of the certified matrix."""
        idx = np.asarray(secrets, dtype=np.int64)
        n_x = len(self._matrix)
        if idx.ndim != 1 or not _within(idx, n_x):
            raise InputError(f"secret indices must lie in [0, {n_x})")
        return self._sampler.draw(idx, rng)

    def sampler(self):
        """The auditor's black box over this release: ``sample(i, n, rng) -> n outputs``."""

        def sample(i: int, n: int, rng: np.random.Generator) -> np.ndarray:
            return self.draw(np.full(n, i, dtype=np.int64), rng)

        return sample

    def __repr__(self) -> str:
        n_x, n_y = self.shape
        return f"CertifiedRelease({n_x}x{n_y}, {self._report_guarantee})"


def _within(idx: np.ndarray, n: int) -> bool:
    """Whether every index of the 1-D ``idx`` lies in ``[0, n)`` (a few, as Python ints)."""
    if len(idx) > RowSampler.SCALAR_ROWS:
        return bool(idx.min() >= 0 and idx.max() < n)
    listed = idx.tolist()
    return not listed or (min(listed) >= 0 and max(listed) < n)
