"""What ``mdpsim plugins`` lists: every component an installed distribution offers through an
entry point (docs/plugins.md), with its kind, distribution and entry point, each loaded to
tell whether it works (a broken one with its one-line error); ``mdpsim plugins --example DIR``
writes the complete example plug-in distribution that ships with mdpsim."""

from __future__ import annotations

from mdpsim.errors import InputError, plain

HEAD = ("name", "kind", "distribution", "entry point", "status")
EXAMPLE = "examples/plugin_example"  # package data of mdpsim: a distribution of its own


def installed_version() -> str:
    """mdpsim's version as installed (``mdpsim --version``)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("mdpsim")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def plugin_rows() -> list[tuple[str, str, str, str, str]]:
    """One row per discovered plug-in: name, kind, distribution, entry point, status."""
    from mdpsim import attacks, mechanisms
    from mdpsim._core.registry import Registry
    from mdpsim.agents import strategies
    from mdpsim.geo.network import named_extracts

    registries: dict[str, Registry] = {
        "mechanism": mechanisms.base._MECHANISMS,
        "attack": attacks.base._ATTACKS,
    }
    registries |= {f"strategy.{kind}": r for kind, r in strategies.REGISTRIES.items()}
    rows = []
    for kind, registry in registries.items():
        for name, ep in registry.plugins().items():
            try:
                registry.get(name)
                status = "ok"
            except InputError as exc:
                status = f"error: {plain(str(exc))}"
            rows.append((name, kind, ep.dist.name if ep.dist else "?", ep.value, status))
    for name, ep in named_extracts().items():  # a network's callable runs when it is used
        rows.append((name, "network", ep.dist.name if ep.dist else "?", ep.value, "not loaded"))
    return rows


def plugin_table() -> str:
    """The rows as aligned text (the status, which may be long, last)."""
    rows = plugin_rows()
    if not rows:
        return "no plug-ins installed (entry points: docs/plugins.md)"
    widths = [max(len(r[i]) for r in [HEAD, *rows]) for i in range(4)]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in [HEAD, *rows]
    )


def write_example(dest: str) -> list[str]:
    """Copy the example plug-in distribution (pyproject.toml, src/mdpsim_example) into the new
    folder ``dest``; its files' paths. InputError if ``dest`` exists (nothing is overwritten)."""
    import importlib.resources
    import shutil
    from pathlib import Path

    out = Path(dest).expanduser()
    if out.exists():
        raise InputError(f"--example {dest!r} exists; name a new folder")
    if not out.parent.is_dir():
        raise InputError(f"--example {dest!r}: its parent folder does not exist")
    built = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")  # a local pip install's
    tmp = out.parent / f".{out.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    with importlib.resources.as_file(importlib.resources.files("mdpsim") / EXAMPLE) as src:
        shutil.copytree(src, tmp, ignore=built)
    tmp.rename(out)  # whole or not at all
    return sorted(str(p) for p in out.rglob("*") if p.is_file())
