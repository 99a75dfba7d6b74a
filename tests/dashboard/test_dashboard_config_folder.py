"""The repository's .streamlit/config.toml holds only for a plain `streamlit run` started in the
repository's root (Streamlit reads it from the working folder), and docs/dashboard.md says so,
with the flag that turns usage statistics off from anywhere else."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit import config

from mdpsim.dashboard.launch import streamlit_command

ROOT = Path(__file__).resolve().parents[2]


def _gather_usage_stats() -> bool:
    return config.get_config_options(force_reparse=True)["browser.gatherUsageStats"].value


def test_the_config_file_holds_in_the_root_only(tmp_path, monkeypatch):
    try:
        monkeypatch.chdir(ROOT)
        assert _gather_usage_stats() is False
        monkeypatch.chdir(tmp_path)
        assert _gather_usage_stats() is True  # Streamlit's default: the repo's file unread
    finally:
        monkeypatch.undo()
        config.get_config_options(force_reparse=True)


def test_the_docs_tell_a_plain_streamlit_run_elsewhere_the_flag():
    text = " ".join((ROOT / "docs" / "dashboard.md").read_text().split())
    command = streamlit_command()
    flag = "--browser.gatherUsageStats"
    stats_off = f"{flag} {command[command.index(flag) + 1]}"
    assert re.search(r"plain `streamlit run` started in the repository's root", text)
    assert f"elsewhere add `{stats_off}`" in text
