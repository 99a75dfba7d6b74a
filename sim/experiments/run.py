"""One simulation run: model, progress, atomic Parquet outputs and a summary.

Outputs of ``run_scenario(..., out_dir=DIR)``:

* ``ticks.parquet``: one row per tick (utility, queries, budgets, attacks, timings);
* ``users.parquet``: one row per (tick, user) when ``output.per_user`` is on;
* ``timings.parquet``: wall-clock seconds per tick and phase (these differ between identical
  runs, so they are kept out of the two tables above, which are byte-identical for a seed);
* ``summary.json``: the scenario, the seed, the run's headline numbers and the whole-run
  attacks' scores (``attacks``: Viterbi, places, linkage, home_work, uniqueness).

Everything is written into a hidden sibling folder first and renamed to ``DIR`` at the end,
so an interrupted run leaves no folder that looks complete.
"""

from __future__ import annotations

import math
import re
import sys
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from mdpsim._core.guards import add_to_marker, check_not_input, input_paths, output_lock
from mdpsim._core.outputs import atomic_folder, json_text, new_folder
from mdpsim.errors import InputError, Interrupted
from mdpsim.experiments import estimate as estimating
from mdpsim.experiments import export as exporting
from mdpsim.experiments.export import TraceRecorder
from mdpsim.simulation.columns import tick_metrics
from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.scenario import Scenario
from mdpsim.simulation.scenario.tables import MAX_TICKS
from mdpsim.simulation.tick_row import TickColumns
from mdpsim.simulation.trace_walks import TracePopulation, moves_beyond_reach
from mdpsim.simulation.traces import BAD_ROWS_FILE

WROTE = "mdpsim run"  # in the marker of the folders it writes


