"""A batch as the batch explorer's tables: filters, error bars, the summary.

A batch is a results store written by ``mdpsim batch`` (per-tick tables too) or a report folder
written by ``mdpsim report``, such as the bundled results in ``docs/results/`` (per-task table
only, so no plots over ticks).

Statistics are those of ``mdpsim report`` (:mod:`mdpsim.experiments.report`): a task's value of a
metric is its
mean over ticks (budgets and halted users: the last tick), and every point is a mean over tasks
with a 95% half-width of 1.96 standard errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mdpsim.errors import InputError
from mdpsim.experiments import report
from mdpsim.experiments.store import (
    ID_COLUMNS,
    MANIFEST,
    load_manifest,
    load_ticks,
    load_timings,
    verify,
)
from mdpsim.simulation.columns import tick_metrics
from mdpsim.simulation.tick_row import DECLARATIONS_FILE, TickColumns

#: Filters every batch has (tick-table column -> label), whatever it sweeps.
FIXED_FILTERS = {"mechanism": "mechanism", "epsilon_per_km": "epsilon (1/km)"}
COVERED = {"mechanism.name", "mechanism.epsilon_per_km"}  # swept fields the fixed filters cover
TICK_EXTRAS = ("remaining_budget_mean", "n_halted")  # plotted over ticks beside the tick means


REPORT_TASKS = "tasks.csv"  # the per-task table of a report folder


@dataclass(frozen=True)
class Batch:
    """A loaded batch: what it swept, its per-tick rows (empty for a report folder) and one
    row per finished task."""

    folder: Path
    name: str
    swept: list[str]
    repetitions: int
    n_tasks: int
    ticks: pd.DataFrame
    tasks: pd.DataFrame
    damaged: tuple[str, ...] = ()  # one line per damaged task, left out (store.verify)

    @property
    def has_ticks(self) -> bool:
        """Whether per-tick rows are there (a store; not a report folder)."""
        return not self.ticks.empty

    @property
    def filters(self) -> dict[str, list]:
        """Filterable column -> its values: mechanism, eps and every other swept field."""
        columns = [*FIXED_FILTERS, *[f for f in self.swept if f not in COVERED]]
        return {c: sorted(self.tasks[c].dropna().unique().tolist()) for c in columns}


def find_stores(root: str | Path, *, depth: int = 2) -> list[Path]:
    """Batch stores (folders with a manifest) under ``root``, newest first."""
    return _find(root, MANIFEST, depth)


def find_reports(root: str | Path, *, depth: int = 2) -> list[Path]:
    """Report folders (with a ``tasks.csv``) under ``root``, e.g. ``docs/results``, by name."""
    return sorted(_find(root, REPORT_TASKS, depth))


def _find(root: str | Path, marker: str, depth: int) -> list[Path]:
    root = Path(root)
    if not root.is_dir():
        return []
    found = [
        p.parent for d in range(depth) for p in root.glob("/".join(["*"] * (d + 1)) + "/" + marker)
    ]
    return sorted(found, key=lambda p: (p / marker).stat().st_mtime, reverse=True)


def load(folder: str | Path) -> Batch:
    """Read a store or a report folder; InputError if it is neither or has no finished task.

    A store's damaged tasks (files missing, truncated or altered) are left out and named in
    ``damaged``."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file() and (folder / REPORT_TASKS).is_file():
        return _load_report(folder)
    manifest = load_manifest(folder)
    checked = verify(folder)
    done = list(checked.done)
    ticks = load_ticks(folder, done)
    if ticks.empty and checked.damaged:
        raise InputError(f"{folder}: no task can be read; {'; '.join(checked.warnings(folder))}")
    if ticks.empty:
        raise InputError(f"{folder} has no finished task yet; run or resume `mdpsim batch` first")
    return Batch(
        folder=folder,
        name=manifest["scenario"]["scenario"]["name"],
        swept=list(manifest["swept_fields"]),
        repetitions=int(manifest["repetitions"]),
        n_tasks=len(manifest["tasks"]),
        ticks=ticks,
        tasks=report.per_task(ticks, load_timings(folder, done), manifest),
        damaged=tuple(checked.warnings(folder)),
    )


