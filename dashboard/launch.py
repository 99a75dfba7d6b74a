"""How ``mdpsim dashboard`` starts Streamlit: the command line and its environment.

Settings are given on the command line (not only in ``.streamlit/config.toml``) so that they
hold from any working folder: headless (no browser opened), no usage statistics sent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"


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
    ]


def streamlit_env() -> dict[str, str]:
    """The environment of the Streamlit process: ours, with usage statistics off."""
    return {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
