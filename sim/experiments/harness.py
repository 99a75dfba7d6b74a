"""Mechanisms x attacks on one scenario: the evaluation behind ``mdpsim attack``.

Each (repetition, mechanism, eps) is one ordinary run of the scenario through
:class:`~mdpsim.simulation.model.PrivacyModel` with that mechanism: the same world builder, players
and
strategies as ``mdpsim run`` (``[attacks] report_probability``, the pseudonym strategy and
``grant_true_mobility`` act as they do there). Repetition ``r`` runs seed ``scenario.seed + r``
for every mechanism, so all mechanisms meet the same walks (common random numbers). The
attacks' whole-run scores (Viterbi, places, linkage) are taken when the run ends.

What succeeded is kept: a setting (mechanism, eps, repetition) that fails, or a plug-in attack
that fails in one (then dropped from it), is one entry of ``failures`` (written to
``failures.json`` beside the tables, like ``mdpsim batch``'s) and the rest goes on. Only when
nothing succeeded is the first failure raised (a plug-in's mistake: one line, exit 2).
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mdpsim._core.guards import output_lock
from mdpsim._core.outputs import atomic_folder, new_folder
from mdpsim.errors import InputError, Interrupted
from mdpsim.simulation.columns import whole_run_metrics
from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.world import build_domain, load_graph, trace_fixes, with_trace_counts

WROTE = "mdpsim attack"  # in the marker of the folders it writes


# ---------------------------------------------------------------------- mdpsim attack
@dataclass(frozen=True)
class Plan:
    """What ``mdpsim attack`` runs: mechanisms x epsilons x repetitions (the scenario's attacks)."""

    mechanisms: list[str]
    epsilons: list[float]
    repetitions: int

    @property
    def n_runs(self) -> int:
        """Mechanism fits times repetitions."""
        return len(self.mechanisms) * len(self.epsilons) * self.repetitions


def plan_of(scenario, *, mechanisms=None, epsilons=None, repetitions=None) -> Plan:
    """Mechanisms and eps from the flags, else the scenario's sweep, else its [mechanism]."""
    from mdpsim.mechanisms import mechanism_class

    sweep = scenario.sweep
    names = mechanisms or sweep.get("mechanism.name") or [scenario.mechanism.name]
    for name in names:
        try:
            mechanism_class(name)  # a registered name, a plug-in's, or package.module:Name
        except InputError as exc:
            raise InputError(f"--mechanisms: {exc}") from None
    eps = epsilons or sweep.get("mechanism.epsilon_per_km") or [scenario.mechanism.epsilon_per_km]
    eps = [float(e) for e in eps]
    if any(not (np.isfinite(e) and e > 0) for e in eps):
        raise InputError(f"--epsilons: {eps} must all be finite and > 0 (per km)")
    reps = repetitions if repetitions is not None else sweep.get("repetitions", 1)
    if reps < 1:
        raise InputError(f"--repetitions={reps} must be >= 1")
    if not scenario.attacks.specs():
        raise InputError("attacks.run lists no attack that is switched on")
    from mdpsim.attacks import AttackSuite

    AttackSuite.from_specs(scenario.attacks.specs())  # an attack that cannot be built: now
    return Plan(mechanisms=list(names), epsilons=eps, repetitions=int(reps))


@dataclass
class Outcome:
    """What :func:`evaluate` ran: one summary row per run and attack, the per-tick table, and
    the failures (setting or attack -> its error text)."""

    summary: pd.DataFrame
    per_tick: pd.DataFrame
    failures: dict[str, str] = field(default_factory=dict)

    def __iter__(self):  # ``summary, per_tick = evaluate(...)``
        return iter((self.summary, self.per_tick))


def evaluate(scenario, plan: Plan, *, ticks: int | None = None, progress: bool = False):
    """Run the plan; an :class:`Outcome` (unpacks as ``summary, per_tick``)."""
    from mdpsim.attacks.suite import keep_going

    graph = load_graph(scenario)
    scenario = with_trace_counts(scenario, trace_fixes(scenario, graph))  # traces: the data's
    n_ticks = ticks or scenario.scenario.ticks
    summaries: list[pd.DataFrame] = []
    per_tick: list[pd.DataFrame] = []
    failures: dict[str, str] = {}
    first_error: Exception | None = None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(
            total=plan.n_runs * n_ticks, unit="tick", desc=f"{scenario.scenario.name} attacks"
        )
    n_done = 0
    try:
        for rep in range(plan.repetitions):
            seed = scenario.scenario.seed + rep
            domain = build_domain(scenario, graph, seed=seed)
            for name in plan.mechanisms:
                for eps in plan.epsilons:
                    varied = scenario.replace(
                        **{
                            "mechanism.name": name,
                            "mechanism.epsilon_per_km": eps,
                            "scenario.ticks": n_ticks,
                        }
                    )
                    where = f"mechanism {name} eps {eps:g} repetition {rep}"
                    try:
                        with keep_going():
                            model = PrivacyModel(varied, rng=seed, graph=graph, domain=domain)
                            model.run(
                                n_ticks, progress=None if bar is None else lambda _t: bar.update()
                            )
                            suite = model.server.attacks
                            assert suite is not None, "plan_of refuses a plan without attacks"
                            suite.finish()
                    except Exception as exc:  # one setting must not stop the rest
                        failures[where] = "".join(traceback.format_exception(exc))
                        first_error = first_error or exc
                        continue
                    for label, line in suite.failed.items():
                        failures[f"{where} attack {label}"] = line
                    if not suite.attacks:
                        continue
                    summary_frame = with_exploitability(suite.summary(), model.server.mechanism)
                    for frames, frame in ((summaries, summary_frame), (per_tick, suite.table())):
                        frames.append(
                            frame.assign(mechanism=name, epsilon_per_km=eps, repetition=rep)
                        )
                    n_done += 1
    except KeyboardInterrupt:
        raise Interrupted(
            f"attack evaluation interrupted after {n_done} of {plan.n_runs} runs; nothing was "
            "written: run the same command again (same seeds, same results)"
        ) from None
    finally:
        if bar is not None:
            bar.leave = bool(summaries)  # nothing succeeded: the error's line stands alone
            bar.close()
    if not summaries:  # nothing succeeded: the first failure is the answer
        if first_error is not None:
            raise first_error
        raise next(_failed(line) for line in failures.values())
    order = ["mechanism", "epsilon_per_km", "repetition", "attack"]
    summary = pd.concat(summaries, ignore_index=True)
    summary = summary[order + [c for c in summary.columns if c not in order]]
    return Outcome(summary, pd.concat(per_tick, ignore_index=True), failures)


def _failed(line: str) -> Exception:
    from mdpsim.errors import PluginError

    return PluginError(line)


def with_exploitability(summary: pd.DataFrame, mechanism) -> pd.DataFrame:
    """``optimal_error_km``: the Bayes-optimal single-report adversary's expected error,
    exact from the (last) released matrix and the public prior (docs/games.md); and
    ``exploitability_km`` = each attack's point-estimate error minus it. Positive: the attack
    leaves that much on the table (it would make the mechanism look safer than it is);
    negative: it beats one report alone (several reports, mobility)."""
    from mdpsim.mechanisms.lp.stackelberg import adversary_error_km

    if mechanism is None:
        return summary
    domain = mechanism.domain_
    optimal = adversary_error_km(mechanism.matrix_, domain.prior, domain.dist_xx)
    out = summary.assign(optimal_error_km=optimal)
    if "guess_error_km" in out:
        out["exploitability_km"] = out["guess_error_km"] - optimal
    return out


def success_markdown(summary: pd.DataFrame) -> str:
    """Mean over repetitions of each attack's scores (:func:`whole_run_metrics`' order): a
    Markdown table."""
    from mdpsim.experiments.report import markdown_table

    ids = ("mechanism", "epsilon_per_km", "repetition", "attack")
    metrics = whole_run_metrics(summary, ids)
    means = summary.groupby(["mechanism", "epsilon_per_km", "attack"], sort=False)[metrics].mean()
    frame = means.reset_index()
    for m in metrics:
        frame[m] = [("—" if not np.isfinite(v) else f"{v:.3g}") for v in frame[m]]
    frame["epsilon_per_km"] = [f"{v:g}" for v in frame["epsilon_per_km"]]
    return markdown_table(frame)


def heatmap(summary: pd.DataFrame, path, *, metric: str = "hit") -> None:
    """Attack (rows) x mechanism@eps (columns), coloured by the mean ``metric``; a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = summary.assign(
        column=[
            f"{m}@{e:g}"
            for m, e in zip(summary["mechanism"], summary["epsilon_per_km"], strict=True)
        ]
    )
    grid = frame.pivot_table(index="attack", columns="column", values=metric, sort=False)
    fig, ax = plt.subplots(figsize=(1.1 * grid.shape[1] + 2.5, 0.5 * grid.shape[0] + 1.8))
    im = ax.imshow(grid.to_numpy(dtype=float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=45, ha="right")
    ax.set_yticks(range(grid.shape[0]), grid.index)
    for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
        if np.isfinite(v):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="w" if v < 0.6 else "k")
    fig.colorbar(im, ax=ax, label=f"attack success ({metric}: top-1 hit / home hit / link hit)")
    ax.set_title("attack success by mechanism and eps (per km)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(
    summary: pd.DataFrame,
    per_tick: pd.DataFrame,
    out,
    *,
    overwrite: bool,
    failures: dict[str, str] | None = None,
):
    """``attacks.parquet``, ``attacks_ticks.parquet``, ``attacks.md``, ``attack_success.png``
    (and ``failures.json`` if anything failed), written into a hidden sibling folder and
    renamed at the end; returns the paths."""
    with output_lock(Path(out)):  # checked again under the lock: one that appeared meanwhile
        return _write(
            summary, per_tick, new_folder(out, overwrite=overwrite, wrote=WROTE), failures
        )


def _write(summary, per_tick, out: Path, failures: dict[str, str] | None) -> list[Path]:
    names = ["attacks.parquet", "attacks_ticks.parquet", "attacks.md", "attack_success.png"]
    if failures:
        names.append("failures.json")
    with atomic_folder(out, wrote=WROTE) as tmp:
        if failures:
            text = json.dumps(failures, indent=2) + "\n"
            (tmp / "failures.json").write_text(text, encoding="utf-8")
        summary.to_parquet(tmp / names[0], index=False)
        per_tick.to_parquet(tmp / names[1], index=False)
        (tmp / names[2]).write_text(success_markdown(summary) + "\n", encoding="utf-8")
        heatmap(summary, tmp / names[3])
    return [out / n for n in names]
