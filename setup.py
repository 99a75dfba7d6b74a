"""Map the repository's folders into the one import root ``mdpsim`` (metadata: pyproject.toml).

sim/ is ``mdpsim``, agents/ ``mdpsim.agents``, dashboard/ ``mdpsim.dashboard`` and the TOML
files of scenarios/ ``mdpsim.scenarios``; no other top-level name is installed.
"""

from setuptools import find_packages, setup

ROOTS = {
    "mdpsim": "sim",
    "mdpsim.agents": "agents",
    "mdpsim.dashboard": "dashboard",
    "mdpsim.scenarios": "scenarios",
}
packages = [
    f"{name}.{sub}" if sub else name
    for name, folder in ROOTS.items()
    for sub in ["", *find_packages(folder)]
]
setup(
    packages=packages,
    package_dir=ROOTS,
    package_data={
        "mdpsim": ["py.typed", "examples/plugin_example/**/*"],  # a distribution of its own
        "mdpsim.scenarios": ["*.toml"],
    },
)
