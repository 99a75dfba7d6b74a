"""The ``mdpsim`` command line's arguments: every subcommand's flags and their help (the
handlers are in :mod:`mdpsim.cli`)."""

from __future__ import annotations

import argparse
import functools
from typing import NoReturn

from mdpsim.experiments.plugins import installed_version

TRACEBACK_ENV = "MDPSIM_TRACEBACK"
SCENARIO_HELP = "a TOML scenario file or a packaged scenario's name (e.g. helsinki_demo)"
STRICT_HELP = "refuse a traces file with any bad row (exit 2) instead of dropping the bad rows"
FORCE_HELP = (
    "replace an existing output folder mdpsim wrote (and, for run, a --export file it exported)"
)

# What ``ArgumentParser.add_subparsers`` returns; each ``_add_<command>`` adds one subcommand.
type _Subparsers = argparse._SubParsersAction[_Parser]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one ``error:`` line (as every other bad input's),
    naming the command and its help, instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message}; see `{self.prog} --help`\n")


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand (built once per process, ~10 ms; parsing
    does not change it)."""
    parser = _Parser(
        prog="mdpsim",
        description="Metric differential privacy for mobile users on real road networks.",
        epilog="exit codes: 0 ok, 1 audit violation, 2 bad input or plug-in, 3 partial",
    )
    parser.add_argument("--version", action="version", version=f"mdpsim {installed_version()}")
    parser.add_argument(
        "--traceback",
        action="store_true",
        help=f"on an error, print the full traceback too (or set {TRACEBACK_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_network(sub)
    _add_domain(sub)
    _add_run(sub)
    _add_demo(sub)
    _add_batch(sub)
    _add_attack(sub)
    _add_frontier(sub)
    _add_mobility(sub)
    _add_report(sub)
    _add_audit(sub)
    _add_bound(sub)
    _add_plugins(sub)
    _add_dashboard(sub)
    return parser


def _add_network(sub: _Subparsers) -> None:
    """The ``network`` subcommand: a road network's size and extent."""
    p = sub.add_parser("network", help="load a road network and print its size and extent")
    _add_network_args(p)


def _add_domain(sub: _Subparsers) -> None:
    """The ``domain`` subcommand: a privacy domain's size and memory."""
    p = sub.add_parser("domain", help="build a privacy domain and print its size and memory")
    _add_network_args(p)
    _add_domain_args(p)


def _add_run(sub: _Subparsers) -> None:
    """The ``run`` subcommand: one scenario, its tables and summary."""
    p = sub.add_parser("run", help="run a scenario; write Parquet tables and summary.json")
    p.add_argument("scenario", help=SCENARIO_HELP)
    p.add_argument("--out", help="output folder (default runs/<scenario name>-seed<S>)")
    p.add_argument("--seed", type=int, help="override scenario.seed")
    p.add_argument("--ticks", type=int, help="override scenario.ticks")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument(
        "--export",
        nargs=2,
        metavar=("FORMAT", "PATH"),
        help="also write the true, reported and estimated traces: geojson or geoparquet "
        "(lon/lat, EPSG:4326; docs/traces.md)",
    )
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)


def _add_demo(sub: _Subparsers) -> None:
    """The ``demo`` subcommand: the packaged helsinki_demo."""
    p = sub.add_parser("demo", help="run the packaged scenario helsinki_demo (bundled network)")
    p.add_argument(
        "--out",
        help="output folder (default runs/helsinki_demo-seed<S>, which each demo replaces; "
        "a given --out that exists needs --force)",
    )
    p.add_argument("--force", action="store_true", help=FORCE_HELP)