def simulate(
    scenario: Scenario,
    *,
    seed: int | None = None,
    ticks: int | None = None,
    progress: bool = False,
    graph=None,
    domain=None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Run the model; return the per-tick, per-user and timing tables."""
    return tables(
        run_model(scenario, seed=seed, ticks=ticks, progress=progress, graph=graph, domain=domain)
    )


def run_model(
    scenario: Scenario,
    *,
    seed: int | None = None,
    ticks: int | None = None,
    progress: bool = False,
    graph=None,
    domain=None,
    recorder: TraceRecorder | None = None,
    max_memory_bytes: int | None = None,
) -> PrivacyModel:
    """Build the model and run it for ``ticks`` (default ``scenario.ticks``, with traces the
    data's) ticks. A ``recorder`` (:class:`~mdpsim.experiments.export.TraceRecorder`) is started
    on the model before the first tick and told after each. A run whose tables would hold more
    than ``max_memory_bytes`` (default: half the memory available) is refused before its first
    tick (:mod:`mdpsim.experiments.estimate`); with ``progress`` a big one's estimate is told."""
    model = PrivacyModel(scenario, rng=seed, graph=graph, domain=domain)
    if recorder is not None:
        recorder.start(model)
    n_ticks = model.config.scenario.ticks if ticks is None else ticks
    if isinstance(n_ticks, bool) or not isinstance(n_ticks, int) or not 1 <= n_ticks <= MAX_TICKS:
        raise InputError(f"ticks={n_ticks!r} must be an integer, >= 1 and <= {MAX_TICKS:,}")
    plan = estimating.estimate(
        n_ticks,
        model.world.n_users,
        per_user=model.config.output.per_user,
        export=recorder is not None,
    )
    estimating.check(plan, cap_bytes=max_memory_bytes)
    if progress and plan.peak_bytes >= estimating.TELL_FROM_BYTES:
        print(f"estimate: {plan.line()}", file=sys.stderr)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n_ticks, unit="tick", desc=scenario.scenario.name)

    def after_tick(_tick: int) -> None:
        if recorder is not None:
            recorder.after_tick(model)
        if bar is not None:
            bar.update(1)

    finished = False
    try:
        model.run(n_ticks, progress=after_tick)
        finished = True
    except KeyboardInterrupt:
        raise Interrupted(
            f"run interrupted after {model.tick} of {n_ticks} ticks; nothing was written: run "
            "the same command again (same seed, same results)"
        ) from None
    finally:
        if bar is not None:
            bar.leave = finished  # an error's line stands alone, under no stale bar
            bar.close()
    return model


def tables(model: PrivacyModel) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The per-tick, per-user and timing tables of a model's run so far."""
    ticks_df = model.log.columns.attach(pd.DataFrame(model.log.ticks))
    # some columns exist only at some ticks (the upload attack at releases): NaN elsewhere
    names = list(dict.fromkeys(k for cols in model.log.users for k in cols))
    users_df = pd.DataFrame(
        {
            k: np.concatenate([c.get(k, np.full(len(c["user"]), np.nan)) for c in model.log.users])
            for k in names
        }
    )
    if len(users_df):  # each user's id as written in its traces file (synthetic: the index)
        traces = model.world.traces
        user = users_df["user"].to_numpy(dtype=np.int64)
        ids = user if traces is None else traces.user_ids[user]
        users_df.insert(list(users_df.columns).index("user") + 1, "user_id", ids)
    return ticks_df, users_df, pd.DataFrame(model.log.timings)


def summarize(ticks_df: pd.DataFrame, timings_df: pd.DataFrame) -> dict:
    """Headline numbers of a run (means over ticks; the final budgets)."""
    out: dict = {"ticks": len(ticks_df)}
    for name in tick_metrics(TickColumns.of(ticks_df)):  # means over the ticks
        if name in ticks_df:
            value = float(np.nanmean(ticks_df[name])) if ticks_df[name].notna().any() else math.nan
            out[name] = value
    last = ticks_df.iloc[-1]
    out["reports"] = int(ticks_df["n_reports"].sum())
    out["halted_users_final"] = int(last["n_halted"])
    out["remaining_budget_mean_final"] = float(last["remaining_budget_mean"])
    out["mechanism_generations"] = int(last["mechanism_generations"])
    generated = timings_df["regenerated"]
    out["mechanism_generation_s_mean"] = float(timings_df.loc[generated, "mechanism_s"].mean())
    phases = ["move_s", "report_s", "query_s", "attack_s"]
    ticked = timings_df[timings_df["tick"] > 0]  # tick 0: the first generation only
    out["seconds_per_tick_excl_generation"] = float(ticked[phases].sum(axis=1).mean())
    return out


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    seed: int | None = None,
    ticks: int | None = None,
    progress: bool = False,
    overwrite: bool = False,
    export: tuple[str, str | Path] | None = None,
) -> dict:
    """Run and write ``ticks.parquet``, ``users.parquet`` and ``summary.json`` atomically;
    ``export = (format, path)`` also writes the traces (:mod:`mdpsim.experiments.export`): both
    or neither. The output paths are checked before the network is loaded (none may be an
    input: :func:`~mdpsim._core.guards.check_not_input`) and locked while the run lasts."""
    out = Path(out_dir)
    targets = [out] if export is None else [out, Path(export[1])]
    with output_lock(*targets):  # a second run into the same folder: one line, exit 2
        out = new_folder(out_dir, overwrite=overwrite, wrote=WROTE)
        inputs = input_paths(scenario)
        check_not_input(out, inputs, flag="--out")
        recorder = None
        if export is not None:
            exporting.check_target(*export, overwrite=overwrite, out=out)
            check_not_input(Path(export[1]), inputs, flag=f"--export {export[0]}")
            recorder = TraceRecorder()
        return _run_and_write(scenario, out, seed, ticks, progress, export, recorder)


def _run_and_write(
    scenario: Scenario,
    out: Path,
    seed: int | None,
    ticks: int | None,
    progress: bool,
    export: tuple[str, str | Path] | None,
    recorder: TraceRecorder | None,
) -> dict:
    """:func:`run_scenario` once its outputs are checked and locked."""
    model = run_model(scenario, seed=seed, ticks=ticks, progress=progress, recorder=recorder)
    used_seed = scenario.scenario.seed if seed is None else seed
    guarantee = model.budget.statement(model.tick)
    fixes = model.world.traces
    with (
        exporting.writing(recorder.table(), *export)
        if recorder is not None and export is not None
        else nullcontext()
    ):  # the export is renamed into place only once the run folder is
        return write_outputs(
            out,
            model.config,
            used_seed,
            tables(model),
            budget_guarantee=guarantee,
            traces=trace_summary(model),
            bad_rows=bad_rows_frame(fixes.report.lines) if fixes is not None else None,
            attacks=whole_run_scores(model),
        )


def whole_run_scores(model: PrivacyModel) -> dict[str, dict[str, float]]:
    """The attacks' whole-run scores (Viterbi, places, linkage, home_work, uniqueness), taken
    as the run ends: per label, the mean of every metric over the users scored (NaN left out);
    summary.json's ``attacks``. Attacks with nothing at the end are not listed."""
    suite = model.server.attacks
    if suite is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for label, scored in suite.finish().items():
        totals: dict[str, list[float]] = {}
        for s in scored:
            for metric, (total, count) in s.finite_totals().items():
                acc = totals.setdefault(metric, [0.0, 0])
                acc[0] += total
                acc[1] += count
        means = {m: t / n for m, (t, n) in totals.items() if n}
        if means:
            out[label] = means
    return out


