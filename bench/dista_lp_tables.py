"""Analogues of DistA-LP's Tables II, III-V and XIII on the Helsinki walk network.

Prints Markdown. Utility loss is summed over the users' own rows (as the paper's artifact
does), violation ratio is the exact verifier's (eps for baselines; eps_pt on the users'
union U for DistA-LP), time is the fit in seconds (DistA-LP: server solve; total in brackets).
Mean ± 1.96 standard error over repetitions. One domain per size (the paper's one dataset);
each repetition draws new users and new upload noise, so DistA-LP's noise calibration, which
depends on the domain only, is done once per size and eps.

DistA-LP appears three times: ``dista_lp`` is the registered mechanism (each user's row from
the matrix released over the union U, exact across all of U); ``dista_lp (own block)`` is the
loss of each user's row in its own downloaded block, the paper's guarantee (eps_pt-mDP inside
the user's neighbourhood); ``dista_lp (exact uploads)`` is an ablation with noise-free uploads
(NOT private) that shows what the server's LP makes of exact coefficient blocks.

    python bench/dista_lp_tables.py --sizes 300 --eps 4 7 10 --reps 5
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import math
import os
import re
import sys
import time

import numpy as np

from sim.domain import Domain
from sim.mechanisms import make
from sim.mechanisms.dista_lp import server
from sim.mechanisms.dista_lp.mechanism import DistALP
from sim.mechanisms.dista_lp.user import (
    UploadConfig,
    calibrate_upload,
    prepare_upload,
    reconstruct,
)
from sim.network import load_network
from sim.privacy.verify import verify

BASELINES = ("em", "laplace", "rmp", "lp_a", "panda", "copt", "lp")
FAMILIES = ("gaussian", "polynomial", "rbf", "svd")
OWN_BLOCK = "dista_lp (own block)"
EXACT = "dista_lp (exact uploads)"
NOISE_FREE_BETA = 1e-12


class ExactUploadsDistALP(DistALP):
    """Ablation, NOT private: DistA-LP whose users upload their fitted surrogate parameters
    without noise (the calibrated scales times 1e-12), everything else unchanged."""

    def _upload_config(self, domain):
        config = super()._upload_config(domain)
        cal = config.calibration
        blocks = {t: dataclasses.replace(b, beta=NOISE_FREE_BETA) for t, b in cal.blocks.items()}
        return dataclasses.replace(config, calibration=dataclasses.replace(cal, blocks=blocks))


def _ci(values: list[float]) -> str:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)])
    if len(v) == 0:
        return "n/a"
    if len(v) == 1:
        return f"{v[0]:.4g} (one run)"
    half = 1.96 * v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else 0.0
    return f"{v.mean():.4g} ± {half:.2g}"


def _fit(name, domain, eps, args, *, users=None, seed=0):
    """(fitted mechanism, seconds), or an error string for the table."""
    params = {"epsilon": eps}
    if name == "copt":
        params.update(time_limit_s=args.cap)
    if name in ("dista_lp", EXACT):
        params.update(
            user_indices=users, n_neighbours=args.neighbours, delta=args.delta,
            confidence=args.confidence, audit_records=args.audit_records, seed=seed,
        )  # fmt: skip
    if name == "lp" and domain.n_x > args.lp_max:
        return f"skipped (|X| > {args.lp_max})"
    if name == "copt" and domain.n_x > args.copt_max:
        return f"skipped (|X| > {args.copt_max}: {domain.n_x * domain.n_y:.1e} LP variables)"
    try:
        start = time.perf_counter()
        mech = ExactUploadsDistALP(**params) if name == EXACT else make(name, **params)
        mech.fit(domain)
        return mech, time.perf_counter() - start
    except Exception as err:  # reported in the table, never hidden
        if "Time limit" in str(err):
            return f"> {args.cap:g} s (time limit)"
        return f"{type(err).__name__}: {str(err)[:80]}"


def _baseline_rows(mech, seconds: float, users: np.ndarray, violation: float) -> tuple:
    """(loss summed over users in km, violation ratio, seconds, total seconds)."""
    loss = sum(float(mech.matrix_[x] @ mech.domain_.dist_xy[x]) for x in users)
    return (loss, violation, seconds, seconds)


def _dista_rows(name: str, mech, seconds: float, domain, users: np.ndarray) -> dict:
    """The registered union release (over the users' union U, ``mech.domain_``) and, for
    ``dista_lp``, each user's own block; losses on the full ``domain``."""
    info = mech.info_
    rows = {int(u): p for p, u in enumerate(info["union_rows"])}
    loss = sum(float(mech.matrix_[rows[int(x)]] @ domain.dist_xy[x]) for x in users)
    viol = verify(mech.matrix_, mech.domain_.dist_xx, info["epsilon_pt"]).violation_ratio
    times = (info["server_seconds"], seconds)
    out = {name: (loss, viol, *times)}
    if name == "dista_lp":
        # Each block is verified on its user's true local distances (0 violations there).
        own = sum(
            float(block[r] @ domain.dist_xy[x])
            for block, r, x in zip(
                info["final_blocks"], info["user_rows"], info["users"], strict=True
            )
        )
        out[OWN_BLOCK] = (own, 0.0, *times)
    return out


def table_mechanisms(G, args) -> None:
    """Tables III-V, printed per size as soon as the size is done. Every run's result is
    also logged on stderr, one line each, which ``--from-logs`` reads back.

    The baselines do not depend on the users, so each is fitted once per size and eps (its
    time is that one fit) and evaluated on every repetition's users; DistA-LP is fitted per
    repetition (its users and upload noise change)."""
    for size in args.sizes:
        results = {}
        domain = Domain.from_network(G, n_points=size, seed=0)
        reps = range(args.rep_start, args.rep_start + args.reps)
        users = {rep: np.sort(np.random.default_rng(rep).choice(size, args.users, replace=False))
                 for rep in reps}  # fmt: skip
        for eps in args.eps:
            for name in BASELINES:
                fitted = _fit(name, domain, eps, args)
                if not isinstance(fitted, str):
                    mech, seconds = fitted
                    pairs = domain.constraint_pairs
                    viol = verify(mech.matrix_, domain.dist_xx, eps, pairs=pairs).violation_ratio
                for rep in reps:
                    res = fitted
                    if not isinstance(fitted, str):
                        first = rep == args.rep_start  # one fit, one time
                        row = _baseline_rows(mech, seconds if first else math.nan, users[rep], viol)
                        res = {name: row}
                    _log_and_collect(results, size, rep, eps, name, res)
            for rep in reps:
                for name in ("dista_lp", EXACT):
                    fitted = _fit(name, domain, eps, args, users=users[rep], seed=rep)
                    res = (
                        fitted
                        if isinstance(fitted, str)
                        else _dista_rows(name, *fitted, domain, users[rep])
                    )
                    _log_and_collect(results, size, rep, eps, name, res)
        print(_format_tables(results), flush=True)


def _log_and_collect(results: dict, size: int, rep: int, eps: float, name: str, res) -> None:
    print(f"|X|={size} rep={rep} eps={eps:g} {name}: {res!r}", file=sys.stderr, flush=True)
    _collect(results, size, eps, name, res)


def _collect(results: dict, size: int, eps: float, name: str, res) -> None:
    rows = [name, OWN_BLOCK] if name == "dista_lp" else [name]
    for row in rows:
        results.setdefault((size, row, eps), []).append(res if isinstance(res, str) else res[row])


def tables_from_logs(paths: list[str]) -> str:
    """The tables of earlier runs (possibly split over processes) from their stderr logs."""
    pattern = re.compile(r"^\|X\|=(\d+) rep=(\d+) eps=(\S+) (.+?): (.*)$")
    results: dict = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = pattern.match(line.rstrip("\n"))
                if m:
                    size, _, eps, name, res = m.groups()
                    if not res.startswith(("{", "'", '"')):
                        res = repr(res)  # an error or skip message
                    res = re.sub(r"\bnan\b", "None", res)  # a baseline's time after its one fit
                    _collect(results, int(size), float(eps), name, ast.literal_eval(res))
    return _format_tables(results)


def _format_tables(results: dict) -> str:
    """{(size, row, eps): [per-repetition tuple or error]} -> Markdown, one block per size."""
    out = []
    names = (*BASELINES, "dista_lp", OWN_BLOCK, EXACT)
    for size in sorted({k[0] for k in results}):
        eps_all = sorted({k[2] for k in results if k[0] == size})
        n_reps = max(len(v) for k, v in results.items() if k[0] == size)
        head = " | ".join(f"eps={e:g}" for e in eps_all)
        for title, idx in (("violation ratio", 1), ("utility loss (km, sum over users)", 0),
                           ("time (s)", 2)):  # fmt: skip
            out += [f"\n### |X| = {size:,}: {title} ({n_reps} repetitions)\n",
                    f"| mechanism | {head} |", "|---|" + "---|" * len(eps_all)]  # fmt: skip
            for name in names:
                cells = []
                for eps in eps_all:
                    runs = results.get((size, name, eps), [])
                    errors = [r for r in runs if isinstance(r, str)]
                    ok = [r for r in runs if not isinstance(r, str)]
                    cell = _ci([r[idx] for r in ok]) if ok else (errors[0] if errors else "")
                    if name.startswith("dista_lp") and idx == 2 and ok:
                        cell += f" (total {_ci([r[3] for r in ok])})"
                    if errors and ok:
                        cell += f" ({len(errors)} failed: {errors[0]})"
                    cells.append(cell)
                out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def table_surrogates(G, args) -> list[str]:
    """Table II (RelErr, ViolRatio after repair, upload loss) and XIII (bytes up)."""
    size, eps = args.sizes[0], args.eps[0]
    domain = Domain.from_network(G, n_points=size, seed=0)
    rng = np.random.default_rng(0)
    users = np.sort(rng.choice(size, args.users, replace=False))
    rows2, rows13 = [], []
    for family in FAMILIES:
        config = UploadConfig(
            epsilon=eps, family=family, n_neighbours=args.neighbours, delta=args.delta,
            confidence=args.confidence, audit_records=args.audit_records,
        )  # fmt: skip
        try:
            config = calibrate_upload(domain, config, rng=rng)
        except Exception as err:
            rows2.append(f"| {family} | {type(err).__name__}: {str(err)[:80]} |||||||")
            continue
        rel = {t: [] for t in ("dx", "dy", "cy")}
        vio = {t: [] for t in ("dx", "dy")}
        up = []
        for x in users:
            state, upload = prepare_upload(domain, int(x), config, rng)
            true = state.permuted_blocks()
            rep = server.repair_blocks(reconstruct(upload), gamma_km=0.0)
            for t in rel:
                rel[t].append(server.relative_error(true[t], rep[t]))
            vio["dx"].append(server.violation_ratio(true["dx"], rep["dx"], exclude_diagonal=True))
            vio["dy"].append(server.violation_ratio(true["dy"], rep["dy"]))
            up.append(upload.bytes_up)
        upload_eps = config.eps_dx + config.eps_dy + config.eps_cy
        rows2.append(
            f"| {family} | {_ci(rel['dx'])} | {_ci(vio['dx'])} | {_ci(rel['dy'])} | "
            f"{_ci(vio['dy'])} | {_ci(rel['cy'])} | {upload_eps:g} "
            f"(conf {config.calibration.confidence:.3f}) |"
        )
        n, K = args.neighbours, domain.n_y
        rows13.append(f"| {family} | {np.mean(up):,.0f} | {8 * (n * n + 2 * n * K):,} |")
    return [
        f"\n### Table II analogue (|X| = {size:,}, eps = {eps:g}/km, {args.users} users)\n",
        "| surrogate | dx RelErr | dx ViolRatio | dy RelErr | dy ViolRatio | cy RelErr | "
        "upload eps (confidence) |",
        "|---|---|---|---|---|---|---|",
        *rows2,
        "\n### Table XIII analogue: bytes uploaded per user\n",
        "| surrogate | released parameters (bytes) | raw blocks (bytes) |",
        "|---|---|---|",
        *rows13,
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000, 6000])
    p.add_argument("--eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument(
        "--rep-start", type=int, default=0, help="first repetition (to split a run over processes)"
    )
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--neighbours", type=int, default=20)
    p.add_argument("--cap", type=float, default=600.0, help="COPT time limit (s)")
    p.add_argument("--lp-max", type=int, default=300, help="largest |X| for the full LP")
    p.add_argument(
        "--copt-max", type=int, default=2000, help="largest |X| for COPT's whole-domain LP"
    )
    p.add_argument("--delta", type=float, default=1e-4)
    p.add_argument("--confidence", type=float, default=0.99)
    p.add_argument("--audit-records", type=int, default=200)
    p.add_argument("--skip-surrogates", action="store_true")
    p.add_argument("--skip-mechanisms", action="store_true")
    p.add_argument("--from-logs", nargs="+", help="only rebuild Tables III-V from stderr logs")
    args = p.parse_args()
    if args.from_logs:
        print(tables_from_logs(args.from_logs))
        return
    os.environ.setdefault("MDPSIM_CACHE", "/tmp/mdpcache")
    G = load_network("helsinki", network_type="walk")
    print(f"Arguments: {vars(args)}", flush=True)
    if not args.skip_surrogates:
        print("\n".join(table_surrogates(G, args)), flush=True)
    if not args.skip_mechanisms:
        table_mechanisms(G, args)


if __name__ == "__main__":
    main()
