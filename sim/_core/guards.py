"""Output guards: mdpsim replaces only what it wrote, never an input, never under another run.

* :func:`write_marker` puts ``.mdpsim-output`` (one JSON line: what wrote the folder, when, the
  files it wrote) into every output folder; :func:`check_replaceable` refuses to replace a
  folder without it or holding anything it does not list (one line naming the foreign file).
* :func:`check_not_dangerous` refuses ``.``, the working folder, home, ``/`` and their
  ancestors as an output folder; :func:`check_not_input` an output that is, or holds, an input.
* :func:`output_lock` holds an exclusive lock (``fcntl.flock``) on an output path for the
  duration of a command, so that a second command writing there gets one line and exit 2.
* :func:`safe_name` refuses a scenario name that would not make one plain folder name.

docs/reliability.md lists the cases and their messages.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mdpsim.errors import InputError

MARKER = ".mdpsim-output"  # the JSON line mdpsim writes into each output folder it makes
ALWAYS_OWN = ("bad_rows.csv",)  # written into a command's folder after the marker


def write_marker(folder: Path, wrote: str) -> None:
    """Write ``folder``'s marker: ``wrote`` (the command), the UTC time and every file in it."""
    files = sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != MARKER
    )
    utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {"wrote": wrote, "utc": utc, "files": files}
    (folder / MARKER).write_text(json.dumps(doc) + "\n", encoding="utf-8")


def add_to_marker(folder: Path, name: str) -> None:
    """List one more file (written after the folder) in ``folder``'s marker, if it has one."""
    path = folder / MARKER
    if path.is_file():
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["files"] = sorted({*doc.get("files", []), name})
        path.write_text(json.dumps(doc) + "\n", encoding="utf-8")


def check_replaceable(out: Path, *, flag: str = "--force", wrote: str | None = None) -> None:
    """Refuse (InputError, nothing touched) to replace ``out`` unless it is empty or holds an
    mdpsim marker and only the files that marker lists; given ``wrote`` (the replacing
    command), also a folder that another mdpsim command wrote (a report is not a run's)."""
    check_not_dangerous(out, flag="--out")
    entries = sorted(out.iterdir())
    if not entries:
        return
    marker = out / MARKER
    if not marker.is_file():
        raise InputError(
            f"{flag} refuses to replace {str(out)!r}: it holds {entries[0].name!r} and no "
            f"{MARKER} marker, so mdpsim did not write it; choose another --out"
        )
    try:
        written = json.loads(marker.read_text(encoding="utf-8"))
        listed = set(written["files"])
    except (ValueError, KeyError, TypeError, OSError):
        raise InputError(
            f"{flag} refuses to replace {str(out)!r}: its {MARKER} marker is unreadable; "
            "choose another --out"
        ) from None
    if written.get("wrote") == "mdpsim batch":  # its marker lists no files: the store's own
        raise InputError(
            f"{flag} refuses to replace {str(out)!r}: it is a batch store of mdpsim batch, "
            "which only `mdpsim batch --overwrite` replaces; choose another --out"
        )
    if wrote not in (None, "mdpsim") and written.get("wrote") not in (wrote, "mdpsim"):
        raise InputError(
            f"{flag} refuses to replace {str(out)!r}: `{written.get('wrote')}` wrote it, not "
            f"`{wrote}`; choose another --out"
        )
    for path in sorted(out.rglob("*")):
        name = str(path.relative_to(out))
        if path.is_dir() or name == MARKER or name in listed or name in ALWAYS_OWN:
            continue
        raise InputError(
            f"{flag} refuses to replace {str(out)!r}: it holds {name!r}, which mdpsim did not "
            "write; move that file out or choose another --out"
        )


def check_not_dangerous(out: Path, *, flag: str = "--out") -> None:
    """Refuse ``/``, home, the working folder and any of their ancestors as an output folder."""
    where = out.expanduser().resolve()
    home = Path.home().resolve()
    cwd = Path.cwd().resolve()
    for place, what in ((cwd, "the working folder"), (home, "your home folder")):
        if where == place or where in place.parents:
            raise InputError(
                f"{flag} {str(out)!r} is {what} or holds it; an output folder is replaced "
                f"whole, so give a new folder such as {flag} runs/NAME"
            )
    if where == Path(where.anchor):
        raise InputError(f"{flag} {str(out)!r} is the root folder; give a new folder")


def check_not_input(out: Path, inputs: Iterable[Path], *, flag: str) -> None:
    """Refuse an output path that is an input, or a folder holding one (one line naming it)."""
    where = out.expanduser().resolve()
    for path in inputs:
        source = path.expanduser().resolve()
        if source == where or where in source.parents:
            raise InputError(
                f"{flag} {str(out)!r} would replace the input {str(path)!r}; write the output "
                "somewhere else"
            )


def input_paths(scenario) -> list[Path]:
    """The files a scenario reads: the scenario file, its traces, its network file, and the
    plug-in modules imported from outside Python's installation and mdpsim."""
    paths: list[Path] = []
    if scenario.path is not None and Path(scenario.path).is_file():
        paths.append(Path(scenario.path))
    if scenario.mobility.source == "traces":
        paths.append(scenario.trace_path())
    network = Path(os.path.expanduser(scenario.network_source()))
    if network.suffix and network.is_file():
        paths.append(network)
    return paths + plugin_files()


def plugin_files() -> list[Path]:
    """Source files of imported modules that belong neither to Python's installation (the
    interpreter's and the environment's prefixes) nor to mdpsim: a user's plug-in files."""
    found = []
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        path = _outside_python(file) if isinstance(file, str) else None
        if path is not None and path.is_file():
            found.append(path)
    return found


@functools.cache
def _outside_python(file: str) -> Path | None:
    """``file`` resolved, if it lies outside Python's installation and mdpsim; else ``None``
    (cached: a process holds thousands of modules and a module's file does not move)."""
    import mdpsim

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(mdpsim.__file__)}
    path = os.path.realpath(file)
    inside = any(path.startswith(os.path.join(os.path.realpath(r), "")) for r in roots)
    return None if inside else Path(path)


_UNSAFE = re.compile(r"[/\\\x00-\x1f:*?\"<>|]")


def safe_name(name: str, *, field: str = "scenario.name") -> str:
    """``name`` if it makes one plain folder name (no separator, no ``..``, not hidden);
    else one line naming the field."""
    bad = _UNSAFE.search(name)
    if bad or not name.strip() or name.startswith(".") or ".." in name:
        why = f"it holds {bad.group()!r}" if bad else "it is empty, hidden or holds '..'"
        raise InputError(
            f"field {field} = {name!r} cannot name an output folder ({why}); use letters, "
            "digits, spaces, '-' and '_', or give --out"
        )
    return name


LOCKS = Path(tempfile.gettempdir()) / "mdpsim-locks"  # one lock file per output path


@contextmanager
def output_lock(*outs: Path) -> Iterator[None]:
    """Hold an exclusive lock on each output path (released when the body ends or the process
    dies); one already held by another command is refused in one line."""
    import fcntl

    LOCKS.mkdir(mode=0o777, exist_ok=True)
    held: list[int] = []
    try:
        for out in outs:
            key = hashlib.sha256(str(out.expanduser().resolve()).encode()).hexdigest()[:32]
            fd = os.open(LOCKS / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise InputError(
                    f"another mdpsim command is writing {str(out)!r} now; wait for it to "
                    "finish or choose another output path"
                ) from None
            held.append(fd)
        yield
    finally:
        for fd in held:
            os.close(fd)  # closing the last descriptor releases the flock
