"""The wheel as a user gets it: built from a clean copy of the sources, one top-level name
(``mdpsim``), installed into a fresh venv, and run from a folder outside the repository.

The fresh venv has no site packages of its own but the wheel: its dependencies are the test
venv's, seen through a ``.pth`` line (which, unlike a site folder, runs no ``.pth`` files, so
the test venv's editable mdpsim stays out). ``MDPSIM_WHEEL_DEPS=pypi`` installs them from the
package registry instead (minutes; docs/packaging.md has the times).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "runs", "out", "cache", "*.egg-info", "__pycache__",
    ".*_cache", ".typecheck", ".hypothesis",
)  # fmt: skip
HEALTH_TIMEOUT_S = 90.0

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (a stale build/ folder cannot leak in)."""
    src = tmp_path_factory.mktemp("src") / "mdpsim"
    shutil.copytree(REPO, src, ignore=NOT_SOURCES)
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _check([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)])
    (built,) = out.glob("mdpsim-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh venv holding the wheel; its bin/ folder."""
    root = tmp_path_factory.mktemp("venv")
    _check([sys.executable, "-m", "venv", "--without-pip", str(root)])
    python = root / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python)]
    if os.environ.get("MDPSIM_WHEEL_DEPS") == "pypi":
        _check([*pip, "install", "-q", str(wheel)])
    else:
        site = Path(
            _check(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
            ).strip()
        )
        ours = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
        (site / "_mdpsim_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
        _check([*pip, "install", "-q", "--no-deps", str(wheel)])
    _check([*pip, "check"])  # every requirement of the wheel is met
    return root / "bin"


def test_the_wheel_installs_one_top_level_name(wheel):
    with zipfile.ZipFile(wheel) as zf:
        dist_info = next(n.split("/")[0] for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        record = zf.read(f"{dist_info}/RECORD").decode()
        top_level = zf.read(f"{dist_info}/top_level.txt").decode().split()
    tops = {line.split(",")[0].split("/")[0] for line in record.splitlines() if line}
    assert tops == {"mdpsim", dist_info}
    assert top_level == ["mdpsim"]
    example = "mdpsim/examples/plugin_example"
    for shipped in (
        "mdpsim/scenarios/helsinki_demo.toml",
        "mdpsim/dashboard/pages/live.py",
        f"{example}/pyproject.toml",
        f"{example}/src/mdpsim_example/__init__.py",
    ):
        assert f"{shipped}," in record


def test_the_installed_package_runs_from_another_folder(venv, tmp_path):
    where = _check([str(venv / "python"), "-c", "import mdpsim; print(mdpsim.__file__)"], tmp_path)
    assert Path(where.strip()).is_relative_to(venv.parent)
    demo = _check([str(venv / "mdpsim"), "demo"], tmp_path)
    assert (
        "outputs" in demo
        and (tmp_path / "runs" / "helsinki_demo-seed2026" / "summary.json").is_file()
    )
    _check(
        [str(venv / "mdpsim"), "run", "helsinki_demo", "--ticks", "3", "--out", "three"], tmp_path
    )
    assert (tmp_path / "three" / "ticks.parquet").is_file()
    assert _check([str(venv / "python"), "-m", "mdpsim", "--help"], tmp_path).startswith("usage")
    _check([str(venv / "mdpsim"), "plugins", "--example", "example"], tmp_path)
    assert (tmp_path / "example" / "src" / "mdpsim_example" / "__init__.py").is_file()


def test_the_installed_dashboard_answers_its_health_check(venv, tmp_path):
    port = _free_port()
    cmd = [str(venv / "mdpsim"), "dashboard", "--port", str(port), "--address", "127.0.0.1"]
    proc = subprocess.Popen(  # its own session: stopping it stops Streamlit, its child, too
        cmd,
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert _healthy(f"http://127.0.0.1:{port}/_stcore/health", proc), _output(proc)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read()
        assert b"<title>Streamlit</title>" in page or b"streamlit" in page.lower()
    finally:
        _stop(proc)


def _healthy(url: str, proc: subprocess.Popen) -> bool:
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200 and answer.read().strip() == b"ok":
                    return True
        except OSError:
            time.sleep(0.5)
    return False


def _stop(proc: subprocess.Popen, *, grace_s: float = 15.0) -> None:
    """SIGTERM to the dashboard's process group (mdpsim and the streamlit it started), then
    SIGKILL to whatever of the group is left after ``grace_s`` (a streamlit still starting up
    can miss the SIGTERM and outlive its parent)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # the group is empty
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _group_alive(proc.pid):
            proc.poll()  # reap mdpsim itself
            time.sleep(0.2)
    proc.wait(timeout=30)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _output(proc: subprocess.Popen) -> str:
    _stop(proc)
    out = proc.stdout.read() if proc.stdout else ""
    return f"dashboard did not answer /_stcore/health; exit {proc.returncode}; output:\n{out}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    """Our environment without anything that would point Python at the repository."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _check(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def test_setup_py_refuses_a_python_older_than_3_12_in_one_line(monkeypatch):
    """pip 23 checks Requires-Python only after the dependencies: a clone on Python 3.11
    would fail on mesa>=3.5, so setup.py (run first, to get the build's requirements) says it."""
    import runpy

    monkeypatch.setattr(sys, "version_info", (3, 11, 7, "final", 0))
    with pytest.raises(SystemExit) as stopped:
        runpy.run_path(str(REPO / "setup.py"))
    said = str(stopped.value.code)
    assert said.startswith("error: mdpsim needs Python 3.12 or newer") and "\n" not in said
