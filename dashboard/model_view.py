"""Plain tables of a live :class:`~mdpsim.simulation.model.PrivacyModel` for the dashboard's map
and charts.

Nothing here imports Streamlit: every function takes the model and returns a DataFrame, so the
numbers the page shows are tested without a browser.
"""

from __future__ import annotations

from typing import get_args

import numpy as np
import pandas as pd

from mdpsim._core.clock import hour_of_tick
from mdpsim.agents.strategies import REGISTRIES, specs_of
from mdpsim.dashboard.geo import lonlat
from mdpsim.errors import InputError
from mdpsim.simulation import columns
from mdpsim.simulation import scenario as scenario_mod
from mdpsim.simulation.model import PrivacyModel
from mdpsim.simulation.scenario import Scenario
from mdpsim.simulation.scenario.tables import MobilityTable
from mdpsim.simulation.tick_row import TickColumns

#: The dashboard's default: small enough that a tick takes well under a second; DistA-LP in
#: its honest default mode (``upload="none"``, docs/results/dista_lp.md), like ``make demo``.
LIVE_DEFAULT = {
    # the people model from 8:00 at 5-minute ticks: people leave home (docs/mobility.md)
    "scenario": {"name": "live", "seed": 1, "ticks": 20, "tick_seconds": 300.0, "start_hour": 8.0},
    "mobility": {"model": "epr"},
    "network": {"source": "helsinki", "network_type": "walk"},
    "domain": {"n_points": 400},
    "users": {"count": 30},
    # per mechanism, so that picking another mechanism on the page does not carry "upload"
    "mechanism": {
        "name": "dista_lp",
        "epsilon_per_km": 6.0,
        "params_by_name": {"dista_lp": {"upload": "none"}},
    },
    "queries": {"rho_per_km2": 10.0},
    "output": {"per_user": True},
    "strategies": {"budget": {"name": "cgp", "rho_per_km2": 400.0}},
}

#: Fields the live page lets a user edit: dotted name -> label.
EDITABLE = {
    "scenario.seed": "seed",
    "domain.n_points": "secrets |X|",
    "users.count": "users",
    "strategies.budget.rho_per_km2": "budget per user (rho, 1/km²)",
    "mechanism.name": "mechanism",
    "mechanism.epsilon_per_km": "epsilon (1/km)",
    "queries.every_ticks": "queries every (ticks, 0: never)",
    "attacks.run": "attacks",
    "mobility.model": "mobility model",
    "scenario.tick_seconds": "tick (seconds)",
    "scenario.start_hour": "clock at tick 0 (hour)",
    "mobility.work_share": "share of users with work (epr)",
    "mobility.rho": "exploration rho (epr)",
    "mobility.gamma": "exploration gamma (epr)",
}
#: The mobility models the page offers (``[mobility] model``).
MOBILITY_MODELS = list(get_args(MobilityTable.model_fields["model"].annotation))

#: Strategy kinds the live page lets a user pick: kind -> label.
STRATEGY_PICKERS = {
    "report": "report policy",
    "budget": "budget policy",
    "query_planner": "query planner",
    "refresh": "refresh schedule (public)",
}


def strategy_choices(kind: str) -> list[str]:
    """The registered names of one strategy kind."""
    return REGISTRIES[kind].available()


def strategy_names(scenario: Scenario) -> dict[str, str]:
    """The name of each strategy the scenario runs with (unset kinds resolved)."""
    return {kind: _name(specs_of(scenario)[kind]) for kind in STRATEGY_PICKERS}


def with_strategies(base: Scenario, names: dict[str, str]) -> Scenario:
    """``base`` running the picked strategies; a kind whose name is unchanged keeps its spec.

    A new strategy keeps the parameters of the old spec that it takes too (read from the
    registry: cgp's ``rho_per_km2`` carries over to ``renewing``). Raises
    :class:`~mdpsim.errors.InputError` for a name that is not registered.
    """
    current = strategy_names(base)
    changes: dict = {}
    for kind, name in names.items():
        if kind not in STRATEGY_PICKERS:
            raise InputError(
                f"{kind!r} is not a strategy kind; kinds: {', '.join(STRATEGY_PICKERS)}"
            )
        if name == current[kind]:
            continue
        takes = REGISTRIES[kind].get(name).param_names()  # an unknown name fails here
        old = base.strategy_spec(kind)
        kept = {k: v for k, v in old.items() if k in takes} if isinstance(old, dict) else {}
        changes[f"strategies.{kind}"] = {"name": name, **kept} if kept else name
    return base.replace(**changes) if changes else base


