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
* ``tasks/<task_id>.done.json``: the task's record, written last: each of its files' size in
  bytes and SHA-256. Its existence, and every file matching it, is what marks a task as
  finished (the manifest's tasks carry a copy, ``files``);
* ``failures.json``: ``task_id`` -> error text (the traceback) of tasks that failed.

Every file is written atomically (temporary file + rename, the record last). Readers go by the
records: a task counts as finished when its record exists and each file it lists has the
recorded size and checksum, whatever the manifest's ``status`` says (the manifest is rewritten
at most once a second while a batch runs, so it can lag behind after a crash). A task whose
files are missing, truncated or altered is *damaged*: ``--resume`` runs it again, readers leave
it out with a warning naming the file (:func:`verify`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from mdpsim._core.guards import MARKER, check_not_dangerous, check_replaceable, write_marker
from mdpsim.errors import InputError, one_line
from mdpsim.simulation.tick_row import stack

if TYPE_CHECKING:
    from mdpsim.simulation.scenario import Scenario

MANIFEST = "manifest.json"
FAILURES = "failures.json"
TASKS = "tasks"
RECORD = ".done.json"  # tasks/<task_id>.done.json: the finished task's files, sizes, checksums
ID_COLUMNS = ("task_id", "repetition", "seed")
SUFFIXES = (".users", ".timings", "")  # a task's tables, in the order they are written


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


def check_store_folder(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse, before any work, a folder that is not a store and an existing store without
    ``resume`` or ``overwrite`` (a store where nothing has finished or failed yet, left by a
    batch stopped before its first task, is accepted: a plain re-run replaces it)."""
    check_not_dangerous(out)
    if (out / MANIFEST).is_file():
        if overwrite:
            check_owned(out)
        if not resume and not overwrite and not _is_empty_store(out):
            raise InputError(
                f"{out} already holds a batch; pass --resume to continue it, --overwrite to "
                "discard it and start again, or choose another --out"
            )
    elif out.is_dir() and any(out.iterdir()):
        raise InputError(
            f"output folder {str(out)!r} exists and is not a batch store; choose another --out"
        )


def _is_empty_store(out: Path) -> bool:
    """A store with no finished, damaged or failed task: nothing in it to keep."""
    tasks = out / TASKS
    has_files = tasks.is_dir() and any(not p.name.startswith(".") for p in tasks.iterdir())
    return not has_files and not load_failures(out)


def open_store(out: Path, manifest: dict[str, Any], *, resume: bool) -> dict[str, str]:
    """Create or reopen the store for ``manifest``; return the recorded failures.

    Refuses a folder that is not a store, an existing store without ``resume``, and a store of
    another scenario, seeding or task list; removes leftover temporary files. An empty store
    (:func:`check_store_folder`) is replaced."""
    check_store_folder(out, resume=resume, overwrite=False)
    path = out / MANIFEST
    if path.is_file() and _is_empty_store(out):
        check_owned(out)
        shutil.rmtree(out)
    if path.is_file():
        old = load_manifest(out)
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
    (out / TASKS).mkdir(parents=True, exist_ok=True)
    for stale in (out / TASKS).glob(".*.tmp-*"):
        stale.unlink()
    if not (out / MARKER).is_file():
        write_marker(out, "mdpsim batch")  # its files: the store's names (check_owned)
    return load_failures(out)


_STORE_FILE = re.compile(
    r"^(manifest\.json|failures\.json|bad_rows\.csv|\.mdpsim-output|"
    r"tasks/[^/]+?(\.users|\.timings)?\.parquet|tasks/[^/]+?\.done\.json|"
    r"(tasks/)?\.[^/]+\.tmp-\d+)$"
)


def check_owned(out: Path) -> None:
    """Refuse (one line naming the foreign file, nothing touched) to delete a folder that
    holds anything but a batch store's own files; its ``report/`` must be mdpsim's too."""
    check_not_dangerous(out)
    for path in sorted(out.rglob("*")):
        name = path.relative_to(out).as_posix()
        if name == "report" or name.startswith("report/"):
            continue
        if path.is_dir() and name == TASKS:
            continue
        if not _STORE_FILE.match(name):
            raise InputError(
                f"--overwrite refuses to delete {str(out)!r}: it holds {name!r}, which is not "
                "part of a batch store; move it out or choose another --out"
            )
    if (out / "report").is_dir():
        check_replaceable(out / "report", flag="--overwrite", wrote="mdpsim report")


def _task_keys(tasks: list[dict]) -> list[dict]:
    keys = ("task_id", "params", "repetition", "seed")
    return json.loads(canonical_json([{k: t[k] for k in keys} for t in tasks]))


def write_state(out: Path, manifest: dict, done: dict[str, dict], failures: dict[str, str]) -> None:
    """Rewrite the manifest's task statuses (with the finished tasks' records, ``done``:
    task_id -> file name -> size and checksum) and ``failures.json``."""
    for t in manifest["tasks"]:
        tid = t["task_id"]
        t["status"] = "done" if tid in done else "failed" if tid in failures else "pending"
        if tid in done:
            t["files"] = done[tid]
        else:
            t.pop("files", None)
    _write_json(out / MANIFEST, manifest)
    _write_json(out / FAILURES, failures)


def write_task(
    out: Path,
    task_id: str,
    *,
    ticks: pd.DataFrame,
    timings: pd.DataFrame,
    users: pd.DataFrame | None = None,
) -> dict[str, dict]:
    """Write one task's tables atomically, then its record (which marks completion); return
    the record: file name -> ``{"bytes", "sha256"}``."""
    folder = out / TASKS
    tables = {".users": users, ".timings": timings, "": ticks}
    files: dict[str, dict] = {}
    for suffix in SUFFIXES:
        df = tables[suffix]
        if df is not None:
            path = folder / f"{task_id}{suffix}.parquet"
            _write_parquet(df, path)
            files[path.name] = _fingerprint(path)
    _write_json(_record_path(folder, task_id), {"task_id": task_id, "files": files})
    return files


def forget_task(out: Path, task_id: str) -> None:
    """Delete a task's record and files (a damaged task, before it runs again)."""
    folder = out / TASKS
    _record_path(folder, task_id).unlink(missing_ok=True)
    for suffix in SUFFIXES:
        (folder / f"{task_id}{suffix}.parquet").unlink(missing_ok=True)


def write_failures(out: Path, failures: dict[str, str]) -> None:
    """Rewrite ``failures.json`` (``task_id`` -> error text)."""
    _write_json(out / FAILURES, failures)


def discard(out: Path) -> None:
    """Delete the store in ``out`` (only a folder holding a manifest)."""
    if not (out / MANIFEST).is_file():
        raise InputError(f"{out} is not a batch store (no {MANIFEST}); it is left as it is")
    check_owned(out)
    shutil.rmtree(out)


def _write_json(path: Path, doc: Any) -> None:
    _atomic(path, lambda tmp: tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8"))


def _record_path(folder: Path, task_id: str) -> Path:
    return folder / f"{task_id}{RECORD}"


def _fingerprint(path: Path) -> dict[str, Any]:
    """A file's size in bytes and SHA-256 (hex)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


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
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not all(isinstance(t["task_id"], str) for t in manifest["tasks"]):
            raise ValueError("a task_id is not a string")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} is damaged, not a batch manifest ({one_line(exc)})") from None
    return manifest


def swept_fields(store: str | Path) -> list[str]:
    """The dotted names of the swept fields, in sweep order (not ``repetitions``)."""
    return list(load_manifest(store)["swept_fields"])


def load_failures(store: str | Path) -> dict[str, str]:
    """``task_id`` -> error text of the tasks that failed and have not succeeded since."""
    path = Path(store) / FAILURES
    if not path.is_file():
        return {}
    try:
        failures = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{path} is damaged ({one_line(exc)}); delete it (it only holds the failed tasks' "
            "error texts, which --resume retries) and run again"
        ) from None
    if not isinstance(failures, dict):
        raise InputError(f"{path} is damaged (not a JSON object); delete it and run again")
    return failures


@dataclass(frozen=True)
class Verified:
    """What :func:`verify` found: the finished tasks' records (manifest order) and, for each
    damaged task, one line naming the file and what is wrong with it."""

    done: dict[str, dict] = field(default_factory=dict)
    damaged: dict[str, str] = field(default_factory=dict)

    def warnings(self, store: str | Path) -> list[str]:
        """One line per damaged task: which file, what is wrong, what to do."""
        return [
            f"task {tid}: {why}; left out (`mdpsim batch ... --out {store} --resume` runs it again)"
            for tid, why in self.damaged.items()
        ]


def verify(store: str | Path, task_ids: list[str] | None = None) -> Verified:
    """Check every task's record against its files (default: every task of the manifest).

    A task with no record and no file has not run (neither finished nor damaged); a file
    without a record, a record that does not parse, a listed file that is missing or whose
    size or SHA-256 differs from the record make the task damaged."""
    folder = Path(store) / TASKS
    ids = [t["task_id"] for t in load_manifest(store)["tasks"]] if task_ids is None else task_ids
    present = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    done: dict[str, dict] = {}
    damaged: dict[str, str] = {}
    for tid in ids:
        files = [f"{tid}{suffix}.parquet" for suffix in SUFFIXES]
        record = f"{tid}{RECORD}"
        if record not in present:
            if any(name in present for name in files):
                stray = next(name for name in reversed(files) if name in present)
                damaged[tid] = f"{TASKS}/{stray} has no record ({TASKS}/{record}): unfinished"
            continue
        problem, listed = _check_record(folder, record, tid)
        if problem is None:
            done[tid] = listed
        else:
            damaged[tid] = problem
    return Verified(done=done, damaged=damaged)


def _check_record(folder: Path, record: str, tid: str) -> tuple[str | None, dict]:
    """(None, the record's files) if every file matches, else (what is wrong, {})."""
    try:
        files = json.loads((folder / record).read_text(encoding="utf-8"))["files"]
        if f"{tid}.parquet" not in files:
            raise ValueError(f"it lists no {tid}.parquet")
        expected = {name: (int(f["bytes"]), str(f["sha256"])) for name, f in files.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{TASKS}/{record} is damaged ({one_line(exc)})", {}
    for name, (size, sha) in expected.items():
        path = folder / name
        if not path.is_file():
            return f"{TASKS}/{name} is missing", {}
        found = path.stat().st_size
        if found == 0:
            return f"{TASKS}/{name} is empty (recorded {size:,} bytes)", {}
        if found != size:
            return f"{TASKS}/{name} is truncated or extended ({found:,} of {size:,} bytes)", {}
        if _fingerprint(path)["sha256"] != sha:
            return f"{TASKS}/{name} is altered (its SHA-256 differs from the record)", {}
    return None, files


def finished_ids(store: str | Path) -> list[str]:
    """Ids of the finished (verified) tasks, in manifest order."""
    return list(verify(store).done)


def task_table(store: str | Path) -> pd.DataFrame:
    """One row per task: id columns, swept values, ``status`` (from the records: done,
    damaged, failed or pending) and the failure or damage."""
    manifest = load_manifest(store)
    checked = verify(store)
    failures = load_failures(store)
    rows = []
    for t in manifest["tasks"]:
        tid = t["task_id"]
        status = (
            "done"
            if tid in checked.done
            else "damaged"
            if tid in checked.damaged
            else "failed"
            if tid in failures
            else "pending"
        )
        error = {"failed": failures.get(tid), "damaged": checked.damaged.get(tid)}.get(status)
        rows.append(
            {
                "task_id": tid,
                "repetition": t["repetition"],
                "seed": t["seed"],
                **t["params"],
                "status": status,
                "error": error,
            }
        )
    return pd.DataFrame(rows)


def load_ticks(store: str | Path, task_ids: list[str] | None = None) -> pd.DataFrame:
    """The per-tick tables of the given (default: all finished) tasks, stacked, with their
    declared columns (:class:`~mdpsim.simulation.tick_row.TickColumns`)."""
    return _stack(store, "", task_ids)


def load_timings(store: str | Path, task_ids: list[str] | None = None) -> pd.DataFrame:
    """Wall-clock seconds per tick and phase of the given (default: all finished) tasks."""
    return _stack(store, ".timings", task_ids)


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
    frames = []
    for tid in ids:
        path = folder / f"{tid}{suffix}.parquet"
        if not path.is_file():
            continue
        try:
            frames.append(pd.read_parquet(path))
        except Exception as exc:  # pyarrow's errors: a file that does not read
            raise InputError(
                f"{path} cannot be read ({one_line(exc)}); `mdpsim batch ... --resume` runs "
                f"task {tid} again"
            ) from None
    return stack(frames)  # a tick table's declared columns merged (others have none)
