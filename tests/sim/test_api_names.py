"""No API traps: a package attribute never shadows a submodule of the same name (issue 29, 7).

``import mdpsim.privacy.verify as v`` used to give the function ``verify`` (the package
re-exported it under its module's name), so ``v.PrivacyViolation`` failed. Every package is
walked; for each submodule ``p.m`` the attribute ``p.m`` must be that module, both before it is
imported (no function waiting to be overwritten) and after.
"""

import importlib
import pkgutil
import types

import mdpsim


def _clashes(pkg: types.ModuleType) -> list[str]:
    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name == "__main__":  # runs the CLI when imported
            continue
        before = vars(pkg).get(info.name)
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        if (before is not None and before is not mod) or getattr(pkg, info.name) is not mod:
            found.append(f"{pkg.__name__}.{info.name}")
        if info.ispkg:
            found += _clashes(mod)
    return found


def test_no_module_shares_its_dotted_name_with_a_function():
    assert _clashes(mdpsim) == []


def test_the_verifier_module_and_function_are_distinct():
    import mdpsim.privacy.verifier as v
    from mdpsim.privacy import verify

    assert isinstance(v, types.ModuleType) and v.verify is verify
