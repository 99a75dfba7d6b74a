"""Threads of a run: BLAS pinned to one (the same bits everywhere), the rest within a budget.

* **BLAS / OpenMP: one thread, always.** OpenBLAS splits a matrix product between its threads,
  and the split changes the order of the sums: the Bayes attack's risk table
  ``dist_xx @ posterior`` came out different in the last bit under ``OMP_NUM_THREADS=1`` and
  under the default (14-18 of 1,260 ``bayes_error_km`` values of a 6-task sweep). A model is
  built and every tick is run inside :func:`one_blas_thread` (threadpoolctl), so what the
  environment says (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, a Dask worker's settings)
  changes nothing. The parallel work that matters (the tracking filter) has its own threads,
  whose result does not depend on their number (docs/attacks.md, Speed).
* **A thread budget per task.** :func:`task_threads` is what a task may use: the cores this
  process may run on (``os.sched_getaffinity``), or less while :func:`thread_budget` is in
  force; the batch sets it in each worker so that workers x threads <= the cores
  (docs/batch.md). The tracking filter's ``threads=None`` takes it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import ContextDecorator, contextmanager
from contextvars import ContextVar

from mdpsim._core.validation import check_positive_int

# Per thread (batch worker threads set their own budgets concurrently): a ContextVar.
_budget: ContextVar[int | None] = ContextVar("thread_budget", default=None)
_lock = threading.Lock()
_depth = 0
_restore: list = []  # (library, threads) to put back when the last block ends
_controller = None
_modules_seen = -1


def available_cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def task_threads() -> int:
    """Threads the running task may use: the budget in force, else :func:`available_cores`."""
    budget = _budget.get()
    return budget if budget is not None else available_cores()


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """The most threads each of ``workers`` concurrent tasks may take so that
    ``workers * threads <= cores`` (at least 1)."""
    cores = available_cores() if cores is None else cores
    return max(1, cores // max(1, workers))


@contextmanager
def thread_budget(threads: int | None) -> Iterator[None]:
    """Within the block, :func:`task_threads` is ``threads`` (``None``: leave it as it is)."""
    if threads is None:
        yield
        return
    token = _budget.set(check_positive_int(threads, "threads"))
    try:
        yield
    finally:
        _budget.reset(token)


class _OneBlasThread(ContextDecorator):
    """The block of :func:`one_blas_thread`: a plain context manager (no generator made at
    each entry), a decorator too; its state is the module's, shared by every block."""

    def __enter__(self) -> None:
        global _depth, _restore
        with _lock:
            if _depth == 0:
                _restore = _limit_to_one(_blas_controller().lib_controllers)
            _depth += 1

    def __exit__(self, *exc: object) -> None:
        global _depth, _restore
        with _lock:
            _depth -= 1
            if _depth == 0:
                for lib, threads in _restore:
                    lib.set_num_threads(threads)
                _restore = []


_ONE_BLAS_THREAD = _OneBlasThread()


def one_blas_thread() -> _OneBlasThread:
    """BLAS and OpenMP libraries limited to one thread within the block (threadpoolctl).

    The limit is process-wide, so nested and concurrent blocks (two dashboard sessions in one
    server) share it: the first to enter sets it, the last to leave restores the libraries'
    own settings. Only the libraries not already at one thread are touched (each tick enters
    a block; threadpoolctl's ``limit`` costs ~20 us, setting one library ~1 us)."""
    return _ONE_BLAS_THREAD


def _limit_to_one(libraries) -> list:
    """Set every library of ``libraries`` (threadpoolctl controllers) to one thread; returns
    ``(library, its threads before)`` for those that had more."""
    changed = []
    for lib in libraries:
        threads = lib.num_threads
        if threads != 1:
            lib.set_num_threads(1)
            changed.append((lib, threads))
    return changed


def _blas_controller():
    """The threadpoolctl controller of the loaded libraries, rebuilt when modules were
    imported since (a new extension may load a new BLAS); building one scans the process's
    shared libraries (~3 ms), using it does not."""
    global _controller, _modules_seen
    if _controller is None or len(sys.modules) != _modules_seen:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _modules_seen = len(sys.modules)
    return _controller
