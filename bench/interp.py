"""Interpolation-based mDP (``interp``) on a fine grid over central Helsinki.

Secrets: 50 m grid over the Helsinki walk network's bounding box; outputs: 100 m grid. Two
priors on the secrets: uniform, and "road" (each cell weighted by the length of walkable way
inside it, :func:`road_length_prior`). Utility tables (per metric and prior): loss at eps in
{4, 7, 10}/km against EM and planar Laplace (the registered ``em`` and ``laplace``
mechanisms on the same domain and outputs; both ignore the prior by design) and the optimal
LP on an anchor grid alone (200 m by default; mapped to each secret's nearest anchor; its
exact smallest epsilon on the fine secrets shows the off-grid leak). Scaling table (l2,
eps 10, uniform): anchor spacing -> anchors, fit time, loss, worst off-anchor loss (dense
check of random continuous pairs, 1 mm to 1 km apart and beyond) for the warped, plain-step
and naive variants. Usage:
``MDPSIM_CACHE=/tmp/mdpcache python bench/interp.py [--pairs 100000] [--spacings 400 300 200 150]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import shapely
from scipy.spatial import cKDTree

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms import make
from mdpsim.mechanisms.interp.dense_check import dense_check
from mdpsim.mechanisms.interp.grid import AnchorGrid
from mdpsim.privacy import verify

EPSILONS = (4.0, 7.0, 10.0)
ROAD_STEP_M = 1.0  # sampling step along the ways for the road prior


def build_domain(secret_m: float, output_m: float, metric: str) -> Domain:
    """Fine secrets and coarser outputs over the Helsinki walk network's box."""
    G = load_network("helsinki", network_type="walk")
    secrets = Domain.grid(G, cell_m=secret_m, metric=metric).x_xy
    outputs = Domain.grid(G, cell_m=output_m, metric=metric).x_xy
    return Domain.from_points(secrets, outputs, metric=metric)


