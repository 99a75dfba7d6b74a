"""Live simulation: pick or edit a scenario, step the model, watch the map and the charts."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mdpsim.attacks import available as attacks
from mdpsim.dashboard import charts as ch
from mdpsim.dashboard import model_view as mv
from mdpsim.dashboard import resources
from mdpsim.dashboard.mapview import STYLE, deck, tracked_trace_layers
from mdpsim.errors import InputError, SolverError
from mdpsim.mechanisms import available

DEFAULT_CHOICE = "live (small default)"
LEVELS_KEY = "live_game_levels"  # the text field of [game] epsilon_levels
RUN_ERRORS = (InputError, SolverError)  # user mistakes and solver failures: shown, not raised


def widget_key(field: str) -> str:
    """The session-state key of the widget that edits a dotted scenario field."""
    return "live_" + field.replace(".", "_")


def _choose_scenario() -> None:
    """Callback of the scenario picker: load the file, fill the editor, rebuild the model."""
    choice = st.session_state["live_scenario"]
    try:
        base = (
            mv.default_scenario() if choice == DEFAULT_CHOICE else resources.load_scenario(choice)
        )
    except InputError as exc:
        st.session_state["live_error"] = str(exc)
        return
    _use(base)


def strategy_key(kind: str) -> str:
    """The session-state key of the picker of one strategy kind."""
    return f"live_strategy_{kind}"


def _use(base) -> None:
    st.session_state["live_base"] = base
    for field in mv.EDITABLE:
        st.session_state[widget_key(field)] = mv.field_value(base, field)
    for kind, name in mv.strategy_names(base).items():
        st.session_state[strategy_key(kind)] = name
    st.session_state[LEVELS_KEY] = mv.levels_text(base)
    st.session_state["live_rebuild"] = base
    st.session_state.pop("live_error", None)


def _apply_edits() -> None:
    """Callback of the editor's submit button: validate the edits, then rebuild."""
    values = {field: st.session_state[widget_key(field)] for field in mv.EDITABLE}
    names = {kind: st.session_state[strategy_key(kind)] for kind in mv.STRATEGY_PICKERS}
    try:
        scenario = mv.with_strategies(mv.edited(st.session_state["live_base"], values), names)
        scenario = mv.with_levels(scenario, st.session_state[LEVELS_KEY])
    except InputError as exc:
        st.session_state["live_error"] = str(exc)
        return
    st.session_state["live_rebuild"] = scenario
    st.session_state.pop("live_error", None)


def _build(scenario) -> None:
    scenario = scenario.replace(**{"output.per_user": True})  # the map needs per-user rows
    with st.spinner(f"Building {scenario.scenario.name!r} ..."):
        try:
            model = resources.build_model(scenario)
        except RUN_ERRORS as exc:
            st.session_state["live_error"] = str(exc)
            return
    st.session_state["live_model"] = model
    st.session_state.pop("live_error", None)


def sidebar() -> None:
    """Scenario picker and the editor of its main fields."""
    with st.sidebar:
        st.header("Scenario")
        st.selectbox(
            "scenario",
            [DEFAULT_CHOICE, *resources.scenario_files()],
            key="live_scenario",
            on_change=_choose_scenario,
        )
        with st.form("live_form"):
            for field, label in mv.EDITABLE.items():
                key = widget_key(field)
                if field == "mechanism.name":
                    st.selectbox(label, available(), key=key)
                elif field == "mobility.model":
                    st.selectbox(label, mv.MOBILITY_MODELS, key=key)
                elif field == "attacks.run":  # the registered attacks and the scenario's labels
                    chosen = st.session_state[key]
                    st.multiselect(label, list(dict.fromkeys([*chosen, *attacks()])), key=key)
                elif isinstance(st.session_state[key], float):
                    st.number_input(label, key=key)
                else:
                    st.number_input(label, key=key, step=1)
            st.text_input(
                "game eps levels (1/km, e.g. 2, 6, 12; must hold epsilon; empty: epsilon alone)",
                key=LEVELS_KEY,
            )
            st.markdown("**Strategies**")
            for kind, label in mv.STRATEGY_PICKERS.items():
                st.selectbox(label, mv.strategy_choices(kind), key=strategy_key(kind))
            st.form_submit_button("Apply and rebuild", key="live_apply", on_click=_apply_edits)


