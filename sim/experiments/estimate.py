"""What a run will hold and write, estimated before its first tick, and a cap on its memory.

A run keeps every tick's row (``ticks.parquet``, ``timings.parquet``) and, with
``[output] per_user``, every (tick, user) row (``users.parquet``) in memory until it writes
them; an export (``--export``) keeps its points too. The bytes per tick and per row below were
measured with ``tracemalloc`` on helsinki-test runs (4 and 40 users, 300 and 1,200 ticks; the
test ``test_estimate_covers_a_measured_run`` measures them again) and rounded up by about a
third; docs/reliability.md gives the numbers and the cap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mdpsim.errors import InputError

#: Memory per tick: its row of the tick and timing tables (measured ~4,500 B).
TICK_BYTES = 6_000
#: Memory per tick with ``per_user``: the tick's per-user arrays and their dict (~2,850 B).
USER_TICK_BYTES = 3_500
#: Memory per (tick, user) row with ``per_user``: held, then concatenated (~430 B).
USER_ROW_BYTES = 550
#: Memory per tick of an export (its frames; ~7,100 B) and per (tick, user) (~145 B).
EXPORT_TICK_BYTES = 9_000
EXPORT_ROW_BYTES = 200
#: Parquet bytes written per tick (ticks + timings, ~61 B) and per users.parquet row (~1.2 B);
#: compressed, so real traces (less regular than synthetic walks) may take more.
DISK_TICK_BYTES = 80
DISK_ROW_BYTES = 4
#: A run may plan to hold at most this fraction of the memory available when it starts.
MEMORY_FRACTION = 0.5
#: Runs planned to hold more than this get their estimate printed before the first tick.
TELL_FROM_BYTES = 1 << 30
GB = 1e9  # the network, the domain, the mechanism and Python come on top (not estimated)


@dataclass(frozen=True)
class Estimate:
    """Rows, bytes written and peak memory of a run (the growing tables only)."""

    ticks: int
    users: int
    per_user: bool
    export: bool
    user_rows: int
    disk_bytes: int
    peak_bytes: int

    def line(self) -> str:
        """One line: the rows, the bytes written and the memory."""
        rows = f"{self.ticks:,} tick rows" + (
            f", {self.user_rows:,} user rows" if self.per_user else ""
        )
        return (
            f"{rows}, about {size(self.disk_bytes)} written and {size(self.peak_bytes)} of "
            "memory held until the end"
        )


def size(n_bytes: float) -> str:
    """``n_bytes`` in GB, MB, kB or B, three significant digits."""
    for unit, scale in (("GB", GB), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} B"


def estimate(ticks: int, users: int, *, per_user: bool, export: bool) -> Estimate:
    """The estimate for ``ticks`` ticks of ``users`` users with these outputs."""
    rows = ticks * users if per_user else 0
    peak = ticks * TICK_BYTES
    if per_user:
        peak += ticks * USER_TICK_BYTES + rows * USER_ROW_BYTES
    if export:
        peak += ticks * EXPORT_TICK_BYTES + ticks * users * EXPORT_ROW_BYTES
    disk = ticks * DISK_TICK_BYTES + rows * DISK_ROW_BYTES
    return Estimate(ticks, users, per_user, export, rows, disk, peak)


def available_bytes() -> int | None:
    """Memory available now (Linux ``MemAvailable``, else free pages), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check(plan: Estimate, *, cap_bytes: int | None = None) -> None:
    """Refuse (one line: the estimate and what to lower) a run planned to hold more than
    ``cap_bytes`` (default :data:`MEMORY_FRACTION` of the memory available now)."""
    if cap_bytes is None:
        available = available_bytes()
        if available is None:
            return
        cap_bytes = int(available * MEMORY_FRACTION)
    if plan.peak_bytes <= cap_bytes:
        return
    lower = "scenario.ticks (--ticks) or users.count"
    if plan.per_user:
        lower += ", or set [output] per_user = false"
    if plan.export:
        lower += ", or drop --export"
    raise InputError(
        f"this run would hold {plan.line()}, over the cap of {size(cap_bytes)} "
        f"({MEMORY_FRACTION:g} of the memory available; docs/reliability.md): lower {lower}"
    )
