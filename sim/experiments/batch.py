"""Batch runs: a scenario's ``[sweep]`` expanded into tasks, run on a process pool or Dask.

The tasks' tables go to a results store (layout and writing in :mod:`mdpsim.experiments.store`).

Workers only compute; the driver process writes every file, each one atomically (temporary
file + rename, the per-tick table last), so a batch killed at any moment and resumed neither
loses nor duplicates a task, and remote Dask workers need no shared file system.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import time
import traceback
from collections.abc import Callable, Generator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mdpsim._core.guards import check_not_input, input_paths, output_lock
from mdpsim._core.outputs import check_folder
from mdpsim._core.threads import available_cores, thread_budget, threads_per_worker
from mdpsim.errors import InputError, Interrupted, PluginError, one_line
from mdpsim.experiments import store
from mdpsim.experiments.backends import Backend, check_options, connect_dask
from mdpsim.experiments.store import canonical_json
from mdpsim.simulation.scenario import Scenario

SEEDING = ("per-task", "common")
_MANIFEST_EVERY_S = 1.0  # rewrite the manifest at most this often while tasks finish


@dataclass(frozen=True)
class Task:
    """One run of a batch: the swept values, the repetition and the derived seed."""

    task_id: str
    params: dict[str, Any]
    repetition: int
    seed: int


@dataclass
class TaskResult:
    """What a worker sends back: the tables, or the error text."""

    task_id: str
    ticks: pd.DataFrame | None = None
    timings: pd.DataFrame | None = None
    users: pd.DataFrame | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class BatchOutcome:
    """Counts of a batch after :func:`run_batch`, and the failed tasks' error texts."""

    n_tasks: int
    n_done: int
    n_failed: int
    n_skipped: int
    seconds: float
    failures: dict[str, str] = field(default_factory=dict)
    workers: int = 1  # concurrent tasks; 0 on an external cluster
    threads_per_task: int = 1
    cores: int = 1
    redone: dict[str, str] = field(default_factory=dict)  # damaged task -> what was wrong

    @property
    def ok(self) -> bool:
        """Whether every task of the batch has finished."""
        return self.n_done == self.n_tasks

    @property
    def threads_line(self) -> str:
        """How the batch shared the cores, for its summary (workers 0: an external cluster's)."""
        threads = f"{self.threads_per_task} thread(s) per task (tracking filter; BLAS pinned to 1)"
        if self.workers == 0:
            return f"the cluster's workers x {threads}"
        return f"{self.workers} worker(s) x {threads} on {self.cores} core(s) this process may use"


# ---------------------------------------------------------------------- expansion and seeds
def expand(scenario: Scenario, *, seeding: str = "per-task") -> list[Task]:
    """The tasks of a scenario's sweep: every combination of values, times ``repetitions``.

    Combinations follow the order of the ``[sweep]`` keys (the last key varies fastest), with
    repetitions innermost. Values are normalised through the scenario's validation (an int
    given for a float field becomes a float), so ``4`` and ``4.0`` give the same task and seed.

    Parameters
    ----------
    scenario
        A validated scenario; an empty sweep gives ``repetitions`` (default 1) tasks.
    seeding
        ``"per-task"``: each task's seed comes from the scenario seed and its (params,
        repetition); ``"common"``: from the scenario seed and the repetition only, so every
        sweep point of one repetition sees the same domain and walks (common random numbers).
    """
    if seeding not in SEEDING:
        raise InputError(f"seeding={seeding!r} must be one of {', '.join(SEEDING)}")
    fields = [k for k in scenario.sweep if k != "repetitions"]
    repetitions = int(scenario.sweep.get("repetitions", 1))
    combos = itertools.product(*(scenario.sweep[k] for k in fields))
    n_tasks = repetitions * int(np.prod([len(scenario.sweep[k]) for k in fields]))
    width = max(4, len(str(n_tasks - 1)))
    base_seed = scenario.scenario.seed
    tasks: list[Task] = []
    for combo in combos:
        varied = scenario.replace(**dict(zip(fields, combo, strict=True)))
        params = {k: varied.get(k) for k in fields}
        for rep in range(repetitions):
            key = (
                {"repetition": rep}
                if seeding == "common"
                else {"params": params, "repetition": rep}
            )
            tasks.append(
                Task(
                    task_id=f"{len(tasks):0{width}d}",
                    params=params,
                    repetition=rep,
                    seed=derive_seed(base_seed, key),
                )
            )
    return tasks


