"""The optimal LP over ALL secrets with its outputs restricted to the prior's k-medoids.

City scale (|X| = 2,000-6,000): the full optimal LP (N x N variables) is out of reach, but
its quality is not. This mechanism (docs/lp.md, "Near-optimal at city scale"):

1. **Outputs.** ``n_outputs`` outputs of Y chosen as prior-weighted k-medoids of the loss
   (``prior_medoids``: greedy start at the worst-served secret, then Lloyd steps
   ``y_c = argmin_y sum_{i in c} pi_i d(x_i, y)``). Public: they depend on the prior and
   the metric only.
2. **LP.** The optimal LP over every secret and those outputs, with the domain's chaining
   constraint pairs (exact by chaining), solved by ``solver.solve_optimal`` (constraint
   generation on the dual, docs/lp.md) at ``eps (1 - margin)``, repaired and verified
   exactly at ``eps`` by ``repair.release_verified`` (``solver.release_optimal``). The other
   outputs get probability 0 (a zero column meets every constraint). So the released matrix
   is pure eps-mDP over all of X, and its loss uses the domain's true cost.
   With ``laplace_outputs`` every other output may also carry a fixed-shape column, its
   Laplace ray (docs/lp.md, "Laplace outputs").
3. **Certified lower bound** on the optimal LP's loss over ALL outputs
   (``lower_bound_``; skipped with ``bound=None``): weak duality for the mDP
   constraints. For ANY flows ``f >= 0`` on the constraints of each output (or output
   group), ``sum_i min_g (pi_i min_{y in g} d(x_i, y) + a_g[i])`` (``certified_bound``) is
   at most the optimum (argument in docs/lp.md); it is evaluated in floating point with an
   explicit rounding allowance. By default (``bound="prices"``) the flows are per output,
   from ``lp_certificate.price_certificate``: each output's flows cover what prices derived
   from this mechanism's own LP duals ask each secret to pay. ``bound="relaxation"`` takes
   them from small relaxations instead: ``cluster_lower_bound`` (``bound_options`` ``groups`` of
   outputs, entries within ``reach / eps`` of each secret's nearest group plus one
   "rest" variable per secret, each medoid's shortest-path tree plus ``rounds``
   rounds of the violated constraints) and, from 200 secrets on, ``split_lower_bound`` (the
   secrets in farthest-point-spread parts of about 100, the parts' bounds summed).
   ``info_["gap"]`` is the released loss over that bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import sparse

from mdpsim._core.validation import check_margin, check_positive_int, check_scalar
from mdpsim.errors import InputError
from mdpsim.geo.domain import farthest_points
from mdpsim.mechanisms.base import Mechanism, register
from mdpsim.mechanisms.lp.certificate import LowerBound, price_certificate, ray_prices
from mdpsim.mechanisms.lp.highs import HighsLP, HighsOptions, HighsSettings
from mdpsim.mechanisms.lp.outputs import tight_constraints
from mdpsim.mechanisms.lp.repair import FIRST_MARGIN, MAX_MARGIN
from mdpsim.mechanisms.lp.solver import (
    FEASIBILITY_TOL,
    directed_constraints,
    mdp_rows,
    release_optimal,
)

_LLOYD_STEPS = 30
SUBSET_SIZE = 100  # secrets per part of the split bound (docs/lp.md, "The split bound")
BOUNDS = ("prices", "relaxation")
PRICE_SCALE = 1.0  # the ray prices' cap: this times the LP's duals (docs/lp.md)
PRICE_ROUNDS = 2
BOUND_ROUNDS = 2  # the relaxation bound's rounds of constraint generation
BOUND_REACH = 6.0
_MAX_KEPT_SHARE = 2 / 3  # the reach pays only when it drops a third of the entries (docs/lp.md)


def outputs_for(epsilon: float) -> int:
    """Default number of outputs: ``max(4, round(2.4 eps))`` (eps per km; docs/lp.md).

    More outputs lower the quantisation loss but the LP time grows with them and falls with
    eps; this keeps |X| = 2,000 on Helsinki within the 120 s target at eps 4-10 with the
    certified bound, and its gap within 1.5 (10 / 17 / 24 outputs at eps 4 / 7 / 10).
    """
    return max(4, round(2.4 * epsilon))


def prior_medoids(prior: np.ndarray, dist_xy: np.ndarray, k: int) -> np.ndarray:
    """``k`` output indices minimising (locally) ``sum_i pi_i min_c d(x_i, y_c)``, sorted.

    Start at the 1-median, add the output nearest to the worst-served secret (largest
    ``pi_i min_c d``) until there are ``k``, then Lloyd steps until the medoids repeat.
    """
    n_y = dist_xy.shape[1]
    if k > n_y:
        raise InputError(f"n_outputs={k} exceeds the {n_y} outputs of the domain; use at most that")
    medoids = [int(np.argmin(prior @ dist_xy))]
    served = dist_xy[:, medoids[0]].copy()
    while len(medoids) < k:
        taken = np.zeros(n_y, dtype=bool)
        taken[medoids] = True
        worst = int(np.argmax(prior * served))
        nxt = int(np.argmin(np.where(taken, np.inf, dist_xy[worst])))
        medoids.append(nxt)
        np.minimum(served, dist_xy[:, nxt], out=served)
    out = np.array(medoids, dtype=np.int64)
    for _ in range(_LLOYD_STEPS):
        cluster = np.argmin(dist_xy[:, out], axis=1)
        new = out.copy()
        for c in range(k):
            members = cluster == c
            if members.any():
                new[c] = int(np.argmin(prior[members] @ dist_xy[members]))
        if len(np.unique(new)) < k or np.array_equal(np.sort(new), np.sort(out)):
            break
        out = new
    return np.sort(out)


def certified_bound(group_cost: np.ndarray, src, dst, gain, con, col, flow) -> float:
    """``sum_i min_g (group_cost[i,g] + a_g[i])`` minus a floating-point allowance (km).

    ``a_g[i] = sum_{src=i} f - sum_{dst=i} gain f`` over the flows ``f >= 0`` of the
    constraints ``(con, col)`` (``Z[src,g] <= gain Z[dst,g]`` for group ``col``). It is at
    most the optimal LP's loss for ANY non-negative flows (weak duality, docs/lp.md), so no
    optimality or tolerance of the solver enters. The allowance covers the rounding of the
    sums: ``(terms + N + 2) 2^-53`` times the sum of the absolute values involved.
    """
    n, k = group_cost.shape
    f = np.maximum(np.asarray(flow, dtype=np.float64), 0.0)
    a = np.zeros((n, k))
    np.add.at(a, (src[con], col), f)
    np.add.at(a, (dst[con], col), -gain[con] * f)
    size = np.abs(group_cost)
    np.add.at(size, (src[con], col), f)
    np.add.at(size, (dst[con], col), gain[con] * f)
    terms = np.bincount(src[con] * k + col, minlength=n * k) + np.bincount(
        dst[con] * k + col, minlength=n * k
    )
    allowance = (int(terms.max(initial=0)) + n + 2) * 2.0**-53 * float(size.max(axis=1).sum())
    return float((group_cost + a).min(axis=1).sum()) - allowance


def cluster_lower_bound(
    domain,
    medoids: np.ndarray,
    epsilon: float,
    *,
    rounds: int,
    reach: float,
    options: HighsOptions,
) -> LowerBound:
    """A certified lower bound on the optimal LP's loss from a relaxation of it (docs/lp.md).

    Outputs are grouped by the medoid nearest to them (via their nearest secret); group g
    costs secret i ``pi_i min_{y in g} d(x_i, y)``. The LP keeps only the entries ``(i, g)``
    with ``d(x_i, g)`` at most ``reach / eps`` above secret i's nearest group if that drops
    at least 1/3 of them; a secret with left-out entries gets one "rest" variable at the
    cost of the cheapest, with no mDP constraint (the bound charges left-out entries at
    full cost, so the LP then maximises the bound itself). Of the mDP constraints between
    kept entries, those tight on each medoid's Laplace ray (its shortest-path tree) plus
    ``rounds`` rounds of those the LP's optimum breaks. Solved by HiGHS: IPM with
    crossover first, then the dual simplex from the last basis after each round of added
    rows. Whatever was left out, the bound is :func:`certified_bound` of the last solve's
    row duals, valid for ANY flows. A status other than optimal raises ``SolverError``.
    """
    start = time.perf_counter()
    dist, medoids = _group_distances(domain, medoids)
    group_cost = domain.prior[:, None] * dist
    n, k = group_cost.shape
    kept = dist <= dist.min(axis=1, keepdims=True) + reach / epsilon
    if kept.mean() > _MAX_KEPT_SHARE:
        kept[:] = True
    var = np.full((n, k), -1, dtype=np.int64)
    var[kept] = np.arange(int(kept.sum()))
    pairs = domain.constraint_pairs
    src, dst, gain = directed_constraints(pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], epsilon)
    allowed = kept[src] & kept[dst]  # constraints between kept entries only
    trees = [
        tight_constraints(np.exp(-epsilon * domain.dist_xy[:, y]), src, dst, gain) for y in medoids
    ]
    con = np.concatenate(trees)
    col = np.repeat(np.arange(k), [len(t) for t in trees])
    con, col = con[allowed[con, col]], col[allowed[con, col]]
    cost, rows = _columns(group_cost, kept)
    row_sums = sparse.csr_array(
        (np.ones(len(rows)), (rows, np.arange(len(rows)))), shape=(n, len(rows))
    )
    lp = HighsLP(
        cost,
        sparse.vstack(
            [row_sums, mdp_rows(var[src[con], col], var[dst[con], col], gain[con], len(rows))]
        ),
        np.concatenate([np.ones(n), np.full(len(con), -np.inf)]),
        np.concatenate([np.ones(n), np.zeros(len(con))]),
        options=options,
        name="lp_medoids lower bound",
    )
    in_model = np.zeros((len(src), k), dtype=bool)
    in_model[con, col] = True
    done = 0
    while True:
        sol = lp.solve()
        if done == rounds:
            break
        Z = np.zeros((n, k))
        Z[kept] = np.maximum(sol.x[var[kept]], 0.0)
        broken = Z[src] - gain[:, None] * Z[dst] > FEASIBILITY_TOL
        new_con, new_col = np.nonzero(broken & allowed & ~in_model)
        if not len(new_con):
            break
        in_model[new_con, new_col] = True
        lp.add_rows(
            -np.inf,
            0.0,
            mdp_rows(
                var[src[new_con], new_col], var[dst[new_con], new_col], gain[new_con], len(rows)
            ),
        )
        con, col = np.concatenate([con, new_con]), np.concatenate([col, new_col])
        lp.set_option("solver", "simplex")  # added rows: the last basis stays dual feasible
        done += 1
    flow = -sol.row_dual[n:]  # HiGHS: the dual of an active upper bound is <= 0 (minimising)
    return LowerBound(
        value=certified_bound(group_cost, src, dst, gain, con, col, flow),
        relaxation=sol.objective,
        rounds=done,
        constraints=len(con),
        variables=int(kept.sum()),
        seconds=time.perf_counter() - start,
    )


def split_lower_bound(
    domain,
    epsilon: float,
    *,
    subsets: int,
    rounds: int,
    reach: float,
    options: HighsOptions,
) -> LowerBound:
    """A certified lower bound from a partition of the secrets (docs/lp.md, "The split bound").

    For ANY partition ``X = X_1 + ... + X_m``, ``OPT(X) >= sum_j OPT(X_j)`` where ``OPT(X_j)``
    is the optimal loss on the secrets of ``X_j`` alone with the prior restricted to them
    (not renormalised), all outputs kept: the optimal mechanism of X restricted to the rows
    of ``X_j`` is feasible there (its constraints are a subset of X's) and pays
    ``sum_{i in X_j} pi_i L_i``. Each part is a farthest-point-spread sample (rank ``r`` of
    the farthest-point order of X goes to part ``r mod m``), so it keeps X's extent with
    fewer, sparser secrets; its ``OPT`` is bounded by :func:`cluster_lower_bound` on
    ``domain.restrict(part)`` with one group per secret of the part (around its nearest
    output). The parts' certified bounds, each times its prior mass, are summed; the sum
    subtracts an allowance for the renormalised priors and the sums' rounding,
    ``(N + m + 8) 2^-53`` times the total.
    """
    start = time.perf_counter()
    order = farthest_points(domain.dist_xx, int(np.argmax(domain.prior)), domain.n_x)
    value = relaxation = size = 0.0
    rounds_done = constraints = variables = 0
    for part in range(subsets):
        rows = np.sort(order[part::subsets])
        sub = domain.restrict(rows)
        mass = float(domain.prior[rows].sum())
        if mass <= 0:
            continue  # no prior mass: contributes 0 (every OPT(X_j) is >= 0)
        medoids = np.unique(np.argmin(sub.dist_xy, axis=1))
        bound = cluster_lower_bound(
            sub, medoids, epsilon, rounds=rounds, reach=reach, options=options
        )
        value += mass * bound.value
        size += mass * abs(bound.value)
        relaxation += mass * bound.relaxation
        rounds_done = max(rounds_done, bound.rounds)
        constraints += bound.constraints
        variables += bound.variables
    allowance = (domain.n_x + subsets + 8) * 2.0**-53 * size
    return LowerBound(
        value=value - allowance,
        relaxation=relaxation,
        rounds=rounds_done,
        constraints=constraints,
        variables=variables,
        seconds=time.perf_counter() - start,
    )


def _optional(value, check):
    """``None``, or ``value`` checked."""
    return None if value is None else check(value)


def _default(value, default):
    return default if value is None else value


def _columns(group_cost: np.ndarray, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cost and secret (row-sum row) of each LP column: the kept entries in row-major order,
    then one rest column per secret with left-out entries, at the cheapest one's cost."""
    left_out = np.where(kept, np.inf, group_cost).min(axis=1)
    with_rest = np.flatnonzero(np.isfinite(left_out))
    cost = np.concatenate([group_cost[kept], left_out[with_rest]])
    return cost, np.concatenate([np.nonzero(kept)[0], with_rest])


def _group_distances(domain, medoids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``min_{y in g} d(x_i, y)`` (km, N x groups) and the medoids of the non-empty groups.

    Each output joins the group of the medoid nearest to its nearest secret; a medoid's own
    group holds it unless a tie says otherwise (empty groups are dropped).
    """
    dist_xy = domain.dist_xy
    nearest_secret = np.argmin(dist_xy, axis=0)
    group = np.argmin(dist_xy[nearest_secret][:, medoids], axis=1)
    present = np.unique(group)
    dist = np.empty((domain.n_x, len(present)))
    for g, label in enumerate(present):
        dist[:, g] = dist_xy[:, group == label].min(axis=1)
    return dist, medoids[present]


_PRICES_KEYS = ("scale", "rounds")
_RELAXATION_KEYS = ("subsets", "groups", "rounds", "reach")


@dataclass(frozen=True)
class _BoundOptions:
    """A bound's options (``bound_options``), checked; ``None``: the default."""

    scale: float | None = None
    rounds: int | None = None
    subsets: int | None = None
    groups: int | None = None
    reach: float | None = None

    @staticmethod
    def parse(bound: str | None, given: dict[str, Any] | None) -> _BoundOptions:
        """Check ``given`` against ``bound``'s keys and each value; refuse with one line."""
        given = {} if given is None else given
        if not isinstance(given, dict):
            raise InputError(f"bound_options={given!r} must be a dict (a table) or None")
        keys = {"prices": _PRICES_KEYS, "relaxation": _RELAXATION_KEYS}.get(bound or "", ())
        for key in given:
            if key not in keys:
                allowed = ", ".join(keys) if keys else "none"
                raise InputError(
                    f"bound_options has {key!r}, not an option of bound={bound!r} "
                    f"(its options: {allowed})"
                )

        def number(key: str, **kw) -> float | None:
            value = given.get(key)
            return None if value is None else check_scalar(value, f"bound_options {key}", **kw)

        def count(key: str, minimum: int = 1) -> int | None:
            value = given.get(key)
            name = f"bound_options {key}"
            return None if value is None else check_positive_int(value, name, minimum=minimum)

        return _BoundOptions(
            scale=number("scale", min=0, include_boundaries="neither", finite=True),
            rounds=count("rounds", minimum=0 if bound == "relaxation" else 1),
            subsets=count("subsets"),
            groups=count("groups"),
            reach=number("reach", min=0, include_boundaries="neither", finite=False),
        )


@register("lp_medoids")
class MedoidOutputLP(HighsSettings, Mechanism):
    """The optimal LP over all secrets, outputs restricted to the prior's k-medoids.

    Pure eps-mDP over all of X (exact verifier), with a certified lower bound on the full
    optimal LP's loss (``lower_bound_``, ``info_["gap"]``). Module docstring, docs/lp.md.

    Parameters
    ----------
    epsilon
        Budget per km.
    n_outputs
        Outputs the LP may use (k-medoids of the prior), at most the domain's. ``None``
        (default): ``outputs_for(epsilon)``, i.e. ``max(4, round(2.4 eps km))`` (docs/lp.md).
    margin
        The LP is solved at ``epsilon (1 - margin)`` (default ``FIRST_MARGIN``, 1e-6); tenfold
        on a failed exact check.
    priced_outputs
        Outputs added to the medoids by pricing ALL outputs against the restricted LP's
        row-sum duals (Laplace rays, ``solver.solve_optimal`` with ``max_outputs``; outputs
        without mass may leave again). 0 (default): the medoids only.
    bound
        Which certified lower bound (docs/lp.md, "How far from optimal"): ``"prices"``
        (default; ``lp_certificate.price_certificate``: per-output flows that cover what
        prices ask each secret to pay; the first prices are ``lp_certificate.ray_prices``
        below the mechanism's own LP duals) or ``"relaxation"`` (the split and / or grouped
        relaxations below, the larger kept), or ``None``: no bound (``lower_bound`` is
        ``None``, no ``gap``; ``"none"`` in a scenario file, TOML having no null): for callers
        that need only the matrix, e.g. DistA-LP's planner. A parameter of another bound is
        an ``InputError``; so is ``with_bound``, which this replaced.
    laplace_outputs
        Also give every output that is not a medoid one column of fixed shape, its Laplace ray
        ``w_y exp(-eps d(x, y))`` with ``w_y >= 0`` chosen by the LP (``solver``'s
        ``ray_dist_km``; docs/lp.md, "Laplace outputs"). Lower loss, a slower LP. Default off.
    bound_options
        The chosen bound's options, a dict (a table in a scenario file); ``None`` or a key
        left out: its default. ``"prices"``: ``scale``, the cap on the first prices (this
        times the LP's row-sum duals; default 1), and ``rounds`` (default 2; each re-aims at
        the mean of the last prices and what was certified). ``"relaxation"``: ``subsets``,
        the parts of the split bound (``split_lower_bound``: the secrets in that many
        farthest-point-spread parts, each part's optimum bounded on its own; default
        ``N // SUBSET_SIZE`` parts, 100 secrets each, and from 2 parts on BOTH relaxations
        are computed and the larger is the bound; 1: no split, the grouped relaxation over
        all of X; 2 or more: the split bound alone); ``groups``, the output groups of the
        unsplit relaxation (k-medoids of their own; more: a tighter bound and a larger LP;
        default 3 per output of the mechanism; not used by the split bound); ``rounds`` of
        constraint generation (default 2; 0: trees only); ``reach``: the relaxation keeps the
        entries ``(i, g)`` within ``reach / eps`` km of secret i's nearest group (default 6:
        entries ``e^-6`` down from the nearest; the others share one "rest" variable per
        secret), when that drops at least 1/3 of them (else all are kept); larger: a tighter
        bound and a larger LP. A key of the other bound, or any key with ``bound=None``, is
        an ``InputError``.
    time_limit_s, threads
        Wall-clock limit of the LP solve (s; hitting it raises ``SolverError``), HiGHS threads.
    """

    conformance_params: ClassVar[dict] = {"n_outputs": 6}
    retired_params: ClassVar[dict[str, str]] = {
        **HighsSettings.retired_params,
        "with_bound": 'bound=None for no bound (bound = "none" in a scenario file)',
        **{
            f"{prefix}_{key}": f"bound_options={{{key!r}: ...}} (bound_options = {{{key} = ...}}"
            " in a scenario file)"
            for prefix, keys in (("price", ("scale", "rounds")), ("bound", _RELAXATION_KEYS))
            for key in keys
        },
    }
    lower_bound_: float | None

    def __init__(
        self,
        epsilon: float,
        *,
        n_outputs: int | None = None,
        margin: float = FIRST_MARGIN,
        priced_outputs: int = 0,
        laplace_outputs: bool = False,
        bound: str | None = "prices",
        bound_options: dict[str, Any] | None = None,
        time_limit_s: float | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(epsilon)
        self.n_outputs = None if n_outputs is None else check_positive_int(n_outputs, "n_outputs")
        self.margin = check_margin(margin, MAX_MARGIN)
        self.priced_outputs = check_positive_int(priced_outputs, "priced_outputs", minimum=0)
        self.laplace_outputs = check_scalar(laplace_outputs, "laplace_outputs", kind=bool)
        if self.laplace_outputs and self.priced_outputs:
            raise InputError(
                "laplace_outputs and priced_outputs exclude each other; set one of them"
            )
        bound = None if bound == "none" else bound
        if bound is not None and bound not in BOUNDS:
            raise InputError(f"bound={bound!r} must be one of {', '.join(BOUNDS)} or None")
        self.bound = bound
        # stored as given (None: the defaults), so get_params round-trips through make
        self._bound_opts = _BoundOptions.parse(bound, bound_options)
        self.bound_options = None if bound_options is None else dict(bound_options)
        self._set_highs(time_limit_s, threads)

    @property
    def lower_bound(self) -> float | None:
        """Certified lower bound (km) on the optimal eps-mDP LP's loss over all outputs
        (``None`` when fitted with ``bound=None``)."""
        return self.lower_bound_

    def _subsets(self, domain) -> int:
        """Parts of the split bound for this domain (1: not split)."""
        subsets = self._bound_opts.subsets
        if subsets is None:
            return max(1, domain.n_x // SUBSET_SIZE)
        if subsets > domain.n_x:
            raise InputError(
                f"bound_options subsets={subsets} exceeds the {domain.n_x} secrets; "
                "use at most that"
            )
        return subsets

    def _bounds(self, domain, n_outputs: int, duals: np.ndarray) -> dict[str, LowerBound]:
        """The certified bounds asked for: ``"prices"``, or ``"split"`` and / or
        ``"grouped"``; ``duals`` are the mechanism's LP row-sum duals."""
        if self.bound == "prices":
            options = HighsOptions(threads=self.threads)
            cap = _default(self._bound_opts.scale, PRICE_SCALE) * duals
            certificate = price_certificate(
                domain.prior,
                domain.dist_xy,
                domain.dist_xx,
                domain.constraint_pairs,
                self.epsilon,
                ray_prices(domain.prior, domain.dist_xy, self.epsilon, cap, options=options),
                rounds=_default(self._bound_opts.rounds, PRICE_ROUNDS),
                options=options,
            )
            return {"prices": certificate}
        options = HighsOptions(
            threads=self.threads,
            solver="ipm",
            primal_feasibility_tolerance=FEASIBILITY_TOL,
            dual_feasibility_tolerance=FEASIBILITY_TOL,
        )
        subsets = self._subsets(domain)
        out = {}
        if subsets > 1:
            out["split"] = split_lower_bound(
                domain,
                self.epsilon,
                subsets=subsets,
                rounds=_default(self._bound_opts.rounds, BOUND_ROUNDS),
                reach=_default(self._bound_opts.reach, BOUND_REACH),
                options=options,
            )
        opts = self._bound_opts
        if subsets == 1 or opts.subsets is None:
            groups = 3 * n_outputs if opts.groups is None else opts.groups
            out["grouped"] = cluster_lower_bound(
                domain,
                prior_medoids(domain.prior, domain.dist_xy, min(groups, domain.n_y)),
                self.epsilon,
                rounds=_default(self._bound_opts.rounds, BOUND_ROUNDS),
                reach=_default(self._bound_opts.reach, BOUND_REACH),
                options=options,
            )
        return out

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        k = outputs_for(self.epsilon) if self.n_outputs is None else self.n_outputs
        medoids = prior_medoids(domain.prior, domain.dist_xy, min(k, domain.n_y))
        # priced: all outputs as candidates, medoids first, then priced; else the medoids only
        priced = bool(self.priced_outputs) or self.laplace_outputs
        released, sol = release_optimal(
            domain.prior[:, None] * (domain.dist_xy if priced else domain.dist_xy[:, medoids]),
            domain.dist_xx,
            domain.constraint_pairs,
            self.epsilon,
            margin=self.margin,
            options=self._options(),
            start_outputs=medoids if priced else None,
            max_outputs=len(medoids) + self.priced_outputs if priced else None,
            ray_dist_km=domain.dist_xy if self.laplace_outputs else None,
        )
        Z = released.matrix
        if not priced:
            Z = np.zeros((domain.n_x, domain.n_y))
            Z[:, medoids] = released.matrix
        loss = float(domain.prior @ np.einsum("ik,ik->i", Z, domain.dist_xy))
        info = {
            "medoids": medoids,
            "solver_status": sol.status,
            "lp_objective_km": sol.objective,
            "lp_epsilon": self.epsilon * (1 - released.margin),
            "margin_used": released.margin,
            "rounds": sol.rounds,
            "solve_seconds": sol.seconds,
            "generated_constraints": sol.generated,
            "lp_rows": sol.full + domain.n_x,
            "outputs_used": int(np.count_nonzero(released.matrix.sum(axis=0) > 0)),
        }
        self.lower_bound_ = None
        if self.bound is not None:
            bounds = self._bounds(domain, len(medoids), sol.row_duals)
            kind = max(bounds, key=lambda name: bounds[name].value)
            bound = bounds[kind]
            self.lower_bound_ = bound.value
            info.update(
                lower_bound_km=bound.value,
                lower_bound_kind=kind,
                lower_bound_relaxation_km=bound.relaxation,
                lower_bound_rounds=bound.rounds,
                lower_bound_constraints=bound.constraints,
                lower_bound_variables=bound.variables,
                lower_bound_seconds=sum(b.seconds for b in bounds.values()),
                lower_bound_subsets=self._subsets(domain) if self.bound == "relaxation" else 1,
                gap=loss / bound.value if bound.value > 0 else float("inf"),
            )
            info.update({f"lower_bound_{name}_km": b.value for name, b in bounds.items()})
        return Z, info
