"""The one place a scenario becomes a world: roads, domain, the users' walks, the adversary.

:func:`build_world` turns a validated scenario and a seed into a :class:`World`: the projected
road graph, the domain of secrets and outputs, the mobility model (places, routes), the users'
starting positions and the seeded random streams every later draw of a run comes from. The
model (:class:`~mdpsim.simulation.model.PrivacyModel`), and through it ``mdpsim run``, ``mdpsim
attack``,
``mdpsim batch``, the environment and the dashboard, all build their worlds here, so a
scenario field means the same thing everywhere.

With ``[mobility] source = "traces"`` the users replay a file's fixes
(:mod:`mdpsim.simulation.traces`):
``users.count`` and ``scenario.ticks`` become the data's (``World.scenario`` holds them), and
the mobility model still gives the adversary its public reach of one tick, from the roads and
``users.speed_mps`` (docs/traces.md, "What the adversary knows").

:meth:`World.context` is what the adversary knows at the start (:class:`~mdpsim.attacks.Context`):
the public reach of a tick, a public population's walks when an attack asks for them, and the
users' own empirical transitions only when ``[attacks] grant_true_mobility`` hands them over.
"""

from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import numpy as np
from scipy import sparse

from mdpsim.attacks.base import Context
from mdpsim.attacks.mobility_models import counted_kernel, reach_kernel
from mdpsim.errors import InputError
from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.simulation.mobility import MobilityModel, Population
from mdpsim.simulation.people import People, PeopleModel, PeopleParams
from mdpsim.simulation.relevance import relevance_map
from mdpsim.simulation.trace_walks import TracePopulation
from mdpsim.simulation.traces import Fixes, read_fixes

if TYPE_CHECKING:
    from mdpsim.geo.routing import RoadSegments
    from mdpsim.simulation.scenario import Scenario

#: The run's independent random streams, children of the seed in this order. New streams are
#: appended (a SeedSequence's i-th child does not depend on how many are spawned), so adding
#: one leaves every earlier stream, and so every earlier result, unchanged.
STREAMS = (
    "mobility",
    "reports",
    "queries",
    "mechanism",
    "places",
    "participation",
    "pseudonyms",
)
#: Laplace smoothing of the users' counted transitions handed over by grant_true_mobility.
TRUE_MOBILITY_SMOOTHING = 1e-3


@dataclass(eq=False)
class World:
    """What a scenario and a seed make; shared by every player of one run."""

    scenario: Scenario
    seed: int
    graph: Any
    domain: Domain
    mobility: MobilityModel
    population: Population | TracePopulation | People
    streams: dict[str, np.random.Generator]
    traces: Fixes | None = None  # the fixes of [mobility] source = "traces"

    @property
    def n_users(self) -> int:
        """How many users walk in this world."""
        return self.population.n_users

    def context(self) -> Context:
        """What the adversary knows before the first tick (see the module docstring)."""
        attacks = self.scenario.attacks
        specs = attacks.specs()
        wants_public = any(spec.get("mobility") == "public" for spec in specs)
        true = None
        if attacks.grant_true_mobility:
            traces = self.walks_ahead(self.scenario.scenario.ticks)
            true = true_transitions(self.domain, self.mobility.reach_km, traces)
        return Context(
            domain=self.domain,
            n_users=self.n_users,
            reach_km=self.mobility.reach_km,
            public_traces=public_walks(self.scenario, self.domain, seed=self.seed)
            if wants_public
            else None,
            true_transitions=true,
            seed=self.seed,
            tick_seconds=self.scenario.scenario.tick_seconds,
            start_hour=self.scenario.scenario.start_hour,
            public_prior=self._public_prior() if attacks.people_prior else None,
        )

    def _public_prior(self) -> np.ndarray:
        """The people model's public structure as a prior (``[attacks] people_prior``)."""
        from mdpsim.simulation.public_prior import people_prior

        if not isinstance(self.population, People):  # the scenario's check refuses this
            raise InputError('attacks.people_prior = true needs [mobility] model = "epr"')
        model, run = self.population.model, self.scenario.scenario
        return people_prior(
            model.relevance.housing, model.relevance.activity, model.params.home_by_hour,
            self.domain.prior, tick_seconds=run.tick_seconds, start_hour=run.start_hour,
        )  # fmt: skip

    def walks_ahead(self, ticks: int) -> np.ndarray:
        """``(ticks, users)`` secrets of the users at ticks 1 .. ``ticks``, as the run will walk
        them (drawn on copies of the population and its stream; the world is not advanced)."""
        population = copy.deepcopy(self.population)
        rng = copy.deepcopy(self.streams["mobility"])
        out = np.empty((ticks, self.n_users), dtype=np.int64)
        for t in range(ticks):
            population.step(rng)  # a tick starts with the users' move (SPEC.md section 6)
            out[t] = population.position
        return out


