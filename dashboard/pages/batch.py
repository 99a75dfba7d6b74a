"""Batch explorer: pick a batch (a store under runs/, or the bundled results in docs/results/),
filter it, plot with error bars, download."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from mdpsim._core.paths import source_checkout
from mdpsim.dashboard import batch_data as bd
from mdpsim.dashboard import batch_mobility as bm
from mdpsim.dashboard import charts as ch
from mdpsim.errors import InputError
from mdpsim.experiments.store import MANIFEST, TASKS, load_manifest, verify

X_TICK = "tick"


#: The clone the dashboard runs from (its docs/results hold bundled batch results), else the
#: working folder (an installed package bundles none: only the stores under ./runs are listed).
REPO = source_checkout() or Path.cwd()
RESULTS = REPO / "docs" / "results"


@st.cache_data(show_spinner="Reading the batch ...", max_entries=8)
def _load(folder: str, stamp: tuple) -> bd.Batch:
    """The batch's tables; ``stamp`` changes when tasks finish, which reloads them."""
    return bd.load(folder)


def _stamp(folder: Path) -> tuple:
    """Changes when a task finishes and when any task file changes (damage included)."""
    marks = [folder / MANIFEST, folder / bd.REPORT_TASKS]
    tasks = sorted((folder / TASKS).iterdir()) if (folder / TASKS).is_dir() else []
    files = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in tasks)
    return (*(m.stat().st_mtime if m.is_file() else 0.0 for m in marks), files)


def available() -> dict[str, str]:
    """Label -> folder of every batch found: stores under ``runs/`` (newest first), then the
    bundled results in ``docs/results/``."""
    stores = [*bd.find_stores(REPO / "runs"), *bd.find_stores(Path.cwd() / "runs")]
    found = {str(p.resolve()): "store" for p in stores}
    for p in bd.find_reports(RESULTS):
        found.setdefault(str(p.resolve()), "bundled results")
    return {f"{_short(Path(f))} ({kind})": f for f, kind in found.items()}


def _short(path: Path) -> str:
    for root in (REPO, Path.cwd()):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return str(path)


def open_batch() -> bd.Batch | None:
    """The batch picker (found batches, or any folder); the loaded batch, or None with why."""
    found = available()
    c1, c2 = st.columns([2, 3])
    label = c1.selectbox("batch", list(found), key="batch_pick", placeholder="none found")
    typed = c2.text_input(
        "or a folder",
        key="batch_dir",
        help="a store written by `mdpsim batch` (manifest.json, tasks/) or a report folder "
        "written by `mdpsim report` (tasks.csv)",
    ).strip()
    folder = typed or (found[label] if label else "")
    if not folder:
        st.info("Run `mdpsim batch scenarios/mechanism_compare.toml` and pick its folder here.")
        return None
    try:
        checked = verify(folder) if (Path(folder) / MANIFEST).is_file() else None
        if checked is not None and not checked.done and not checked.damaged:
            n_tasks = len(load_manifest(folder)["tasks"])
            st.info(  # a store `mdpsim batch` has only begun to write: nothing wrong with it
                f"{folder}: none of its {n_tasks} tasks has finished yet; refresh the page "
                "once `mdpsim batch` has written some"
            )
            return None
        batch = _load(folder, _stamp(Path(folder)))
        for line in batch.damaged:
            st.warning(line)
        return batch
    except InputError as exc:
        st.error(str(exc))
        return None


@st.cache_data(show_spinner=False, max_entries=8)
def _mobility(folder: str, stamp: tuple, task_ids: tuple[str, ...]) -> pd.DataFrame:
    bar = st.progress(0.0, text="walking each task's users ...")

    def told(i: int, n: int) -> None:
        bar.progress(i / n, text=f"task {i} of {n}")

    frame = bm.task_measures(folder, list(task_ids), progress=told)
    bar.empty()
    return frame


