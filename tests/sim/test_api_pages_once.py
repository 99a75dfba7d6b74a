"""Each object appears once on the API pages (issue 50 item 1); builds the site (slow)."""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _object(path: str):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


@pytest.mark.slow
def test_no_class_or_function_is_rendered_twice(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(tmp_path)]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    seen: dict[int, str] = {}
    twice = []
    for page in sorted((tmp_path / "api").glob("*/index.html")):
        for path in re.findall(r'<h[23] id="(mdpsim[\w.]*)"', page.read_text(encoding="utf-8")):
            obj = _object(path)
            if not (isinstance(obj, type) or callable(obj)) or isinstance(obj, type(os)):
                continue
            if id(obj) in seen and seen[id(obj)] != path:
                twice.append((seen[id(obj)], path))
            seen.setdefault(id(obj), path)
    assert not twice, twice