def controls(model) -> None:
    """Step, run N ticks, reset."""
    c1, c2, c3, c4 = st.columns([1, 1, 1, 1], vertical_alignment="bottom")
    step = c1.button("Step one tick", key="live_step", type="primary")
    n = c2.number_input("ticks to run", min_value=1, max_value=500, value=5, key="live_n")
    run = c3.button(f"Run {n} ticks", key="live_run")
    if c4.button("Reset", key="live_reset"):
        st.session_state["live_rebuild"] = model.config
        st.rerun()
    todo = 1 if step else int(n) if run else 0
    if not todo:
        return
    bar = st.progress(0.0, text="simulating ...") if todo > 1 else None
    with st.spinner(f"Simulating {todo} tick(s) ..."):
        try:
            for i in range(todo):
                model.step()
                if bar is not None:
                    bar.progress((i + 1) / todo, text=f"tick {model.tick}")
        except RUN_ERRORS as exc:
            st.error(f"tick {model.tick} failed: {exc}. Reset or change the scenario.")
    if bar is not None:
        bar.empty()


def headline(model, ticks) -> None:
    """The latest tick in a few numbers."""
    cols = st.columns(5)
    last = ticks.iloc[-1] if len(ticks) else None
    cols[0].metric("tick", model.tick)
    cols[1].metric("users", model.population.n_users)
    cols[2].metric("reports (last tick)", "-" if last is None else int(last["n_reports"]))
    cols[3].metric("halted users", int(model.filters.halted.sum()))
    cols[4].metric("mechanism generations", model.server.n_generations)


def map_view(model) -> None:
    """Roads and the latest tick's points."""
    st.subheader("Map")
    t1, t2, t3 = st.columns(3)
    show_true = t1.toggle("show true locations", value=False, key="live_show_true")
    show_tracking = t2.toggle("show tracking estimates", value=False, key="live_show_tracking")
    places = mv.places(model)
    show_places = t3.toggle(
        "show homes and work places", value=False, key="live_show_places", disabled=not places
    )
    layers = {**mv.points(model), **places}
    show = ["home", "work"] if show_places and places else []
    show += ["reported", "estimate"]
    if show_tracking:
        show.append("tracking")
    if show_true:
        show.append("true")
    net = model.config.network
    roads = resources.roads(net.source, net.network_type)
    extra, suite = (), model.server.attacks
    tracking = next(  # the first tracking attack of the run draws the tracked trace
        (a for a in (suite.attacks.values() if suite else ()) if getattr(a, "guesses_", None)),
        None,
    )
    if tracking is not None and model.log.users:
        user = st.number_input(  # the tracked trace against the true one
            "user whose tracked trace to draw (-1: none)", -1, len(model.population.position) - 1,
            -1, key="live_trace_user",
        )  # fmt: skip
        if user >= 0:
            true = np.array([cols["secret"][user] for cols in model.log.users])
            tracked = tracking.guesses()[-len(true) :, user]
            crs = model.graph.graph["crs"]
            extra = tuple(tracked_trace_layers(model.domain.x_xy, crs, true, tracked))
            show += ["true_trace", "tracked_trace"]
    st.pydeck_chart(deck(roads, layers, show=tuple(show), extra=extra), key="live_map", height=480)
    legend = " · ".join(
        f"<span style='color:rgb({r},{g},{b})'>●</span> {STYLE[name][0]}"
        for name in show
        for r, g, b, _ in [STYLE[name][1]]
    )
    st.caption(legend, unsafe_allow_html=True)


def charts(model, ticks) -> None:
    """Metrics over time and the budgets now."""
    st.subheader("Over time")
    if ticks.empty:
        st.info("Step the model to see utility, attacks, leakage, savings and budgets over time.")
        return
    cols = st.columns(2)
    panels = mv.charts(ticks)  # every attack the run has, one chart per metric; the others
    for i, (title, columns) in enumerate(panels.items()):
        frame = ch.long_form(mv.chart_frame(ticks, columns))
        with cols[i % 2]:
            st.markdown(f"**{title}**")
            st.vega_lite_chart(frame, ch.lines(), height=240)
    whole = mv.whole_run(model)
    if not whole.empty:
        st.markdown(
            "**Whole-run attacks so far**: home and work found within `match_km`, the pair's "
            "anonymity set, persons linked from k known (place, hour) points against chance "
            "(docs/attacks.md)"
        )
        st.dataframe(whole, hide_index=True)
    with cols[len(panels) % 2]:
        st.markdown("**Remaining budgets now**")
        spec = ch.histogram(field="remaining_budget", title="rho left (1/km²)", color="halted")
        st.vega_lite_chart(mv.budgets(model), spec, height=240)
    at_home = mv.home_by_hour(model)
    if not at_home.empty:
        with cols[(len(panels) + 1) % 2]:
            st.markdown("**Share of users at home, by hour of day**")
            st.vega_lite_chart(ch.long_form(at_home, index="hour"), ch.lines(x="hour"), height=240)


