"""Output paths checked before any work, and folders and files written whole or not at all.

Every command that writes checks its targets first (:func:`check_folder`, :func:`check_file`):
an empty path, a file where a folder should be (or in the way of one), a folder that cannot be
written. Writability is probed by creating and deleting a temporary file in the nearest folder
that exists, since permission bits say nothing when running as root and a read-only mount
shows only on a write. A write that fails after the work (a full disk) removes what it had
written and says so in one line (:func:`atomic_folder`, :func:`atomic_file`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from mdpsim._core.guards import check_not_dangerous, check_replaceable, write_marker
from mdpsim.errors import InputError, one_line


def check_folder(out: str | Path, *, flag: str = "--out", inside: bool = False) -> Path:
    """``out`` as a path, refused if it cannot be a folder this process creates and writes.

    Refused: an empty path, an existing file, a file among its parents, and a folder that
    cannot be written: ``out`` itself if ``inside`` (a store is written inside its folder) and
    it exists, else the nearest existing parent (a new folder is made beside it and renamed).
    """
    text = str(out)
    if not text.strip():
        raise InputError(f"{flag} {text!r} is empty; give a folder, or leave {flag} out")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {text!r} is a file, not a folder; choose another {flag}")
    _check_writable(out if inside and out.is_dir() else out.parent, flag, text)
    return out


def check_file(path: str | Path, *, flag: str) -> Path:
    """``path`` as a file this process can write (atomically, beside it); else InputError."""
    text = str(path)
    if not text.strip():
        raise InputError(f"{flag} {text!r} is empty; give a file name")
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{flag} {text!r} is a folder; give a file name")
    _check_writable(path.parent, flag, text)
    return path


def _check_writable(folder: Path, flag: str, text: str) -> None:
    """The nearest existing folder of ``folder`` (itself or a parent) accepts a new file."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(
            f"{flag} {text!r}: {str(existing)!r} is a file, so the folder cannot be made "
            f"there; choose another {flag}"
        )
    try:
        fd, name = tempfile.mkstemp(prefix=".mdpsim-probe-", dir=existing)
    except OSError as exc:
        raise InputError(
            f"{flag} {text!r}: cannot write in {str(existing)!r} ({one_line(exc)}); choose "
            f"another {flag}"
        ) from None
    os.close(fd)
    os.unlink(name)


def new_folder(
    out: str | Path, *, overwrite: bool, flag: str = "--out", wrote: str | None = None
) -> Path:
    """``out`` checked (:func:`check_folder`), refused if it exists unless ``overwrite`` (the
    CLI's ``--force``); ``.``, home and their ancestors always, and an existing folder that
    mdpsim did not write, or that a command other than ``wrote`` wrote
    (:func:`~mdpsim._core.guards.check_replaceable`), even with it."""
    out = check_folder(out, flag=flag)
    check_not_dangerous(out, flag=flag)
    if out.exists() and not overwrite:
        raise InputError(f"output folder {str(out)!r} exists; choose another {flag} or --force")
    if out.exists():
        check_replaceable(out, wrote=wrote)
    return out


@contextmanager
def atomic_folder(out: Path, *, wrote: str = "mdpsim") -> Iterator[Path]:
    """Yield a hidden sibling folder of ``out`` to write into; on success the marker (``wrote``
    and the files) is added and it replaces ``out``, which must be replaceable
    (:func:`~mdpsim._core.guards.check_replaceable`: empty, or mdpsim's and nothing else).

    If the body raises, the partial folder is removed and ``out`` is left as it was; an
    ``OSError`` (a full disk, a folder made read-only meanwhile) becomes one InputError line.
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    except OSError as exc:
        raise _write_error(out, exc) from None
    try:
        yield tmp
        write_marker(tmp, wrote)
        if out.exists():
            check_replaceable(out, wrote=wrote)
            shutil.rmtree(out)
        os.replace(tmp, out)
    except OSError as exc:
        raise _write_error(out, exc) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def atomic_file(out: Path) -> Iterator[Path]:
    """Yield a hidden temporary path beside ``out`` to write; on success it replaces ``out``.

    If the body raises, the partial file is removed and ``out`` is left as it was; an
    ``OSError`` becomes one InputError line.
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.partial-", dir=out.parent)
    except OSError as exc:
        raise _write_error(out, exc) from None
    os.close(fd)
    tmp = Path(name)
    tmp.unlink()  # a name no one else has: some writers (GDAL's) refuse an existing file
    try:
        yield tmp
        os.replace(tmp, out)
    except OSError as exc:
        raise _write_error(out, exc) from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _write_error(out: Path, exc: OSError) -> InputError:
    return InputError(
        f"cannot write {str(out)!r} ({one_line(exc)}); nothing was written there and no "
        "partial results are kept: free space or choose another output path, and run again"
    )


def json_text(doc: object, *, indent: int = 2) -> str:
    """``doc`` as standard JSON: numpy scalars as Python numbers, and every NaN or infinite
    number as ``null`` (``NaN`` is not JSON: JavaScript's ``JSON.parse`` and strict parsers
    refuse it), e.g. a metric that no tick had."""
    return json.dumps(_finite(doc), indent=indent, allow_nan=False)


def _finite(value):
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
