"""The optimal LP over ALL secrets with its outputs restricted to the prior's k-medoids.

City scale (|X| = 2,000-6,000): the full optimal LP (N x N variables) is out of reach, but
its quality is not. This mechanism (docs/lp.md, "Near-optimal at city scale"):

1. **Outputs.** ``n_outputs`` outputs of Y chosen as prior-weighted k-medoids of the loss
   (``prior_medoids``: greedy start at the worst-served secret, then Lloyd steps
   ``y_c = argmin_y sum_{i in c} pi_i d(x_i, y)``). Public: they depend on the prior and
   the metric only.
2. **LP.** The optimal LP over every secret and those outputs, with the domain's chaining
   constraint pairs (exact by chaining), solved by ``lp.solve_optimal`` (constraint
   generation on the dual, docs/lp.md) at ``eps (1 - margin)``, repaired and verified
   exactly at ``eps`` by ``repair.release_verified`` (``lp.release_optimal``). The other
   outputs get probability 0 (a zero column meets every constraint). So the released matrix
   is pure eps-mDP over all of X, and its loss uses the domain's true cost.
3. **Certified lower bound** on the optimal LP's loss over ALL outputs
   (``lower_bound_``): the optimum of a relaxation, ``cluster_lower_bound`` (argument in
   docs/lp.md): outputs grouped by their nearest medoid, each group's cost for secret i the
   SMALLEST cost of its members (``pi_i min_{y in group} d(x_i, y)``; ``bound_groups``
   groups around k-medoids of their own), and only a subset of
   the mDP constraints (each medoid's shortest-path tree plus ``bound_rounds`` rounds of
   the violated ones). ``info_["gap"]`` is the released loss over that bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import sparse

from sim.errors import InputError
from sim.mechanisms.base import Mechanism, check_positive_int, register
from sim.mechanisms.highs import HighsLP, HighsOptions
from sim.mechanisms.lp import FEASIBILITY_TOL, directed_constraints, release_optimal
from sim.mechanisms.lp_outputs import tight_constraints
from sim.mechanisms.repair import check_margin

_LLOYD_STEPS = 30


def outputs_for(epsilon: float) -> int:
    """Default number of outputs: ``max(4, round(2 eps))`` (eps per km; docs/lp.md).

    More outputs lower the quantisation loss but the LP time grows with them and falls with
    eps; this keeps |X| = 2,000 on Helsinki within the 120 s target at eps 4-10.
    """
    return max(4, round(2 * epsilon))


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


@dataclass(frozen=True)
class LowerBound:
    """A certified lower bound on the optimal LP's loss (km) and how it was obtained."""

    value: float
    rounds: int
    constraints: int
    seconds: float


