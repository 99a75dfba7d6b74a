"""The Streamlit dashboard: a live simulation page and a batch explorer (``mdpsim dashboard``).

The UI lives in ``dashboard/pages/``; the modules next to this file turn a model or a batch
folder into plain tables and map layers, so that they can be tested without a browser.
"""