def _add_batch(sub: _Subparsers) -> None:
    """The ``batch`` subcommand: a scenario's [sweep] as tasks."""
    p = sub.add_parser(
        "batch", help="run a scenario's [sweep] as tasks (process pool or Dask); see docs/batch.md"
    )
    p.add_argument("scenario", help=f"{SCENARIO_HELP}, with a [sweep] table")
    p.add_argument("--out", help="results store folder (default runs/<scenario name>-batch)")
    backend = p.add_mutually_exclusive_group()
    backend.add_argument(
        "--workers", type=int, help="local worker processes (default: CPU count; 1: in-process)"
    )
    backend.add_argument("--scheduler", help="address of a running Dask scheduler, tcp://HOST:PORT")
    backend.add_argument("--dask-workers", type=int, help="start a local Dask cluster of N workers")
    store = p.add_mutually_exclusive_group()
    store.add_argument("--resume", action="store_true", help="continue the batch stored in --out")
    store.add_argument(
        "--overwrite",
        action="store_true",
        help="discard the batch stored in --out and run every task again (e.g. after a fix)",
    )
    p.add_argument("--ticks", type=int, help="override scenario.ticks for every task")
    p.add_argument(
        "--common-seeds",
        action="store_true",
        help="seed tasks by repetition only: every sweep point of a repetition sees the same "
        "domain and walks (default: seed from the task's values and repetition)",
    )
    p.add_argument(
        "--connect-timeout", type=float, default=10.0, help="seconds to reach --scheduler"
    )
    p.add_argument(
        "--threads-per-task",
        type=int,
        help="threads each task may use (default: cores / concurrent tasks, so workers x "
        "threads <= cores; 1 with --scheduler)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)


def _add_attack(sub: _Subparsers) -> None:
    """The ``attack`` subcommand: mechanisms x attacks on a scenario."""
    p = sub.add_parser(
        "attack", help="run mechanisms x attacks on a scenario; table and heatmap of success"
    )
    p.add_argument("scenario", help=f"{SCENARIO_HELP}; its [attacks] lists the attacks")
    p.add_argument("--out", help="output folder (default runs/<scenario name>-attacks)")
    p.add_argument("--mechanisms", help="comma-separated mechanism names (default: scenario)")
    p.add_argument("--epsilons", help="comma-separated eps per km (default: scenario)")
    p.add_argument("--repetitions", type=int, help="seeds per setting (default: scenario)")
    p.add_argument("--ticks", type=int, help="override scenario.ticks")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)


def _add_frontier(sub: _Subparsers) -> None:
    """The ``frontier`` subcommand: the optimal user strategy per mechanism."""
    p = sub.add_parser(
        "frontier",
        help="the optimal user strategy against every mechanism: quality loss vs the Bayes "
        "adversary's error (docs/games.md)",
    )
    p.add_argument("scenario", help="a TOML scenario file or a packaged scenario's name")
    p.add_argument("--out", help="output folder (default runs/<scenario name>-frontier)")
    p.add_argument("--qualities", help="comma-separated Q in km (default: 8 up to the cap)")
    p.add_argument("--mechanisms", help="comma-separated names (default: all but stackelberg)")
    p.add_argument("--epsilons", help="comma-separated eps per km (default: the scenario's sweep)")
    p.add_argument(
        "--quality-metric", default="domain", help="domain, road, l1, l2, linf, zero_one"
    )
    p.add_argument(
        "--adversary-metric", default="domain", help="domain, road, l1, l2, linf, zero_one"
    )
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)


def _add_report(sub: _Subparsers) -> None:
    """The ``report`` subcommand: tables and plots of a results store."""
    p = sub.add_parser("report", help="tables and plots of a batch results store")
    p.add_argument("store", help="a folder written by `mdpsim batch`")
    p.add_argument("--out", help="report folder (default STORE/report)")


def _add_audit(sub: _Subparsers) -> None:
    """The ``audit`` subcommand: a statistical audit of an mDP claim."""
    p = sub.add_parser("audit", help="statistically audit a mechanism's mDP claim (black box)")
    p.add_argument(
        "mechanism",
        help="a registered mechanism name (em, lp, ...) or MODULE:FACTORY, an importable "
        "callable returning a mechanism, fitted or not, or a Mechanism subclass (built "
        "with --epsilon; see docs/reliability.md)",
    )
    p.add_argument(
        "--epsilon",
        type=float,
        help="claimed eps per km (default: a factory mechanism's own epsilon; 4 for a name)",
    )
    _add_network_args(p)
    p.add_argument("--n-points", type=int, default=60, help="secrets of the audited domain")
    p.add_argument("--metric", default="road", help="road (default), l1, l2 or linf")
    p.add_argument(
        "--samples", type=int, default=30_000_000, help="draws in the whole audit (default 3e7)"
    )
    p.add_argument("--candidates", type=int, default=6, help="screened candidates confirmed")
    p.add_argument("--alpha", type=float, default=1e-6, help="overall false-alarm rate")
    p.add_argument("--seed", type=int, default=0)