def cluster_lower_bound(
    domain, medoids: np.ndarray, epsilon: float, *, rounds: int, options: HighsOptions
) -> LowerBound:
    """The optimum of a relaxation of the optimal LP (all outputs): a lower bound on its loss.

    Outputs are grouped by the medoid nearest to them (via their nearest secret); group g
    costs secret i ``pi_i min_{y in g} d(x_i, y)``; the mDP constraints kept are those tight
    on each medoid's Laplace ray (its shortest-path tree) plus ``rounds`` rounds of the
    chaining constraints the relaxed optimum breaks. Solved by HiGHS: IPM with crossover
    first, then the dual simplex from the last basis after each round of added rows (at
    N = 2,000, eps 4, 24 groups, 2 rounds: 22 s against 76 s with IPM every round, same
    bound). A status other than optimal raises ``SolverError``.
    """
    start = time.perf_counter()
    dist_xy, prior = domain.dist_xy, domain.prior
    nearest_secret = np.argmin(dist_xy, axis=0)
    group = np.argmin(dist_xy[nearest_secret][:, medoids], axis=1)
    present = np.unique(group)  # a medoid's own group holds it unless a tie says otherwise
    medoids = medoids[present]
    n, k = domain.n_x, len(present)
    group_cost = np.empty((n, k))
    for g, label in enumerate(present):
        group_cost[:, g] = dist_xy[:, group == label].min(axis=1)
    cost = (prior[:, None] * group_cost).ravel()
    pairs = domain.constraint_pairs
    src, dst, gain = directed_constraints(pairs, domain.dist_xx[pairs[:, 0], pairs[:, 1]], epsilon)
    trees = [tight_constraints(np.exp(-epsilon * dist_xy[:, y]), src, dst, gain) for y in medoids]
    con = np.concatenate(trees)
    col = np.repeat(np.arange(k), [len(t) for t in trees])
    row_sums = sparse.csr_array(
        (np.ones(n * k), (np.repeat(np.arange(n), k), np.arange(n * k))), shape=(n, n * k)
    )
    lp = HighsLP(
        cost,
        sparse.vstack([row_sums, _mdp_rows(src, dst, gain, con, col, n, k)]),
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
        value = sol.objective
        if done == rounds:
            break
        Z = np.maximum(sol.x.reshape(n, k), 0.0)
        new_con, new_col = np.nonzero(
            (Z[src] - gain[:, None] * Z[dst] > FEASIBILITY_TOL) & ~in_model
        )
        if not len(new_con):
            break
        in_model[new_con, new_col] = True
        lp.add_rows(-np.inf, 0.0, _mdp_rows(src, dst, gain, new_con, new_col, n, k))
        lp.set_option("solver", "simplex")  # added rows: the last basis stays dual feasible
        done += 1
    return LowerBound(
        value=float(value),
        rounds=done,
        constraints=int(in_model.sum()),
        seconds=time.perf_counter() - start,
    )


def _mdp_rows(src, dst, gain, con, col, n: int, k: int) -> sparse.csr_array:
    """Rows ``Z[src,g] - gain Z[dst,g] <= 0`` over the flattened ``Z`` (N x k, row-major)."""
    m = len(con)
    rows = np.repeat(np.arange(m), 2)
    cols = np.column_stack([src[con] * k + col, dst[con] * k + col]).ravel()
    vals = np.column_stack([np.ones(m), -gain[con]]).ravel()
    return sparse.csr_array((vals, (rows, cols)), shape=(m, n * k))


@register("lp_medoids")
class MedoidOutputLP(Mechanism):
    """The optimal LP over all secrets, outputs restricted to the prior's k-medoids.

    Pure eps-mDP over all of X (exact verifier), with a certified lower bound on the full
    optimal LP's loss (``lower_bound_``, ``info_["gap"]``). Module docstring, docs/lp.md.

    Parameters
    ----------
    epsilon
        Budget per km.
    n_outputs
        Outputs the LP may use (k-medoids of the prior), at most the domain's. ``None``
        (default): ``outputs_for(epsilon)``, i.e. ``max(4, round(2 eps km))`` (docs/lp.md).
    margin
        The LP is solved at ``epsilon (1 - margin)``; doubled on a failed exact check.
    bound_groups
        Output groups of the lower bound's relaxation (k-medoids of their own; more groups:
        a tighter bound and a larger LP). ``None``: 3 per output of the mechanism.
    bound_rounds
        Rounds of constraint generation in the lower bound's relaxation (0: trees only).
    time_limit, threads
        Wall-clock limit of the LP solve (s; hitting it raises ``SolverError``), HiGHS threads.
    """

    conformance_params: ClassVar[dict] = {"n_outputs": 6}

    def __init__(
        self,
        epsilon: float,
        *,
        n_outputs: int | None = None,
        margin: float = 1e-3,
        bound_groups: int | None = None,
        bound_rounds: int = 2,
        time_limit: float | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(epsilon)
        self.n_outputs = None if n_outputs is None else check_positive_int(n_outputs, "n_outputs")
        self.margin = check_margin(margin)
        self.bound_groups = (
            None if bound_groups is None else check_positive_int(bound_groups, "bound_groups")
        )
        self.bound_rounds = check_positive_int(bound_rounds, "bound_rounds", minimum=0)
        self.time_limit = time_limit
        self.threads = threads
        self._options()  # validates time_limit, threads

    def _options(self) -> HighsOptions:
        return HighsOptions(time_limit=self.time_limit, threads=self.threads)

    @property
    def lower_bound(self) -> float:
        """Certified lower bound (km) on the optimal eps-mDP LP's loss over all outputs."""
        return self.lower_bound_

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        k = outputs_for(self.epsilon) if self.n_outputs is None else self.n_outputs
        medoids = prior_medoids(domain.prior, domain.dist_xy, min(k, domain.n_y))
        weighted = domain.prior[:, None] * domain.dist_xy[:, medoids]
        released, sol = release_optimal(
            weighted,
            domain.dist_xx,
            domain.constraint_pairs,
            self.epsilon,
            margin=self.margin,
            options=self._options(),
        )
        Z = np.zeros((domain.n_x, domain.n_y))
        Z[:, medoids] = released.matrix
        groups = 3 * len(medoids) if self.bound_groups is None else self.bound_groups
        bound = cluster_lower_bound(
            domain,
            prior_medoids(domain.prior, domain.dist_xy, min(groups, domain.n_y)),
            self.epsilon,
            rounds=self.bound_rounds,
            options=HighsOptions(
                threads=self.threads,
                solver="ipm",
                primal_feasibility_tolerance=FEASIBILITY_TOL,
                dual_feasibility_tolerance=FEASIBILITY_TOL,
            ),
        )
        loss = float(domain.prior @ np.einsum("ik,ik->i", Z, domain.dist_xy))
        self.lower_bound_ = bound.value
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
            "lower_bound_km": bound.value,
            "lower_bound_rounds": bound.rounds,
            "lower_bound_constraints": bound.constraints,
            "lower_bound_seconds": bound.seconds,
            "gap": loss / bound.value if bound.value > 0 else float("inf"),
        }
        return Z, info