def _load_report(folder: Path) -> Batch:
    """A report's ``tasks.csv``: the columns :func:`mdpsim.experiments.report.per_task` writes, the
    swept
    fields between the id columns and ``mechanism``."""
    tasks = pd.read_csv(folder / REPORT_TASKS, dtype={"task_id": str})
    declarations = folder / DECLARATIONS_FILE  # none: a report of an mdpsim before the declarations
    if declarations.is_file():
        TickColumns.from_json(declarations.read_text(encoding="utf-8")).attach(tasks)
    columns = list(tasks.columns)
    if columns[: len(ID_COLUMNS)] != list(ID_COLUMNS) or "mechanism" not in columns:
        raise InputError(
            f"{folder / REPORT_TASKS} is not a report's task table (written by `mdpsim report`)"
        )
    return Batch(
        folder=folder,
        name=folder.name,
        swept=columns[len(ID_COLUMNS) : columns.index("mechanism")],
        repetitions=int(tasks["repetition"].max()) + 1 if len(tasks) else 0,
        n_tasks=len(tasks),
        ticks=pd.DataFrame(),
        tasks=tasks,
    )


def select(frame: pd.DataFrame, chosen: dict[str, list]) -> pd.DataFrame:
    """Rows whose value of every filtered column is among the chosen ones (empty: no filter)."""
    keep = np.ones(len(frame), dtype=bool)
    for column, values in chosen.items():
        if values:
            keep &= frame[column].isin(values).to_numpy()
    return frame[keep]


def metrics(batch: Batch, *, over_ticks: bool) -> list[str]:
    """Metrics with data: per-tick columns for plots over ticks, else per-task values."""
    source = batch.ticks if over_ticks else batch.tasks
    names = [*tick_metrics(TickColumns.of(source)), *TICK_EXTRAS] if over_ticks else labels(batch)
    return [m for m in names if m in source and source[m].notna().any()]


def labels(batch: Batch) -> dict[str, str]:
    """Metric -> label for this batch's per-task table (every attack it ran included)."""
    return report.labels(TickColumns.of(batch.tasks))


def errorbars(frame: pd.DataFrame, *, x: str, y: str, series: list[str]) -> pd.DataFrame:
    """Mean of ``y`` per (series, x) with its 95% interval ``lo``..``hi`` and count ``n``.

    ``frame`` is the per-task table (x a swept field or eps) or the per-tick table (x =
    ``"tick"``, the mean over tasks at each tick). ``series`` columns are joined into a label.
    """
    if y not in frame:
        raise InputError(f"metric {y!r} is not in this table; choose one of the listed metrics")
    data = frame.dropna(subset=[y])
    label = _labels(data, series)
    stats = data.groupby([label, data[x]], sort=True)[y].agg(["mean", "std", "count"])
    half = report.Z95 * stats["std"] / np.sqrt(stats["count"])
    stats["lo"] = stats["mean"] - half.fillna(0.0)
    stats["hi"] = stats["mean"] + half.fillna(0.0)
    return stats.rename(columns={"count": "n"}).drop(columns="std").reset_index()


def _labels(frame: pd.DataFrame, series: list[str]) -> pd.Series:
    if not series:
        return pd.Series("all", index=frame.index, name="series")
    parts = [
        frame[c].astype(str) if c == "mechanism" else f"{c.split('.')[-1]}=" + frame[c].astype(str)
        for c in series
    ]
    out = parts[0]
    for p in parts[1:]:
        out = out + ", " + p
    return out.rename("series")


def summary(tasks: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """One row per sweep point: ``n`` and each metric's ``_mean`` and ``_ci95``."""
    return report.summarize(tasks, by)
