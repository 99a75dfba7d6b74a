"""Every API page's python blocks run as written (issue 50 item 1).

Each ```python block of docs/api/*.md is executed in a fresh namespace, blocks of one page in
order; a page without an example fails, so a new page comes with one.
"""

import re
from pathlib import Path

import pytest

PAGES = sorted((Path(__file__).resolve().parents[2] / "docs" / "api").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pages_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it there
    blocks = BLOCK.findall(page.read_text(encoding="utf-8"))
    assert blocks, f"{page.name} has no python example"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)
