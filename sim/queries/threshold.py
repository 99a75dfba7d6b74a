"""Private threshold query (paper Appendix C): is a count below ``threshold``?

Central model: a trusted curator holds a database and asks whether ``|H(x)| < threshold``
(e.g. how many users sit in a zone, below ``q N``?). ``|H|`` changes by at most 1 when one
record changes (Hamming metric), so the budget ``rho`` is per record squared (unitless).
``BM1`` adds ``N(0, 1/(2 rho))`` once; ``PM1`` runs PIE-NI on the single curator with
``nu_low = nu_high = threshold`` and stops as soon as the answer is settled, spending only
the rounds it used; if ``c`` rounds do not settle it, the full-budget average decides, exactly
as ``BM1`` would.
"""

from __future__ import annotations

import numpy as np

from mdpsim._core.validation import check_choice, check_scalar
from mdpsim.queries.elimination import DistancePrivatization, QueryAnswer, pie_ni, release

THRESHOLD_METHODS = ("BM1", "PM1")


def threshold_query(
    value: float,
    threshold: float,
    rho: float,
    *,
    method: str = "PM1",
    rng: np.random.Generator,
    c: int = 8,
    scheme: str = "even",
    beta: float = 0.1,
) -> QueryAnswer:
    """Privately decide ``value < threshold``; ``answer.value`` is a bool, ``spent`` shape (1,).

    With probability ``1 - beta/4`` an early answer (before ``c`` rounds) is correct.
    """
    check_choice(method, "method", THRESHOLD_METHODS)
    check_scalar(value, "value")
    check_scalar(threshold, "threshold")
    check_scalar(rho, "rho", min=0, include_boundaries="neither")
    t = float(threshold)
    released = release(
        method,
        DistancePrivatization(np.array([float(value)]), rng=rng),
        np.array([float(rho)]),
        beta=beta,
        eliminate=lambda triple, budget, beta0: pie_ni(
            triple, budget, nu_low=t, nu_high=t, c=c, scheme=scheme, beta0=beta0
        ),
    )
    elim = released.elimination
    if elim is None or len(released.deciding):  # BM, or PM unsettled after c rounds: average
        return released.answer(bool(released.triple.estimate(released.deciding)[0] < t))
    return released.answer(bool(elim.s1[0]))
