"""Privacy filters: per-user stopping rules that never let the composed loss pass a budget B.

A filter (Liang & Yi, §4; Rogers et al. 2016; Feldman & Zrnic 2021) is ex-ante and fully
adaptive: each query's cost may depend on every earlier output, and the filter answers
CONT (the user answers and pays) or HALT. The first HALT is permanent.

Three notions, one additive currency each:

* pure GP budget ``PureGP(B)``: costs are ``epsilon`` (1/km), ``sum_j eps_j <= B``;
* CGP budget ``CGP(B)``: costs are ``rho`` (1/km^2), ``sum_j rho_j <= B``;
* approximate GP budget ``ApproxGP(B, delta, Lambda)``: costs are CGP ``rho``; the filter
  continues while the converted ``epsilon(sum_j rho_j, delta, Lambda) <= B``, i.e. while
  ``sum_j rho_j <= approx_gp_to_cgp_budget(B, delta, Lambda)``.

Components and time steps compose under ``dist_inf`` (paper §5): a cost paid on any component
adds to the same sum, so the ledger keeps a per-component breakdown for reporting only.

Exact float accounting (``docs/budgeting.md``): every sum is rounded *up* to the next float
when it is inexact (two-sum error term), so the recorded spend is never below the true real
sum of the accepted costs; a request is accepted iff the *exact* real sum fits the capacity;
``remaining`` is rounded *down*, and a request of exactly ``remaining`` is always accepted and
leaves ``remaining == 0``. NaN, inf and negative costs raise :class:`PrivacyBudgetError`.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdpsim._core.validation import check_scalar
from mdpsim.errors import InputError, PrivacyBudgetError
from mdpsim.privacy.accounting import (
    CGP,
    ApproxGP,
    Notion,
    PureGP,
    approx_gp_to_cgp_budget,
    gp_to_cgp,
)
from mdpsim.privacy.guarantees import (
    PMDP,
    Composition,
    Guarantee,
    NoGuarantee,
    PureMDP,
    check_guarantee,
)


# --------------------------------------------------------------------------- exact float sums
def _two_sum(a, b):
    """``s = fl(a + b)`` and the exact error ``a + b - s`` (Knuth), element-wise."""
    s = a + b
    bp = s - a
    ap = s - bp
    return s, (a - ap) + (b - bp)


def add_up(a, b):
    """The smallest float >= the exact real ``a + b`` (element-wise, finite inputs)."""
    if isinstance(a, float) and isinstance(b, float):
        s, err = _two_sum(a, b)
        return math.nextafter(s, math.inf) if err > 0 else s
    return _rounded_up(*_two_sum(np.asarray(a, dtype=float), np.asarray(b, dtype=float)))


def _rounded_up(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """:func:`add_up` from the two-sum ``(s, err)`` of its terms."""
    return np.where(err > 0, np.nextafter(s, np.inf), s)


def sub_down(a, b):
    """The largest float <= the exact real ``a - b``, clipped at 0."""
    if isinstance(a, float) and isinstance(b, float):
        s, err = _two_sum(a, -b)
        return max(math.nextafter(s, -math.inf) if err < 0 else s, 0.0)
    s, err = _two_sum(np.asarray(a, dtype=float), -np.asarray(b, dtype=float))
    s = np.where(err < 0, np.nextafter(s, -np.inf), s)
    return np.maximum(s, 0.0)


def fits(spent, cost, capacity):
    """Whether the exact real ``spent + cost <= capacity`` (element-wise)."""
    if isinstance(spent, float) and isinstance(cost, float):
        s, err = _two_sum(spent, cost)
        return s < capacity or (s == capacity and err <= 0)
    return _fit(*_two_sum(np.asarray(spent, dtype=float), np.asarray(cost, dtype=float)), capacity)


def _fit(s: np.ndarray, err: np.ndarray, capacity) -> np.ndarray:
    """:func:`fits` from the two-sum ``(s, err)`` of ``spent + cost``."""
    return (s < capacity) | ((s == capacity) & (err <= 0))


@functools.cache
def _compiled():
    """The compiled kernels' module (``mdpsim.privacy._filter_kernels``), imported on the
    first charge (numba's import is not paid by ``import mdpsim``)."""
    from mdpsim.privacy import _filter_kernels

    return _filter_kernels


def _checked_cost(cost) -> float:
    return check_scalar(cost, "privacy cost", min=0, error=PrivacyBudgetError)


def _checked_costs(costs, n: int | None = None) -> np.ndarray:
    arr = np.asarray(costs, dtype=float)
    if n is not None and arr.shape != (n,):
        raise PrivacyBudgetError(f"costs must have shape ({n},), got {arr.shape}")
    if arr.size and (
        _compiled().valid_costs_1d(arr)
        if arr.ndim == 1
        else arr.min() >= 0.0 and arr.max() < math.inf
    ):  # NaN fails both
        return arr
    if not np.isfinite(arr).all():
        raise PrivacyBudgetError("privacy costs must be finite (got NaN or inf)")
    if (arr < 0).any():
        raise PrivacyBudgetError("privacy costs must be >= 0 (got a negative cost)")
    return arr


# --------------------------------------------------------------------------- notions
def _by_type(table: dict, obj, what: str):
    """``table``'s entry for ``obj``'s type (or a base class of it), else InputError."""
    for cls in type(obj).__mro__:
        if cls in table:
            return table[cls]
    names = ", ".join(t.__name__ for t in table)
    raise InputError(f"{what}={obj!r} must be {names}")


#: Per budget notion: its currency and its additive capacity in that currency.
_BUDGETS: dict[type, tuple[str, Callable[[Any], float]]] = {
    PureGP: ("epsilon_per_km", lambda b: b.epsilon_per_km),
    CGP: ("rho_per_km2", lambda b: b.rho_per_km2),
    ApproxGP: (
        "rho_per_km2",
        lambda b: approx_gp_to_cgp_budget(b.epsilon_per_km, delta=b.delta, lambda_km=b.lambda_km),
    ),
}
#: A cost notion in a currency: (currency, cost type) -> its amount; a missing pair is refused.
_COSTS: dict[tuple[str, type], Callable[[Any], float]] = {
    ("epsilon_per_km", PureGP): lambda c: c.epsilon_per_km,
    ("rho_per_km2", PureGP): lambda c: gp_to_cgp(c.epsilon_per_km),
    ("rho_per_km2", CGP): lambda c: c.rho_per_km2,
}
_COST_REFUSED = {
    "epsilon_per_km": "a pure GP budget only accepts pure GP costs (CGP is not pure)",
    "rho_per_km2": "a CGP-currency budget accepts pure GP and CGP costs",
}
#: Cost notions no filter composes, whatever the budget.
_UNCOMPOSABLE: dict[type, str] = {
    ApproxGP: "an (epsilon, delta)-GP cost cannot be composed by a filter; use CGP",
}


def currency_of(budget: Notion) -> str:
    """``"epsilon_per_km"`` for a pure GP budget, ``"rho_per_km2"`` otherwise."""
    return _by_type(_BUDGETS, budget, "budget")[0]


def capacity_of(budget: Notion) -> float:
    """The additive capacity in the filter's currency."""
    return _by_type(_BUDGETS, budget, "budget")[1](budget)


def cost_in(budget: Notion, cost: Notion) -> float:
    """A mechanism's guarantee ``cost`` expressed in the currency of a ``budget``.

    Pure GP composes only with pure GP; CGP and approximate-GP budgets take CGP costs and pure
    costs converted by ``epsilon^2 / 2``. An approximate-GP *cost* does not compose additively
    and is refused.
    """
    currency = currency_of(budget)
    if type(cost) in _UNCOMPOSABLE:
        raise InputError(_UNCOMPOSABLE[type(cost)])
    amount = _COSTS.get((currency, type(cost)))
    if amount is None:
        raise InputError(_COST_REFUSED[currency])
    return amount(cost)


@dataclass(frozen=True)
class Charge:
    """What one use of a mechanism costs a user: ``cost`` in the budget's currency, and the
    ``delta`` of a probabilistic guarantee (0 for a pure one), summed apart per user."""

    cost: float
    delta: float = 0.0


def charge_of(budget: Notion, guarantee: Guarantee) -> Charge:
    """THE conversion of a stated guarantee into a filter charge (every charge passes here).

    * :class:`PureMDP` eps: ``cost_in(budget, PureGP(eps))`` (eps, or ``eps^2 / 2`` in rho);
    * :class:`PMDP` (eps, delta), audited: with probability ``1 - delta`` over the mechanism's
      own randomness the release is eps-mDP, so a CGP budget pays ``eps^2 / 2`` and the delta
      is summed apart (:attr:`PopulationFilter.delta_spent`); a pure GP budget cannot pay it,
      and an unaudited claim (an unfitted mechanism's) is refused;
    * :class:`Composition`: the sum of its parts' charges (costs and deltas add up).

    :class:`NoGuarantee` (claims nothing) and a guarantee the budget cannot charge raise
    :class:`InputError`; anything that is not a guarantee type, :class:`TypeError`. One
    function per guarantee type (:data:`_CHARGES`): a new type adds its own.
    """
    return _charge(budget, guarantee, audited=True)


def check_chargeable(budget: Notion, guarantee: Guarantee) -> None:
    """Raise as :func:`charge_of` does for what no audit can change (a guarantee of kind
    ``"none"``, PmDP under a pure GP budget): the refusal of an unfitted mechanism's claim,
    made before any fit."""
    _charge(budget, guarantee, audited=False)


def _charge(budget: Notion, guarantee: Guarantee, *, audited: bool) -> Charge:
    """:func:`charge_of`; ``audited=False``: an unaudited PmDP claim is not refused."""
    check_guarantee(guarantee, "a charged guarantee")
    return _by_type(_CHARGES, guarantee, "guarantee")(budget, guarantee, audited)


def _charge_none(budget: Notion, guarantee: NoGuarantee, audited: bool) -> Charge:
    raise InputError(f"a guarantee of kind 'none' ({guarantee}) cannot be charged by a filter")


def _charge_composition(budget: Notion, guarantee: Composition, audited: bool) -> Charge:
    cost, delta = 0.0, 0.0
    for part in guarantee.parts:
        charge = _charge(budget, part, audited=audited)
        cost, delta = add_up(cost, charge.cost), add_up(delta, charge.delta)
    return Charge(cost, delta)


def _charge_pure(budget: Notion, guarantee: PureMDP, audited: bool) -> Charge:
    return Charge(cost_in(budget, PureGP(guarantee.epsilon_per_km)))


def _charge_pmdp(budget: Notion, guarantee: PMDP, audited: bool) -> Charge:
    if currency_of(budget) == "epsilon_per_km":
        raise InputError(
            "a pure GP budget cannot charge an (eps, delta)-PmDP guarantee (its delta "
            "does not compose as pure GP); use the cgp or renewing budget policy"
        )
    if audited and guarantee.audit is None:
        raise InputError(
            f"{guarantee} has not been audited: charge the fitted mechanism's guarantee"
        )
    delta = _checked_cost(guarantee.delta)
    return Charge(cost_in(budget, PureGP(guarantee.epsilon_per_km)), delta)


#: The charge of each guarantee type (check_guarantee refuses any other type first).
_CHARGES: dict[type, Callable[[Notion, Any, bool], Charge]] = {
    NoGuarantee: _charge_none,
    Composition: _charge_composition,
    PureMDP: _charge_pure,
    PMDP: _charge_pmdp,
}


def query_costs_in(budget: Notion, rho_per_km2) -> np.ndarray:
    """Per-user CGP query spends ``rho`` (1/km^2) in the budget's currency.

    Only CGP-currency budgets can pay them (pure GP cannot compose a Gaussian release).
    """
    if currency_of(budget) == "epsilon_per_km":
        raise InputError(
            "a pure GP budget cannot pay the Gaussian (CGP) queries; set queries.every_ticks = 0 "
            "or use the cgp or renewing budget policy"
        )
    return _checked_costs(rho_per_km2)


# --------------------------------------------------------------------------- filters
class PrivacyFilter:
    """One user's filter.

    Parameters
    ----------
    budget
        ``PureGP(B)``, ``CGP(B)`` or ``ApproxGP(B, delta, lambda_km)`` (units in
        :mod:`mdpsim.privacy.accounting`).
    """

    def __init__(self, budget: Notion) -> None:
        self.budget = budget
        self.currency = currency_of(budget)
        self.capacity = float(capacity_of(budget))
        self.spent = 0.0
        self.halted = False
        self.ledger: list[tuple[object, float]] = []

    @property
    def remaining(self) -> float:
        """Budget left, in the filter's currency, rounded down (0 once halted)."""
        return 0.0 if self.halted else sub_down(self.capacity, self.spent)

    def request(self, cost: float, *, component=None) -> bool:
        """CONT (pay ``cost`` and return True) or HALT (return False, permanently)."""
        c = _checked_cost(cost)
        if self.halted:
            return False
        if not fits(self.spent, c, self.capacity):
            self.halted = True
            return False
        self.spent = add_up(self.spent, c)
        self.ledger.append((component, c))
        return True

    def spend(self, cost: float, *, component=None) -> None:
        """Pay ``cost`` or raise :class:`PrivacyBudgetError` (and change nothing)."""
        c = _checked_cost(cost)
        if self.halted:
            raise PrivacyBudgetError("this user's filter has halted; it answers no more queries")
        if not fits(self.spent, c, self.capacity):
            raise PrivacyBudgetError(
                f"cost {c!r} exceeds the remaining budget {self.remaining!r} ({self.currency})"
            )
        self.request(c, component=component)

    def spent_by_component(self) -> dict:
        """Spend per component (for reporting; each value rounded up)."""
        out: dict = defaultdict(float)
        for comp, c in self.ledger:
            out[comp] = add_up(out[comp], c)
        return dict(out)


class PopulationFilter:
    """Filters of ``n`` users held in arrays (vectorised :class:`PrivacyFilter`).

    Parameters
    ----------
    budget
        The notion and budget ``B`` shared by all users (see :class:`PrivacyFilter`).
    n_users
        Number of users.
    capacity
        Optional per-user capacities in the filter's currency (heterogeneous budgets), each
        in ``[0, capacity_of(budget)]``; by default every user gets the full capacity.
    """

    def __init__(self, budget: Notion, n_users: int, *, capacity=None) -> None:
        n_users = check_scalar(n_users, "n_users", kind=int, min=0)
        self.budget = budget
        self.currency = currency_of(budget)
        full = capacity_of(budget)
        if capacity is None:
            cap = np.full(int(n_users), full)
        else:
            cap = np.array(capacity, dtype=float)
            if cap.shape != (n_users,) or not np.all(np.isfinite(cap)):
                raise InputError(f"capacity must be {n_users} finite numbers")
            if np.any(cap < 0) or np.any(cap > full):
                raise InputError(f"capacity values must lie in [0, {full!r}] ({self.currency})")
        self.capacity = _read_only(cap)
        self.windows = 0  # how many times the budget was renewed
        self._start_window()
        self._remaining: tuple[tuple, np.ndarray] | None = None

    def _start_window(self) -> None:
        """Nothing spent, nobody halted, an empty ledger (the state arrays are read-only: a
        change assigns new ones, which is what :attr:`remaining`'s cache watches)."""
        self.spent = _read_only(np.zeros(self.n_users))
        self.halted = _read_only(np.zeros(self.n_users, dtype=bool))
        self.delta_spent = np.zeros(self.n_users)
        self._by_component: dict = {}

    @property
    def n_users(self) -> int:
        return len(self.capacity)

    @property
    def remaining(self) -> np.ndarray:
        """Per-user budget left, rounded down (0 for halted users); computed again only when
        the state arrays were replaced (every change replaces them), a copy each time."""
        kept = self._remaining
        if kept is None or not _same(kept[0], (self.capacity, self.spent, self.halted)):
            left = _compiled().left_1d(self.capacity, self.spent, self.halted)
            kept = self._remaining = ((self.capacity, self.spent, self.halted), left)
        return kept[1].copy()

    def short_of(self, cost: float) -> np.ndarray:
        """Which users have not halted and have less than ``cost`` left (:attr:`remaining`
        ``< cost``): those a request of ``cost`` would halt."""
        return _compiled().short_of_1d(self.capacity, self.spent, self.halted, float(cost))

    def request(self, costs, *, component=None, delta: float = 0.0) -> np.ndarray:
        """Ask every user with ``cost > 0`` to pay; return who pays and may answer.

        Users whose cost would pass their budget halt permanently; halted users never pay.
        A cost of 0 means the user is not asked. Invalid costs raise before any change.
        ``delta`` (of a PmDP charge, see :func:`charge_of`) is added to each payer's
        :attr:`delta_spent`.
        """
        c = _checked_costs(costs, self.n_users)
        d = 0.0 if type(delta) is float and delta == 0.0 else _checked_cost(delta)
        by = self._by_component.get(component)
        if by is None:  # the component's first payment (recorded only if someone pays)
            by = np.zeros(self.n_users)
        ok, halted, spent, by, refused, paid = _compiled().request_paid_1d(
            self.spent, c, self.capacity, self.halted, by
        )
        if refused:
            self.halted = _read_only(halted)
        if paid:
            self.spent = _read_only(spent)
            self._by_component[component] = by
        if d > 0:
            self.delta_spent = np.where(ok, add_up(self.delta_spent, d), self.delta_spent)
        return ok

    def renew(self) -> None:
        """Start a new budget window: nothing spent, nobody halted (the ledger starts over)."""
        self._start_window()
        self.windows += 1

    def affordable(self, costs) -> np.ndarray:
        """Which users could pay ``costs`` now (no state change; 0 cost is always affordable).

        Check this *before* letting users release data under a plan, so that a refusal can
        never come after the release.
        """
        c = _checked_costs(costs, self.n_users)
        return (c == 0) | (~self.halted & fits(self.spent, c, self.capacity))

    def spend(self, costs, *, component=None) -> None:
        """Charge every user ``costs`` atomically, or raise and change nothing."""
        c = _checked_costs(costs, self.n_users)
        spent, asked, check = _compiled().charge_1d(self.spent, c, self.capacity, self.halted)
        if not asked:
            return
        if check:  # else every charge fits
            self._refuse(c, c > 0, fits(self.spent, c, self.capacity))
        self._pay(c, spent, component)

    def _refuse(self, c: np.ndarray, asked: np.ndarray, fit: np.ndarray) -> None:
        """Raise for a charge of halted users or past a budget (``fit``: who can pay it)."""
        if (asked & self.halted).any():
            raise PrivacyBudgetError(
                f"{int(np.sum(asked & self.halted))} charged users have halted filters"
            )
        over = asked & ~fit
        if over.any():
            first = int(np.argmax(over))
            raise PrivacyBudgetError(
                f"{int(over.sum())} users would pass their budget (user {first}: cost "
                f"{c[first]!r} > remaining {self.remaining[first]!r} {self.currency})"
            )

    def spent_by_component(self) -> dict:
        """Per-component spend arrays (each rounded up), for reporting."""
        return {k: v.copy() for k, v in self._by_component.items()}

    def _pay(self, c: np.ndarray, spent: np.ndarray, component) -> None:
        """Record the payment ``c`` (0 for users who do not pay, so that adding it changes
        nothing for them) and the new ``spent`` (``spent + c`` rounded up)."""
        self.spent = _read_only(spent)
        prev = self._by_component.get(component)
        if prev is None:  # the component's first payment
            prev = np.zeros(self.n_users)
        self._by_component[component] = _compiled().add_up_1d(prev, c)


def _same(kept: tuple, state: tuple) -> bool:
    """Whether the state arrays are the very ones ``kept`` was computed from."""
    return kept[0] is state[0] and kept[1] is state[1] and kept[2] is state[2]


def _read_only(arr: np.ndarray) -> np.ndarray:
    """``arr``, made read-only (a filter's state changes only by replacing its arrays)."""
    arr.setflags(write=False)
    return arr


__all__ = [
    "Charge",
    "PopulationFilter",
    "PrivacyFilter",
    "add_up",
    "capacity_of",
    "charge_of",
    "check_chargeable",
    "cost_in",
    "currency_of",
    "fits",
    "query_costs_in",
    "sub_down",
]
