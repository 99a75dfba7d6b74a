"""Map the repository's folders into the one import root ``mdpsim`` (metadata: pyproject.toml).

sim/ is ``mdpsim``, agents/ ``mdpsim.agents``, dashboard/ ``mdpsim.dashboard`` and the TOML
files of scenarios/ ``mdpsim.scenarios``; no other top-level name is installed.
"""

import platform
import sys

from setuptools import find_packages, setup

if sys.version_info < (3, 12):  # noqa: UP036 (pip 23 would first fail on mesa>=3.5 instead)
    sys.exit(
        f"error: mdpsim needs Python 3.12 or newer, and this pip runs Python "
        f"{platform.python_version()}; make a 3.12 venv (python3.12 -m venv .venv) and install "
        "into it"
    )

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