def field_value(base: Scenario, field: str):
    """The page's value of an :data:`EDITABLE` field; ``None`` for a strategy's parameter that
    the scenario's strategy does not take (the field does not apply to it)."""
    try:
        return base.get(field)
    except InputError:
        return None


def _name(spec) -> str:
    return spec if isinstance(spec, str) else str(spec["name"])


def charts(ticks: pd.DataFrame) -> dict[str, list[str]]:
    """The live page's charts for this run's tick table (sim/simulation/columns.py)."""
    return columns.charts(TickColumns.of(ticks))


def default_scenario() -> Scenario:
    """The small live scenario the page opens with."""
    return scenario_mod.from_dict(LIVE_DEFAULT)


def edited(base: Scenario, values: dict) -> Scenario:
    """``base`` with the page's edits (dotted name -> value; ``None``: a field that does not
    apply, :func:`field_value`), re-validated.

    Raises :class:`~mdpsim.errors.InputError` naming the field when an edit is not allowed.
    """
    unknown = [k for k in values if k not in EDITABLE]
    if unknown:
        raise InputError(f"{unknown[0]!r} is not editable here; editable: {', '.join(EDITABLE)}")
    return base.replace(**{k: v for k, v in values.items() if v is not None})


def history(model: PrivacyModel) -> pd.DataFrame:
    """One row per simulated tick (empty before the first step), with its declared columns."""
    return model.log.columns.attach(pd.DataFrame(model.log.ticks))


def whole_run(model: PrivacyModel) -> pd.DataFrame:
    """The whole-run attacks' scores so far (home / work, re-identification from k points,
    places, linkage; :meth:`~mdpsim.attacks.suite.AttackSuite.peek`): one row per attack, the
    scores some attack has (:func:`~mdpsim.simulation.columns.whole_run_metrics`); empty when
    the run has none or no tick yet."""
    suite = model.server.attacks
    table = suite.peek() if suite is not None else pd.DataFrame()
    if table.empty:
        return table
    keep = [m for m in columns.whole_run_metrics(table) if table[m].notna().any()]
    return table[["attack", *keep]]


