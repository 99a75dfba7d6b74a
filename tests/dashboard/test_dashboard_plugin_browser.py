"""A plug-in's attack on the live page, in a real browser: the example plug-in
(sim/examples/plugin_example) pip-installed, ``mdpsim dashboard --scenarios DIR`` listing a scenario
that runs its attack ``mode_guess``; picked in the sidebar and run, its columns are charted."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_dashboard_browser import (  # the browser test's helpers (same folder)
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_TIMEOUT_MS,
)
from test_dashboard_browser import _free_port as free_port
from test_dashboard_browser import _wait_healthy as wait_healthy
from test_dashboard_browser import _wait_rendered as wait_rendered

EXAMPLE = Path(__file__).resolve().parents[2] / "sim" / "examples" / "plugin_example"
PLUGIN_TOML = """
[scenario]
name = "plugin_live"
seed = 2
ticks = 20
[network]
source = "helsinki-test"
[domain]
n_points = 40
[users]
count = 5
[mechanism]
name = "coin_em"
epsilon_per_km = 5.0
[queries]
every_ticks = 0
[attacks]
run = ["bayes", "mode_guess"]
[output]
per_user = true
[strategies]
budget = {name = "cgp", rho_per_km2 = 1000.0}
"""

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


@pytest.fixture
def plugin_dashboard(tmp_path):
    """The example plug-in installed into a folder on PYTHONPATH, and ``mdpsim dashboard
    --scenarios DIR`` with its scenario, serving on a free port."""
    src = tmp_path / "example"
    shutil.copytree(EXAMPLE, src)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    flags = ["--no-deps", "--no-build-isolation", "--no-index", "--target", str(site)]
    subprocess.run([*pip, *flags, str(src)], check=True, capture_output=True, timeout=300)
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "plugin_live.toml").write_text(PLUGIN_TOML)
    port = free_port()
    log = tmp_path / "streamlit.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    with log.open("w") as out:
        command = [sys.executable, "-m", "mdpsim.cli", "dashboard", "--port", str(port)]
        proc = subprocess.Popen(
            [*command, "--address", "127.0.0.1", "--scenarios", str(scenarios)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc, log)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_plugin_attack_is_charted_on_the_live_page(plugin_dashboard, tmp_path):
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    received: list[bytes] = []  # what the server sends the page (Streamlit's protobuf deltas)

    def on_socket(ws):
        ws.on("framereceived", lambda f: received.append(f if isinstance(f, bytes) else f.encode()))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2600})
            page.on("websocket", on_socket)
            page.goto(plugin_dashboard)
            page.get_by_role("button", name="Run 5 ticks").wait_for(timeout=PAGE_TIMEOUT_MS)
            picker = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first
            picker.click()
            page.get_by_role("option", name="plugin_live").click()
            page.get_by_text("scenario 'plugin_live'").wait_for(timeout=PAGE_TIMEOUT_MS)
            received.clear()  # from here on: the plug-in's run only
            page.get_by_role("button", name="Run 5 ticks").click()
            wait_rendered(page, ticks="5", charts=6)
            assert page.locator("[data-testid='stException']").count() == 0
            assert page.locator("[data-testid='stAlertContentError']").count() == 0
            page.screenshot(path=str(tmp_path / "plugin_live.png"))
        finally:
            browser.close()
    sent = b"".join(received)
    # the attack charts' data (one series per column) carry the plug-in's columns, beside bayes'
    for series in (b"mode_guess_error_km", b"mode_guess_hit", b"bayes_error_km"):
        assert series in sent, series
