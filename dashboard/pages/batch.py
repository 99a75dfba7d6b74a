"""Batch explorer: open a batch results store, filter it, plot with error bars, download."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import batch_data as bd
from dashboard import charts as ch
from dashboard.resources import REPO
from sim.errors import InputError
from sim.report import LABELS
from sim.store import MANIFEST, TASKS

X_TICK = "tick"


@st.cache_data(show_spinner="Reading the batch ...", max_entries=8)
def _load(store: str, stamp: tuple) -> bd.Batch:
    """The store's tables; ``stamp`` changes when tasks finish, which reloads them."""
    return bd.load(store)


def _stamp(store: Path) -> tuple:
    manifest = store / MANIFEST
    n_done = len(list((store / TASKS).glob("*.parquet"))) if (store / TASKS).is_dir() else 0
    return (manifest.stat().st_mtime if manifest.is_file() else 0.0, n_done)


def open_store() -> bd.Batch | None:
    """The folder picker; the loaded batch, or None with the reason shown."""
    found = [*bd.find_stores(REPO / "runs"), *bd.find_stores(Path.cwd() / "runs")]
    found = list(dict.fromkeys(p.resolve() for p in found))
    if "batch_dir" not in st.session_state:
        st.session_state["batch_dir"] = str(found[0]) if found else ""
    store = st.text_input(
        "batch folder (written by `mdpsim batch`)",
        key="batch_dir",
        help="the folder holding manifest.json and tasks/",
    )
    if found:
        st.caption("found: " + ", ".join(f"`{p}`" for p in found[:6]))
    if not store.strip():
        st.info("Run `mdpsim batch scenarios/mechanism_compare.toml` and give its folder here.")
        return None
    try:
        return _load(store.strip(), _stamp(Path(store.strip())))
    except InputError as exc:
        st.error(str(exc))
        return None


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
    axes = ["epsilon_per_km", *[f for f in batch.swept if f not in bd.COVERED], X_TICK]
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox("x axis", axes, key="batch_x")
    over_ticks = x == X_TICK
    names = bd.metrics(batch, over_ticks=over_ticks)
    y = c2.selectbox("metric", names, key="batch_metric", format_func=lambda m: LABELS.get(m, m))
    candidates = ["mechanism", *[f for f in batch.swept if f not in bd.COVERED and f != x]]
    if x != "epsilon_per_km":
        candidates.insert(1, "epsilon_per_km")
    series = c3.multiselect("one line per", candidates, default=["mechanism"], key="batch_series")
    frame = bd.select(batch.ticks if over_ticks else batch.tasks, chosen)
    if frame.empty or y is None:
        st.warning("No run matches these filters.")
        return
    stats = bd.errorbars(frame, x=x, y=y, series=series)
    title = f"{LABELS.get(y, y)} (mean ± 1.96 SE)"
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
    name = batch.manifest["scenario"]["scenario"]["name"]
    c1, c2 = st.columns(2)
    c1.download_button(
        "summary CSV",
        summary.to_csv(index=False),
        file_name=f"{name}-summary.csv",
        mime="text/csv",
        key="batch_download",
    )
    c2.download_button(
        "per-task CSV",
        tasks.to_csv(index=False),
        file_name=f"{name}-tasks.csv",
        mime="text/csv",
        key="batch_download_tasks",
    )


def main() -> None:
    """The page, top to bottom."""
    st.title("Batch explorer")
    batch = open_store()
    if batch is None:
        return
    m = batch.manifest
    st.caption(
        f"scenario {m['scenario']['scenario']['name']!r} · {len(batch.tasks)} of "
        f"{len(m['tasks'])} tasks finished · swept: {', '.join(batch.swept) or '(nothing)'} · "
        f"repetitions: {m['repetitions']}"
    )
    chosen = filters(batch)
    plot(batch, chosen)
    table(batch, chosen)


main()
