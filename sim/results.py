"""Reading a batch results store (written by :mod:`sim.batch`; layout in docs/batch.md).

A task counts as finished when its ``tasks/<task_id>.parquet`` exists, whatever the manifest's
``status`` says (the manifest is rewritten at most once a second while a batch runs, so it can
lag behind after a crash).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from sim.batch import FAILURES, MANIFEST, TASKS
from sim.errors import InputError

ID_COLUMNS = ("task_id", "repetition", "seed")


def load_manifest(store: str | Path) -> dict[str, Any]:
    """The store's manifest: scenario, sweep, seeding and the task list."""
    path = Path(store) / MANIFEST
    if not path.is_file():
        raise InputError(f"{store} is not a batch store (no {MANIFEST}); run `mdpsim batch` first")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None


def swept_fields(store: str | Path) -> list[str]:
    """The dotted names of the swept fields, in sweep order (not ``repetitions``)."""
    return list(load_manifest(store)["swept_fields"])


def load_failures(store: str | Path) -> dict[str, str]:
    """``task_id`` -> error text of the tasks that failed and have not succeeded since."""
    path = Path(store) / FAILURES
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def finished_ids(store: str | Path) -> list[str]:
    """Ids of the finished tasks, in manifest order."""
    folder = Path(store) / TASKS
    return [
        t["task_id"]
        for t in load_manifest(store)["tasks"]
        if (folder / f"{t['task_id']}.parquet").is_file()
    ]


def task_table(store: str | Path) -> pd.DataFrame:
    """One row per task: id columns, swept values, ``status`` (from the files) and failure."""
    manifest = load_manifest(store)
    done = set(finished_ids(store))
    failures = load_failures(store)
    rows = []
    for t in manifest["tasks"]:
        tid = t["task_id"]
        status = "done" if tid in done else "failed" if tid in failures else "pending"
        rows.append(
            {
                "task_id": tid,
                "repetition": t["repetition"],
                "seed": t["seed"],
                **t["params"],
                "status": status,
                "error": failures.get(tid) if status == "failed" else None,
            }
        )
    return pd.DataFrame(rows)


def load_ticks(store: str | Path) -> pd.DataFrame:
    """The per-tick tables of all finished tasks, stacked (manifest order)."""
    return _stack(store, "")


def load_timings(store: str | Path) -> pd.DataFrame:
    """Wall-clock seconds per tick and phase of all finished tasks, stacked."""
    return _stack(store, ".timings")


def load_users(store: str | Path, task_ids: list[str] | None = None) -> pd.DataFrame:
    """Per-(tick, user) rows of the given (default: all finished) tasks, where stored."""
    return _stack(store, ".users", task_ids)


def scenario_value(manifest: dict[str, Any], dotted: str) -> Any:
    """A field's value in the batch's base scenario (before the sweep)."""
    table, _, name = dotted.partition(".")
    return manifest["scenario"][table][name]


def _stack(store: str | Path, suffix: str, task_ids: list[str] | None = None) -> pd.DataFrame:
    folder = Path(store) / TASKS
    ids = finished_ids(store) if task_ids is None else task_ids
    paths = [folder / f"{tid}{suffix}.parquet" for tid in ids]
    frames = [pd.read_parquet(p) for p in paths if p.is_file()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
