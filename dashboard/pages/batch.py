import streamlit as st

st.title("Batch explorer")