def trace_summary(model: PrivacyModel) -> dict | None:
    """What the traces import found (summary.json's ``traces``; None for synthetic walks)."""
    fixes, population = model.world.traces, model.population
    if fixes is None or not isinstance(population, TracePopulation):
        return None
    walks = population.walks
    beyond = moves_beyond_reach(walks, model.domain.dist_xx, model.mobility.reach_km)
    _, snap_m = fixes.snap(model.domain.x_xy)
    return {
        **fixes.report.as_dict(),
        "users": fixes.n_users,
        "ticks": int(len(walks)),
        "snap_distance_m_median": float(np.median(snap_m)),
        "snap_distance_m_max": float(snap_m.max()),
        "moves_beyond_reach_fraction": beyond,
    }


_BAD_ROW = re.compile(r"^row (\d+)(?:, columns? ([^:]+))?: (.*)$")


def bad_rows_frame(lines: tuple[str, ...]) -> pd.DataFrame:
    """Every bad row of a traces file: its row number, the column(s) named, the problem."""
    parsed = [_BAD_ROW.match(line) for line in lines]
    return pd.DataFrame(
        {
            "row": pd.array([int(m[1]) if m else None for m in parsed], dtype="Int64"),
            "column": [m[2] if m else None for m in parsed],
            "problem": [m[3] if m else x for m, x in zip(parsed, lines, strict=True)],
        }
    )


def write_bad_rows(folder: str | Path, scenario: Scenario) -> Path | None:
    """Every bad row of ``scenario``'s traces file into ``folder``'s ``bad_rows.csv`` (for
    ``mdpsim attack``, ``batch`` and ``frontier``; a run writes it with its tables): its path,
    or None when there is none (synthetic mobility, a clean file, no folder written)."""
    from mdpsim.simulation.world import load_graph, trace_fixes

    folder = Path(folder)
    fixes = trace_fixes(scenario, load_graph(scenario)) if folder.is_dir() else None
    if fixes is None or not fixes.report.lines:
        return None
    path, tmp = folder / BAD_ROWS_FILE, folder / f".{BAD_ROWS_FILE}.partial"
    bad_rows_frame(fixes.report.lines).to_csv(tmp, index=False)
    add_to_marker(folder, BAD_ROWS_FILE)
    return tmp.replace(path)


def write_outputs(
    out_dir: str | Path,
    scenario: Scenario,
    seed: int,
    run_tables,
    *,
    budget_guarantee: str | None = None,
    traces: dict | None = None,
    bad_rows: pd.DataFrame | None = None,
    attacks: dict[str, dict[str, float]] | None = None,
) -> dict:
    """Write a run's tables (:func:`tables`) and ``summary.json`` atomically; the summary.

    ``budget_guarantee`` (the budget policy's statement) and ``traces`` (what the traces
    import found, :func:`trace_summary`) go into ``summary.json``; ``bad_rows`` (every bad
    row of the traces file) into ``bad_rows.csv``, which ``traces.bad_rows_file`` names;
    ``attacks`` (:func:`whole_run_scores`) into ``summary.json``'s ``attacks`` when not empty.
    """
    out = Path(out_dir)
    ticks_df, users_df, timings_df = run_tables
    summary = summarize(ticks_df, timings_df)
    used = {"scenario.seed": seed, "scenario.ticks": summary["ticks"]}
    if any(scenario.get(k) != v for k, v in used.items()):  # a seed or ticks given apart
        scenario = scenario.replace(**used)
    doc: dict[str, object] = {"scenario": scenario.to_dict(), "summary": summary}
    if budget_guarantee is not None:
        doc["budget_guarantee"] = budget_guarantee
    if traces is not None:
        doc["traces"] = traces
    if attacks:
        doc["attacks"] = attacks
    with atomic_folder(out, wrote=WROTE) as tmp:
        ticks_df.to_parquet(tmp / "ticks.parquet", index=False)
        timings_df.to_parquet(tmp / "timings.parquet", index=False)
        if len(users_df):
            users_df.to_parquet(tmp / "users.parquet", index=False)
        if bad_rows is not None and len(bad_rows):
            bad_rows.to_csv(tmp / BAD_ROWS_FILE, index=False)
        (tmp / "summary.json").write_text(json_text(doc))  # standard JSON: null, not NaN
    return summary


def summary_table(summary: dict) -> str:
    """The summary as an aligned two-column text table."""
    width = max(len(k) for k in summary)
    lines = []
    for key, value in summary.items():
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"{key.ljust(width)}  {text}")
    return "\n".join(lines)