def _add_bound(sub: _Subparsers) -> None:
    """The ``bound`` subcommand: a certified lower bound on the optimal loss."""
    p = sub.add_parser(
        "bound",
        help="a certified lower bound on the optimal eps-mDP mechanism's loss on a domain "
        "(docs/lp.md), and the gap of mechanisms to it",
    )
    _add_network_args(p)
    _add_domain_args(p)
    p.add_argument("--epsilon", type=float, required=True, help="eps per km")
    p.add_argument("--rounds", type=int, default=2, help="rounds of flows (default 2)")
    p.add_argument(
        "--mechanism",
        action="append",
        default=[],
        metavar="NAME",
        help="also fit this registered mechanism (default parameters) and print its loss and "
        "gap (repeatable; lp_medoids, which gives the bound, and em are always shown)",
    )


def _add_plugins(sub: _Subparsers) -> None:
    """The ``plugins`` subcommand: the installed plug-ins."""
    p = sub.add_parser("plugins", help="list the installed plug-ins; a broken one with its error")
    p.add_argument("--example", metavar="DIR", help="write the example plug-in into new DIR")


def _add_dashboard(sub: _Subparsers) -> None:
    """The ``dashboard`` subcommand: the Streamlit dashboard."""
    p = sub.add_parser("dashboard", help="start the Streamlit dashboard (live runs, batches)")
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument(
        "--address", default="localhost", help="address to bind (default localhost; 0.0.0.0: all)"
    )
    p.add_argument(
        "--scenarios",
        action="append",
        metavar="DIR",
        help="a folder of scenario files the live page lists beside the packaged ones "
        "(repeatable): your own scenarios, plug-ins, traces",
    )


def _add_mobility(sub: _Subparsers) -> None:
    """The ``mobility`` subcommand: the laws of human mobility on users or traces."""
    p = sub.add_parser(
        "mobility",
        help="the laws of human mobility measured on a scenario's users or a traces file: "
        "JSON, table and plots (docs/mobility.md)",
    )
    p.add_argument(
        "scenario", nargs="?", help=f"{SCENARIO_HELP}; default helsinki_demo (its network too)"
    )
    p.add_argument(
        "--traces",
        metavar="FILE",
        help="measure this traces file (CSV, Parquet, GeoJSON, GPX; docs/traces.md) on the "
        "scenario's network instead of its synthetic users",
    )
    p.add_argument("--out", help="output folder (default runs/<scenario name>-mobility)")
    p.add_argument("--users", type=int, help="override users.count")
    p.add_argument("--days", type=float, help="simulated days (sets scenario.ticks)")
    p.add_argument("--tick-seconds", type=float, help="override scenario.tick_seconds")
    p.add_argument("--n-points", type=int, help="override domain.n_points (the secrets)")
    p.add_argument("--seed", type=int, help="override scenario.seed")
    p.add_argument(
        "--resolution-m",
        type=float,
        default=200.0,
        help="grid cell of the uniqueness points (default 200 m; with an hour of the run)",
    )
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)


def _add_network_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        default="helsinki",
        help="helsinki (default), helsinki-test, a .osm/.osm.bz2/.osm.pbf/.graphml path, "
        "or a place name (downloaded once, then cached)",
    )
    p.add_argument("--network-type", default="walk", choices=["walk", "drive"])


def _add_domain_args(p: argparse.ArgumentParser) -> None:
    size = p.add_mutually_exclusive_group()
    size.add_argument("--n-points", type=int, help="exactly this many secrets along the roads")
    size.add_argument("--spacing-m", type=float, help="one secret every SPACING_M metres")
    size.add_argument("--grid-cell-m", type=float, help="a regular grid of this cell size")
    p.add_argument("--n-outputs", type=int, help="a coarser output set Y (default Y = X)")
    p.add_argument("--metric", default="road", help="road (default), l1, l2 or linf")
    p.add_argument("--seed", type=int, default=0)
