"""DistA-LP's upload mode as a nested component (issue 50 item 3): ``upload=StrictUpload(...)``
in Python, a ``[mechanism.params.upload]`` table in TOML, dotted names in get/set_params."""

from __future__ import annotations

import inspect
import warnings

import pytest

from mdpsim.errors import InputError
from mdpsim.experiments.batch import expand
from mdpsim.experiments.run import simulate
from mdpsim.mechanisms import make
from mdpsim.mechanisms.dista_lp.mechanism import DistALP
from mdpsim.mechanisms.dista_lp.uploads import LocationUpload, NoUpload, PaperUpload, StrictUpload
from mdpsim.simulation import scenario as sc

SPLIT = {"eps_dx": 0.5, "eps_dy": 0.5, "eps_cy": 0.5, "eps_pt": 2.5}


def test_the_constructor_takes_at_most_12_parameters():
    params = inspect.signature(DistALP.__init__).parameters.values()
    named = [p for p in params if p.kind is not p.VAR_KEYWORD and p.name != "self"]
    assert len(named) <= 12


def test_a_nested_scheme_holds_its_own_parameters_and_budgets_follow_them():
    mech = DistALP(4.0, upload=StrictUpload(delta=0.01, **SPLIT))
    assert isinstance(mech.upload, StrictUpload) and mech.upload.scheme == "strict"
    assert mech.upload == "strict" and mech.upload != "paper"  # the old string readers
    assert mech.upload.epsilon is None  # the mechanism binds its epsilon to its own copy
    assert mech.upload_guarantee.epsilon_per_km == pytest.approx(1.5)
    assert mech.report_guarantee.epsilon_per_km == pytest.approx(2.5)
    assert DistALP(4.0, upload=LocationUpload(upload_share=0.25)).report_guarantee.epsilon_per_km \
        == pytest.approx(3.0)  # fmt: skip
    assert isinstance(DistALP(4.0).upload, NoUpload)


def test_get_params_deep_gives_dotted_names_and_set_params_takes_them():
    mech = DistALP(4.0, upload=StrictUpload(delta=0.01))
    shallow = mech.get_params()
    assert "upload.delta" not in shallow and shallow["upload"] == StrictUpload(delta=0.01)
    deep = mech.get_params(deep=True)
    assert deep["upload.delta"] == 0.01 and deep["upload.n_neighbours"] == 20
    assert mech.set_params(**{"upload.delta": 0.02, "margin": 1e-5}) is mech
    assert mech.get_params(deep=True)["upload.delta"] == 0.02 and mech.margin == 1e-5
    with pytest.raises(InputError, match="overspen|exceed|budget|split"):
        mech.set_params(**{f"upload.{k}": 2.0 for k in SPLIT})  # checked again: 8 > 4
    assert mech.get_params(deep=True)["upload.eps_dx"] is None  # and nothing changed
    rebuilt = make("dista_lp", **mech.get_params())  # the components' rebuild contract
    assert rebuilt.get_params(deep=True) == mech.get_params(deep=True)


def test_the_string_and_the_table_give_the_scheme_s_defaults_and_params():
    assert DistALP(4.0, upload="paper").upload == PaperUpload()
    table = {"scheme": "location", "upload_share": 0.3}
    assert make("dista_lp", epsilon=4.0, upload=table).upload == LocationUpload(upload_share=0.3)


def test_flat_scheme_keywords_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match=r"upload=StrictUpload"):
        mech = make("dista_lp", epsilon=4.0, upload="strict", n_neighbours=8)
    assert mech.upload == StrictUpload(n_neighbours=8)


@pytest.mark.parametrize(
    "upload, match",
    [
        ("nope", r"upload='nope' must be one of 'none', 'location', 'strict', 'paper'"),
        ({"scheme": "location", "delta": 0.1}, r"delta applies to upload='strict' or 'paper'"),
        ({"scheme": "strict", "foo": 1}, r"upload 'strict' has no parameter 'foo'"),
        ({"delta": 0.1}, r"upload table needs scheme"),
    ],
)
def test_a_bad_scheme_or_a_parameter_of_another_scheme_is_one_line(upload, match):
    with pytest.raises(InputError, match=match) as err:
        make("dista_lp", epsilon=4.0, upload=upload)
    assert "\n" not in str(err.value)


def _raw(params: dict, sweep: dict | None = None) -> dict:
    return {
        "scenario": {"name": "nested", "seed": 3, "ticks": 2},
        "network": {"source": "helsinki-test"},
        "domain": {"n_points": 12},
        "users": {"count": 3},
        "mechanism": {"name": "dista_lp", "epsilon_per_km": 4.0, "params": params},
        "queries": {"every_ticks": 0},
        **({"sweep": sweep} if sweep else {}),
    }


def test_a_toml_upload_table_runs_like_the_component_and_a_bad_one_is_refused_at_load():
    table = {"upload": {"scheme": "location", "upload_share": 0.2}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the nested form warns nothing
        nested, _, _ = simulate(sc.from_dict(_raw(table)))
    with pytest.warns(DeprecationWarning):
        flat, _, _ = simulate(sc.from_dict(_raw({"upload": "location", "upload_share": 0.2})))
    assert nested.equals(flat)
    with pytest.raises(InputError, match=r"delta applies to upload='strict' or 'paper'"):
        sc.from_dict(_raw({"upload": {"scheme": "location", "delta": 0.1}}))


def test_a_sweep_reaches_an_upload_parameter_by_its_dotted_name():
    key = "mechanism.params.upload.upload_share"
    first = {"upload": {"scheme": "location", "upload_share": 0.1}}
    scenario = sc.from_dict(_raw(first, sweep={key: [0.1, 0.4]}))
    tasks = expand(scenario)
    assert [t.params[key] for t in tasks] == [0.1, 0.4]
    shares = []
    for task in tasks:
        varied = scenario.replace(**task.params)
        assert varied.get(key) == task.params[key]
        mech = make("dista_lp", epsilon=4.0, **varied.mechanism.constructor_params())
        shares.append(mech.get_params(deep=True)["upload.upload_share"])
    assert shares == [0.1, 0.4]
    with pytest.raises(InputError, match=r"sweep.mechanism.params.upload.upload_share: .*1.5"):
        sc.from_dict(_raw(first, sweep={key: [0.1, 1.5]}))
    with pytest.raises(InputError, match="mechanism.params.upload = 'none' is not a table"):
        sc.from_dict(_raw({"upload": "none"}, sweep={"mechanism.params.upload.delta": [0.1]}))


def test_a_sweep_varies_an_upload_parameter_through_the_scenario_machinery():
    values = [{"upload": {"scheme": "location", "upload_share": s}} for s in (0.1, 0.4)]
    scenario = sc.from_dict(_raw(values[0], sweep={"mechanism.params": values}))
    tasks = expand(scenario)
    assert [t.params["mechanism.params"] for t in tasks] == values
    shares = []
    for task in tasks:
        varied = scenario.replace(**task.params)
        mech = make("dista_lp", epsilon=4.0, **varied.mechanism.constructor_params())
        shares.append(mech.get_params(deep=True)["upload.upload_share"])
    assert shares == [0.1, 0.4]
    with pytest.raises(InputError, match="upload_share"):
        sc.from_dict(_raw(values[0], sweep={"mechanism.params": [
            {"upload": {"scheme": "location", "upload_share": 1.5}}]}))  # fmt: skip
