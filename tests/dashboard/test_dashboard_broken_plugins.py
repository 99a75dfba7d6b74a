"""A broken plug-in on the dashboard's live page: one error line naming the plug-in, no
exception, the running page and its step controls kept (issue 35 item 2). The plug-ins are
tests/sim/broken_plugins.py's, named ``module:Name`` in scenarios of a ``--scenarios``
folder (``$MDPSIM_SCENARIOS``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from mdpsim.dashboard import app as app_module

CORPUS = Path(__file__).resolve().parents[1] / "sim"
BASE = """
[scenario]
name = "{name}"
seed = 2
ticks = 5
[network]
source = "helsinki-test"
[domain]
n_points = 30
[users]
count = 3
[mechanism]
name = "{mechanism}"
epsilon_per_km = 5.0
[queries]
every_ticks = 0
[attacks]
run = ["bayes", "{attack}"]
[strategies]
report = "{report}"
"""
GOOD = {"mechanism": "em", "attack": "bayes", "report": "always"}
BROKEN = [  # scenario stem, the field it breaks, what the one line says
    ("bad_mechanism", {"mechanism": "broken_plugins:RowsSumTo09"}, "sums to 0.899"),
    ("bad_attack", {"attack": "broken_plugins:ObserveRaises"}, "observe raised IndexError"),
    ("bad_report", {"report": "broken_plugins:DecideRaises"}, "decide raised ValueError"),
]


@pytest.fixture
def broken_scenarios(tmp_path, monkeypatch):
    for stem, fields, _ in BROKEN:
        text = BASE.format(name=stem, **{**GOOD, **fields})
        (tmp_path / f"{stem}.toml").write_text(
            text.replace('run = ["bayes", "bayes"]', 'run = ["bayes"]')
        )
    monkeypatch.setenv("MDPSIM_SCENARIOS", str(tmp_path))
    monkeypatch.syspath_prepend(str(CORPUS))
    yield
    sys.modules.pop("broken_plugins", None)


@pytest.mark.slow  # about 8 s: three scenarios built and stepped in the app
def test_a_broken_plug_in_is_one_error_line_and_the_page_stays(
    helsinki_test_walk, broken_scenarios
):
    at = AppTest.from_file(str(Path(app_module.__file__)), default_timeout=120)
    at.run()
    for stem, _, why in BROKEN:
        at.selectbox(key="live_scenario").set_value(stem).run()
        at.button(key="live_step").click().run()
        assert not at.exception, (stem, [e.value for e in at.exception])
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and why in errors[0], (stem, errors)
        assert "plug-in" in errors[0] and "\n" not in errors[0] and "np.float64" not in errors[0]
        assert "Traceback" not in errors[0]
        assert at.button(key="live_step") is not None  # the controls are still there