def build_world(
    scenario: Scenario, seed: int | None = None, *, graph=None, domain: Domain | None = None
) -> World:
    """The world of ``scenario`` with run seed ``seed`` (default: the scenario's).

    ``graph`` and ``domain`` may be given when already built for the same scenario fields and
    seed (the dashboard and the environment cache them); they are never mutated.
    """
    seed = scenario.scenario.seed if seed is None else int(seed)
    graph = load_graph(scenario) if graph is None else graph
    fixes = trace_fixes(scenario, graph)
    scenario = with_trace_counts(scenario, fixes)
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    streams = {name: np.random.default_rng(s) for name, s in zip(STREAMS, children, strict=True)}
    domain = build_domain(scenario, graph, seed=seed) if domain is None else domain
    mobility = _mobility(scenario, domain, seed, streams["places"])
    population: Population | TracePopulation | People
    if fixes is None and scenario.mobility.model == "epr":
        people_model = _people_model(scenario, domain)
        population = People(people_model, scenario.users.count, streams["mobility"])
    elif fixes is None:
        population = Population(
            mobility,
            domain,
            scenario.users.count,
            streams["mobility"],
            personal_places=scenario.users.personal_places,
        )
    else:
        walks = fixes.walks(domain, scenario.scenario.tick_seconds, how=scenario.mobility.resample)
        population = TracePopulation(walks)
    return World(
        scenario=scenario,
        seed=seed,
        graph=graph,
        domain=domain,
        mobility=mobility,
        population=population,
        streams=streams,
        traces=fixes,
    )


#: Per domain, the mobility models built on it by (seed, users' movement fields): the places
#: stream is drawn by nothing else, so a seed's model is the same every time (an
#: environment's resets rebuild the same world; the model is frozen, its arrays read-only).
_MOBILITY: WeakKeyDictionary = WeakKeyDictionary()


def _mobility(scenario: Scenario, domain: Domain, seed: int, places_rng) -> MobilityModel:
    """The scenario's mobility model on ``domain`` for run seed ``seed`` (drawn from the
    places stream ``places_rng`` once per domain, seed and movement fields)."""
    users = scenario.users
    fields = (users.n_places, users.speed_mps, scenario.scenario.tick_seconds,
              users.dwell_ticks[0], users.dwell_ticks[1])  # fmt: skip
    per_domain = _MOBILITY.setdefault(domain, {})
    key = (seed, fields)
    if key not in per_domain:
        n_places, speed_mps, tick_seconds, *dwell = fields
        per_domain[key] = MobilityModel.build(
            domain, n_places=n_places, speed_mps=speed_mps, tick_seconds=tick_seconds,
            dwell_ticks=(dwell[0], dwell[1]), rng=places_rng,
        )  # fmt: skip
    return per_domain[key]


#: Per domain, the people models built on it by their fields (routes and gravity are N x N).
_PEOPLE: WeakKeyDictionary = WeakKeyDictionary()


def _people_model(scenario: Scenario, domain: Domain) -> PeopleModel:
    """The ``[mobility] model = "epr"`` model of ``scenario`` on ``domain`` (kept per domain
    and fields: it draws nothing, so it is the same for every seed)."""
    mob, run = scenario.mobility, scenario.scenario
    params = PeopleParams(
        rho=mob.rho, gamma=mob.gamma, beta=mob.beta, tau_h=mob.tau_h,
        min_stay_min=mob.min_stay_min, work_share=mob.work_share,
        work_hours=(mob.work_hours[0], mob.work_hours[1]), work_prob=mob.work_prob,
        gravity_min_km=mob.gravity_min_km, home_by_hour=tuple(mob.home_by_hour),
        diary_churn=mob.diary_churn,
        speed_mps=scenario.users.speed_mps, tick_seconds=run.tick_seconds,
        start_hour=run.start_hour,
    )  # fmt: skip
    relevance_path = None
    if mob.relevance_path:  # relative: to the scenario file's folder, as [mobility] path
        relevance_path = Path(os.path.expanduser(mob.relevance_path))
        if not relevance_path.is_absolute() and scenario.path is not None:
            relevance_path = Path(scenario.path).parent / relevance_path
    per_domain = _PEOPLE.setdefault(domain, {})
    key = (params, str(relevance_path))
    if key not in per_domain:
        relevance = relevance_map(domain, path=relevance_path)
        per_domain[key] = PeopleModel.build(domain, relevance, params)
    return per_domain[key]


def trace_fixes(scenario: Scenario, graph) -> Fixes | None:
    """The checked fixes of ``[mobility] source = "traces"`` on ``graph`` (None: synthetic).

    Read once per process for the same file (size and modification time), CRS and network."""
    mob = scenario.mobility
    if mob.source != "traces":
        return None
    path = scenario.trace_path()
    stat = path.stat() if path.is_file() else None
    key = (
        str(path),
        stat and (stat.st_size, stat.st_mtime_ns),
        mob.crs,
        mob.keep_trace,
        tuple(sorted(mob.columns.items())),
        mob.time_unit,
    )
    crs = str(graph.graph["crs"])
    return _read_fixes(key, mob.strict, crs, network_extent(graph))


