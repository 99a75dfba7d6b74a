"""Where a batch's tasks run, checked before anything is read: the backend options
(``--workers``, ``--dask-workers``, ``--scheduler``, ``--connect-timeout``, ...) and the Dask
client (a scheduler given by address, or a local cluster)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mdpsim._core.validation import check_positive_int
from mdpsim.errors import InputError, one_line


@dataclass(frozen=True)
class Backend:
    """Where a batch's tasks run (:func:`mdpsim.experiments.batch.run_batch`); the defaults run
    them one by one in this process.

    Attributes
    ----------
    workers
        Local worker processes (1: run in this process). Ignored with a Dask backend.
    scheduler, dask_workers
        Dask backend: an existing scheduler's address, or a new LocalCluster of this many
        workers (``dask_processes=False`` runs them as threads of this process).
    connect_timeout_s
        Seconds to reach ``scheduler`` (``--connect-timeout``).
    threads_per_task
        Threads each task may use (the tracking filter's; BLAS is always pinned to one).
        ``None``: the cores this process may use divided by the concurrent tasks (local
        workers or ``dask_workers``), so workers x threads <= cores; 1 on an external
        ``scheduler``, whose machines the driver does not know.
    """

    workers: int = 1
    scheduler: str | None = None
    dask_workers: int | None = None
    dask_processes: bool = True
    connect_timeout_s: float = 10.0
    threads_per_task: int | None = None

    @property
    def dask(self) -> bool:
        """Whether the tasks run on Dask (a scheduler or a local cluster)."""
        return self.scheduler is not None or self.dask_workers is not None


def connect_dask(
    *, scheduler: str | None = None, dask_workers: int | None = None, processes: bool = True,
    connect_timeout_s: float = 10.0,
):  # fmt: skip
    """A Dask ``Client``: to ``scheduler`` (``tcp://HOST:PORT``) or to a new LocalCluster.

    Raises :class:`InputError` when the scheduler cannot be reached within the timeout.
    """
    import logging

    from distributed import Client, LocalCluster

    if scheduler is not None:
        check_scheduler(scheduler)
        try:
            return Client(scheduler, timeout=f"{connect_timeout_s}s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise InputError(
                f"cannot reach the Dask scheduler at {scheduler} within {connect_timeout_s:g} s "
                f"({type(exc).__name__}: {exc}); start one with `dask scheduler` and "
                "`dask worker ADDRESS`, or use --dask-workers N for a local cluster"
            ) from None
    if dask_workers is None or dask_workers < 1:
        raise InputError(f"--dask-workers={dask_workers} must be >= 1")
    cluster = LocalCluster(
        n_workers=dask_workers,
        threads_per_worker=1,
        processes=processes,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    return Client(cluster, set_as_default=False)


MAX_WORKERS = 1024  # local processes, Dask workers or threads per task: more is a typo
MAX_CONNECT_TIMEOUT_S = 3600.0


def check_options(
    *, workers: int, scheduler: str | None, dask_workers: int | None, connect_timeout_s: float,
    threads_per_task: int | None, resume: bool, overwrite: bool,
) -> None:  # fmt: skip
    """Refuse bad backend options (one line naming the flag) before anything is read or run."""
    if scheduler is not None and dask_workers is not None:
        raise InputError(
            "give either --scheduler (an existing cluster) or --dask-workers, not both"
        )
    for value, flag in (
        (workers, "--workers"),
        (dask_workers, "--dask-workers"),
        (threads_per_task, "--threads-per-task"),
    ):
        if value is not None:
            check_positive_int(value, flag)
            if value > MAX_WORKERS:
                raise InputError(f"{flag}={value} must be <= {MAX_WORKERS}")
    timeout = connect_timeout_s
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise InputError(f"--connect-timeout={timeout!r} must be a number of seconds")
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_CONNECT_TIMEOUT_S):
        raise InputError(
            f"--connect-timeout={timeout!r} must be seconds, > 0 and <= {MAX_CONNECT_TIMEOUT_S:g}"
        )
    if scheduler is not None:
        check_scheduler(scheduler)
    if resume and overwrite:
        raise InputError("give either --resume (keep finished tasks) or --overwrite, not both")


def check_scheduler(address: str) -> None:
    """Refuse a Dask scheduler address that is not ``SCHEME://HOST:PORT`` (one line)."""
    from distributed.comm import get_address_host_port

    problem = "" if "://" in address else "no scheme"
    if not problem:
        try:
            get_address_host_port(address)
        except ValueError as exc:
            problem = one_line(exc)
    if problem:
        raise InputError(
            f"--scheduler {address!r} must be an address like tcp://HOST:PORT, as printed by "
            f"`dask scheduler` ({problem})"
        )
