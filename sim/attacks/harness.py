"""Mechanisms x attacks on one scenario: the evaluation behind ``mdpsim attack``.

The true world is drawn once per seed and shared by every mechanism (common random numbers):
the users' walks (sim/mobility.py), a public population's walks (other people, other places;
the adversary's public data) and, as the oracle the scenario may grant, the users' own
empirical transitions. Each mechanism is fitted once on the domain; every user reports every
tick with probability ``report_probability``; the attacks see what the server sees and are
scored against the walks. Pseudonyms change at ``pseudonym_change_tick`` (0: never), which is
where the linkage attack splits the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mdpsim.attacks.base import Context, Observation, Release
from mdpsim.attacks.mobility_models import counted_kernel, reach_kernel
from mdpsim.attacks.suite import AttackSuite
from mdpsim.errors import InputError
from mdpsim.mobility import MobilityModel, Population
from mdpsim.outputs import atomic_folder

if TYPE_CHECKING:
    from mdpsim.domain import Domain


@dataclass(frozen=True, eq=False)
class World:
    """The truth of one seed: walks of the users and of the public, and the mobility."""

    domain: Domain
    traces: np.ndarray  # (T, U) secret index of every user per tick
    public_traces: np.ndarray  # (T, M)
    mobility: MobilityModel
    reports_seed: np.random.SeedSequence
    seed: int

    def context(self, *, grant_true_mobility: bool) -> Context:
        """What the adversary gets: reach and public traces; the truth only if granted."""
        true = None
        if grant_true_mobility:
            support = reach_kernel(self.domain.dist_xx, self.mobility.reach_km)
            true = counted_kernel(support, self.traces, 1e-3).forward
        return Context(
            domain=self.domain,
            n_users=self.traces.shape[1],
            reach_km=self.mobility.reach_km,
            public_traces=self.public_traces,
            true_transitions=true,
            seed=self.seed,
        )


def draw_world(
    domain,
    *,
    n_users: int,
    ticks: int,
    seed: int,
    n_places: int,
    speed_mps: float,
    tick_seconds: float,
    dwell_ticks: tuple[int, int],
    personal_places: int = 0,
    n_public: int | None = None,
) -> World:
    """Walk the users and a public population of ``n_public`` (default ``n_users``) people
    (their own places, drawn apart; see :class:`~mdpsim.mobility.Population`)."""
    users_ss, public_ss, reports_ss = np.random.SeedSequence(seed).spawn(3)

    def walks(count: int, ss: np.random.SeedSequence) -> tuple[MobilityModel, np.ndarray]:
        places_rng, walk_rng = (np.random.default_rng(s) for s in ss.spawn(2))
        model = MobilityModel.build(
            domain,
            n_places=n_places,
            speed_mps=speed_mps,
            tick_seconds=tick_seconds,
            dwell_ticks=dwell_ticks,
            rng=places_rng,
        )
        pop = Population(model, domain, count, walk_rng, personal_places=personal_places)
        out = np.empty((ticks, count), dtype=np.int64)
        for t in range(ticks):
            pop.step(walk_rng)
            out[t] = pop.position
        return model, out

    mobility, traces = walks(n_users, users_ss)
    _, public = walks(n_public or n_users, public_ss)  # fmt: skip
    return World(
        domain=domain,
        traces=traces,
        public_traces=public,
        mobility=mobility,
        reports_seed=reports_ss,
        seed=seed,
    )


def public_walks(scenario, domain, *, seed: int) -> np.ndarray:
    """``(ticks, users.count)`` walks of a public population for a live model's adversary:
    other people on the same roads with their own places (the users' walks are not used)."""
    u, s = scenario.users, scenario.scenario
    world = draw_world(
        domain,
        n_users=1,
        n_public=u.count,
        ticks=s.ticks,
        seed=seed,
        n_places=u.n_places,
        speed_mps=u.speed_mps,
        tick_seconds=s.tick_seconds,
        dwell_ticks=(u.dwell_ticks[0], u.dwell_ticks[1]),
        personal_places=u.personal_places,
    )
    return world.public_traces


def run(
    world: World,
    mechanism,
    specs: Sequence[dict],
    *,
    uploads: np.ndarray | None = None,
    report_probability: float = 1.0,
    pseudonym_change_tick: int = 0,
    grant_true_mobility: bool = False,
    progress: Callable[[], None] | None = None,
) -> AttackSuite:
    """Feed one fitted mechanism's reports to the attacks of ``specs``; the scored suite."""
    suite = AttackSuite.from_specs(specs)
    suite.start(world.context(grant_true_mobility=grant_true_mobility))
    release = Release(tick=1, mechanism=mechanism, uploads=uploads)
    suite.release(release)
    rng = np.random.default_rng(world.reports_seed)
    n_ticks, n_users = world.traces.shape
    pseudonyms = np.arange(n_users, dtype=np.int64)
    for t in range(n_ticks):
        tick = t + 1
        if pseudonym_change_tick and tick == pseudonym_change_tick:
            pseudonyms = n_users + rng.permutation(n_users)
        secrets = world.traces[t]
        reporting = np.less(rng.random(n_users), report_probability)
        outputs = np.full(n_users, -1, dtype=np.int64)
        idx = np.nonzero(reporting)[0]
        outputs[idx] = mechanism.sample_many(secrets[idx], rng)
        suite.observe(
            Observation(tick=tick, outputs=outputs, pseudonyms=pseudonyms), world.traces[t]
        )
        if progress is not None:
            progress()
    suite.finish()
    return suite


# ---------------------------------------------------------------------- mdpsim attack
@dataclass(frozen=True)
class Plan:
    """What ``mdpsim attack`` runs: mechanisms x epsilons x repetitions, with these attacks."""

    mechanisms: list[str]
    epsilons: list[float]
    repetitions: int
    specs: list[dict]

    @property
    def n_runs(self) -> int:
        """Mechanism fits times repetitions."""
        return len(self.mechanisms) * len(self.epsilons) * self.repetitions


def plan_of(scenario, *, mechanisms=None, epsilons=None, repetitions=None) -> Plan:
    """Mechanisms and eps from the flags, else the scenario's sweep, else its [mechanism]."""
    from mdpsim.mechanisms import available

    sweep = scenario.sweep
    names = mechanisms or sweep.get("mechanism.name") or [scenario.mechanism.name]
    bad = [n for n in names if n not in available()]
    if bad:
        raise InputError(
            f"--mechanisms: {bad[0]!r} is not a mechanism; available: {', '.join(available())}"
        )
    eps = epsilons or sweep.get("mechanism.epsilon_per_km") or [scenario.mechanism.epsilon_per_km]
    eps = [float(e) for e in eps]
    if any(not (np.isfinite(e) and e > 0) for e in eps):
        raise InputError(f"--epsilons: {eps} must all be finite and > 0 (per km)")
    reps = repetitions if repetitions is not None else sweep.get("repetitions", 1)
    if reps < 1:
        raise InputError(f"--repetitions={reps} must be >= 1")
    specs = scenario.attacks.specs()
    if not specs:
        raise InputError("attacks.run lists no attack that is switched on")
    return Plan(mechanisms=list(names), epsilons=eps, repetitions=int(reps), specs=specs)


def fit_mechanism(scenario, name: str, eps: float, world: World):
    """Fit ``name`` at ``eps`` on the world's domain; DistA-LP on the users' tick-1 secrets.

    Returns the fitted mechanism and, for DistA-LP, which upload each slot sent.
    """
    from mdpsim.mechanisms import make

    params = {**scenario.mechanism.params, **scenario.mechanism.params_by_name.get(name, {})}
    uploads = None
    if name == "dista_lp":
        users = np.unique(world.traces[0])
        params.setdefault("user_indices", users.tolist())
        params.setdefault("seed", world.seed)
    mech = make(name, epsilon=eps, **params).fit(world.domain)
    if name == "dista_lp":
        slot = {int(x): i for i, x in enumerate(mech.info_["users"])}
        uploads = np.array([slot.get(int(x), -1) for x in world.traces[0]], dtype=np.int64)
    return mech, uploads


def evaluate(scenario, plan: Plan, *, ticks: int | None = None, progress: bool = False):
    """Run the plan; ``(summary, per_tick)`` frames, one summary row per run and attack."""
    from mdpsim.domain import Domain
    from mdpsim.network import load_network

    s, users, attacks = scenario.scenario, scenario.users, scenario.attacks
    n_ticks = ticks or s.ticks
    graph = load_network(scenario.network.source, network_type=scenario.network.network_type)
    summaries, per_tick = [], []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=plan.n_runs * n_ticks, unit="tick", desc=f"{s.name} attacks")
    try:
        for rep in range(plan.repetitions):
            seed = s.seed + rep
            domain = Domain.from_network(
                graph,
                n_points=scenario.domain.n_points,
                n_outputs=scenario.domain.n_outputs or None,
                metric=scenario.domain.metric,
                seed=seed,
            )
            world = draw_world(
                domain,
                n_users=users.count,
                ticks=n_ticks,
                seed=seed,
                n_places=users.n_places,
                speed_mps=users.speed_mps,
                tick_seconds=s.tick_seconds,
                dwell_ticks=tuple(users.dwell_ticks),
                personal_places=users.personal_places,
            )
            for name in plan.mechanisms:
                for eps in plan.epsilons:
                    mech, uploads = fit_mechanism(scenario, name, eps, world)
                    suite = run(
                        world,
                        mech,
                        plan.specs,
                        uploads=uploads,
                        report_probability=attacks.report_probability,
                        pseudonym_change_tick=attacks.pseudonym_change_tick,
                        grant_true_mobility=attacks.grant_true_mobility,
                        progress=None if bar is None else bar.update,
                    )
                    summaries.append(
                        suite.summary().assign(mechanism=name, epsilon_per_km=eps, repetition=rep)
                    )
                    per_tick.append(
                        suite.table().assign(mechanism=name, epsilon_per_km=eps, repetition=rep)
                    )
    finally:
        if bar is not None:
            bar.close()
    order = ["mechanism", "epsilon_per_km", "repetition", "attack"]
    summary = pd.concat(summaries, ignore_index=True)
    summary = summary[order + [c for c in summary.columns if c not in order]]
    return summary, pd.concat(per_tick, ignore_index=True)


def success_markdown(summary: pd.DataFrame) -> str:
    """Mean over repetitions of each attack's hit rate, error and entropy: a Markdown table."""
    from mdpsim.report import markdown_table

    metrics = [m for m in ("hit", "error_km", "entropy_bits", "leakage_per_km",
                           "precision_at_k", "recall_at_k", "chance") if m in summary]  # fmt: skip
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


def write_outputs(summary: pd.DataFrame, per_tick: pd.DataFrame, out, *, overwrite: bool):
    """``attacks.parquet``, ``attacks_ticks.parquet``, ``attacks.md``, ``attack_success.png``,
    written into a hidden sibling folder and renamed at the end; returns the paths."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise InputError(f"output folder {str(out)!r} exists; choose another --out or --force")
    names = ["attacks.parquet", "attacks_ticks.parquet", "attacks.md", "attack_success.png"]
    with atomic_folder(out) as tmp:
        summary.to_parquet(tmp / names[0], index=False)
        per_tick.to_parquet(tmp / names[1], index=False)
        (tmp / names[2]).write_text(success_markdown(summary) + "\n", encoding="utf-8")
        heatmap(summary, tmp / names[3])
    return [out / n for n in names]
