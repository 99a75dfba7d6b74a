"""How ``mdpsim dashboard`` starts Streamlit: the command line and its environment.

Settings are given on the command line (not only in ``.streamlit/config.toml``) so that they
hold from any working folder, as from an installed package: headless (no browser opened), no
usage statistics sent, a minimal toolbar. The app script is found in the installed package.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def app_path() -> Path:
    """The dashboard's entry script, ``mdpsim/dashboard/app.py`` of the installed package."""
    spec = importlib.util.find_spec("mdpsim.dashboard.app")
    if spec is None or spec.origin is None:  # pragma: no cover - a broken installation
        raise RuntimeError("mdpsim.dashboard.app is not installed")
    return Path(spec.origin)


APP = app_path()


def streamlit_command(*, port: int = 8501, address: str = "localhost") -> list[str]:
    """The ``streamlit run`` command of the dashboard."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]


def streamlit_env(scenarios: list[str] | None = None) -> dict[str, str]:
    """The environment of the Streamlit process: ours, with usage statistics off, and
    ``scenarios`` (folders of TOML files the live page lists) in ``$MDPSIM_SCENARIOS``."""
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    if scenarios:
        folders = [str(Path(f).expanduser().resolve()) for f in scenarios]
        env["MDPSIM_SCENARIOS"] = os.pathsep.join(folders)
    return env