def derive_seed(base_seed: int, key: dict[str, Any]) -> int:
    """A 63-bit seed from ``base_seed`` and a JSON-able key (SeedSequence over SHA-256)."""
    digest = hashlib.sha256(canonical_json(key).encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    state = np.random.SeedSequence(base_seed, spawn_key=words).generate_state(2, np.uint32)
    return ((int(state[0]) << 32) | int(state[1])) & (2**63 - 1)


def check_tasks(scenario: Scenario, tasks: list[Task]) -> None:
    """Check every task's parameters before anything runs or is written.

    Beyond the fields' own validation (done by :func:`expand`): each task's network loads, its
    ``domain.n_points`` and ``domain.n_outputs`` fit on that network, and the domain's distance
    matrices fit in this machine's memory. Raises
    :class:`InputError` naming the first bad task and field.
    """
    from mdpsim.geo.domain import check_memory
    from mdpsim.geo.routing import max_points
    from mdpsim.simulation.world import domain_sizes, load_graph

    limits: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    for task in tasks:
        key = canonical_json(task.params)
        if key in seen:
            continue
        seen.add(key)
        varied = scenario.replace(**task.params)
        net = varied.network
        where = f"task {task.task_id}" + (f" ({_describe(task.params)})" if task.params else "")
        source = (varied.network_source(), net.network_type)
        if source not in limits:
            try:
                graph = load_graph(varied)
            except InputError as exc:
                raise InputError(f"{where}: field network.source: {exc}") from None
            limits[source] = max_points(graph)
        limit = limits[source]
        dom = varied.domain
        for name in ("n_points", "n_outputs"):
            n = getattr(dom, name)
            if n > limit:
                raise InputError(
                    f"{where}: field domain.{name} = {n:,} is more than network "
                    f"{net.source!r} ({net.network_type}) allows: at most {limit:,} points "
                    "at least 1 m apart; use fewer points or a larger network"
                )
        for name, n_y in (("n_points", None), ("n_outputs", domain_sizes(varied)[1])):
            try:
                check_memory(dom.n_points, n_y)
            except InputError as exc:
                raise InputError(f"{where}: field domain.{name}: {exc}") from None


def _describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def error_line(text: str) -> str:
    """The last line of an error text (a traceback's ``Type: message``)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no message)"


# ---------------------------------------------------------------------- one task (in a worker)
def run_task(scenario: Scenario, task: Task, threads: int | None = None) -> TaskResult:
    """Simulate one task with a budget of ``threads`` (``None``: the worker's cores); never
    raises (errors come back as text)."""
    from mdpsim.experiments.run import simulate

    start = time.perf_counter()
    try:
        varied = scenario.replace(**task.params) if task.params else scenario
        with thread_budget(threads):
            ticks, users, timings = simulate(varied, seed=task.seed)
        front = _identity_columns(task)
        return TaskResult(
            task_id=task.task_id,
            ticks=_with_front(ticks, front),
            timings=_with_front(timings, front),
            users=_with_front(users, front) if len(users) else None,
            seconds=time.perf_counter() - start,
        )
    except Exception:  # one task's failure must not stop the batch
        return TaskResult(
            task_id=task.task_id, error=traceback.format_exc(), seconds=time.perf_counter() - start
        )


def _identity_columns(task: Task) -> dict[str, Any]:
    cols: dict[str, Any] = {
        "task_id": task.task_id,
        "repetition": task.repetition,
        "seed": task.seed,
    }
    for key, value in task.params.items():
        cols[key] = value if isinstance(value, bool | int | float | str) else canonical_json(value)
    return cols


def _with_front(df: pd.DataFrame, front: dict[str, Any]) -> pd.DataFrame:
    ident = pd.DataFrame({k: [v] * len(df) for k, v in front.items()})
    if "seed" in ident:
        ident["seed"] = ident["seed"].astype(np.int64)
    if "repetition" in ident:
        ident["repetition"] = ident["repetition"].astype(np.int64)
    out = pd.concat([ident, df.reset_index(drop=True)], axis=1)
    out.attrs.update(df.attrs)  # a tick table's declared columns
    return out


# ---------------------------------------------------------------------- backends
_Results = Generator[tuple[Task, TaskResult], None, None]


def _serial(scenario: Scenario, tasks: list[Task], threads: int) -> _Results:
    for task in tasks:
        yield task, run_task(scenario, task, threads)


def _pooled(executor, scenario: Scenario, tasks: list[Task], threads: int) -> _Results:
    futures: dict[Future, Task] = {
        executor.submit(run_task, scenario, t, threads): t for t in tasks
    }
    try:
        for fut in as_completed(futures):
            task = futures.pop(fut)
            exc = fut.exception()
            if exc is not None:  # the worker died or the backend lost the task
                text = "".join(traceback.format_exception(exc))
                yield task, TaskResult(task_id=task.task_id, error=text)
            else:
                yield task, fut.result()
    finally:
        for fut in futures:
            fut.cancel()


def _process_pool(workers: int) -> ProcessPoolExecutor:
    import multiprocessing as mp

    ctx = mp.get_context("forkserver")  # no fork of a threaded parent; sim imported once
    ctx.set_forkserver_preload(["mdpsim.experiments.batch", "mdpsim.experiments.run"])
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


# ---------------------------------------------------------------------- the driver
def run_batch(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    backend: Backend | None = None,
    resume: bool = False,
    overwrite: bool = False,
    seeding: str = "per-task",
    progress: bool = True,
    on_result: Callable[[Task, TaskResult], None] | None = None,
    notify: Callable[[str], None] | None = None,
) -> BatchOutcome:
    """Run every unfinished task of ``scenario``'s sweep and store the results in ``out_dir``.

    Parameters
    ----------
    backend
        Where the tasks run: local worker processes or Dask, and the threads per task
        (:class:`~mdpsim.experiments.backends.Backend`; default: one by one in this process).
    resume
        Continue the batch already stored in ``out_dir``: finished tasks are skipped, failed
        ones retried. Without it (or ``overwrite``), ``out_dir`` must not hold a batch.
    overwrite
        Discard the batch stored in ``out_dir`` (a folder with a manifest) and run every task
        afresh, e.g. after fixing the scenario of a failed batch.
    seeding
        ``"per-task"`` or ``"common"`` (see :func:`expand`).
    on_result
        Called in the driver after each task's outcome has been stored.
    notify
        Told one line per task found damaged in the store (:func:`mdpsim.experiments.store.verify`),
        which then runs again.

    Everything is checked (options, the output folder, every task, the Dask scheduler)
    before the store is created, so a refusal leaves nothing behind. Ctrl-C raises
    :class:`~mdpsim.errors.Interrupted` saying what finished and how to resume.
    """
    backend = Backend() if backend is None else backend
    check_options(
        workers=backend.workers,
        scheduler=backend.scheduler,
        dask_workers=backend.dask_workers,
        connect_timeout_s=backend.connect_timeout_s,
        threads_per_task=backend.threads_per_task,
        resume=resume,
        overwrite=overwrite,
    )
    start = time.perf_counter()
    out = check_folder(out_dir, inside=True)
    check_not_input(out, input_paths(scenario), flag="--out")
    with output_lock(out):  # a second batch into the same store: one line, exit 2
        store.check_store_folder(out, resume=resume, overwrite=overwrite)
        tasks = expand(scenario, seeding=seeding)
        check_tasks(scenario, tasks)
        manifest = store.new_manifest(scenario, [asdict(t) for t in tasks], seeding)
        batch = _Batch(scenario, out, tasks, manifest, start)
        client = None
        if backend.dask:  # reached before a store exists
            client = connect_dask(
                scheduler=backend.scheduler,
                dask_workers=backend.dask_workers,
                processes=backend.dask_processes,
                connect_timeout_s=backend.connect_timeout_s,
            )
        try:
            ledger = _open_store(batch, resume=resume, overwrite=overwrite, notify=notify)
            return _drive(batch, ledger, client, backend, progress=progress, on_result=on_result)
        finally:
            if client is not None:
                cluster = client.cluster
                client.close()
                if cluster is not None:
                    cluster.close()


@dataclass(frozen=True)
class _Batch:
    """A batch's fixed parts: the scenario, its store folder, tasks and manifest, and the
    ``time.perf_counter()`` it started at."""

    scenario: Scenario
    out: Path
    tasks: list[Task]
    manifest: dict
    start: float


@dataclass
class _Ledger:
    """What a batch has finished (task_id -> its files' records) and what failed (task_id ->
    error text), written to its store as tasks come back."""

    batch: _Batch
    done: dict[str, dict]
    failures: dict[str, str]
    existed: bool  # the store folder existed before this batch opened it
    redone: dict[str, str]  # damaged task -> what was wrong
    n_skipped: int
    last_write: float = 0.0  # time.monotonic() of the last manifest write

    def write_state(self) -> None:
        """Rewrite the manifest's task statuses and ``failures.json``."""
        store.write_state(self.batch.out, self.batch.manifest, self.done, self.failures)

    def record(self, task: Task, result: TaskResult) -> None:
        """Store one task's tables, or its failure; the manifest at most every second."""
        out = self.batch.out
        if result.ticks is not None and result.timings is not None:
            try:
                self.done[task.task_id] = store.write_task(
                    out,
                    result.task_id,
                    ticks=result.ticks,
                    timings=result.timings,
                    users=result.users,
                )
            except OSError as exc:
                raise InputError(
                    f"cannot write task {task.task_id} to {out} ({one_line(exc)}); "
                    f"{_where(self.done, len(self.batch.tasks), out)}: free space and run the "
                    "same command with --resume"
                ) from None
            self.failures.pop(task.task_id, None)
        else:
            self.failures[task.task_id] = result.error or "the task returned no tables"
            store.write_failures(out, self.failures)
        if time.monotonic() - self.last_write >= _MANIFEST_EVERY_S:
            self.write_state()
            self.last_write = time.monotonic()


def _open_store(
    batch: _Batch, *, resume: bool, overwrite: bool, notify: Callable[[str], None] | None
) -> _Ledger:
    """Open (or create) the store, forget its damaged tasks and record what is left to do."""
    out = batch.out
    if overwrite and (out / store.MANIFEST).is_file():
        store.discard(out)
    existed = out.is_dir()
    failures = store.open_store(out, batch.manifest, resume=resume)
    checked = store.verify(out, [t.task_id for t in batch.tasks])
    done = dict(checked.done)
    for tid, why in checked.damaged.items():
        store.forget_task(out, tid)
        if notify is not None:
            notify(f"task {tid}: {why}; running it again")
    failures = {k: v for k, v in failures.items() if k not in done}
    ledger = _Ledger(batch, done, failures, existed, dict(checked.damaged), len(done))
    ledger.write_state()
    return ledger


def _drive(
    batch: _Batch, ledger: _Ledger, client, backend: Backend, *, progress: bool,
    on_result: Callable[[Task, TaskResult], None] | None,
) -> BatchOutcome:  # fmt: skip
    """Run the unfinished tasks and store their outcomes (:func:`run_batch`)."""
    todo = [t for t in batch.tasks if t.task_id not in ledger.done]
    cores = available_cores()
    concurrent, threads_per_task = _concurrency(backend, len(todo), cores)
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(
            total=len(batch.tasks),
            initial=len(ledger.done),
            unit="task",
            desc=_name(batch.scenario),
        )
    try:
        _run_tasks(ledger, todo, client, (concurrent, threads_per_task), bar, on_result)
    except KeyboardInterrupt:
        raise Interrupted(
            f"batch interrupted; {_where(ledger.done, len(batch.tasks), batch.out)}: run the "
            "same command with --resume to continue"
        ) from None
    finally:
        if bar is not None:
            bar.close()
        with contextlib.suppress(OSError):  # a full disk: the records say what has finished
            ledger.write_state()
    if not ledger.done and ledger.failures:
        _refuse_if_input(batch.out, ledger.failures, ledger.existed)
    return BatchOutcome(
        n_tasks=len(batch.tasks),
        n_done=len(ledger.done),
        n_failed=len(ledger.failures),
        n_skipped=ledger.n_skipped,
        seconds=time.perf_counter() - batch.start,
        failures=dict(ledger.failures),
        workers=concurrent,
        threads_per_task=threads_per_task,
        cores=cores,
        redone=ledger.redone,
    )


def _concurrency(backend: Backend, n_todo: int, cores: int) -> tuple[int, int]:
    """The tasks run at once (0: unknown, an external cluster's workers) and the threads each
    may use."""
    if backend.scheduler is not None:
        concurrent = 0  # unknown: the cluster's workers
    elif backend.dask_workers is not None:
        concurrent = backend.dask_workers
    else:
        workers = backend.workers
        concurrent = min(workers, n_todo) if workers > 1 and n_todo > 1 else 1
    threads = backend.threads_per_task
    if threads is None:
        threads = 1 if backend.scheduler is not None else threads_per_worker(concurrent, cores)
    return concurrent, threads


def _run_tasks(
    ledger: _Ledger, todo: list[Task], client, sharing: tuple[int, int], bar,
    on_result: Callable[[Task, TaskResult], None] | None,
) -> None:  # fmt: skip
    """Run ``todo`` on the Dask ``client``, a process pool (``sharing``: concurrent tasks,
    threads per task) or in this process, recording each outcome as it comes back."""
    scenario = ledger.batch.scenario
    concurrent, threads_per_task = sharing
    pool = None
    if client is not None:
        results = _pooled(client.get_executor(pure=False), scenario, todo, threads_per_task)
    elif concurrent > 1:
        pool = _process_pool(concurrent)
        results = _pooled(pool, scenario, todo, threads_per_task)
    else:
        results = _serial(scenario, todo, threads_per_task)
    ledger.last_write = time.monotonic()
    try:
        for task, result in results:
            ledger.record(task, result)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(failed=len(ledger.failures), refresh=False)
            if on_result is not None:
                on_result(task, result)
    finally:
        results.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def input_error(text: str) -> InputError | None:
    """The :class:`InputError` (or :class:`PluginError`) a task's error text ends with, if
    it is one: a bad input or a plug-in's mistake, the same one line as a single run's."""
    kind, _, message = error_line(text).partition(": ")
    cls = error_class(kind)
    if cls is None or not issubclass(cls, InputError):
        return None
    return (PluginError if issubclass(cls, PluginError) else InputError)(message)


def error_class(kind: str) -> type | None:
    """The exception class a traceback's last line names (``module.Qualname``), imported, or
    None: the batch tells a bad input by its type (a subclass of InputError), not its name."""
    import importlib

    module, _, qualname = kind.rpartition(".")
    if not module:
        return None
    try:
        found: object = importlib.import_module(module)
    except ImportError:
        return None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _refuse_if_input(out: Path, failures: dict[str, str], existed: bool) -> None:
    """No task finished and every failure is a bad input or a plug-in's mistake: the batch
    was a refusal, found at run time. It leaves no store (a folder that existed before is
    left empty) and raises the first task's error as one line (docs/batch.md)."""
    errors = [input_error(text) for text in failures.values()]
    first = errors[0]
    if first is None or not all(errors):
        return
    tid = next(iter(failures))
    store.discard(out)
    if existed:
        out.mkdir()
    more = f" ({len(failures) - 1} more tasks failed)" if len(failures) > 1 else ""
    raise type(first)(
        f"task {tid}: {first}{more}; no task finished, so no store was kept (docs/batch.md)"
    )


def _where(done: dict, n_tasks: int, out: Path) -> str:
    """Where the finished tasks are, for a line about a batch that stopped."""
    return f"{len(done)} of {n_tasks} tasks finished and are kept in {out}"


def _name(scenario: Scenario) -> str:
    return scenario.scenario.name
