"""The dashboard's pages (Streamlit scripts run by ``mdpsim.dashboard.app``)."""