def game_levels(model) -> None:
    """The game's eps levels of the running mechanism, and where each lies on the
    privacy-quality plane beside the frontier (docs/games.md)."""
    st.subheader("Game levels and the frontier")
    levels = mv.level_table(model)
    curve, kind = resources.frontier(model.config, model.seed)
    levels["frontier_gap_km"] = mv.frontier_gap(curve, levels)
    st.dataframe(levels, hide_index=True)
    running = levels[levels["default"]].iloc[0]
    what = {
        "lp": "the Stackelberg LP's optimum (no mDP constraint) at each Q",
        "bound": f"min(Q, cap), an upper bound (|X| > {mv.FRONTIER_LP_MAX_N}: no LP here)",
    }
    if kind == "none":
        st.info(
            f"No frontier on this page: |X| > {mv.FRONTIER_LP_MAX_N} and some outputs are not "
            "secrets; `mdpsim frontier SCENARIO` solves it."
        )
        return
    st.caption(
        f"{model.server.mechanism_name} at eps {running['epsilon_per_km']:g}: quality loss "
        f"{running['quality_loss_km']:.4f} km, adversary error {running['adversary_error_km']:.4f}"
        f" km, {running['frontier_gap_km']:.4f} km below the frontier ({what[kind]})."
    )
    plane = mv.frontier_plane(curve, levels)
    st.vega_lite_chart(plane, ch.frontier(kind=kind), height=320)


def inspector(model) -> None:
    """One user's row of the mechanism, or a block of its matrix as a heatmap."""
    st.subheader("Mechanism inspector")
    mech = model.server.mechanism
    if mech is None:
        st.info("The mechanism is generated at the first tick.")
        return
    n_rows, n_cols = mech.matrix_.shape
    st.caption(
        f"{model.config.mechanism.name}: {n_rows} x {n_cols} matrix; "
        f"guarantee {mech.guarantee}; one report ({mech.report_guarantee}) costs "
        f"{model.server.report_charge.cost:.4g} {model.budget.currency}"
    )
    view = st.radio(
        "view", ["one user's row", "a block of the matrix"], key="insp_view", horizontal=True
    )
    try:
        if view == "one user's row":
            n = model.population.n_users
            user = st.number_input("user", min_value=0, max_value=n - 1, value=0, key="insp_user")
            row = mv.user_row(model, int(user))
            spec = ch.scatter_log_y(
                x="distance_km",
                y="probability",
                x_title="distance from the user's secret (km)",
                y_title="Pr[y | x]",
            )
            st.vega_lite_chart(row[row["probability"] > 0], spec, height=300)
        else:
            c1, c2, c3 = st.columns(3)
            row0 = c1.number_input("first row", 0, n_rows - 1, 0, key="insp_row0")
            col0 = c2.number_input("first column", 0, n_cols - 1, 0, key="insp_col0")
            size = c3.slider("block size", 5, 80, 30, key="insp_size")
            block = mv.matrix_block(model, row0=int(row0), col0=int(col0), size=int(size))
            spec = ch.heatmap(x="column", y="row", value="log10_probability")
            st.vega_lite_chart(block, spec, height=400)
    except InputError as exc:
        st.warning(str(exc))


def main() -> None:
    """The page, top to bottom."""
    st.title("Live simulation")
    if "live_base" not in st.session_state:
        _use(mv.default_scenario())
    sidebar()
    if "live_rebuild" in st.session_state:
        _build(st.session_state.pop("live_rebuild"))
    if "live_error" in st.session_state:
        st.error(st.session_state["live_error"])
    model = st.session_state.get("live_model")
    if model is None:
        st.info("Fix the scenario in the sidebar to build a model.")
        return
    st.caption(
        f"scenario {model.config.scenario.name!r} · network "
        f"{model.config.network.source} ({model.config.network.network_type}) · "
        f"|X| = {model.domain.n_x}, |Y| = {model.domain.n_y} · seed {model.seed}"
    )
    st.caption(
        " · ".join(
            f"{label}: {mv.strategy_names(model.config)[kind]}"
            for kind, label in mv.STRATEGY_PICKERS.items()
        )
        + f" · budget: {model.budget.statement(model.horizon_ticks)}"
    )
    controls(model)
    ticks = mv.history(model)
    headline(model, ticks)
    map_view(model)
    charts(model, ticks)
    game_levels(model)
    inspector(model)


main()
