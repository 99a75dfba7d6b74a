"""Output folders written whole or not at all."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mdpsim.errors import InputError


def new_folder(out: str | Path, *, overwrite: bool) -> Path:
    """``out`` as a path, refused if it exists unless ``overwrite`` (the CLI's ``--force``)."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise InputError(f"output folder {str(out)!r} exists; choose another --out or --force")
    return out


@contextmanager
def atomic_folder(out: Path) -> Iterator[Path]:
    """Yield a hidden sibling folder of ``out`` to write into; on success it replaces ``out``.

    If the body raises, the partial folder is removed and ``out`` is left as it was.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


@contextmanager
def atomic_file(out: Path) -> Iterator[Path]:
    """Yield a hidden temporary path beside ``out`` to write; on success it replaces ``out``.

    If the body raises, the partial file is removed and ``out`` is left as it was.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.partial-", dir=out.parent)
    os.close(fd)
    tmp = Path(name)
    tmp.unlink()  # a name no one else has: some writers (GDAL's) refuse an existing file
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
