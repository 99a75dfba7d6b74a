"""The mdpsim command line: subcommands, summaries, and user errors without tracebacks."""

from __future__ import annotations

import subprocess
import sys

from mdpsim.cli import main


def test_help_lists_subcommands(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    for name in ("network", "domain", "demo"):
        assert name in out


def test_network_prints_size_length_and_extent(capsys):
    assert main(["network", "--source", "helsinki-test"]) == 0
    out = capsys.readouterr().out
    assert "nodes" in out and "road length" in out and "extent" in out


def test_domain_prints_size_metric_and_memory(capsys):
    assert main(["domain", "--source", "helsinki-test", "--n-points", "120"]) == 0
    out = capsys.readouterr().out
    assert "120" in out and "road" in out and "MiB" in out


def test_domain_tells_a_big_domains_size_before_building_it(capsys, monkeypatch):
    from mdpsim.geo.domain import Domain

    def stopped(*_args, **_kwargs):  # the user reads the estimate and presses Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(Domain, "from_network", stopped)
    args = ["domain", "--source", "helsinki-test", "--spacing-m"]
    assert main([*args, "3"]) == 130  # 37.5 km of road
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("estimate: 12,496 points;") and "1.25 GB" in first, first
    assert main([*args, "10"]) == 130
    assert not capsys.readouterr().err.startswith("estimate:")  # 3,749 points: nothing told


def test_bound_prints_a_certified_bound_below_each_mechanism(capsys):
    args = ["bound", "--source", "helsinki-test", "--n-points", "40", "--epsilon", "4"]
    assert main([*args, "--mechanism", "lp_medoids"]) == 0
    lines = dict(line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines())
    bound = float(lines["lower"].split()[1])
    for name in ("em", "lp_medoids"):
        loss, gap = lines[name].split(" km, gap ")
        assert float(loss) >= bound > 0 and float(gap.split()[0]) >= 1


def test_bound_refuses_bad_arguments_with_one_line(capsys):
    args = ["bound", "--source", "helsinki-test", "--n-points", "40"]
    assert main([*args, "--epsilon", "4", "--mechanism", "nosuch"]) == 2
    assert "unknown mechanism 'nosuch'" in capsys.readouterr().err
    assert main([*args, "--epsilon", "0"]) == 2
    assert "epsilon" in capsys.readouterr().err
    assert main([*args, "--epsilon", "4", "--rounds", "0"]) == 2
    assert "rounds" in capsys.readouterr().err


def test_user_errors_exit_2_with_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mdpsim.cli", "domain", "--source", "helsinki-test",
         "--spacing-m", "-1"],
        capture_output=True,
        text=True,
        env={"MDPSIM_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--spacing-m=-1.0" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_file_exits_2(capsys, tmp_path):
    assert main(["network", "--source", str(tmp_path / "x.osm.pbf")]) == 2
    assert "file not found" in capsys.readouterr().err


_FACTORIES = '''
import numpy as np
from mdpsim.geo.domain import Domain
from mdpsim.mechanisms import make
from mdpsim.geo.network import load_network


def unfitted():
    return make("em", epsilon=3.0)


def fitted():
    domain = Domain.from_network(load_network("helsinki-test"), n_points=20, seed=2)
    return make("em", epsilon=3.0).fit(domain)


class Identity:
    """Claims eps = 3 but reports the secret itself."""

    epsilon = 3.0

    def fit(self, domain):
        self.domain_ = domain
        return self

    def sample_many(self, indices, rng):
        return np.asarray(indices)


def leaky():
    return Identity()


def not_a_mechanism():
    return 42


def broken():
    raise RuntimeError("no GPU found")
'''


def _write_factories(tmp_path, monkeypatch, name):
    (tmp_path / f"{name}.py").write_text(_FACTORIES)
    monkeypatch.chdir(tmp_path)


def test_audit_takes_module_factory_fitted_or_not(tmp_path, monkeypatch, capsys):
    _write_factories(tmp_path, monkeypatch, "user_mechs_ok")
    small = ["--source", "helsinki-test", "--n-points", "25", "--samples", "1000000"]
    assert main(["audit", "user_mechs_ok:unfitted", *small]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "claimed eps      3 /km" in out and "on 25 secrets" in out
    assert main(["audit", "user_mechs_ok:fitted", "--samples", "1000000"]) == 0
    assert "on 20 secrets" in capsys.readouterr().out  # the factory's own domain
    assert main(["audit", "user_mechs_ok:leaky", *small]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_audit_bad_factory_exits_2_with_one_line_naming_the_argument(tmp_path, monkeypatch, capsys):
    _write_factories(tmp_path, monkeypatch, "user_mechs_bad")
    small = ["--source", "helsinki-test", "--n-points", "25", "--samples", "1000000"]
    for spec, why in [
        ("no_such_module_xyz:build", "cannot import"),
        ("user_mechs_bad:missing", "cannot import"),
        ("user_mechs_bad:not_a_mechanism", "not a mechanism"),
        ("user_mechs_bad:broken", "RuntimeError: no GPU found"),
    ]:
        assert main(["audit", spec, *small]) == 2, spec
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"mechanism='{spec}'" in err and why in err, err


def test_audit_with_too_few_samples_names_the_flag_and_a_value_that_works(capsys):
    small = ["--source", "helsinki-test", "--n-points", "25"]
    assert main(["audit", "em", *small, "--samples", "20000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--samples 20,000 is too few for 25 secrets" in err, err
    enough = err.split("use --samples ")[1].split()[0]
    assert main(["audit", "em", *small, "--samples", enough]) == 0
