"""``mdpsim mobility``: the measures of human mobility on a scenario's users or a traces file,
each beside its law, as a JSON, a Markdown table and one PNG of nine plots (docs/mobility.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from mdpsim.simulation.mobility_measures import LAWS, holds, measure
from mdpsim.simulation.people import HOME_BY_HOUR

#: Lines of the plots' reference laws.
S_MU, ZETA, RHO, GAMMA, BETA, TAU_H = 0.6, 1.2, 0.6, 0.21, 0.8, 17.0
#: de Montjoye et al. 2013 (antenna, hour): users singled out by k = 2 and k = 4 points.
MONTJOYE = {2: 0.5, 4: 0.95}
NAMES = ("mobility.json", "mobility.md", "mobility.png")
WROTE = "mdpsim mobility"  # in the marker of the folders it writes


def measure_world(world, *, resolution_m: float, seed: int) -> dict:
    """The measures of ``world``'s users over the scenario's ticks, with what they were run on."""
    scenario = world.scenario
    run = scenario.scenario
    walk = world.walks_ahead(run.ticks)
    result = measure(walk, world.domain.x_xy, tick_seconds=run.tick_seconds,
                     start_hour=run.start_hour, resolution_m=resolution_m, seed=seed)  # fmt: skip
    mob = scenario.mobility
    source = f"traces {scenario.trace_path()}" if mob.source == "traces" else f"model {mob.model}"
    result["run"] = {
        "scenario": run.name,
        "source": source,
        "network": scenario.network.source,
        "secrets": int(world.domain.n_x),
        "users": int(walk.shape[1]),
        "ticks": int(walk.shape[0]),
        "tick_seconds": run.tick_seconds,
        "days": walk.shape[0] * run.tick_seconds / 86400.0,
        "start_hour": run.start_hour,
        "seed": world.seed,
        "resolution_m": resolution_m,
    }
    result["laws"] = {
        name: {"law": law, "range": bounds, "source": src, "holds": holds(name, value)}
        for (name, (law, bounds, src)), value in zip(
            LAWS.items(), (result["values"][n] for n in LAWS), strict=True
        )
    }
    return result


def markdown(result: dict) -> str:
    """One table: each measure, its value, the law and whether it holds."""
    r = result["run"]
    lines = [
        f"{r['scenario']} ({r['source']}) on {r['network']}, {r['secrets']} secrets: "
        f"{r['users']} users, {r['days']:.2f} days of {r['tick_seconds']:g} s ticks; "
        f"uniqueness at {r['resolution_m']:g} m and an hour",
        "",
        "| measure | value | law | range | holds | source |",
        "|---|---:|---|---|---|---|",
    ]
    for name, value in result["values"].items():
        law = result["laws"][name]
        bounds = law["range"]
        shown = "" if bounds is None else f"[{bounds[0]:g}, {bounds[1]:g}]"
        verdict = {True: "yes", False: "NO", None: ""}[law["holds"]]
        lines.append(f"| {name} | {_num(value)} | {law['law']} | {shown} | {verdict} | "
                     f"{law['source']} |")  # fmt: skip
    return "\n".join(lines)


def _num(value: float) -> str:
    return "nan" if not math.isfinite(value) else f"{value:.3f}"


def write_outputs(result: dict, out, *, overwrite: bool) -> list[Path]:
    """``mobility.json``, ``mobility.md`` and ``mobility.png`` in the new folder ``out``."""
    from mdpsim._core.guards import output_lock
    from mdpsim._core.outputs import atomic_folder, json_text, new_folder

    with output_lock(Path(out)):
        out = new_folder(out, overwrite=overwrite, wrote=WROTE)
        with atomic_folder(out, wrote=WROTE) as tmp:
            text = json_text(result, indent=1)  # standard JSON: null, not NaN
            (tmp / NAMES[0]).write_text(text + "\n", encoding="utf-8")
            (tmp / NAMES[1]).write_text(markdown(result) + "\n", encoding="utf-8")
            plot(result, tmp / NAMES[2])
    return [out / n for n in NAMES]


def plot(result: dict, path) -> None:
    """Nine plots, each measure beside its law."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 3, figsize=(14, 12))
    c, v = result["curves"], result["values"]
    _gyration(axes[0, 0], c)
    _jumps(axes[0, 1], c)
    _exploration(axes[0, 2], c, v)
    _ranks(axes[1, 0], c, v)
    _p_new(axes[1, 1], c, v)
    _dwell(axes[1, 2], c, v)
    _home(axes[2, 0], c)
    _top(axes[2, 1], c)
    _unique(axes[2, 2], c, result["run"]["resolution_m"])
    r = result["run"]
    fig.suptitle(f"{r['scenario']} ({r['source']}): {r['users']} users, {r['days']:.1f} days of "
                 f"{r['tick_seconds']:g} s ticks, {r['secrets']} secrets")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _gyration(ax, c) -> None:
    for key, label in (("rg_km", "all records"), ("rg2_km", "top-2 places (k = 2)")):
        values = np.sort(np.asarray(c[key]))
        ax.step(values, 1 - np.arange(len(values)) / len(values), where="post", label=label)
    ax.set(xlabel="radius of gyration (km)", ylabel="share of users with r_g >= x",
           title="radius of gyration\n(city scale: heavy-tailed, Gonzalez 2008)")  # fmt: skip
    ax.legend(fontsize=8)


