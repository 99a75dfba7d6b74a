"""Plug-ins by entry point and ``package.module:Name``: found, built, refused in one line when
broken, never taking the built-ins down (sim/_core/registry.py, docs/plugins.md)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from mdpsim import attacks, mechanisms
from mdpsim.agents import strategies
from mdpsim.errors import InputError
from mdpsim.geo import network
from mdpsim.simulation import scenario as sc

MODULE = '''
from mdpsim.mechanisms.em import ExponentialMechanism
from mdpsim.agents.strategies.report_policy import ReportPolicy, REPORT_POLICIES

class MyEM(ExponentialMechanism):
    """EM under another name."""

class Silent(REPORT_POLICIES.get("always")):
    """Always, by another name."""

class NotAMechanism:
    pass

def extract():
    import pyrosm
    return pyrosm.get_data("test_pbf")
'''
ENTRY_POINTS = """
[mdpsim.mechanisms]
my_em = fake_plugin_mod:MyEM
broken = fake_plugin_missing:Nothing
wrong_base = fake_plugin_mod:NotAMechanism
em = fake_plugin_mod:MyEM

[mdpsim.strategies.report]
silent = fake_plugin_mod:Silent

[mdpsim.networks]
tiny = fake_plugin_mod:extract
"""


@pytest.fixture()
def plugin(tmp_path, monkeypatch):
    """A distribution ``fake-plugin`` on sys.path, with entry points (as pip would leave it)."""
    (tmp_path / "fake_plugin_mod.py").write_text(textwrap.dedent(MODULE))
    info = tmp_path / "fake_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    registries = [
        mechanisms.base._MECHANISMS,
        attacks.base._ATTACKS,
        *strategies.REGISTRIES.values(),
    ]
    for r in registries:
        r.refresh_plugins()
    yield
    monkeypatch.undo()
    sys.modules.pop("fake_plugin_mod", None)
    for r in registries:
        r.refresh_plugins()
        for name in ("my_em", "silent", "fake_plugin_mod:MyEM", "fake_plugin_mod:Silent"):
            r._classes.pop(name, None)
        r._classes.pop("mdpsim.attacks.bayes:Bayes", None)


def test_an_entry_point_mechanism_is_listed_and_built(plugin):
    with pytest.warns(UserWarning, match="plug-in 'em' .* has a built-in's name; ignored"):
        names = mechanisms.available()
    assert names[-3:] == ["my_em", "broken", "wrong_base"] and names.count("em") == 1
    mech = mechanisms.make("my_em", epsilon=3.0)
    assert type(mech).__name__ == "MyEM" and mech.name == "my_em"
    assert type(mechanisms.make("em", epsilon=3.0)).__name__ == "ExponentialMechanism"


def test_a_wrong_parameter_of_a_plug_in_is_the_same_one_line(plugin):
    with pytest.raises(InputError, match="mechanism 'my_em' has no parameter 'nope'; parameters"):
        mechanisms.make("my_em", epsilon=3.0, nope=1)


@pytest.mark.parametrize(
    "name, words",
    [
        ("broken", "mechanism 'broken' \\(entry point fake_plugin_missing:Nothing\\) cannot be "
         "imported: ModuleNotFoundError"),
        ("wrong_base", "is <class 'fake_plugin_mod.NotAMechanism'>, not a subclass of "
         "mdpsim.mechanisms.base.Mechanism"),
    ],
)  # fmt: skip
def test_a_broken_plug_in_is_named_when_asked_for_and_the_built_ins_work(plugin, name, words):
    with pytest.raises(InputError, match=words) as info:
        mechanisms.make(name, epsilon=3.0)
    assert "\n" not in str(info.value)
    assert mechanisms.make("laplace", epsilon=3.0).epsilon == 3.0


def test_an_import_path_is_taken_wherever_a_name_is(plugin):
    base = {"network": {"source": "helsinki-test"}, "domain": {"n_points": 20}}
    s = sc.from_dict({**base, "mechanism": {"name": "fake_plugin_mod:MyEM", "epsilon_per_km": 2}})
    assert s.mechanism.name == "fake_plugin_mod:MyEM"
    s = sc.from_dict(
        {
            **base,
            "mechanism": {"name": "em", "epsilon_per_km": 2},
            "strategies": {"report": "fake_plugin_mod:Silent"},
        }
    )
    assert type(strategies.from_scenario(s).report).__name__ == "Silent"
    assert type(strategies.from_scenario(s, report="silent").report).__name__ == "Silent"
    assert attacks.make("mdpsim.attacks.bayes:Bayes").name == "bayes"
    with pytest.raises(InputError, match="mechanism.name: .*cannot be imported"):
        sc.from_dict({**base, "mechanism": {"name": "no_such_mod:X", "epsilon_per_km": 2}})


def test_a_named_extract_loads_as_a_network_source(plugin, helsinki_test_walk):
    assert "tiny" in network.named_extracts()
    G = network.load_network("tiny")
    assert G.number_of_nodes() == helsinki_test_walk.number_of_nodes()
