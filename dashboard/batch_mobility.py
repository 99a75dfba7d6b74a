"""The measures of human mobility per task of a batch store, for the batch explorer.

A task's users walk the same way whatever its mechanism: the walk is drawn from the task's
scenario and seed alone (``World.walks_ahead`` gives the run's walk without running it), so
each distinct (mobility-relevant fields, seed) is walked and measured once
(:func:`mdpsim.simulation.mobility_measures.measure`) and shared by the tasks that differ only
in mechanism, queries, attacks or strategies.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from mdpsim.experiments.store import canonical_json, load_manifest
from mdpsim.simulation import scenario as scenario_mod
from mdpsim.simulation.mobility_measures import LAWS, measure
from mdpsim.simulation.world import build_world

#: The tables that do not change the users' walk.
NOT_WALK = ("mechanism", "queries", "attacks", "strategies", "output", "sweep")
PREFIX = "mobility_"
#: Uniqueness points' grid cell (``mdpsim mobility``'s default).
RESOLUTION_M = 200.0


def labels() -> dict[str, str]:
    """Column -> label of every measure."""
    return {f"{PREFIX}{name}": f"mobility: {name} (law {law})" for name, (law, *_) in LAWS.items()}


def walk_key(scenario: scenario_mod.Scenario, seed: int) -> str:
    """What a task's walk depends on: its scenario without :data:`NOT_WALK`, and its seed."""
    fields = {k: v for k, v in scenario.to_dict().items() if k not in NOT_WALK}
    return f"{seed}:{canonical_json(fields)}"


def task_measures(
    store: str | Path,
    task_ids: list[str],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """One row per task of ``task_ids``: ``task_id`` and every measure (``mobility_<name>``)."""
    manifest = load_manifest(store)
    base = scenario_mod.from_dict(manifest["scenario"])
    tasks = {t["task_id"]: t for t in manifest["tasks"]}
    done: dict[str, dict[str, float]] = {}
    rows = []
    for i, tid in enumerate(task_ids):
        task = tasks[tid]
        varied = base.replace(**task["params"]) if task["params"] else base
        key = walk_key(varied, int(task["seed"]))
        if key not in done:
            world = build_world(varied, int(task["seed"]))
            run = world.scenario.scenario
            walk = world.walks_ahead(run.ticks)
            done[key] = measure(
                walk, world.domain.x_xy, tick_seconds=run.tick_seconds,
                start_hour=run.start_hour, resolution_m=RESOLUTION_M, seed=world.seed,
            )["values"]  # fmt: skip
        rows.append({"task_id": tid, **{f"{PREFIX}{k}": v for k, v in done[key].items()}})
        if progress is not None:
            progress(i + 1, len(task_ids))
    return pd.DataFrame(rows)
