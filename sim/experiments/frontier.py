"""The privacy-quality frontier: the optimal user strategy against every mechanism.

On one plane, x the expected quality loss (``quality_metric``) and y the Bayes-optimal
adversary's expected error (``adversary_metric``, computed exactly from matrix and prior):

* the **frontier**: for each Q of a grid, the optimum of the Stackelberg LP with no mDP
  constraint (:class:`~mdpsim.mechanisms.lp.stackelberg.UnconstrainedStackelberg`): no
  obfuscation at loss <= Q leaves the adversary more;
* every registered **mechanism** at each eps of a grid, placed by its released matrix.

The optimum ``opt(Q)`` is concave and non-decreasing in Q (the value of a maximisation LP in
a right-hand side), and the quality row's dual ``lam(Q)`` is a supergradient, so
``opt(L) <= min_Q [opt(Q) + lam(Q) (L - Q)]`` for every loss L (:func:`frontier_bound`): a
mechanism point is checked against the frontier at its own loss without solving there.
``mdpsim frontier SCENARIO`` writes ``frontier.csv``, ``frontier.md`` and ``frontier.png``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mdpsim.errors import InputError, PluginError, SolverError
from mdpsim.mechanisms import available, make
from mdpsim.mechanisms.base import mechanism_class
from mdpsim.mechanisms.lp.stackelberg import (
    UnconstrainedStackelberg,
    adversary_error_km,
    metric_km,
    prior_cap_km,
)

#: Left out by default: the frontier's own LP with mDP constraints needs a Q, not an eps grid.
FRONTIER_SKIPS = ("stackelberg",)  # the frontier's own LP with mDP constraints: no point
WROTE = "mdpsim frontier"  # in the marker of the folders it writes


def optimum_curve(
    domain,
    qualities: Sequence[float],
    *,
    quality_metric: str = "domain",
    adversary_metric: str = "domain",
    threads: int | None = None,
) -> pd.DataFrame:
    """One row per Q: ``quality_km``, ``adversary_error_km`` (the optimum), ``quality_dual``,
    ``released_loss_km`` (the optimum's own loss) and ``seconds``."""
    rows = []
    for q in qualities:
        mech = UnconstrainedStackelberg(
            quality_km=float(q),
            quality_metric=quality_metric,
            adversary_metric=adversary_metric,
            threads=threads,
        ).fit(domain)
        info = mech.info_
        rows.append(
            {
                "quality_km": float(q),
                "adversary_error_km": info["adversary_error_km"],
                "quality_dual": info["quality_dual"],
                "released_loss_km": info["quality_loss_km"],
                "seconds": info["fit_seconds"],
            }
        )
    return pd.DataFrame(rows)


def frontier_bound(curve: pd.DataFrame, loss_km) -> np.ndarray:
    """Upper bound on the optimum at each loss: ``min_Q opt(Q) + lam(Q) (L - Q)`` (exact at
    the grid's Q; module docstring)."""
    loss = np.atleast_1d(np.asarray(loss_km, dtype=float))
    q = curve["quality_km"].to_numpy()
    opt = curve["adversary_error_km"].to_numpy()
    lam = curve["quality_dual"].to_numpy()
    return (opt[None, :] + lam[None, :] * (loss[:, None] - q[None, :])).min(axis=1)


def mechanism_points(
    domain,
    names: Sequence[str],
    epsilons: Sequence[float],
    *,
    quality_metric: str = "domain",
    adversary_metric: str = "domain",
    params_by_name: dict | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (mechanism, eps): ``quality_loss_km`` and ``adversary_error_km`` of the
    released matrix, or ``failed`` (the one-line reason a fit raised; no silent skip)."""
    cost = metric_km(domain, quality_metric, outputs=True)
    D = metric_km(domain, adversary_metric, outputs=False)
    users = np.arange(domain.n_x)  # a mechanism that needs users: one at every secret
    rows = []
    for name in names:
        params = {
            **mechanism_class(name).conformance_params,
            **(params_by_name or {}).get(name, {}),
        }
        for eps in epsilons:
            row: dict = {"mechanism": name, "epsilon_per_km": float(eps), "failed": ""}
            try:
                mech = make(name, epsilon=float(eps), **params)
                mech.fit(domain, users=users, rng=np.random.default_rng(seed))
            except PluginError:
                raise  # a plug-in's mistake stops the command (one line, exit 2)
            except (InputError, SolverError) as exc:
                row.update(quality_loss_km=np.nan, adversary_error_km=np.nan)
                row["failed"] = str(exc).splitlines()[0]
            else:
                Z = mech.matrix_
                row["quality_loss_km"] = float(domain.prior @ np.einsum("ik,ik->i", Z, cost))
                row["adversary_error_km"] = adversary_error_km(Z, domain.prior, D)
            rows.append(row)
    return pd.DataFrame(rows)


def with_gaps(points: pd.DataFrame, curve: pd.DataFrame) -> pd.DataFrame:
    """``points`` with ``frontier_km`` (the bound at each loss) and ``gap_km`` (frontier minus
    the mechanism's adversary error: >= 0 up to tolerance, small where it comes close)."""
    out = points.copy()
    out["frontier_km"] = frontier_bound(curve, out["quality_loss_km"].fillna(0.0))
    out.loc[out["quality_loss_km"].isna(), "frontier_km"] = np.nan
    out["gap_km"] = out["frontier_km"] - out["adversary_error_km"]
    return out


def default_qualities(domain, *, quality_metric: str, n: int = 8) -> list[float]:
    """``n`` losses from 0 to the prior cap's loss (where the frontier flattens)."""
    cost = metric_km(domain, quality_metric, outputs=True)
    cap_loss = float((domain.prior @ cost).min())  # one output for everyone
    return list(np.linspace(0.0, cap_loss, n + 1)[1:])


def run(scenario, *, qualities=None, mechanisms=None, epsilons=None, quality_metric="domain",
        adversary_metric="domain", seed: int | None = None):  # fmt: skip
    """The frontier and the mechanism points of a scenario's domain (first seed)."""
    from mdpsim.simulation.world import build_domain, load_graph

    seed = scenario.scenario.seed if seed is None else seed
    domain = build_domain(scenario, load_graph(scenario), seed=seed)
    names = list(mechanisms or [n for n in available() if n not in FRONTIER_SKIPS])
    bad = [n for n in names if n not in available()]
    if bad:
        raise InputError(
            f"--mechanisms: {bad[0]!r} is not a mechanism; available: {', '.join(available())}"
        )
    eps = list(epsilons or scenario.sweep.get("mechanism.epsilon_per_km") or [2.0, 4.0, 8.0])
    qs = list(qualities or default_qualities(domain, quality_metric=quality_metric))
    curve = optimum_curve(
        domain, qs, quality_metric=quality_metric, adversary_metric=adversary_metric
    )
    points = mechanism_points(
        domain,
        names,
        eps,
        quality_metric=quality_metric,
        adversary_metric=adversary_metric,
        params_by_name=scenario.mechanism.params_by_name,
        seed=seed,
    )
    cap = prior_cap_km(domain.prior, metric_km(domain, adversary_metric, outputs=False))
    return domain, curve, with_gaps(points, curve), cap


def markdown(curve: pd.DataFrame, points: pd.DataFrame, cap: float) -> str:
    """Two Markdown tables: the frontier by Q, the mechanisms by gap."""
    lines = ["| Q (km) | optimum: adversary error (km) | dual (km/km) | seconds |",
             "|---:|---:|---:|---:|"]  # fmt: skip
    for r in curve.itertuples():
        lines.append(
            f"| {r.quality_km:.3f} | {r.adversary_error_km:.4f} | {r.quality_dual:.3f} | "
            f"{r.seconds:.2f} |"
        )
    lines += ["", f"prior cap (the adversary's error with no report): {cap:.4f} km", ""]
    lines += [
        "| mechanism | eps (1/km) | quality loss (km) | adversary error (km) | "
        "frontier at that loss (km) | gap (km) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for m in points.sort_values(["mechanism", "epsilon_per_km"]).to_dict("records"):
        head = f"| {m['mechanism']} | {m['epsilon_per_km']:g} |"
        if m["failed"]:
            lines.append(f"{head} failed: {m['failed']} | | | |")
            continue
        values = (m["quality_loss_km"], m["adversary_error_km"], m["frontier_km"], m["gap_km"])
        lines.append(f"{head} " + " | ".join(_km4(v) for v in values) + " |")
    return "\n".join(lines)


def _km4(value: float) -> str:
    """``value`` to 4 decimals, never ``-0.0000`` (a gap a hair below 0 is 0 at that precision)."""
    return f"{round(value, 4) + 0.0:.4f}"


def plot(curve: pd.DataFrame, points: pd.DataFrame, path, *, title: str) -> None:
    """The frontier as a line, each mechanism's eps grid as connected markers; a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    ax.plot(curve["quality_km"], curve["adversary_error_km"], "k-", lw=2.5,
            label="optimal user strategy (frontier)")  # fmt: skip
    ok = points[points["failed"] == ""]
    for name, group in ok.groupby("mechanism", sort=False):
        group = group.sort_values("epsilon_per_km")
        ax.plot(group["quality_loss_km"], group["adversary_error_km"], "o-", ms=4, label=name)
    ax.set_xlabel("expected quality loss (km)")
    ax.set_ylabel("Bayes-optimal adversary's expected error (km)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(curve, points, cap: float, out, *, title: str, overwrite: bool) -> list[Path]:
    """``frontier.csv`` (curve and points), ``frontier.md`` and ``frontier.png`` in ``out``."""
    from mdpsim._core.guards import output_lock

    with output_lock(Path(out)):  # checked again under the lock: one that appeared meanwhile
        return _write(curve, points, cap, out, title=title, overwrite=overwrite)


def _write(curve, points, cap: float, out, *, title: str, overwrite: bool) -> list[Path]:
    from mdpsim._core.outputs import atomic_folder, new_folder

    out = new_folder(out, overwrite=overwrite, wrote=WROTE)
    names = ["frontier.csv", "frontier.md", "frontier.png"]
    with atomic_folder(out, wrote=WROTE) as tmp:
        table = pd.concat(
            [curve.assign(mechanism="optimum", epsilon_per_km=np.nan), points], ignore_index=True
        )
        table.to_csv(tmp / names[0], index=False)
        (tmp / names[1]).write_text(markdown(curve, points, cap) + "\n", encoding="utf-8")
        plot(curve, points, tmp / names[2], title=title)
    return [out / n for n in names]
