"""The dashboard under two users (issue 29, item 8), in a real browser: one ``mdpsim
dashboard`` server, two browser contexts (two sessions: separate cookies and websockets)
stepping different scenarios at the same time; and the batch explorer on a store that
``mdpsim batch`` is still writing. The server and Chromium as in test_dashboard_browser.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
import test_dashboard_browser as browser_test  # the server fixture and the browser's settings

from mdpsim.dashboard import charts as charts_mod
from mdpsim.dashboard import model_view
from mdpsim.geo.network import load_network
from mdpsim.simulation import scenario as sc
from mdpsim.simulation.model import PrivacyModel

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]
CHROMIUM, CHROMIUM_ARGS, REPO = browser_test.CHROMIUM, browser_test.CHROMIUM_ARGS, browser_test.REPO
PAGE_TIMEOUT_MS, _count = browser_test.PAGE_TIMEOUT_MS, browser_test._count
dashboard_url = browser_test.dashboard_url  # the fixture: `mdpsim dashboard` on a free port

_PAGE_JS = """() => ({
    script: document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state'),
    metrics: Object.fromEntries([...document.querySelectorAll('[data-testid="stMetric"]')].map(
        (m) => [m.querySelector('[data-testid="stMetricLabel"]')?.innerText.trim(),
                m.querySelector('[data-testid="stMetricValue"]')?.innerText.trim()])),
    captions: [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .map((c) => c.innerText.trim()),
    exceptions: document.querySelectorAll('[data-testid="stException"]').length,
    errors: [...document.querySelectorAll('[data-testid="stAlertContentError"]')]
        .map((e) => e.innerText.trim()),
})"""


# Each page logs when its script starts and stops running (a MutationObserver on the app's
# script state, browser clock): whether the two runs overlapped is read from the logs
# afterwards, not sampled (a sample can miss a short run, and a background page's animation
# frames, which wait_for_function polls on, are throttled).
LOG_RUNS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    window.runs = [[app.getAttribute('data-test-script-state'), Date.now()]];
    new MutationObserver(() => window.runs.push(
        [app.getAttribute('data-test-script-state'), Date.now()]
    )).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def _running_spans(log: list) -> list[tuple[float, float]]:
    """(start, end) in ms of each run of the script in a page's log."""
    spans, start = [], None
    for state, at in log:
        if state == "running" and start is None:
            start = at
        elif state != "running" and start is not None:
            spans.append((start, at))
            start = None
    return spans


def _state(page) -> dict:
    return page.evaluate(_PAGE_JS)


def _wait(page, done, what: str) -> dict:
    """Poll the page until ``done(state)`` holds with the script idle."""
    deadline = time.monotonic() + PAGE_TIMEOUT_MS / 1000
    while True:
        state = _state(page)
        if state["exceptions"] or state["errors"]:
            pytest.fail(f"{what}: the page shows an error: {state}")
        if state["script"] == "notRunning" and done(state):
            return state
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not reached; last state {state}")
        page.wait_for_timeout(300)


def _browser(p):
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (.ci/run does)")
    return p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


# ---------------------------------------------------------------------- two users, live page
def _expected(scenario, ticks: int) -> tuple[dict[str, str], list[pd.DataFrame]]:
    """The headline and the over-time charts' data a session alone shows after ``ticks``
    ticks of ``scenario``: the model the page builds (per-user rows on), stepped here in the
    test's own process."""
    scenario = scenario.replace(**{"output.per_user": True})
    net = scenario.network
    model = PrivacyModel(scenario, graph=load_network(net.source, network_type=net.network_type))
    for _ in range(ticks):
        model.step()
    last = model.log.ticks[-1]
    headline = {
        "tick": str(model.tick),
        "users": str(model.population.n_users),
        "reports (last tick)": str(int(last["n_reports"])),
        "halted users": str(int(model.filters.halted.sum())),
        "mechanism generations": str(model.server.n_generations),
    }
    history = model_view.history(model)
    charts = [
        charts_mod.long_form(model_view.chart_frame(history, columns))
        for columns in model_view.charts(history).values()
    ]
    return headline, charts


def _charts_sent(frames: list[bytes]) -> list[pd.DataFrame]:
    """The data of every Vega-Lite chart in the server's messages to one page (Streamlit's
    ForwardMsg protobuf, the data an Arrow stream): the numbers the page draws."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    out = []
    for frame in frames:
        msg = ForwardMsg.FromString(frame)
        element = msg.delta.new_element if msg.HasField("delta") else None
        if element is not None and element.HasField("vega_lite_chart"):
            data = element.vega_lite_chart.data.data
            if data:
                out.append(pa.ipc.open_stream(data).read_all().to_pandas())
    return out


def _same_data(sent: pd.DataFrame, expected: pd.DataFrame) -> bool:
    columns = list(expected.columns)
    if list(sent.columns) != columns or len(sent) != len(expected):
        return False
    return sent.reset_index(drop=True).equals(expected.reset_index(drop=True))


def _set_ticks(page, n: int) -> None:
    box = page.get_by_label("ticks to run")
    box.fill(str(n))
    box.press("Enter")
    page.get_by_role("button", name=f"Run {n} ticks").wait_for(timeout=PAGE_TIMEOUT_MS)
    _wait(page, lambda s: True, f"the rerun after 'ticks to run' = {n}")  # idle again


def test_two_sessions_step_different_scenarios_at_once_and_see_only_their_own(dashboard_url):
    from playwright.sync_api import sync_playwright

    other = "mechanism_compare"  # em, 500 points, 100 users, seed 11 (the default: dista_lp)
    ticks = {"a": 400, "b": 300}  # long runs (ticks are cheap: a few ms), started together
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            pages, frames = {}, {"a": [], "b": []}
            for who in ("a", "b"):  # two contexts: two sessions, nothing shared in the browser
                pages[who] = browser.new_context(
                    viewport={"width": 1400, "height": 2400}
                ).new_page()
                pages[who].on(
                    "websocket",
                    lambda ws, got=frames[who]: ws.on(
                        "framereceived", lambda f: got.append(f if isinstance(f, bytes) else b"")
                    ),
                )
                pages[who].goto(dashboard_url)
            a, b = pages["a"], pages["b"]
            for page in (a, b):
                page.get_by_role("button", name="Run 5 ticks").wait_for(timeout=PAGE_TIMEOUT_MS)
            b.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first.click()
            b.get_by_role("option", name=other).click()
            _wait(b, lambda s: f"scenario {other!r}" in " ".join(s["captions"]), "b's rebuild")
            for who, page in pages.items():
                _set_ticks(page, ticks[who])
                frames[who].clear()  # from here on: the run's messages only

            for page in (a, b):
                page.evaluate(LOG_RUNS)
            a.get_by_role("button", name=f"Run {ticks['a']} ticks").click()
            b.get_by_role("button", name=f"Run {ticks['b']} ticks").click()
            seen = {
                who: _wait(page, lambda s, n=ticks[who]: s["metrics"].get("tick") == str(n), who)
                for who, page in pages.items()
            }
            spans = {
                who: _running_spans(page.evaluate("() => window.runs"))
                for who, page in pages.items()
            }
        finally:
            browser.close()
    overlap = any(s0 < e1 and s1 < e0 for s0, e0 in spans["a"] for s1, e1 in spans["b"])
    assert overlap, f"the two sessions never ran at the same time: nothing was tested {spans}"

    scenarios = {"a": model_view.default_scenario(), "b": sc.load(sc.packaged()[other])}
    for who, scenario in scenarios.items():
        state = seen[who]
        captions = " ".join(state["captions"])
        assert f"scenario {scenario.scenario.name!r}" in captions, (who, captions)
        assert f"seed {scenario.scenario.seed}" in captions, (who, captions)
        n_x = scenario.domain.n_points
        assert f"{scenario.mechanism.name}: {n_x} x {n_x} matrix" in captions, (who, captions)
        headline, charts = _expected(scenario, ticks[who])
        assert state["metrics"] == headline, who
        sent = _charts_sent(frames[who])
        for expected in charts:  # every over-time chart: the same numbers, to the bit
            assert any(_same_data(got, expected) for got in sent), (who, expected.head())


# ---------------------------------------------------------------------- batch being written
# 8 tasks of about 2 s each (ticks are cheap here: the length keeps the batch writing while
# the page reads its store)
SLOW_SWEEP = """
[scenario]
name = "being_written"
seed = 4
ticks = 1500
[network]
source = "helsinki-test"
[domain]
n_points = 60
[users]
count = 40
[mechanism]
name = "em"
epsilon_per_km = 4.0
[queries]
every_ticks = 0
[sweep]
"mechanism.epsilon_per_km" = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
"""


OURS = "scenario 'being_written'"  # the caption of the store (not of one the picker found)


def _finished(store: Path) -> int:
    tasks = store / "tasks"
    return sum(1 for p in tasks.glob("[0-9]*.parquet") if p.name.count(".") == 1)


def _open_store(page, store: Path) -> dict:
    """Type the store's folder into the batch page and wait for its caption."""
    box = page.get_by_label("or a folder", exact=True).and_(page.get_by_role("textbox"))
    box.wait_for(timeout=PAGE_TIMEOUT_MS)
    box.fill(str(store))
    box.press("Enter")
    return _wait(page, lambda s: any(OURS in c for c in s["captions"]), "the store")


def _shown(state: dict) -> tuple[int, int]:
    (caption,) = [c for c in state["captions"] if OURS in c]
    done, total = re.search(r"(\d+) of (\d+) tasks finished", caption).groups()
    return int(done), int(total)


def test_batch_explorer_reads_a_store_while_mdpsim_batch_writes_it(dashboard_url, tmp_path):
    from playwright.sync_api import sync_playwright

    scenario = tmp_path / "being_written.toml"
    scenario.write_text(SLOW_SWEEP)
    store = tmp_path / "store"
    log = tmp_path / "batch.log"
    command = [sys.executable, "-m", "mdpsim.cli", "batch", str(scenario), "--out", str(store)]
    with sync_playwright() as p:
        browser = _browser(p)
        batch = None
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2000})
            page.goto(f"{dashboard_url}/batch")  # the explorer is open before the batch starts
            page.get_by_role("heading", name="Batch explorer").wait_for(timeout=PAGE_TIMEOUT_MS)
            with log.open("w") as out:
                batch = subprocess.Popen(
                    [*command, "--workers", "1", "--no-progress"], cwd=REPO, stdout=out, stderr=out
                )
            deadline = time.monotonic() + 120
            while _finished(store) < 1:
                if batch.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"no task finished (exit {batch.poll()}):\n{log.read_text()}")
                time.sleep(0.05)
            first, total = _shown(_open_store(page, store))
            assert batch.poll() is None, "the batch ended before the page read its store"
            assert total == 8 and 1 <= first < 8, (first, total)
            assert _count(page, "[data-testid='stVegaLiteChart']") >= 1  # the finished tasks
            seen = [first]
            while batch.poll() is None:  # refreshed, as a user would, while it writes
                page.reload()
                seen.append(_shown(_open_store(page, store))[0])
            assert batch.returncode == 0, log.read_text()
            page.reload()
            seen.append(_shown(_open_store(page, store))[0])
        finally:
            if batch is not None and batch.poll() is None:
                batch.kill()
                batch.wait()
            browser.close()
    assert seen == sorted(seen) and seen[-1] == 8, seen  # first < 8: new ones were picked up
