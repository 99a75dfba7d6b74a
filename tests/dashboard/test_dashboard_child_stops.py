"""`mdpsim dashboard` stopped by SIGTERM (`kill`, a supervisor) stops its Streamlit process
too, instead of leaving it serving the port with no parent. Streamlit is stood in for by a
sleeping child that writes its pid (the launch command is patched in the child process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import sys
import mdpsim.dashboard.launch as launch
from mdpsim.cli import main

pid_file = sys.argv[1]
code = "import os, time; open(%r, 'w').write(str(os.getpid())); time.sleep(120)" % pid_file
launch.streamlit_command = lambda **kw: [sys.executable, "-c", code]
sys.exit(main(["dashboard", "--port", "8597"]))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(predicate, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_sigterm_stops_the_streamlit_child(tmp_path: Path):
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(pid_file)], stdout=subprocess.PIPE, text=True
    )
    child = None
    try:
        assert _wait_for(lambda: pid_file.is_file() and pid_file.read_text().strip())
        child = int(pid_file.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=20) == 128 + signal.SIGTERM
        assert _wait_for(lambda: not _alive(child), 15), "the Streamlit child outlived mdpsim"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