def road_length_prior(domain: Domain) -> np.ndarray:
    """Prior of each secret's grid cell: metres of walkable way inside it (no floor).

    Every undirected way of the walk network is sampled every <= 1 m (each point carries its
    share of the way's length) and the lengths are summed per nearest secret (the cell whose
    centre it is). A walker at constant speed spends time in a cell in proportion to this
    length; cells without a way (buildings, water) get 0: nobody to protect there, although
    the mechanism still is eps-mDP for them (checked exactly on all secrets).
    """
    G = load_network("helsinki", network_type="walk")
    lines, lengths, seen = [], [], set()
    for u, v, data in G.edges(data=True):
        key = (min(u, v), max(u, v), round(float(data["length"]), 1))
        if key not in seen:  # both directions of a two-way way are one way on the ground
            seen.add(key)
            lines.append(data["geometry"])
            lengths.append(float(shapely.length(data["geometry"])))
    lengths = np.asarray(lengths)
    counts = np.maximum(1, np.ceil(lengths / ROAD_STEP_M)).astype(np.int64)
    owner = np.repeat(np.arange(len(lines)), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    fraction = (np.arange(counts.sum()) - first + 0.5) / counts[owner]
    points = shapely.line_interpolate_point(
        np.asarray(lines, dtype=object)[owner], fraction, normalized=True
    )
    nearest = cKDTree(domain.x_xy).query(shapely.get_coordinates(points))[1]
    mass = np.bincount(nearest, weights=(lengths / counts)[owner], minlength=domain.n_x)
    return mass / mass.sum()


def anchor_lp_loss(domain: Domain, anchors_xy: np.ndarray, eps: float) -> tuple[float, float]:
    """Optimal LP on the anchors alone, each secret using its nearest anchor's row.

    An anchor's prior is the total prior of the secrets it serves.
    """
    nearest = cKDTree(anchors_xy).query(domain.x_xy)[1]
    prior = np.bincount(nearest, weights=domain.prior, minlength=len(anchors_xy))
    anchor_domain = Domain.from_points(anchors_xy, domain.y_xy, metric=domain.metric, prior=prior)
    lp = make("lp", epsilon=eps).fit(anchor_domain)
    Z = lp.matrix_[nearest]
    loss = float(domain.prior @ np.einsum("ik,ik->i", Z, domain.dist_xy))
    return loss, verify(Z, domain.dist_xx, eps).smallest_epsilon


def scaling_table(domain: Domain, spacings, eps: float, n_pairs: int) -> None:
    _emit(
        f"Anchor spacing versus cost at eps = {eps:g}/km, metric {domain.metric}, uniform "
        f"prior ({domain.n_x} secrets, "
        f"{domain.n_y} outputs, {n_pairs:,} random pairs per dense check):",
        "",
        "| variant | spacing (m) | anchors | LP variables | fit (s) | loss (km) "
        "| worst off-anchor loss / eps | pairs over eps | smallest eps on secrets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    )
    variants = {
        "warped": {},
        "plain steps": {"warp": False},
        "naive": {"naive": True},
    }
    for spacing in spacings:
        for variant, params in variants.items():
            start = time.perf_counter()
            mech = make("interp", epsilon=eps, spacing_m=spacing, **params).fit(domain)
            fit_s = time.perf_counter() - start
            check = dense_check(mech, n_pairs, seed=1)
            smallest = verify(mech.matrix_, domain.dist_xx, eps).smallest_epsilon
            n_a = mech.info_["n_anchors"]
            _emit(
                f"| {variant} | {spacing:g} | {n_a} "
                f"| {n_a * domain.n_y:,} | {fit_s:.1f} | {mech.expected_loss():.4f} "
                f"| {check.max_ratio:.4f} | {check.violation_ratio:.2%} | {smallest:.3f} |"
            )


def utility_table(
    domain: Domain,
    prior_name: str,
    spacing: float,
    n_pairs: int,
    *,
    optimize_split: bool,
    anchor_lp_spacing: float,
) -> None:
    """Loss per eps against EM and planar Laplace; "target met" = interp below both with no
    pair of the dense check over eps."""
    split = optimize_split and domain.metric != "l1"  # l1: both axes get the full eps
    head = f"| eps (1/km) | EM | planar Laplace | LP on {anchor_lp_spacing:g} m anchors only "
    head += "(smallest eps on secrets) "
    head += "| interp equal split "
    head += "| interp optimised split (eps_1, eps_2) " if split else ""
    head += "| worst off-anchor loss / eps | pairs over eps | target met |"
    _emit(
        f"Utility loss (km, {prior_name} prior, metric {domain.metric}) at equal eps; "
        f"interp anchors every <= {spacing:g} m, {n_pairs:,} random pairs per dense check:",
        "",
        head,
        "|---:" * (head.count("|") - 1) + "|",
    )
    for eps in EPSILONS:
        em = make("em", epsilon=eps).fit(domain).expected_loss()
        laplace = make("laplace", epsilon=eps).fit(domain).expected_loss()
        fitted = [make("interp", epsilon=eps, spacing_m=spacing).fit(domain)]
        if split:
            fitted.append(
                make("interp", epsilon=eps, spacing_m=spacing, budget_split="optimize").fit(domain)
            )
        lp_anchors = AnchorGrid.covering(domain.x_xy, spacing_m=anchor_lp_spacing).xy
        lp_loss, lp_eps = anchor_lp_loss(domain, lp_anchors, eps)
        checks = [dense_check(m, n_pairs, seed=2) for m in fitted]
        worst = max(c.max_ratio for c in checks)
        over = sum(round(c.violation_ratio * c.n_pairs) for c in checks)
        best = min(m.expected_loss() for m in fitted)
        met = best < min(em, laplace) and over == 0
        row = f"| {eps:g} | {em:.4f} | {laplace:.4f} | {lp_loss:.4f} ({lp_eps:.3g}) "
        row += f"| {fitted[0].expected_loss():.4f} "
        if split:
            info = fitted[1].info_
            row += f"| {fitted[1].expected_loss():.4f} ({info['eps_1']:.2f}, {info['eps_2']:.2f}) "
        row += f"| {worst:.4f} | {over} | {'yes' if met else 'no'} |"
        _emit(row)


def _emit(*lines: str) -> None:
    print("\n".join(lines), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--spacings", type=float, nargs="+", default=[400.0, 300.0, 200.0, 150.0])
    parser.add_argument("--utility-spacing", type=float, default=100.0)
    parser.add_argument("--metrics", nargs="*", default=["l2", "l1"])
    parser.add_argument(
        "--priors", nargs="*", choices=["uniform", "road"], default=["uniform", "road"]
    )
    parser.add_argument(
        "--optimize-split",
        action="store_true",
        help="add budget_split='optimize' (about 8 LPs per fit) to the l2/linf tables",
    )
    parser.add_argument(
        "--anchor-lp-spacing",
        type=float,
        default=200.0,
        help="anchor spacing of the LP-on-anchors-only column (the LP over all anchor pairs "
        "is slow for l2 below ~200 m)",
    )
    parser.add_argument("--no-scaling", action="store_true", help="skip the spacing table")
    args = parser.parse_args()
    for metric in args.metrics:
        domain = build_domain(50.0, 100.0, metric)
        for prior_name in args.priors:
            dom = (
                domain if prior_name == "uniform" else domain.with_prior(road_length_prior(domain))
            )
            utility_table(
                dom,
                prior_name,
                args.utility_spacing,
                args.pairs,
                optimize_split=args.optimize_split,
                anchor_lp_spacing=args.anchor_lp_spacing,
            )
            _emit("")
    if not args.no_scaling:
        scaling_table(build_domain(50.0, 100.0, "l2"), args.spacings, 10.0, args.pairs)


if __name__ == "__main__":
    main()
