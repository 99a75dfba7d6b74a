"""The ``mdpsim`` command line.

Exit codes (README): 0 ok; 1 ``mdpsim audit`` found a violation (nothing else exits 1); 2 bad
input or a plug-in's mistake (:class:`~mdpsim.errors.InputError`, PluginError included): one
``error:`` line, nothing written; 3 partial (``attack``, ``batch``: some settings failed, the
others' results are written); 130 Ctrl-C: one ``interrupted:`` line. ``--traceback`` or
``MDPSIM_TRACEBACK=1`` prints the traceback before the line. Anything else keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from contextlib import contextmanager

from mdpsim.errors import InputError, Interrupted, plain
from mdpsim.experiments.cli_parser import TRACEBACK_ENV, build_parser
from mdpsim.experiments.flags import check_flags, csv_list

EXIT_VIOLATION = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
BAD_ROWS_SHOWN = 20  # bad-row lines printed; all of them go to the output's bad_rows.csv
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
DEMO_SCENARIO = "helsinki_demo"  # a packaged scenario (mdpsim.scenarios)
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    """Register the handler of a subcommand."""

    def deco(fn: Callable[[argparse.Namespace], int]):
        _COMMANDS[name] = fn
        return fn

    return deco


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mdpsim`` console script."""
    args = build_parser().parse_args(argv)
    try:
        check_flags(args)  # every numeric flag, before any work (experiments/flags.py)
        return _COMMANDS[args.command](args)
    except InputError as exc:
        if args.traceback or os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
            traceback.print_exception(exc, file=sys.stderr)
        print(f"error: {plain(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        said = str(exc) if isinstance(exc, Interrupted) else ""
        print(f"interrupted: {said or 'stopped by Ctrl-C; nothing was written'}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _scenario(args: argparse.Namespace):
    """The command's scenario (a path, a packaged name or a Scenario), ``--strict`` applied;
    a traces file is read once here so that its bad rows are told before anything runs."""
    import warnings

    from mdpsim.simulation import scenario as scenario_mod

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scenario = scenario_mod.resolve(args.scenario)
    for said in dict.fromkeys(str(w.message) for w in caught if w.category is DeprecationWarning):
        print(f"warning: {said}", file=sys.stderr)  # a deprecated field: one line each
    for w in caught:
        if w.category is not DeprecationWarning:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if scenario.mobility.source != "traces":
        return scenario
    if getattr(args, "strict", False):
        scenario = scenario.replace(**{"mobility.strict": True})

    from mdpsim.simulation.world import load_graph, trace_fixes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # told below, one line per bad row
        fixes = trace_fixes(scenario, load_graph(scenario))
    assert fixes is not None, "source = 'traces'"
    print("\n".join(fixes.report.told(BAD_ROWS_SHOWN)), file=sys.stderr)
    return scenario


def _name(scenario, out: str | None) -> str:
    """The scenario's name as one plain folder name for a default output path (none is made
    when ``--out`` is given), else one line (no separators, no ``..``)."""
    from mdpsim._core.guards import safe_name

    return scenario.scenario.name if out is not None else safe_name(scenario.scenario.name)


@command("network")
def _network(args: argparse.Namespace) -> int:
    from mdpsim.geo.network import load_network, summarize

    start = time.perf_counter()
    G = load_network(args.source, network_type=args.network_type)
    elapsed = time.perf_counter() - start
    print(f"network          {args.source} ({args.network_type})")
    for line in summarize(G).lines():
        print(line)
    print(f"load time        {elapsed:.2f} s")
    return 0


def _built_domain(args: argparse.Namespace, G):
    """The domain the domain arguments describe on the network ``G``; a big one's size is
    told first (its distance matrices alone take a gibibyte or more)."""
    from mdpsim.geo.domain import Domain
    from mdpsim.geo.routing import RoadSegments

    if args.grid_cell_m is not None:
        return Domain.grid(G, cell_m=args.grid_cell_m, metric=args.metric)
    segments = RoadSegments.of(G)
    if args.n_points is not None or args.spacing_m is not None:
        _tell_domain_size(
            segments.place_count(n_points=args.n_points, spacing_m=args.spacing_m, name="X"),
            args.n_outputs,
        )
    return Domain.from_network(
        G,
        n_points=args.n_points,
        spacing_m=args.spacing_m,
        n_outputs=args.n_outputs,
        metric=args.metric,
        seed=args.seed,
        segments=segments,
    )


def _tell_domain_size(n_x: int, n_y: int | None) -> None:
    """One ``estimate:`` line on stderr when the distance matrices need 1 GiB or more."""
    from mdpsim.experiments.estimate import TELL_FROM_BYTES, size
    from mdpsim.geo.domain import distance_bytes

    need = distance_bytes(n_x, n_y)
    if need >= TELL_FROM_BYTES:
        print(
            f"estimate: {n_x:,} points; their distance matrices alone need {size(need)}, and "
            "building them takes tens of seconds or more (fewer points build faster)",
            file=sys.stderr,
        )


@command("domain")
def _domain(args: argparse.Namespace) -> int:
    from mdpsim.geo.network import load_network

    G = load_network(args.source, network_type=args.network_type)
    start = time.perf_counter()
    domain = _built_domain(args, G)
    elapsed = time.perf_counter() - start
    print(f"network          {args.source} ({args.network_type})")
    for line in domain.summary_lines():
        print(line)
    print(f"build time       {elapsed:.2f} s")
    return 0


@command("bound")
def _bound(args: argparse.Namespace) -> int:
    from mdpsim.geo.network import load_network
    from mdpsim.mechanisms import make, mechanism_class

    for name in args.mechanism:
        mechanism_class(name)  # an unknown name: one line before any work
    reference = make("lp_medoids", epsilon=args.epsilon, bound_options={"rounds": args.rounds})
    domain = _built_domain(args, load_network(args.source, network_type=args.network_type))
    reference.fit(domain)
    bound = reference.info_["lower_bound_km"]
    print(f"secrets          {domain.n_x} (outputs {domain.n_y})")
    print(f"epsilon          {args.epsilon:g} /km")
    print(
        f"lower bound      {bound:.4f} km (certified; lp_medoids' price certificate, "
        f"{reference.info_['lower_bound_seconds']:.1f} s)"
    )
    print(
        f"{'lp_medoids':<16} {reference.expected_loss():.4f} km, gap {reference.info_['gap']:.3f}"
    )
    for name in ["em", *[m for m in args.mechanism if m not in ("em", "lp_medoids")]]:
        start = time.perf_counter()
        loss = make(name, epsilon=args.epsilon).fit(domain).expected_loss()
        print(
            f"{name:<16} {loss:.4f} km, gap {loss / bound:.3f} "
            f"({time.perf_counter() - start:.1f} s)"
        )
    return 0


@command("run")
def _run(args: argparse.Namespace) -> int:
    from mdpsim.experiments import overrides
    from mdpsim.experiments.run import run_scenario, summary_table

    export = getattr(args, "export", None)
    if export is not None:
        from mdpsim.experiments.export import check_target

        check_target(*export, overwrite=args.force)  # before the run: costs nothing
    overrides.check_out(args.out, force=args.force, wrote="mdpsim run")
    scenario = overrides.apply(_scenario(args), {"--seed": args.seed, "--ticks": args.ticks})
    seed = scenario.scenario.seed
    out = overrides.out_or(args.out, f"runs/{_name(scenario, args.out)}-seed{seed}")
    summary = run_scenario(
        scenario,
        out,
        ticks=args.ticks,
        progress=True,
        overwrite=args.force,
        export=None if export is None else (export[0], export[1]),
    )
    print(summary_table(summary))
    print(f"outputs          {out}/ ({', '.join(_written(out))})")
    if export is not None:
        print(f"traces           {export[1]} ({export[0]}: true, reported, estimated)")
    return 0


def _written(out: str) -> list[str]:
    """The files a run wrote into ``out`` (users.parquet only with ``output.per_user``,
    bad_rows.csv only with bad trace rows), summary.json first."""
    from pathlib import Path

    names = sorted(p.name for p in Path(out).iterdir() if not p.name.startswith("."))
    return sorted(names, key=lambda name: name != "summary.json")


@command("demo")
def _demo(args: argparse.Namespace) -> int:
    from mdpsim.simulation import scenario as scenario_mod

    demo = scenario_mod.load(scenario_mod.packaged()[DEMO_SCENARIO])  # never a local file
    # The default folder is the previous demo's, replaced; a folder the user names is refused
    # if it exists (an earlier run's, say) unless --force, as `mdpsim run` does.
    force = args.force or args.out is None
    return _run(argparse.Namespace(scenario=demo, out=args.out, seed=None, ticks=None, force=force))


@command("batch")
def _batch(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mdpsim._core.threads import available_cores
    from mdpsim.experiments import overrides
    from mdpsim.experiments.backends import Backend
    from mdpsim.experiments.batch import run_batch
    from mdpsim.experiments.run import write_bad_rows

    scenario = overrides.apply(_scenario(args), {"--ticks": args.ticks})
    out = overrides.out_or(args.out, f"runs/{_name(scenario, args.out)}-batch")
    backend = Backend(
        workers=args.workers if args.workers is not None else available_cores(),
        scheduler=args.scheduler,
        dask_workers=args.dask_workers,
        connect_timeout_s=args.connect_timeout,
        threads_per_task=args.threads_per_task,
    )
    outcome = run_batch(
        scenario,
        out,
        backend=backend,
        resume=args.resume,
        overwrite=args.overwrite,
        seeding="common" if args.common_seeds else "per-task",
        progress=not args.no_progress,
        notify=lambda line: print(f"damaged: {line}", file=sys.stderr),
    )
    write_bad_rows(out, scenario)
    print(
        f"tasks            {outcome.n_done} of {outcome.n_tasks} finished "
        f"({outcome.n_skipped} skipped as already done), {outcome.n_failed} failed"
    )
    print(f"threads          {outcome.threads_line}")
    print(f"time             {outcome.seconds:.1f} s")
    print(f"store            {out}/ (manifest.json, tasks/*.parquet, failures.json)")
    if outcome.failures:
        _print_failures(outcome.failures, Path(out))
    return _failed_exit(outcome.failures.values()) if outcome.failures else 0


def _failed_exit(errors) -> int:
    """2 if any failure is a bad input or a plug-in's mistake (the same one line as a
    single run's), else 3 (partial: the failed ones are bugs or solver failures)."""
    from mdpsim.experiments.batch import input_error

    for text in errors:
        error = input_error(text)  # by type: any subclass of InputError
        if error is not None:
            print(f"error: {plain(str(error))}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_PARTIAL


def _print_failures(failures: dict[str, str], out, *, show: int = 10) -> None:
    """One line per failed task on stderr (the first ``show``), then where the rest is."""
    from mdpsim.experiments.batch import error_line

    for task_id, text in list(failures.items())[:show]:
        print(f"failed: task {task_id}: {error_line(text)}", file=sys.stderr)
    if len(failures) > show:
        print(f"failed: ... and {len(failures) - show} more tasks", file=sys.stderr)
    print(
        f"{len(failures)} task(s) failed; tracebacks in {out / 'failures.json'}. Rerun with "
        "--resume (same scenario: retries failed tasks) or --overwrite (after changing it)",
        file=sys.stderr,
    )


@command("attack")
def _attack(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mdpsim.experiments import harness, overrides
    from mdpsim.experiments.run import write_bad_rows

    overrides.check_out(args.out, force=args.force, wrote="mdpsim attack")
    scenario = overrides.apply(_scenario(args), {"--ticks": args.ticks})
    plan = harness.plan_of(
        scenario,
        mechanisms=csv_list(args.mechanisms, str, "--mechanisms"),
        epsilons=csv_list(args.epsilons, float, "--epsilons"),
        repetitions=args.repetitions,
    )
    default = f"runs/{_name(scenario, args.out)}-attacks"
    out = overrides.folder(args.out, default, args.force, scenario, wrote="mdpsim attack")
    outcome = harness.evaluate(scenario, plan, ticks=args.ticks, progress=not args.no_progress)
    paths = harness.write_outputs(
        outcome.summary,
        outcome.per_tick,
        out,
        overwrite=args.force,
        failures=outcome.failures,
    )
    paths += filter(None, [write_bad_rows(out, scenario)])
    print(harness.success_markdown(outcome.summary))
    print(f"outputs          {', '.join(str(p) for p in paths)}")
    if not outcome.failures:
        return 0
    from mdpsim.experiments.batch import error_line

    for where, text in outcome.failures.items():
        print(f"failed: {where}: {error_line(text)}", file=sys.stderr)
    print(
        f"{len(outcome.failures)} failed (the others' tables are written); tracebacks in "
        f"{Path(out) / 'failures.json'}",
        file=sys.stderr,
    )
    return EXIT_PARTIAL


@command("frontier")
def _frontier(args: argparse.Namespace) -> int:
    from mdpsim.experiments import frontier, overrides
    from mdpsim.experiments.run import write_bad_rows
    from mdpsim.mechanisms.lp.stackelberg import check_metric

    overrides.check_out(args.out, force=args.force, wrote="mdpsim frontier")
    scenario = _scenario(args)
    check_metric(args.quality_metric, "--quality-metric")
    check_metric(args.adversary_metric, "--adversary-metric")
    default = f"runs/{_name(scenario, args.out)}-frontier"
    out = overrides.folder(args.out, default, args.force, scenario, wrote="mdpsim frontier")
    domain, curve, points, cap = frontier.run(
        scenario,
        qualities=csv_list(args.qualities, float, "--qualities"),
        mechanisms=csv_list(args.mechanisms, str, "--mechanisms"),
        epsilons=csv_list(args.epsilons, float, "--epsilons"),
        quality_metric=args.quality_metric,
        adversary_metric=args.adversary_metric,
    )
    title = (
        f"{scenario.scenario.name}: N = {domain.n_x}, quality {args.quality_metric}, "
        f"adversary {args.adversary_metric}"
    )
    paths = frontier.write_outputs(curve, points, cap, out, title=title, overwrite=args.force)
    paths += filter(None, [write_bad_rows(out, scenario)])
    print(frontier.markdown(curve, points, cap))
    print(f"outputs          {', '.join(str(p) for p in paths)}")
    return 0


@command("mobility")
def _mobility(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mdpsim.experiments import mobility_report, overrides
    from mdpsim.simulation.world import build_world

    overrides.check_out(args.out, force=args.force, wrote="mdpsim mobility")
    scenario = overrides.apply(_mobility_scenario(args), {
        "--seed": args.seed, "--users": args.users, "--tick-seconds": args.tick_seconds,
        "--n-points": args.n_points,
    })  # fmt: skip
    if args.days is not None:
        ticks = max(1, round(args.days * 86400 / scenario.scenario.tick_seconds))
        scenario = overrides.apply(scenario, {"--ticks": ticks})
    default = f"runs/{_name(scenario, args.out)}-mobility"
    if args.traces is not None:
        default = f"runs/{_name(scenario, None)}-{Path(args.traces).stem}-mobility"
    out = overrides.folder(args.out, default, args.force, scenario, wrote="mdpsim mobility")
    world = build_world(scenario)
    result = mobility_report.measure_world(world, resolution_m=args.resolution_m,
                                           seed=world.seed)  # fmt: skip
    paths = mobility_report.write_outputs(result, out, overwrite=args.force)
    print(mobility_report.markdown(result))
    print(f"outputs          {', '.join(str(p) for p in paths)}")
    return 0


def _mobility_scenario(args: argparse.Namespace):
    """``mdpsim mobility``'s scenario: the given one (default helsinki_demo), reading
    ``--traces`` instead of its synthetic users when given."""
    from pathlib import Path

    from mdpsim.simulation import scenario as scenario_mod

    if args.traces is None:
        args.scenario = args.scenario or DEMO_SCENARIO
        return _scenario(args)
    path = Path(args.traces).expanduser().resolve()
    if not path.is_file():
        raise InputError(f"--traces {args.traces}: no such file")
    base = scenario_mod.resolve(args.scenario or DEMO_SCENARIO)
    args.scenario = base.replace(**{"mobility.source": "traces", "mobility.path": str(path)})
    return _scenario(args)


@command("report")
def _report(args: argparse.Namespace) -> int:
    from mdpsim.experiments.report import write_report

    warn = lambda line: print(f"warning: {line}", file=sys.stderr)  # noqa: E731
    for path in write_report(args.store, args.out, warn=warn):
        print(path)
    return 0


@command("plugins")
def _plugins(args: argparse.Namespace) -> int:
    from mdpsim.experiments.plugins import plugin_table, write_example

    print("\n".join(write_example(args.example)) if args.example else plugin_table())
    return 0


@command("dashboard")
def _dashboard(args: argparse.Namespace) -> int:
    import subprocess
    from pathlib import Path

    from mdpsim.dashboard.launch import streamlit_command, streamlit_env

    for folder in args.scenarios or []:
        if not Path(folder).expanduser().is_dir():
            raise InputError(f"--scenarios {folder!r} is not a folder")
    cmd = streamlit_command(port=args.port, address=args.address)
    print(f"dashboard        http://{args.address}:{args.port}  (Ctrl-C stops it)", flush=True)
    proc = subprocess.Popen(cmd, env=streamlit_env(args.scenarios))
    try:
        with _sigterm_as_exit():  # `kill`, a supervisor: Streamlit stops with us
            return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if proc.poll() is None:  # never leave Streamlit serving the port without us
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def _sigterm_as_exit():
    """SIGTERM raises SystemExit(143) (128 + 15, the shell's code) while inside, so that the
    callers' ``finally`` runs; a no-op outside the main thread, where no handler can be set."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@command("audit")
def _audit(args: argparse.Namespace) -> int:

    from mdpsim.experiments.audit_target import audited_mechanism
    from mdpsim.privacy.audit import MIN_DRAWS, TooFewSamples

    def built():  # the audited domain, unless the factory fitted the mechanism
        from mdpsim.geo.domain import Domain
        from mdpsim.geo.network import load_network

        G = load_network(args.source, network_type=args.network_type)
        return Domain.from_network(G, n_points=args.n_points, metric=args.metric, seed=args.seed)

    mech, label = audited_mechanism(args.mechanism, epsilon=args.epsilon, domain=built)
    label = label.replace("{metric}", args.metric)
    eps = args.epsilon if args.epsilon is not None else float(mech.epsilon)
    try:
        result = _audited(args, mech, eps)
    except TooFewSamples as exc:  # named as the command line spells it
        raise InputError(
            f"--samples {exc.total:,} is too few for {exc.n_inputs} secrets: the screens and "
            f"the confirmation need >= {MIN_DRAWS:,} draws per secret each; use --samples "
            f"{exc.enough} or more"
        ) from None
    print(f"mechanism        {label} on {len(mech.domain_.dist_xx)} secrets")
    for line in result.lines():
        print(line)
    return 0 if result.passed else EXIT_VIOLATION


def _audited(args: argparse.Namespace, mech, eps: float):
    """The audit of fitted ``mech``'s eps claim with the command line's settings."""
    import numpy as np

    from mdpsim.privacy.audit import audit, mechanism_sampler

    domain = mech.domain_
    return audit(
        mechanism_sampler(mech),
        domain.dist_xx,
        eps,
        total_samples=args.samples,
        n_candidates=args.candidates,
        alpha=args.alpha,
        pairs=getattr(domain, "constraint_pairs", None),  # public: implied by the metric
        output_dist_km=getattr(domain, "dist_xy", None),  # public: where the outputs are
        rng=np.random.default_rng(args.seed),
    )


if __name__ == "__main__":
    sys.exit(main())
