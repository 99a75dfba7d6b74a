"""The batch results store: its layout, the writer (used by :mod:`mdpsim.experiments.batch`) and
the readers.

Layout of a store ``DIR`` (docs/batch.md):

* ``manifest.json``: the scenario, its sweep, the seeding rule and every task
  (``task_id``, ``params`` {dotted field: value}, ``repetition``, ``seed``, ``status``);
* ``tasks/<task_id>.parquet``: the run's per-tick table with ``task_id``, ``repetition``,
  ``seed`` and one column per swept field (named by its dotted name) in front. Its existence
  is what marks a task as finished;
* ``tasks/<task_id>.timings.parquet``: wall-clock seconds per tick and phase (kept apart so
  that the per-tick tables are byte-identical whatever the backend or worker count);
* ``tasks/<task_id>.users.parquet``: one row per (tick, user) when ``output.per_user`` is on;
* ``failures.json``: ``task_id`` -> error text (the traceback) of tasks that failed.

Every file is written atomically (temporary file + rename, the per-tick table last). Readers
go by the files: a task counts as finished when its ``tasks/<task_id>.parquet`` exists,
whatever the manifest's ``status`` says (the manifest is rewritten at most once a second while
a batch runs, so it can lag behind after a crash).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from mdpsim.errors import InputError

if TYPE_CHECKING:
    from mdpsim.simulation.scenario import Scenario

MANIFEST = "manifest.json"
FAILURES = "failures.json"
TASKS = "tasks"
ID_COLUMNS = ("task_id", "repetition", "seed")


# ---------------------------------------------------------------------- writing
def new_manifest(scenario: Scenario, tasks: list[dict[str, Any]], seeding: str) -> dict[str, Any]:
    """The manifest of a batch; ``tasks`` are ``{"task_id", "params", "repetition", "seed"}``
    (every task starts "pending")."""
    return {
        "format": 1,
        "scenario": json.loads(canonical_json(scenario.to_dict())),
        "sweep": json.loads(canonical_json(scenario.sweep)),
        "swept_fields": [k for k in scenario.sweep if k != "repetitions"],
        "repetitions": int(scenario.sweep.get("repetitions", 1)),
        "seeding": seeding,
        "tasks": [{**t, "status": "pending"} for t in tasks],
    }


def open_store(out: Path, manifest: dict[str, Any], *, resume: bool) -> dict[str, str]:
    """Create or reopen the store for ``manifest``; return the recorded failures.

    Refuses a folder that is not a store, an existing store without ``resume``, and a store of
    another scenario, seeding or task list; removes leftover temporary files."""
    path = out / MANIFEST
    if path.is_file():
        if not resume:
            raise InputError(
                f"{out} already holds a batch; pass --resume to continue it, --overwrite to "
                "discard it and start again, or choose another --out"
            )
        old = json.loads(path.read_text(encoding="utf-8"))
        for key in ("scenario", "seeding"):
            if old.get(key) != manifest[key]:
                raise InputError(
                    f"{out} holds a batch with a different {key}; resume it with the same "
                    "scenario file and options, pass --overwrite to start it again with these, "
                    "or choose another --out"
                )
        if _task_keys(old["tasks"]) != _task_keys(manifest["tasks"]):
            raise InputError(
                f"{out}: the stored task list differs from this scenario's sweep; "
                "pass --overwrite to start it again with this sweep, or choose another --out"
            )
    elif out.exists() and any(out.iterdir()):
        raise InputError(
            f"output folder {str(out)!r} exists and is not a batch store; choose another --out"
        )
    (out / TASKS).mkdir(parents=True, exist_ok=True)
    for stale in (out / TASKS).glob(".*.tmp-*"):
        stale.unlink()
    fpath = out / FAILURES
    return json.loads(fpath.read_text(encoding="utf-8")) if fpath.is_file() else {}


def _task_keys(tasks: list[dict]) -> list[dict]:
    keys = ("task_id", "params", "repetition", "seed")
    return json.loads(canonical_json([{k: t[k] for k in keys} for t in tasks]))


def write_state(out: Path, manifest: dict, done: set[str], failures: dict[str, str]) -> None:
    """Rewrite the manifest's task statuses and ``failures.json``."""
    for t in manifest["tasks"]:
        tid = t["task_id"]
        t["status"] = "done" if tid in done else "failed" if tid in failures else "pending"
    _write_json(out / MANIFEST, manifest)
    _write_json(out / FAILURES, failures)


def write_task(
    out: Path,
    task_id: str,
    *,
    ticks: pd.DataFrame,
    timings: pd.DataFrame,
    users: pd.DataFrame | None = None,
) -> None:
    """Write one task's tables atomically; the per-tick table last (it marks completion)."""
    folder = out / TASKS
    if users is not None:
        _write_parquet(users, folder / f"{task_id}.users.parquet")
    _write_parquet(timings, folder / f"{task_id}.timings.parquet")
    _write_parquet(ticks, folder / f"{task_id}.parquet")


def write_failures(out: Path, failures: dict[str, str]) -> None:
    """Rewrite ``failures.json`` (``task_id`` -> error text)."""
    _write_json(out / FAILURES, failures)


def discard(out: Path) -> None:
    """Delete the store in ``out`` (only a folder holding a manifest)."""
    if not (out / MANIFEST).is_file():
        raise InputError(f"{out} is not a batch store (no {MANIFEST}); it is left as it is")
    shutil.rmtree(out)


def _write_json(path: Path, doc: Any) -> None:
    _atomic(path, lambda tmp: tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8"))


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    _atomic(path, lambda tmp: df.to_parquet(tmp, index=False))


def _atomic(path: Path, write: Callable[[Path], Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the form values are compared and stored in."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------- reading
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