@functools.lru_cache(maxsize=8)
def _read_fixes(key: tuple, strict: bool, graph_crs: str, extent: tuple) -> Fixes:
    path, _, crs, keep_trace, columns, time_unit = key
    return read_fixes(
        path,
        graph_crs=graph_crs,
        extent_xy=extent,
        crs=crs,
        keep_trace=keep_trace,
        strict=strict,
        columns=dict(columns),
        time_unit=time_unit,
    )


def network_extent(graph) -> tuple[float, float, float, float]:
    """``(xmin, ymin, xmax, ymax)`` of the graph's nodes, in its CRS."""
    xy = np.array([(d["x"], d["y"]) for _, d in graph.nodes(data=True)], dtype=float)
    xmin, ymin = xy.min(axis=0)
    xmax, ymax = xy.max(axis=0)
    return float(xmin), float(ymin), float(xmax), float(ymax)


def with_trace_counts(scenario: Scenario, fixes: Fixes | None) -> Scenario:
    """``scenario`` with ``users.count`` and ``scenario.ticks`` of the traces (unchanged when
    there are none): users and ticks come from the data."""
    if fixes is None:
        return scenario
    counts = {
        "users.count": fixes.n_users,
        "scenario.ticks": fixes.n_ticks(scenario.scenario.tick_seconds),
    }
    if all(scenario.get(k) == v for k, v in counts.items()):
        return scenario
    return scenario.replace(**counts)


def load_graph(scenario: Scenario):
    """The scenario's projected road graph (``[network]``)."""
    return load_network(scenario.network_source(), network_type=scenario.network.network_type)


def domain_sizes(scenario: Scenario) -> tuple[int, int | None]:
    """``(n_points, n_outputs)`` of the scenario's domain; ``n_outputs`` None: outputs = secrets."""
    dom = scenario.domain
    return dom.n_points, dom.n_outputs or None


def build_domain(
    scenario: Scenario, graph, *, seed: int, segments: RoadSegments | None = None
) -> Domain:
    """The scenario's domain (``[domain]``) on ``graph``, its points placed by ``seed``
    (``segments``: the graph's, when already read)."""
    n_points, n_outputs = domain_sizes(scenario)
    return Domain.from_network(
        graph, n_points=n_points, n_outputs=n_outputs, metric=scenario.domain.metric, seed=seed,
        segments=segments,
    )  # fmt: skip


def public_walks(scenario: Scenario, domain: Domain, *, seed: int) -> np.ndarray:
    """``(ticks, users.count)`` walks of a public population: other people on the same roads
    with places of their own, drawn apart from the users (the adversary's public data); of
    the people model when the users follow it, else of the waypoint walk."""
    users, s = scenario.users, scenario.scenario
    _, public_ss, _ = np.random.SeedSequence(seed).spawn(3)
    if scenario.mobility.source == "synthetic" and scenario.mobility.model == "epr":
        rng = np.random.default_rng(public_ss.spawn(2)[1])  # people of the same model
        people = People(_people_model(scenario, domain), users.count, rng)
        out = np.empty((s.ticks, users.count), dtype=np.int64)
        for t in range(s.ticks):
            people.step(rng)
            out[t] = people.position
        return out
    return walk(
        domain, users.count, public_ss, ticks=s.ticks, n_places=users.n_places,
        speed_mps=users.speed_mps, tick_seconds=s.tick_seconds,
        dwell_ticks=(users.dwell_ticks[0], users.dwell_ticks[1]),
        personal_places=users.personal_places,
    )[1]  # fmt: skip


def walk(
    domain: Domain,
    count: int,
    seed: np.random.SeedSequence,
    *,
    ticks: int,
    n_places: int,
    speed_mps: float,
    tick_seconds: float,
    dwell_ticks: tuple[int, int],
    personal_places: int = 0,
) -> tuple[MobilityModel, np.ndarray]:
    """``count`` people with places of their own, drawn from ``seed`` (places, then walks):
    their mobility model and ``(ticks, count)`` positions after each step."""
    places_rng, walk_rng = (np.random.default_rng(child) for child in seed.spawn(2))
    mobility = MobilityModel.build(
        domain, n_places=n_places, speed_mps=speed_mps, tick_seconds=tick_seconds,
        dwell_ticks=dwell_ticks, rng=places_rng,
    )  # fmt: skip
    population = Population(mobility, domain, count, walk_rng, personal_places=personal_places)
    out = np.empty((ticks, count), dtype=np.int64)
    for t in range(ticks):
        population.step(walk_rng)
        out[t] = population.position
    return mobility, out


def true_transitions(domain: Domain, reach_km, traces: np.ndarray) -> sparse.csr_matrix:
    """The users' own one-tick transitions counted from ``traces`` on the road reach (what
    ``grant_true_mobility`` hands the adversary), smoothed by ``TRUE_MOBILITY_SMOOTHING``."""
    support = reach_kernel(domain.dist_xx, reach_km)
    return counted_kernel(support, traces, TRUE_MOBILITY_SMOOTHING).forward
