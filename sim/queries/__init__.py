"""Server queries under geo-privacy with adaptive budgeting (Liang & Yi, §5-6).

Iterative elimination (PIE-NI, PIE-k) turns the Gaussian baselines ``BM0`` (point
privatization) and ``BM1`` (distance privatization) into privacy-saving ``PM0``/``PM1``;
:mod:`mdpsim.queries.budgeting` (Algorithm 3) hands the savings to later queries. Every query
takes user locations as an ``(n, 2)`` array in metres and per-user CGP budgets in 1/km^2,
and returns a :class:`QueryAnswer` with the answer and each user's spend. The kinds a scenario
may ask (``queries.kinds``) register themselves in :mod:`mdpsim.queries.kinds`.
"""

from mdpsim.queries.budgeting import STRATEGIES, QueryBudgeter, allocate
from mdpsim.queries.elimination import (
    METHODS,
    DistancePrivatization,
    Elimination,
    PointPrivatization,
    QueryAnswer,
    pie_k,
    pie_ni,
    priv_sav,
    split_budget,
)
from mdpsim.queries.kde_query import kde, l1_err, true_kde
from mdpsim.queries.kinds import QueryCall, available_kinds, query_kind, register_kind
from mdpsim.queries.knn_query import dist_err, knn, true_knn
from mdpsim.queries.range_query import Disk, Rectangle, count_err, range_count, true_count
from mdpsim.queries.threshold import threshold_query

__all__ = [
    "METHODS",
    "STRATEGIES",
    "Disk",
    "DistancePrivatization",
    "Elimination",
    "PointPrivatization",
    "QueryAnswer",
    "QueryBudgeter",
    "QueryCall",
    "Rectangle",
    "allocate",
    "available_kinds",
    "count_err",
    "dist_err",
    "kde",
    "knn",
    "l1_err",
    "pie_k",
    "pie_ni",
    "priv_sav",
    "query_kind",
    "range_count",
    "register_kind",
    "split_budget",
    "threshold_query",
    "true_count",
    "true_kde",
    "true_knn",
]
