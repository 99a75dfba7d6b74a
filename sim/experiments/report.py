"""``mdpsim report``: paper-style tables and plots from a batch results store.

Every number is a mean over repetitions with a 95% half-width of 1.96 standard errors
(pandas' ``sem``: ``s / sqrt(n)``, ``s`` the sample standard deviation of the per-task values,
``n`` the number of repetitions with a value). A task's value of a metric is its mean over ticks,
except budgets and halted users (their value at the last tick) and the solve time (the mean
wall-clock seconds of the ticks that generated the mechanism).

Outputs in ``DIR/report/``: ``summary.md``, ``summary.csv`` (one row per sweep point),
``tasks.csv`` (one row per task) and PNG plots.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mdpsim._core.guards import check_replaceable
from mdpsim._core.outputs import atomic_folder, check_folder
from mdpsim.errors import InputError
from mdpsim.experiments.store import (
    load_failures,
    load_manifest,
    load_ticks,
    load_timings,
    scenario_value,
    verify,
)
from mdpsim.simulation.columns import (
    HEADLINE_ATTACK_METRICS,
    QUERY_SAVING,
    attack_columns,
    query_metrics,
    tick_metrics,
)
from mdpsim.simulation.tick_row import DECLARATIONS_FILE, TickColumns

Z95 = 1.96
FINAL = {
    "remaining_budget_mean": ("remaining_budget_final", "remaining budget at the end (rho/km^2)"),
    "n_halted": ("halted_final", "halted users at the end"),
}
SOLVE = ("solve_s", "mechanism solve time (s)")
QUERY_TABLE = ["query_privacy_saving", "remaining_budget_final", "halted_final"]
PIVOTED = (
    "utility_loss_km",
    "solve_s",
    "query_privacy_saving",
    "range_error",
    "remaining_budget_final",
)
EPS_FIELD = "mechanism.epsilon_per_km"
WROTE = "mdpsim report"  # in the marker of the folders it writes
N_FIELD = "domain.n_points"


# ---------------------------------------------------------------------- metrics
def query_columns(declared: TickColumns) -> dict[str, str]:
    """The error column ``{kind}_error`` of every declared query kind -> its label (a new
    kind shows in the report with no edit here)."""
    return {c: label for c, label in query_metrics(declared).items() if c not in QUERY_SAVING}


def run_metrics(declared: TickColumns) -> dict[str, str]:
    """The per-tick metrics of a tick table with these declared columns (every attack's and
    every query kind's, sim/simulation/columns.py) -> their labels."""
    return tick_metrics(declared)


def labels(declared: TickColumns) -> dict[str, str]:
    """Metric -> label of a per-task table of a tick table with these declared columns: the
    tick means (every attack's and every query kind's columns included), the final budgets
    and the solve time."""
    return {**run_metrics(declared), **dict(FINAL.values()), SOLVE[0]: SOLVE[1]}


def tables(declared: TickColumns) -> dict[str, list[str]]:
    """The summary's tables (title -> metrics) for a report of these declared columns."""
    attacks = attack_columns(declared, HEADLINE_ATTACK_METRICS)
    return {
        "Utility and attacks": ["utility_loss_km", *attacks],
        "Queries and budgets": [*query_columns(declared), *QUERY_TABLE],
        "Cost": [SOLVE[0]],
    }


# ---------------------------------------------------------------------- numbers
def per_task(ticks: pd.DataFrame, timings: pd.DataFrame, manifest: dict) -> pd.DataFrame:
    """One row per finished task: its swept values and its value of every metric."""
    swept = list(manifest["swept_fields"])
    keys = ["task_id", "repetition", "seed", *swept]
    first = ticks.groupby("task_id", sort=False).first()
    out = first.reset_index()[[*keys, "mechanism", "epsilon_per_km"]].copy()
    out["n_points"] = (
        first[N_FIELD].to_numpy() if N_FIELD in swept else scenario_value(manifest, N_FIELD)
    )
    declared = TickColumns.of(ticks)
    present = [m for m in run_metrics(declared) if m in ticks]
    means = ticks.groupby("task_id", sort=False)[present].mean()
    last = ticks.groupby("task_id", sort=False).last()
    for col, (name, _) in FINAL.items():
        means[name] = last[col].astype(float)
    generated = timings[timings["regenerated"]]
    means[SOLVE[0]] = generated.groupby("task_id", sort=False)["mechanism_s"].mean()
    return declared.attach(out.merge(means, left_on="task_id", right_index=True, how="left"))


def summarize(tasks: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean, 1.96-SE half-width and count over repetitions of each metric, per group."""
    metrics = [m for m in labels(TickColumns.of(tasks)) if m in tasks and tasks[m].notna().any()]
    frame, keys = (tasks, list(by)) if by else (tasks.assign(_all=0), ["_all"])
    groups = frame.groupby(keys, sort=False, dropna=False)[metrics]
    mean, sem = groups.mean(), groups.sem()  # sem: s / sqrt(n), ddof=1, NaN values skipped
    out = pd.DataFrame(index=mean.index)
    out["n"] = groups.size()
    for m in metrics:
        out[f"{m}_mean"] = mean[m]
        out[f"{m}_ci95"] = Z95 * sem[m]
    out = out.reset_index()
    out.attrs.update(tasks.attrs)  # the tick columns' declarations
    return out.drop(columns="_all") if not by else out


# ---------------------------------------------------------------------- text
def fmt(mean: float, ci: float) -> str:
    """``mean ± ci`` with 4 significant digits (just the mean when ci is undefined)."""
    if not np.isfinite(mean):
        return "—"
    return f"{mean:.4g} ± {ci:.2g}" if np.isfinite(ci) else f"{mean:.4g}"


def markdown_table(frame: pd.DataFrame) -> str:
    """A DataFrame of strings as a GitHub Markdown table."""
    head = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def _summary_tables(summary: pd.DataFrame, by: list[str]) -> list[str]:
    parts = []
    declared = TickColumns.of(summary)
    names = labels(declared)
    for title, metrics in tables(declared).items():
        metrics = [m for m in metrics if f"{m}_mean" in summary]
        if not metrics:
            continue
        frame = summary[[*by, "n"]].copy()
        for m in metrics:
            frame[names[m]] = [
                fmt(a, b) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_ci95"], strict=True)
            ]
        parts += [f"## {title}", "", markdown_table(frame), ""]
    return parts


def _pivots(summary: pd.DataFrame, by: list[str]) -> list[str]:
    """Paper-style tables: one metric, rows = other swept fields, columns = eps (or last)."""
    if len(by) < 2:
        return []
    col = EPS_FIELD if EPS_FIELD in by else by[-1]
    rows = [f for f in by if f != col]
    parts = []
    declared = TickColumns.of(summary)
    names = labels(declared)
    pivoted = [PIVOTED[0], *attack_columns(declared, ["error_km"]), *PIVOTED[1:]]
    for m in pivoted:
        if f"{m}_mean" not in summary or summary[f"{m}_mean"].nunique() < 2:
            continue  # nothing to compare
        cells = summary.assign(
            _cell=[
                fmt(a, b) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_ci95"], strict=True)
            ]
        )
        table = cells.pivot_table(
            index=rows, columns=col, values="_cell", aggfunc="first", sort=False
        )
        table.columns = [f"{col} = {c}" for c in table.columns]
        parts += [f"## {names[m]}", "", markdown_table(table.reset_index()), ""]
    return parts


# ---------------------------------------------------------------------- plots
def _series_label(key, names: list[str]) -> str:
    key = key if isinstance(key, tuple) else (key,)
    return ", ".join(
        str(v) if n == "mechanism" else f"{n.split('.')[-1]}={v}"
        for n, v in zip(names, key, strict=True)
    )


def _errorbar_plot(
    ax, tasks: pd.DataFrame, x: str, y: str, series: list[str], *, prefix: str = ""
) -> None:
    for key, group in tasks.groupby(series, sort=False, dropna=False):
        stats = group.groupby(x)[y].agg(["mean", "std", "count"]).sort_index()
        ci = Z95 * stats["std"] / np.sqrt(stats["count"])
        ax.errorbar(
            stats.index, stats["mean"], yerr=ci.fillna(0.0), marker="o", capsize=3,
            label=prefix + _series_label(key, series),
        )  # fmt: skip


def _over_ticks_plot(ax, ticks: pd.DataFrame, y: str, by: list[str]) -> None:
    series = by or ["mechanism"]
    for key, group in ticks.groupby(series, sort=False, dropna=False):
        stats = group.groupby("tick")[y].agg(["mean", "std", "count"]).sort_index()
        ci = (Z95 * stats["std"] / np.sqrt(stats["count"])).fillna(0.0)
        (line,) = ax.plot(stats.index, stats["mean"], marker=".", label=_series_label(key, series))
        ax.fill_between(
            stats.index, stats["mean"] - ci, stats["mean"] + ci, color=line.get_color(), alpha=0.2
        )


def _restyle(ax) -> None:
    """Dashed, then dotted lines once the ten default colours repeat."""
    styles = ("-", "--", ":", "-.")
    lines = [c.lines[0] for c in ax.containers] if ax.containers else ax.get_lines()
    for i, line in enumerate(lines):
        line.set_linestyle(styles[(i // 10) % len(styles)])


def write_plots(tasks: pd.DataFrame, ticks: pd.DataFrame, by: list[str], out: Path) -> list[Path]:
    """The report's PNG plots (those whose data exist); returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [f for f in by if f not in (EPS_FIELD, "mechanism.name")]
    declared = TickColumns.of(tasks)
    names = labels(declared)
    errors = [c for c in attack_columns(declared, ["error_km"]) if tasks[c].notna().any()]
    specs: list[tuple[str, Any, str]] = [
        ("utility_loss_vs_eps.png", "utility_loss_km", "eps"),
        ("attack_error_vs_eps.png", errors or [""], "eps"),  # every attack's expected error
        ("remaining_budget_over_ticks.png", "remaining_budget_mean", "ticks"),
        ("privacy_saving_over_ticks.png", "query_privacy_saving", "ticks"),
        ("solve_time_vs_n_points.png", SOLVE[0], "size"),
    ]
    written: list[Path] = []
    for name, metric, kind in specs:
        source = ticks if kind == "ticks" else tasks
        x = {"eps": "epsilon_per_km", "ticks": "tick", "size": "n_points"}[kind]
        first = metric[0] if isinstance(metric, list) else metric  # the attacks: one each
        if first not in source or not source[first].notna().any() or source[x].nunique() < 2:
            continue  # no data, or a single x value: nothing to plot against
        fig, ax = plt.subplots(figsize=(9.0, 4.2))
        if isinstance(metric, list):
            for column in metric:
                prefix = f"{declared[column].owner}: "
                _errorbar_plot(ax, tasks, x, column, ["mechanism", *others], prefix=prefix)
            ax.set_xlabel("epsilon (1/km)")
            ax.set_ylabel("attack expected error (km)")
        elif kind == "eps":
            _errorbar_plot(ax, tasks, "epsilon_per_km", metric, ["mechanism", *others])
            ax.set_xlabel("epsilon (1/km)")
            ax.set_ylabel(names[metric])
        elif kind == "ticks":
            _over_ticks_plot(ax, ticks, metric, by)
            ax.set_xlabel("tick")
            ax.set_ylabel(
                "remaining budget, mean over users (rho/km^2)"
                if metric == "remaining_budget_mean"
                else "query privacy saving"
            )
        else:
            series = ["mechanism", *[f for f in others if f != N_FIELD]]  # eps pooled
            _errorbar_plot(ax, tasks, "n_points", metric, series)
            ax.set_xlabel("|X| (secrets)")
            ax.set_ylabel(names[metric])
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        _restyle(ax)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_title(f"{ax.get_ylabel()}: mean ± 1.96 SE", fontsize="medium")
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# ---------------------------------------------------------------------- the report
def write_report(
    store: str | Path,
    out_dir: str | Path | None = None,
    *,
    warn: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write ``summary.md``, ``summary.csv``, ``tasks.csv`` (with its tick columns'
    declarations, ``tick_columns.json``) and the PNGs; return their paths.

    The report folder is checked before the store is read and written whole or not at all;
    an existing one is replaced only if it is a report (or empty). Damaged tasks
    (:func:`mdpsim.experiments.store.verify`) are left out, each told to ``warn`` in one line
    naming the file (default: :func:`warnings.warn`) and listed in ``summary.md``."""
    store = Path(store)
    out = check_folder(store / "report" if out_dir is None else out_dir)
    given = out_dir is not None  # name --out in a refusal only if the user gave it
    if out.is_dir() and any(out.iterdir()) and not (out / "summary.md").is_file():
        raise InputError(
            f"{'--out ' if given else ''}{str(out)!r} exists and is not a report folder (no "
            "summary.md); choose another --out"
        )
    if out.is_dir():  # a report mdpsim wrote, and nothing else
        check_replaceable(out, flag="--out" if given else WROTE, wrote=WROTE)
    manifest = load_manifest(store)
    checked = verify(store)
    for line in checked.warnings(store):
        (warn or warnings.warn)(line)
    ticks = load_ticks(store, list(checked.done))
    if ticks.empty:
        raise InputError(f"{store} has no finished task yet; run or resume `mdpsim batch` first")
    tasks = per_task(ticks, load_timings(store, list(checked.done)), manifest)
    with atomic_folder(out, wrote=WROTE) as tmp:
        plots = _write_report_files(tmp, store, manifest, tasks, ticks, checked.damaged)
    written = ["summary.md", "summary.csv", "tasks.csv", DECLARATIONS_FILE, *plots]
    return [out / name for name in written]


def _write_report_files(
    out: Path,
    store: Path,
    manifest: dict,
    tasks: pd.DataFrame,
    ticks: pd.DataFrame,
    damaged: dict[str, str],
) -> list[str]:
    """The report's files in ``out``; the plots' file names."""
    by = list(manifest["swept_fields"])
    summary = summarize(tasks, by)
    summary.to_csv(out / "summary.csv", index=False)
    tasks.to_csv(out / "tasks.csv", index=False)
    (out / DECLARATIONS_FILE).write_text(TickColumns.of(tasks).to_json(), encoding="utf-8")
    plots = write_plots(tasks, ticks, by, out)
    failures = load_failures(store)
    name = manifest["scenario"]["scenario"]["name"]
    lines = [
        f"# Batch report: {name}",
        "",
        f"- tasks finished: {len(tasks)} of {len(manifest['tasks'])}; failed: {len(failures)}"
        + (f"; damaged: {len(damaged)}" if damaged else ""),
        f"- swept: {', '.join(by) if by else '(nothing)'}; "
        f"repetitions: {manifest['repetitions']}; seeding: {manifest['seeding']}",
        f"- ticks per run: {manifest['scenario']['scenario']['ticks']}; "
        f"mechanism: {manifest['scenario']['mechanism']['name']} (unless swept)",
        "- cells: mean ± 1.96 standard errors over repetitions (n = repetitions); a task's value"
        " is its mean over ticks (budgets and halted users: last tick; solve time: ticks that"
        " generated the mechanism)",
        "",
        *_pivots(summary, by),
        *_summary_tables(summary, by),
    ]
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    if failures:
        lines += ["## Failed tasks", ""]
        lines += [f"- `{tid}`: {text.strip().splitlines()[-1]}" for tid, text in failures.items()]
        lines.append("")
    if damaged:
        lines += ["## Damaged tasks (left out; `mdpsim batch --resume` runs them again)", ""]
        lines += [f"- `{tid}`: {why}" for tid, why in damaged.items()]
        lines.append("")
    (out / "summary.md").write_text("\n".join(lines), encoding="utf-8")
    return [p.name for p in plots]