def _log_density(ax, values: np.ndarray, n_bins: int):
    """Draw the density of positive ``values`` over log-spaced bins as points; return the bins'
    geometric middles, the densities and the edges."""
    bins = np.logspace(np.log10(values.min()), np.log10(values.max() * 1.01), n_bins)
    hist, edges = np.histogram(values, bins=bins, density=True)
    mid = np.sqrt(edges[1:] * edges[:-1])
    ax.loglog(mid[hist > 0], hist[hist > 0], "o", ms=4, label="model")
    return mid, hist, edges


def _jumps(ax, c) -> None:
    jumps = np.asarray(c["jump_km"])
    jumps = jumps[jumps > 0]
    if jumps.size < 2:
        ax.set_title("jump lengths: fewer than two jumps")
        return
    mid, hist, _ = _log_density(ax, jumps, 20)
    top = int(hist.argmax())  # the law drawn through the model's mode
    ref = hist[top] * (mid / mid[top]) ** -1.75
    ax.loglog(mid, ref, "k--", lw=1, label="r^-1.75 (Gonzalez 2008, up to ~100 km)")
    ax.set(xlabel="jump between stays (km)", ylabel="density", title="jump lengths")
    ax.legend(fontsize=8)


def _exploration(ax, c, v) -> None:
    t = np.asarray(c["hours"])
    s = np.asarray(c["s_mean"])
    ok = (t > 0) & (s > 0)
    ax.loglog(t[ok], s[ok], label=f"model, slope {v['s_slope']:.2f}")
    if ok.any():
        anchor = np.flatnonzero(ok)[len(np.flatnonzero(ok)) // 2]
        ref = s[anchor] * (t[ok] / t[anchor]) ** S_MU
        ax.loglog(t[ok], ref, "k--", lw=1, label=f"t^{S_MU} (Song 2010)")
    ax.set(xlabel="hours", ylabel="distinct places S(t)", title="exploration S(t)")
    ax.legend(fontsize=8)


def _ranks(ax, c, v) -> None:
    f = np.asarray(c["visits_by_rank"])
    k = np.arange(1, len(f) + 1)
    ok = f > 0
    ax.loglog(k[ok], f[ok], "o-", ms=3, label=f"model, zeta {v['zeta']:.2f}")
    if ok.any():
        ax.loglog(k[ok], f[0] * k[ok] ** -ZETA, "k--", lw=1, label=f"k^-{ZETA} (Song 2010)")
    ax.set(xlabel="rank k", ylabel="share of visits f_k", title="visits by rank")
    ax.legend(fontsize=8)


def _p_new(ax, c, v) -> None:
    p, tried = np.asarray(c["p_new"]), np.asarray(c["p_new_tried"])
    s = np.arange(len(p))
    ok = (tried >= 20) & (s > 0)
    ax.plot(s[ok], p[ok], "o", ms=4, label=f"model (daytime), at S 8-12: {v['p_new_s10']:.2f}")
    grid = np.arange(1, len(p))
    ax.plot(grid, RHO * grid**-GAMMA, "k--", lw=1, label="0.6 S^-0.21 (Song 2010)")
    ax.set(xlabel="places known S", ylabel="P(next visit is new)", title="exploration P(new)",
           ylim=(0, 1))  # fmt: skip
    ax.legend(fontsize=8)


def _dwell(ax, c, v) -> None:
    dt = np.asarray(c["dwell_h"])
    if dt.size == 0:
        ax.set_title("dwell times: no stay inside the run")
        return
    mid, hist, edges = _log_density(ax, dt, 25)
    for beta, tau, style, label in (
        (v["dwell_beta"], v["dwell_tau_h"], "-", f"fit beta {v['dwell_beta']:.2f}, "
         f"tau {v['dwell_tau_h']:.0f} h"),
        (BETA, TAU_H, "k--", f"law beta {BETA}, tau {TAU_H:g} h (Song 2010)"),
    ):  # fmt: skip
        if math.isfinite(beta):
            law = mid ** (-1 - beta) * np.exp(-mid / tau)
            scale = (hist * np.diff(edges)).sum() / (law * np.diff(edges)).sum()
            ax.loglog(mid, law * scale, style, lw=1, label=label)
    ax.set(xlabel="stay (hours)", ylabel="density", title="dwell times")
    ax.legend(fontsize=8)


def _home(ax, c) -> None:
    hours = np.arange(24)
    ax.plot(hours, c["home_share_by_hour"], "o-", ms=3, label="model: at home (night top place)")
    ax.plot(hours, HOME_BY_HOUR, "k--", lw=1, label="time-use surveys (stylised, HETUS)")
    ax.set(xlabel="hour of day", ylabel="share of users at home", ylim=(0, 1),
           title="nights at home")  # fmt: skip
    ax.legend(fontsize=8)


def _top(ax, c) -> None:
    bins = np.linspace(0, 1, 21)
    ax.hist(c["top1_share"], bins=bins, alpha=0.6, label="top-1 place")
    ax.hist(c["top2_share"], bins=bins, alpha=0.6, label="top-2 places")
    ax.set(xlabel="share of a user's time", ylabel="users", title="time at the top places")
    ax.legend(fontsize=8)


def _unique(ax, c, resolution_m: float) -> None:
    ks = [int(k) for k in c["uniqueness"]]
    ax.plot(ks, list(c["uniqueness"].values()), "o-", label=f"model ({resolution_m:g} m, hour)")
    ax.plot(list(MONTJOYE), list(MONTJOYE.values()), "ks", label="de Montjoye 2013 (antenna, hour)")
    ax.set(xlabel="known points k", ylabel="share singled out", ylim=(0, 1.02), xticks=ks,
           title="uniqueness")  # fmt: skip
    ax.legend(fontsize=8)
