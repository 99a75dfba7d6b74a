"""The people model ([mobility] model = "epr"): homes, diaries, stays, determinism."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from mdpsim._core.clock import hour_of_tick
from mdpsim.errors import InputError
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.mobility import Population
from mdpsim.simulation.people import People, PeopleModel, PeopleParams, diary_chain
from mdpsim.simulation.relevance import relevance_map
from mdpsim.simulation.world import build_world, public_walks


@pytest.fixture(scope="module")
def domain(walk_domain):
    return walk_domain(300, 3)


@pytest.fixture(scope="module")
def relevance(domain):
    return relevance_map(domain)


def _walk(model: PeopleModel, users: int, ticks: int, seed: int):
    """Positions and moving flags ``(ticks, users)`` and the population after them."""
    rng = np.random.default_rng(seed)
    people = People(model, users, rng)
    pos = np.empty((ticks, users), dtype=np.int64)
    moving = np.empty((ticks, users), dtype=bool)
    for t in range(ticks):
        pos[t], moving[t] = people.position, people.moving
        people.step(rng)
    return pos, moving, people


def _stays_ticks(pos: np.ndarray, moving: np.ndarray) -> list[int]:
    """Lengths of the completed stays (runs of ticks not moving at one place)."""
    out = []
    for u in range(pos.shape[1]):
        still = ~moving[:, u]
        run, place = 0, -1
        for t in range(len(still)):
            if still[t] and pos[t, u] == place:
                run += 1
                continue
            if run and place >= 0 and t - run > 0:  # a stay begun and ended inside the walk
                out.append(run)
            run, place = (1, pos[t, u]) if still[t] else (0, -1)
    return out


def test_relevance_counts_the_extracts_buildings(relevance, domain):
    assert relevance.source == "osm buildings"
    for weights in (relevance.housing, relevance.activity):
        assert weights.shape == (domain.n_x,) and np.all(weights > 0)
        assert weights.sum() == pytest.approx(1.0)
        assert weights.max() > 5 / domain.n_x  # buildings concentrate it, unlike uniform


def test_same_seed_same_walk_other_seed_another(domain, relevance):
    model = PeopleModel.build(domain, relevance, PeopleParams(tick_seconds=300))
    a, _, pa = _walk(model, 40, 300, seed=5)
    b, _, pb = _walk(model, 40, 300, seed=5)
    c, _, _ = _walk(model, 40, 300, seed=6)
    assert np.array_equal(a, b) and np.array_equal(pa.home, pb.home)
    assert not np.array_equal(a, c)


def test_homes_are_distinct_and_follow_housing(domain, relevance):
    model = PeopleModel.build(domain, relevance, PeopleParams())
    people = People(model, 200, np.random.default_rng(0))
    assert len(np.unique(people.home)) == 200  # room for all on 300 secrets
    empty = np.setdiff1d(np.arange(domain.n_x), people.home)
    assert relevance.housing[people.home].mean() > 2 * relevance.housing[empty].mean()
    workers = people.work >= 0
    assert 0.35 < workers.mean() < 0.65  # work_share 0.5
    assert np.all(people.work[workers] != people.home[workers])


@pytest.mark.parametrize("tick_seconds", [60.0, 300.0, 3600.0])
def test_nights_at_home_and_stays_of_at_least_20_min(domain, relevance, tick_seconds):
    params = PeopleParams(tick_seconds=tick_seconds)
    model = PeopleModel.build(domain, relevance, params)
    ticks = int(2 * 86400 / tick_seconds)
    pos, moving, people = _walk(model, 60, ticks, seed=1)
    hours = hour_of_tick(np.arange(ticks), tick_seconds)
    at_home = pos == people.home[None, :]
    night = np.isin(hours, [1, 2, 3, 4])
    midday = np.isin(hours, [11, 12, 13, 14])
    assert at_home[night].mean() > 0.85
    assert at_home[midday].mean() < 0.7  # a routine: days are spent out
    stays = _stays_ticks(pos, moving)
    assert stays and min(stays) * tick_seconds >= 20 * 60
    assert (pos[1:] != pos[:-1]).any()  # people go out


def test_diary_chain_keeps_the_routine():
    routine = np.array(PeopleParams().home_by_hour)
    leave, back = diary_chain(routine, 0.05)
    share = routine[-1]
    for h in range(24):
        share = share * (1 - leave[h]) + (1 - share) * back[h]
        assert share == pytest.approx(routine[h])


def test_world_builds_people_for_epr_and_keeps_waypoints(make_scenario):
    epr = make_scenario(mobility={"model": "epr"}, users={"count": 8})
    world = build_world(epr)
    assert isinstance(world.population, People)
    assert np.array_equal(world.walks_ahead(30), build_world(epr).walks_ahead(30))
    old = build_world(make_scenario(mobility={"model": "waypoints"}, users={"count": 10}))
    assert isinstance(old.population, Population)
    walks = old.walks_ahead(50)
    # the waypoint walk of this scenario as it was before the people model (bytes pinned);
    # since the tick's move comes first (issue 49) a run's tick t is the old walk's row t + 1:
    # the walk before the reorder hashed b7033c1902ffba2b over its rows 0 .. 49
    assert hashlib.sha256(walks.tobytes()).hexdigest()[:16] == WAYPOINTS_SHA


WAYPOINTS_SHA = "07a3d41612c4b9a2"


def test_bad_people_fields_name_the_field_and_the_fix(make_scenario, tmp_path):
    with pytest.raises(InputError, match="work_hours"):
        sc.from_dict(make_scenario.raw(mobility={"model": "epr", "work_hours": [17, 9]}))
    with pytest.raises(InputError, match="home_by_hour"):
        sc.from_dict(make_scenario.raw(mobility={"home_by_hour": [0.5] * 23}))
    waypoints = {"model": "waypoints", "rho": 0.5}  # waypoints ignore it: refused
    with pytest.raises(InputError, match=r"mobility.rho is for the people model .*set model"):
        sc.from_dict(make_scenario.raw(mobility=waypoints))
    traces = {"source": "traces", "path": "t.csv", "rho": 0.5}  # traces walk as recorded
    with pytest.raises(InputError, match=r"mobility.rho is for the people model .*drop it"):
        sc.from_dict(make_scenario.raw(mobility=traces))
    bad = tmp_path / "rel.csv"
    bad.write_text("lat,lon\n60.17,24.94\n")
    scen = make_scenario(mobility={"model": "epr", "relevance_path": str(bad)})
    with pytest.raises(InputError, match="relevance_path.*lat, lon and weight"):
        build_world(scen)


def test_a_relevance_file_places_the_homes(make_scenario, tmp_path, helsinki_test_walk):
    node = next(iter(helsinki_test_walk.nodes(data=True)))[1]
    path = tmp_path / "rel.csv"
    path.write_text(f"lat,lon,weight\n{node['lat']},{node['lon']},1000\n")
    world = build_world(
        make_scenario(mobility={"model": "epr", "relevance_path": str(path)}, users={"count": 5})
    )
    rel = world.population.model.relevance
    assert rel.source.startswith("file") and rel.housing.max() > 0.85


def test_the_public_population_of_a_people_scenario_is_people(make_scenario, walk_domain):
    scen = make_scenario(
        mobility={"model": "epr"},
        users={"count": 6},
        scenario={"ticks": 40, "start_hour": 2.0},  # night: people sleep, waypoint walkers walk
    )
    domain = build_world(scen).domain
    public = public_walks(scen, domain, seed=1)
    assert public.shape == (40, 6)
    assert (public[1:] == public[:-1]).mean() > 0.9
    waypoints = scen.replace(**{"mobility.model": "waypoints"})
    walked = public_walks(waypoints, domain, seed=1)
    assert (walked[1:] == walked[:-1]).mean() < 0.9
    assert np.array_equal(public, public_walks(scen, domain, seed=1))
    assert not np.array_equal(public, build_world(scen).walks_ahead(41)[1:])  # other people


@pytest.mark.parametrize("known", [2, 10, 30])
def test_exploration_is_rho_s_to_the_minus_gamma_and_by_gravity(domain, relevance, known):
    model = PeopleModel.build(domain, relevance, PeopleParams())
    rng = np.random.default_rng(known)
    people = People(model, 4000, rng)
    for u in range(people.n_users):  # each user knows `known` places besides where it is
        places = rng.choice(domain.n_x, size=known, replace=False)
        people._count(np.full(known, u), places)
    users = np.arange(people.n_users)
    chosen = people._epr(users, rng)
    is_new = ~(people.known == chosen[:, None]).any(axis=1)
    expected = 0.6 * people.n_known**-0.21
    assert is_new.mean() == pytest.approx(expected.mean(), abs=0.025)
    here = people.position[is_new]
    hop_km = domain.dist_xx[here, chosen[is_new]]
    assert np.median(hop_km) < np.median(domain.dist_xx[here]) / 2  # gravity: near first


def test_stays_follow_the_truncated_power_law(domain, relevance):
    params = PeopleParams(tick_seconds=60.0)
    model = PeopleModel.build(domain, relevance, params)
    minutes = model.stay_ticks(np.random.default_rng(0), 200_000)  # 1-minute ticks
    assert minutes.min() == 20
    # P(dt > 2 h) of dt^-1.8 exp(-dt / 17 h) on [20 min, 14 days], integrated here
    t = np.geomspace(20.0, 14 * 24 * 60.0, 200_000)
    pdf = t**-1.8 * np.exp(-t / (17 * 60.0))
    tail = np.trapezoid(pdf[t > 120], t[t > 120]) / np.trapezoid(pdf, t)
    assert (minutes > 120).mean() == pytest.approx(tail, abs=0.01)


def test_samplers_are_kept_per_parameters_read_only():
    from mdpsim.simulation.people import _samplers, _stay_grid

    p = PeopleParams(beta=0.7, diary_churn=0.05)
    kept = _samplers(p)
    assert _samplers(PeopleParams(beta=0.7, diary_churn=0.05)) is kept
    fresh = (*diary_chain(np.asarray(p.home_by_hour), p.diary_churn), *_stay_grid(p))
    for a, b in zip(kept, fresh, strict=True):
        assert np.array_equal(a, b) and not a.flags.writeable


def test_relevance_is_the_bits_of_one_tree_per_count(relevance, domain):
    """The maps as formerly computed: a KD-tree per count, the nodes' coordinates read anew."""
    from scipy.spatial import cKDTree

    from mdpsim.simulation import relevance as rel

    def counted(xy, weight):
        out = np.zeros(domain.n_x)
        np.add.at(out, cKDTree(domain.x_xy).query(xy)[1], weight)
        return out

    g = domain.graph
    xy = np.array([(d["x"], d["y"]) for _, d in g.nodes(data=True)], dtype=float)
    nodes = counted(xy, np.ones(len(xy))) + 1.0
    nodes /= nodes.sum()
    points = rel._osm_points(str(g.graph.get("mdpsim_source", "")), str(g.graph.get("crs")))
    housing, activity = (rel._blend(counted(*p), nodes) for p in points)
    assert np.array_equal(relevance.housing, housing)
    assert np.array_equal(relevance.activity, activity)


@pytest.mark.parametrize("n", [1, 2, 80, 200])
def test_nearest_secret_is_the_kd_trees_even_on_ties(n):
    from scipy.spatial import cKDTree

    from mdpsim.simulation.relevance import _nearest

    rng = np.random.default_rng(n)
    cells = rng.permutation(np.argwhere(np.ones((20, 20), dtype=bool)))[:n]
    sites = cells * 10.0 + [385_000.0, 6_672_000.0]  # a 10 m grid in shuffled order
    halfway = sites[rng.integers(n, size=200)] + [5.0, 0.0]  # ties between grid neighbours
    points = np.vstack([rng.uniform(0.0, 200.0, (2000, 2)) + sites.min(axis=0), halfway])
    tree = cKDTree(sites)
    assert np.array_equal(_nearest(tree, points), tree.query(points)[1])