def chart_frame(ticks: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The chart's columns that this run has, indexed by tick."""
    present = [c for c in columns if c in ticks]
    return ticks.set_index("tick")[present].astype(float)


def points(model: PrivacyModel) -> dict[str, pd.DataFrame]:
    """Map layers of the latest tick, in lon/lat degrees.

    ``true``: every user's secret now; ``reported``: the outputs reported at the latest tick;
    ``estimate``: the server's Bayes-optimal single-report estimate of each of those reporters;
    ``tracking``: the tracking attack's MAP guess of every user (when the attack is on).
    Before the first tick only ``true`` is there.
    """
    dom, crs = model.domain, model.graph.graph["crs"]
    n = model.population.n_users
    if not model.log.users:
        return {"true": _layer(np.arange(n), dom.x_xy[model.population.position], crs)}
    last = model.log.users[-1]
    out = {"true": _layer(np.arange(n), dom.x_xy[last["secret"]], crs)}
    reporting = last["reported_output"] >= 0
    users, outputs = last["user"][reporting], last["reported_output"][reporting]
    out["reported"] = _layer(users, dom.y_xy[outputs], crs)
    suite = model.server.attacks
    bayes = suite.attacks.get("bayes") if suite is not None else None
    bayes_guess = getattr(bayes, "guess_", None)  # per output, set at each release
    if bayes_guess is not None:
        out["estimate"] = _layer(users, dom.x_xy[bayes_guess[outputs]], crs)
    tracking = suite.attacks.get("tracking") if suite is not None else None
    belief = getattr(tracking, "belief_", None)  # (N, U), the filter's current belief
    if belief is not None:
        guess = belief.argmax(axis=0)
        out["tracking"] = _layer(np.arange(n), dom.x_xy[guess], crs)
    return out


def places(model: PrivacyModel) -> dict[str, pd.DataFrame]:
    """Map layers of the people model's homes and work places (none for another model)."""
    home = getattr(model.population, "home", None)
    work = getattr(model.population, "work", None)
    if home is None or work is None:
        return {}
    dom, crs = model.domain, model.graph.graph["crs"]
    users = np.arange(len(home))
    workers = users[work >= 0]
    return {
        "home": _layer(users, dom.x_xy[home], crs),
        "work": _layer(workers, dom.x_xy[work[workers]], crs),
    }


def home_by_hour(model: PrivacyModel) -> pd.DataFrame:
    """Share of users at home by hour of the day, simulated so far beside the diary's
    routine (``[mobility] home_by_hour``); indexed by ``hour``, empty without homes or ticks."""
    home = getattr(model.population, "home", None)
    if home is None or not model.log.users:
        return pd.DataFrame()
    run = model.config.scenario
    ticks = np.array([int(cols["tick"][0]) for cols in model.log.users])
    at_home = np.array([(cols["secret"] == home).mean() for cols in model.log.users])
    hours = hour_of_tick(ticks, run.tick_seconds, run.start_hour)
    seen = pd.Series(at_home).groupby(hours).mean()
    routine = pd.Series(model.config.mobility.home_by_hour, index=range(24))
    frame = pd.DataFrame({"simulated": seen, "diary routine": routine[seen.index]})
    return frame.rename_axis("hour")


def _layer(users: np.ndarray, xy_m: np.ndarray, crs) -> pd.DataFrame:
    ll = lonlat(xy_m, crs)
    return pd.DataFrame({"user": users.astype(int), "lon": ll[:, 0], "lat": ll[:, 1]})


def budgets(model: PrivacyModel) -> pd.DataFrame:
    """Each user's remaining budget (rho, 1/km²) and whether the filter has halted."""
    return pd.DataFrame(
        {
            "user": np.arange(model.population.n_users),
            "remaining_budget": np.asarray(model.filters.remaining, dtype=float),
            "halted": np.asarray(model.filters.halted, dtype=bool),
        }
    )


def user_row(model: PrivacyModel, user: int) -> pd.DataFrame:
    """The mechanism row of ``user``'s current secret: ``Pr[y | x]`` against ``d(x, y)`` (km).

    Raises :class:`~mdpsim.errors.InputError` if there is no mechanism yet or the user does not
    exist.
    """
    mech = _mechanism(model)
    n = model.population.n_users
    if not 0 <= user < n:
        raise InputError(f"user {user} does not exist; users are 0..{n - 1}")
    secret = int(model.population.position[user])
    probability = mech.matrix_[secret]  # the matrix contract: row i is secret i
    return pd.DataFrame(
        {
            "output": np.arange(len(probability)),
            "distance_km": model.domain.dist_xy[secret],
            "probability": probability,
        }
    )


def matrix_block(model: PrivacyModel, *, row0: int, col0: int, size: int) -> pd.DataFrame:
    """A ``size x size`` block of the mechanism matrix from ``(row0, col0)``, long form."""
    mech = _mechanism(model)
    n_rows, n_cols = mech.matrix_.shape
    if size < 1:
        raise InputError(f"block size {size} must be >= 1")
    if not (0 <= row0 < n_rows and 0 <= col0 < n_cols):
        raise InputError(
            f"block start ({row0}, {col0}) is outside the {n_rows} x {n_cols} matrix; "
            f"rows 0..{n_rows - 1}, columns 0..{n_cols - 1}"
        )
    block = mech.matrix_[row0 : row0 + size, col0 : col0 + size]
    rows, cols = np.indices(block.shape)
    values = block.ravel()
    log10 = np.full(len(values), np.nan)  # a zero probability has no colour
    np.log10(values, out=log10, where=values > 0)
    return pd.DataFrame(
        {
            "row": rows.ravel() + row0,
            "column": cols.ravel() + col0,
            "probability": values,
            "log10_probability": log10,
        }
    )


def _mechanism(model: PrivacyModel):
    mech = model.server.mechanism
    if mech is None:
        raise InputError("no mechanism yet: it is generated at the first tick")
    return mech


# ---------------------------------------------------------------------- the game's levels
#: The live page solves the frontier LP (sim/experiments/frontier.py) up to this many secrets (N =
# 60-100:
#: about a second per Q); above, it draws the closed-form bound when every output is a secret.
FRONTIER_LP_MAX_N = 100
#: How many Q the page's frontier has (from 0 to the prior cap's loss).
FRONTIER_QUALITIES = 6


def levels_from_text(text: str) -> list[float]:
    """``"2, 4, 8"`` as the ``[game] epsilon_levels`` list (empty text: no levels).

    Raises :class:`~mdpsim.errors.InputError` naming the field for anything but numbers.
    """
    parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
    try:
        return [float(p) for p in parts]
    except ValueError:
        raise InputError(
            f"game.epsilon_levels = {text!r} must be numbers separated by commas, e.g. 2, 4, 8"
        ) from None


def with_levels(base: Scenario, text: str) -> Scenario:
    """``base`` with the page's ``[game] epsilon_levels`` (text as :func:`levels_from_text`
    reads it), re-validated: the levels must hold ``mechanism.epsilon_per_km``."""
    levels = levels_from_text(text)
    if levels == list(base.game.epsilon_levels):
        return base
    return base.replace(**{"game.epsilon_levels": levels})


def levels_text(scenario: Scenario) -> str:
    """The scenario's eps levels as the page's text field shows them."""
    return ", ".join(f"{e:g}" for e in scenario.game.epsilon_levels)


def level_table(model: PrivacyModel) -> pd.DataFrame:
    """One row per eps level of the running mechanism: its guarantee's charge, expected loss,
    the Bayes-optimal adversary's exact expected error, the MAP hit chance, and the reports
    made at it at the latest tick (``default``: the level the report strategy uses)."""
    from mdpsim.mechanisms.lp.stackelberg import adversary_error_km

    server, dom = model.server, model.domain
    last = model.log.users[-1] if model.log.users else {}
    if not last:  # before the first tick
        counts = [0] * len(server.levels)
    elif "report_epsilon_per_km" in last:  # several levels: the eps of each report
        counts = [int(np.sum(last["report_epsilon_per_km"] == e)) for e in server.levels]
    else:  # one level: every report is at it
        counts = [int(np.sum(last["reported_output"] >= 0))]
    rows = []
    for i, (eps, mech) in enumerate(zip(server.levels, server.level_mechanisms, strict=True)):
        rows.append(
            {
                "epsilon_per_km": eps,
                "default": i == server.default_level,
                "report_cost": server.level_charges[i].cost,
                "quality_loss_km": mech.expected_loss(),
                "adversary_error_km": adversary_error_km(mech.matrix_, dom.prior, dom.dist_xx),
                "hit_probability": server.level_hit_probability[i],
                "reports_last_tick": counts[i],
            }
        )
    return pd.DataFrame(rows)


def frontier_curve(domain) -> tuple[pd.DataFrame, str]:
    """The frontier the page draws: ``quality_km`` -> ``adversary_error_km``, and its kind.

    * ``"lp"``: the optimum of the Stackelberg LP with no mDP constraint at
      :data:`FRONTIER_QUALITIES` Q (:func:`mdpsim.experiments.frontier.optimum_curve`), up to
      :data:`FRONTIER_LP_MAX_N` secrets;
    * ``"bound"``: above that, when every output is a secret: ``min(Q, cap)``, an upper bound
      on the frontier (the adversary may guess the output itself, or use the prior alone;
      docs/games.md: the LP reaches it in the probes);
    * ``"none"``: neither (empty frame).
    """
    from mdpsim.experiments.frontier import default_qualities, optimum_curve
    from mdpsim.mechanisms.lp.stackelberg import prior_cap_km

    qualities = default_qualities(domain, quality_metric="domain", n=FRONTIER_QUALITIES)
    if domain.n_x <= FRONTIER_LP_MAX_N:
        curve = optimum_curve(domain, qualities)
        return curve[["quality_km", "adversary_error_km", "quality_dual"]], "lp"
    if np.all(domain.y_in_x >= 0):
        cap = prior_cap_km(domain.prior, domain.dist_xx)
        q = np.array([0.0, *qualities])
        bound = {"quality_km": q, "adversary_error_km": np.minimum(q, cap),
                 "quality_dual": np.where(q < cap, 1.0, 0.0)}  # fmt: skip
        return pd.DataFrame(bound), "bound"
    return pd.DataFrame({"quality_km": [], "adversary_error_km": [], "quality_dual": []}), "none"


def frontier_gap(curve: pd.DataFrame, levels: pd.DataFrame) -> pd.Series:
    """Per level, the frontier at the level's loss
    (:func:`mdpsim.experiments.frontier.frontier_bound`)
    minus its adversary error: how much error the optimal strategy would add at that loss."""
    from mdpsim.experiments.frontier import frontier_bound

    if curve.empty:
        return pd.Series(np.nan, index=levels.index)
    bound = frontier_bound(curve, levels["quality_loss_km"].to_numpy())
    return pd.Series(bound - levels["adversary_error_km"].to_numpy(), index=levels.index)


def frontier_plane(curve: pd.DataFrame, levels: pd.DataFrame) -> pd.DataFrame:
    """The chart's long-form rows: the frontier's points and each level's mechanism point."""
    front = curve[["quality_km", "adversary_error_km"]].assign(series="frontier", label="")
    points = pd.DataFrame(
        {
            "quality_km": levels["quality_loss_km"],
            "adversary_error_km": levels["adversary_error_km"],
            "series": np.where(levels["default"], "running mechanism", "other levels"),
            "label": [f"eps {e:g}" for e in levels["epsilon_per_km"]],
        }
    )
    return pd.concat([front, points], ignore_index=True)