def with_mobility(batch: bd.Batch) -> bd.Batch:
    """The batch with the measures of human mobility per task, when asked for (a store's
    tasks only: they are walked again from their scenario and seed)."""
    if not batch.has_ticks or not st.toggle(
        "mobility measures",
        key="batch_mobility",
        help="the laws of human mobility (docs/mobility.md) per task, from each task's scenario "
        "and seed; tasks that differ only in mechanism share one walk",
    ):
        return batch
    ids = tuple(batch.tasks["task_id"].astype(str))
    measures = _mobility(str(batch.folder), _stamp(batch.folder), ids)
    return replace(batch, tasks=batch.tasks.merge(measures, on="task_id", how="left"))


def filters(batch: bd.Batch) -> dict[str, list]:
    """One multiselect per filterable column (nothing chosen: everything)."""
    chosen = {}
    options = batch.filters
    cols = st.columns(min(len(options), 4))
    for i, (column, values) in enumerate(options.items()):
        label = bd.FIXED_FILTERS.get(column, column)
        chosen[column] = cols[i % len(cols)].multiselect(
            label, values, key=f"batch_filter_{column}", placeholder="all"
        )
    return chosen


def plot(batch: bd.Batch, chosen: dict[str, list]) -> None:
    """A metric against eps, a swept field or the tick, with 95% error bars."""
    axes = ["epsilon_per_km", *[f for f in batch.swept if f not in bd.COVERED]]
    axes += [X_TICK] if batch.has_ticks else []
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox("x axis", axes, key="batch_x")
    over_ticks = x == X_TICK
    names = bd.metrics(batch, over_ticks=over_ticks)
    labels = {**bd.labels(batch), **bm.labels()}
    if not over_ticks:
        names += [m for m in bm.labels() if m in batch.tasks]
    y = c2.selectbox("metric", names, key="batch_metric", format_func=lambda m: labels.get(m, m))
    candidates = ["mechanism", *[f for f in batch.swept if f not in bd.COVERED and f != x]]
    if x != "epsilon_per_km":
        candidates.insert(1, "epsilon_per_km")
    series = c3.multiselect("one line per", candidates, default=["mechanism"], key="batch_series")
    frame = bd.select(batch.ticks if over_ticks else batch.tasks, chosen)
    if frame.empty or y is None:
        st.warning("No run matches these filters.")
        return
    stats = bd.errorbars(frame, x=x, y=y, series=series)
    title = f"{labels.get(y, y)} (mean ± 1.96 SE)"
    spec = ch.errorbars(x=x, y_title=title, series_title=", ".join(series) or "all")
    st.vega_lite_chart(stats, spec, height=400)
    st.caption(
        "mean over repetitions of each task's mean over ticks; bars: 1.96 standard errors"
        if not over_ticks
        else "mean over the matching runs at each tick; bars: 1.96 standard errors"
    )


def table(batch: bd.Batch, chosen: dict[str, list]) -> None:
    """The summary (one row per sweep point), per-task rows, and their CSV downloads."""
    tasks = bd.select(batch.tasks, chosen)
    if tasks.empty:
        return
    by = batch.swept or ["mechanism"]
    summary = bd.summary(tasks, by)
    st.subheader("Summary")
    st.dataframe(summary, key="batch_summary", hide_index=True)
    downloads = [("summary", summary, "batch_download"), ("tasks", tasks, "batch_download_tasks")]
    for col, (what, frame, key) in zip(st.columns(2), downloads, strict=True):
        col.download_button(
            "summary CSV" if what == "summary" else "per-task CSV",
            frame.to_csv(index=False),
            file_name=f"{batch.name}-{what}.csv",
            mime="text/csv",
            key=key,
        )


def main() -> None:
    """The page, top to bottom."""
    st.title("Batch explorer")
    batch = open_batch()
    if batch is None:
        return
    st.caption(
        f"scenario {batch.name!r} · {len(batch.tasks)} of {batch.n_tasks} tasks finished · "
        f"swept: {', '.join(batch.swept) or '(nothing)'} · repetitions: {batch.repetitions}"
        + ("" if batch.has_ticks else " · a report's task table: no plots over ticks")
        + (" · refresh to see tasks finished since" if len(batch.tasks) < batch.n_tasks else "")
    )
    chosen = filters(batch)
    batch = with_mobility(batch)
    plot(batch, chosen)
    table(batch, chosen)


main()
