"""Entry script of the dashboard: ``streamlit run dashboard/app.py`` (or ``mdpsim dashboard``)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "pages"

st.set_page_config(page_title="mdpsim", layout="wide")
st.navigation(
    [
        st.Page(PAGES / "live.py", title="Live simulation", default=True),
        st.Page(PAGES / "batch.py", title="Batch explorer"),
    ]
).run()
