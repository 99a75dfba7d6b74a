"""The scenarios shipped with mdpsim (TOML files), found by name through importlib.resources."""
