"""The dashboard in a real browser: ``mdpsim dashboard`` on a free port, driven by Playwright
with Debian's chromium (``.ci/run`` installs it), offline.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60
PAGE_TIMEOUT_MS = 90_000

pytestmark = [pytest.mark.browser, pytest.mark.timeout(170)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mdpsim dashboard exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read() == b"ok":
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    pytest.fail(f"the dashboard did not answer within {START_TIMEOUT_S} s:\n{log.read_text()}")


@pytest.fixture
def dashboard_url(tmp_path):
    """``mdpsim dashboard`` (the real command) serving on a free local port."""
    port = _free_port()
    log = tmp_path / "streamlit.log"
    with log.open("w") as out:
        command = [sys.executable, "-m", "mdpsim.cli", "dashboard", "--port", str(port)]
        proc = subprocess.Popen(
            [*command, "--address", "127.0.0.1"],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the streamlit child goes with it
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc, log)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


_STATE_JS = """() => ({
    script: document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state'),
    tick: document.querySelector('[data-testid="stMetricValue"]')?.innerText.trim(),
    charts: [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
        .filter((chart) => chart.querySelector('svg, canvas')).length,
    map: document.querySelectorAll('[data-testid="stDeckGlJsonChart"] canvas').length,
})"""


def _wait_rendered(page, *, ticks: str, charts: int) -> dict:
    """Poll until the script is idle at tick ``ticks`` with the map and the charts drawn."""
    deadline = time.monotonic() + PAGE_TIMEOUT_MS / 1000
    while True:
        state = page.evaluate(_STATE_JS)
        done = state["script"] == "notRunning" and state["tick"] == ticks
        if done and state["charts"] >= charts and state["map"] == 1:
            return state
        if time.monotonic() > deadline:
            pytest.fail(f"the page did not finish rendering; last state {state}")
        page.wait_for_timeout(500)


def _count(page, selector: str) -> int:
    return page.locator(selector).count()


def test_live_page_runs_five_ticks_offline_and_renders_map_and_charts(dashboard_url, tmp_path):
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2600})
            page.on("request", lambda r: requested.append(r.url))
            page.goto(dashboard_url)
            run = page.get_by_role("button", name="Run 5 ticks")
            run.wait_for(timeout=PAGE_TIMEOUT_MS)  # the default model is built
            run.click()
            _wait_rendered(page, ticks="5", charts=8)
            assert _count(page, "[data-testid='stDeckGlJsonChart'] canvas") == 1
            assert _count(page, "[data-testid='stVegaLiteChart']") >= 8
            assert _count(page, "[data-testid='stException']") == 0
            assert _count(page, "[data-testid='stAlertContentError']") == 0
            shot = tmp_path / "dashboard.png"
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000

            page.get_by_role("link", name="Batch explorer").click()
            page.get_by_role("heading", name="Batch explorer").wait_for(timeout=PAGE_TIMEOUT_MS)
            assert _count(page, "[data-testid='stException']") == 0
        finally:
            browser.close()
    if os.environ.get("MDPSIM_DASHBOARD_SCREENSHOT"):  # refresh docs/img/dashboard.png
        shutil.copyfile(shot, os.environ["MDPSIM_DASHBOARD_SCREENSHOT"])
    hosts = {u.split("/")[2] for u in requested if u.startswith(("http://", "https://"))}
    assert hosts == {dashboard_url.removeprefix("http://")}, f"requests left the machine: {hosts}"


def test_live_page_game_levels_show_each_level_beside_the_frontier(dashboard_url):
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 3200})
            page.goto(dashboard_url)
            page.get_by_role("button", name="Run 5 ticks").wait_for(timeout=PAGE_TIMEOUT_MS)
            sidebar = page.locator("[data-testid='stSidebar']")
            pick = sidebar.locator("[data-testid='stSelectbox']").filter(
                has=page.get_by_text("mechanism", exact=True)
            )
            pick.locator("input").click()
            page.get_by_role("option", name="em", exact=True).click()
            sidebar.get_by_label("game eps levels", exact=False).fill("2, 6, 12")
            sidebar.get_by_role("button", name="Apply and rebuild").click()
            # rebuilt: the section speaks of the new mechanism before any tick
            page.get_by_text("em at eps 6:", exact=False).wait_for(timeout=PAGE_TIMEOUT_MS)
            page.get_by_role("button", name="Step one tick").click()
            _wait_rendered(page, ticks="1", charts=8)
            page.get_by_role("heading", name="Game levels and the frontier").wait_for()
            caption = page.get_by_text("below the frontier", exact=False).first.inner_text()
            assert caption.startswith("em at eps 6") and "min(Q, cap)" in caption
            table = page.locator("[data-testid='stDataFrame']")
            assert table.count() == 1  # the levels' table (one row per level)
            # the plane: the Vega-Lite chart before the inspector's, drawn
            plane = page.locator("[data-testid='stVegaLiteChart']").nth(-2)
            plane.locator("svg, canvas").first.wait_for(timeout=PAGE_TIMEOUT_MS)
            assert _count(page, "[data-testid='stException']") == 0
            assert _count(page, "[data-testid='stAlertContentError']") == 0
        finally:
            browser.close()
