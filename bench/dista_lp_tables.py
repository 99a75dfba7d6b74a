"""DistA-LP's Tables III-V analogues per upload mode, the upload-share curve, server quality.

Prints Markdown (and writes the share plot). Sections (``--sections``):

* ``tables``: utility loss (km, summed over the users' rows, the paper's artifact rule),
  violation ratio (exact verifier over ALL of X at the report budget), fit time, the upload
  attack's median / 10th-percentile error and the guarantee, per mechanism and eps. Baselines
  and ``dista_lp none`` do not depend on the users: one fit per size and eps, evaluated on
  every repetition's users. The other modes are fitted per repetition (new users and noise).
  ``(own block)`` rows are the paper's per-neighbourhood blocks (verified only on the user's
  own neighbourhood: the paper's guarantee, not an mDP matrix over X).
* ``share``: ``dista_lp location`` against ``eps_up / eps`` (0 is ``upload="none"``).
* ``paper-audit``: the paper's own audit (S = 100 pairs) of its SVD release at the paper's
  noise rule and at the ``fidelity:f`` diagnostic noises: violation rate per block.
* ``quality``: on domains where the optimal LP solves, the users' loss under DistA-LP with
  noise-free uploads (``strict`` with zero noise: NOT private) against the optimal LP.

Mean ± 1.96 standard errors over repetitions. Every result is also logged on stderr as one
JSON line.

    python bench/dista_lp_tables.py --sizes 2000 --eps 4 7 10 --reps 5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time

import numpy as np

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network
from mdpsim.mechanisms import make
from mdpsim.mechanisms.dista_lp.locate import error_summary
from mdpsim.mechanisms.dista_lp.mechanism import DistALP
from mdpsim.mechanisms.dista_lp.paper_upload import calibrate_paper
from mdpsim.mechanisms.dista_lp.uploads import SCHEMES
from mdpsim.mechanisms.dista_lp.uploads.strict import StrictUpload
from mdpsim.privacy.verifier import verify

BASELINES = ("em", "laplace", "rmp", "lp_a", "panda", "copt")
MODES = ("none", "location", "paper", "strict")
NOISE_FREE_BETA = 1e-12
NONE_ROWS = {"default": "dista_lp none", "blocks": "dista_lp none (blocks)"}


@dataclasses.dataclass(kw_only=True, repr=False, eq=False)
class NoiseFreeStrict(StrictUpload):
    """Ablation, NOT private: ``strict`` uploads whose noise scales are 1e-12 of the
    calibrated ones (the fitted surrogate parameters as they are)."""

    def calibration(self, domain, config, calibrations):
        cal = super().calibration(domain, config, calibrations)
        blocks = {t: dataclasses.replace(b, beta=NOISE_FREE_BETA) for t, b in cal.blocks.items()}
        return dataclasses.replace(cal, blocks=blocks)


class NoiseFreeDistALP(DistALP):
    """DistA-LP with the noise-free ``strict`` scheme (the ``quality`` ablation)."""

    schemes = {**SCHEMES, "strict": NoiseFreeStrict}


def _ci(values) -> str:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if len(v) == 0:
        return "n/a"
    if len(v) == 1:
        return f"{v[0]:.4g} (one run)"
    return f"{v.mean():.4g} ± {1.96 * v.std(ddof=1) / math.sqrt(len(v)):.2g}"


def _log(**row) -> None:
    print(json.dumps(row, default=float), file=sys.stderr, flush=True)


def _variants(args) -> list[tuple[str, str, dict]]:
    """(row name, upload mode, extra parameters) of every DistA-LP row with an upload."""
    rows = []
    for mode in MODES[1:]:
        if mode in args.skip_modes:
            continue
        if mode != "paper":
            rows.append((f"dista_lp {mode}", mode, {}))
            continue
        for noise in args.paper_noise:
            name = "dista_lp paper" + ("" if noise == "lipschitz" else f" ({noise})")
            rows.append((name, mode, {"paper_noise": noise}))
    return rows


def _dista_params(mode: str, args, users, seed: int) -> dict:
    params: dict = {"upload": mode, "seed": seed}
    if mode in ("paper", "strict"):
        params.update(
            n_neighbours=args.neighbours, delta=args.delta, confidence=args.confidence,
            audit_records=args.audit_records,
        )  # fmt: skip
    return params


def _audit_text(mech) -> str:
    """The paper's S = 100 audit of a paper-mode upload: violation rate per block."""
    cal = mech.info_.get("paper_calibration")
    if cal is None:
        return ""
    rates = " / ".join(f"{cal.p_hat[t]:.2f}" for t in ("dx", "dy", "cy"))
    return f"; paper audit p_hat dx/dy/cy {rates} (delta {mech.upload.delta:g})"


def _loss(mech, users) -> float:
    return float(sum(mech.matrix_[x] @ mech.domain_.dist_xy[x] for x in users))


def _own_loss(mech, users) -> float:
    info = mech.info_
    return float(
        sum(
            b[r] @ mech.domain_.dist_xy[x]
            for b, r, x in zip(info["own_blocks"], info["own_rows"], users, strict=True)
        )
    )


def table_mechanisms(G, args) -> None:
    """Tables III-V analogues with the upload-attack column, per size."""
    for size in args.sizes:
        domain = Domain.from_network(G, n_points=size, seed=0)
        reps = range(args.reps)
        users = {r: np.sort(np.random.default_rng(r).choice(size, args.users, replace=False))
                 for r in reps}  # fmt: skip
        cells: dict = {}  # (name, eps) -> lists
        for eps in args.eps:
            nones = {NONE_ROWS[p]: p for p in args.none_planners}  # row name -> planner
            for name in args.baselines + list(nones):
                if name == "copt" and size > args.copt_max:
                    cells[(name, eps)] = f"skipped (|X| > {args.copt_max})"
                    continue
                params = {"epsilon": eps}
                if name == "copt":
                    params["time_limit_s"] = args.cap
                try:
                    t0 = time.perf_counter()
                    if name in nones:
                        params["planner"] = None if nones[name] == "default" else nones[name]
                        mech = make("dista_lp", upload="none", **params)
                        mech.fit(domain)
                    else:
                        mech = make(name, **params).fit(domain)
                    sec = time.perf_counter() - t0
                except Exception as err:  # reported in the table, never hidden
                    text = f"{type(err).__name__}: {str(err)[:60]}"
                    if "Time limit" in str(err):
                        text = f"> {args.cap:g} s (HiGHS time limit)"
                    cells[(name, eps)] = text
                    _log(size=size, eps=eps, name=name, error=str(err)[:200])
                    continue
                rep_eps = mech.report_guarantee.epsilon_per_km
                viol = verify(mech.matrix_, domain.dist_xx, rep_eps,
                              pairs=domain.constraint_pairs).violation_ratio  # fmt: skip
                losses = [_loss(mech, users[r]) for r in reps]
                cells[(name, eps)] = {
                    "loss": losses, "viol": [viol], "time": [sec], "attack": [],
                    "guarantee": str(mech.guarantee).split(";")[0],
                }  # fmt: skip
                if name in nones:  # no upload: the prior-only guess
                    pg = int(np.argmin(domain.prior @ domain.dist_xy))
                    cells[(name, eps)]["attack"] = [
                        float(domain.dist_xy[x, pg]) for r in reps for x in users[r]
                    ]
                _log(size=size, eps=eps, name=name, loss=losses, viol=viol, seconds=sec)
            for name, mode, extra in _variants(args):
                own = f"{name} (own block)"
                for r in reps:
                    try:
                        t0 = time.perf_counter()
                        params = _dista_params(mode, args, users[r], r) | extra
                        mech = make("dista_lp", epsilon=eps, **params)
                        mech.fit(domain, users=users[r])
                        sec = time.perf_counter() - t0
                    except Exception as err:
                        cells[(name, eps)] = f"{type(err).__name__}: {str(err)[:60]}"
                        _log(size=size, eps=eps, name=name, rep=r, error=str(err)[:200])
                        break
                    rep_eps = mech.report_guarantee.epsilon_per_km
                    viol = verify(mech.matrix_, domain.dist_xx, rep_eps,
                                  pairs=domain.constraint_pairs).violation_ratio  # fmt: skip
                    c = cells.setdefault((name, eps), {"loss": [], "viol": [], "time": [],
                                                       "attack": [], "guarantee": ""})  # fmt: skip
                    c["loss"].append(_loss(mech, users[r]))
                    c["viol"].append(viol)
                    c["time"].append(sec)
                    c["attack"].extend(mech.info_["upload_attack_error_km"])
                    c["guarantee"] = str(mech.guarantee).split(";")[0] + _audit_text(mech)
                    if "own_blocks" in mech.info_:
                        empty = {"loss": [], "viol": [], "time": [], "attack": [], "guarantee": ""}
                        o = cells.setdefault((own, eps), empty)
                        o["loss"].append(_own_loss(mech, users[r]))
                        o["viol"].append(float("nan"))
                        o["time"].append(sec)
                        o["guarantee"] = "the paper's per-neighbourhood guarantee (not over X)"
                    att = list(mech.info_["upload_attack_error_km"])
                    _log(size=size, eps=eps, name=name, rep=r, loss=c["loss"][-1], attack=att)
        _print_tables(size, args, cells)


def _print_tables(size: int, args, cells: dict) -> None:
    names = sorted({n for n, _ in cells}, key=_order)
    for title, key in (("utility loss (km, sum over 10 users)", "loss"),
                       ("violation ratio over all of X (report budget)", "viol"),
                       ("fit time (s)", "time")):  # fmt: skip
        print(f"\n### |X| = {size:,}: {title} ({args.reps} repetitions)\n")
        print("| mechanism | " + " | ".join(f"eps={e:g}" for e in args.eps) + " |")
        print("|---|" + "---|" * len(args.eps))
        for n in names:
            row = []
            for e in args.eps:
                c = cells.get((n, e), "n/a")
                row.append(c if isinstance(c, str) else _ci(c[key]))
            print(f"| {n} | " + " | ".join(row) + " |")
    print(f"\n### |X| = {size:,}: upload attack (km; median / 10th percentile over all users)"
          " and end-to-end guarantee\n")  # fmt: skip
    print("| mechanism | " + " | ".join(f"eps={e:g}" for e in args.eps) + " | guarantee (eps 7) |")
    print("|---|" + "---|" * (len(args.eps) + 1))
    for n in names:
        if "(own block)" in n:
            continue
        row = []
        for e in args.eps:
            c = cells.get((n, e), "n/a")
            if isinstance(c, str) or not c["attack"]:
                row.append("no upload" if not isinstance(c, str) else c)
            else:
                s = error_summary(c["attack"])
                row.append(f"{s['median_km']:.3f} / {s['p10_km']:.3f}")
        g = cells.get((n, 7.0))
        text = g["guarantee"] if isinstance(g, dict) else ""
        print(f"| {n} | " + " | ".join(row) + f" | {text} |")
    sys.stdout.flush()


def _order(name: str) -> tuple:
    base = list(BASELINES) + [f"dista_lp {m}" for m in MODES]
    key = name.replace(" (own block)", "").split(" (fidelity")[0].replace(" (blocks)", "")
    return (base.index(key) if key in base else 99, name)


def table_share(G, args) -> None:
    """Loss of ``location`` against the upload share eps_up / eps (0: ``none``)."""
    domain = Domain.from_network(G, n_points=args.share_size, seed=0)
    eps = args.share_eps
    rows = []
    for share in args.shares:
        losses, attacks = [], []
        for r in range(args.reps):
            users = np.sort(np.random.default_rng(r).choice(domain.n_x, args.users, replace=False))
            params = (
                {"upload": "none"} if share == 0 else {"upload": "location", "upload_share": share}
            )
            mech = make("dista_lp", epsilon=eps, seed=r, **params).fit(domain, users=users)
            losses.append(_loss(mech, users))
            attacks.extend(mech.info_["upload_attack_error_km"])
            _log(section="share", share=share, rep=r, loss=losses[-1])
        rows.append((share, losses, error_summary(attacks)))
    em = make("em", epsilon=eps).fit(domain)
    em_loss = [
        _loss(em, np.sort(np.random.default_rng(r).choice(domain.n_x, args.users, replace=False)))
        for r in range(args.reps)
    ]
    print(f"\n### Loss against the upload share (|X| = {domain.n_x:,}, eps = {eps:g}/km, "
          f"{args.reps} repetitions; EM {_ci(em_loss)})\n")  # fmt: skip
    print("| eps_up / eps | eps_up (1/km) | eps_pt (1/km) | loss (km, sum over users) "
          "| upload attack median / p10 (km) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for share, losses, att in rows:
        print(f"| {share:g} | {share * eps:.3g} | {(1 - share) * eps:.3g} | {_ci(losses)} "
              f"| {att['median_km']:.3f} / {att['p10_km']:.3f} |")  # fmt: skip
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.2))
        means = [np.mean(losses) for _, losses, _ in rows]
        ax.plot(args.shares, means, "o-", label="dista_lp location (share 0: none)")
        ax.axhline(np.mean(em_loss), color="grey", ls="--", label=f"EM at {eps:g}/km")
        ax.set_xlabel("upload share eps_up / eps")
        ax.set_ylabel("loss (km, sum over users)")
        ax.set_title(f"|X| = {domain.n_x:,}, eps = {eps:g}/km")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"\n![loss against the upload share]({args.plot.split('docs/', 1)[-1]})")


def table_paper_audit(G, args) -> None:
    """The paper's S = 100 audit of its release at several noise scales (mean over seeds)."""
    domain = Domain.from_network(G, n_points=args.share_size, seed=0)
    eps_t = 0.1 * args.share_eps  # the default split: 10 % of eps per upload block
    budgets = {t: eps_t for t in ("dx", "dy", "cy")}
    print(f"\n### The paper's audit of its own release (|X| = {domain.n_x:,}, eps_t = "
          f"{eps_t:g}/km per block, delta {args.delta:g}, S = 100, {args.reps} audits, "
          f"{args.audit_records} records)\n")  # fmt: skip
    print("| noise | b dx / dy / cy (km) | p_hat dx | p_hat dy | p_hat cy |")
    print("|---|---|---|---|---|")
    records = np.sort(np.random.default_rng(0).choice(domain.n_x, args.audit_records, False))
    for noise in args.paper_noise:
        cals = [
            calibrate_paper(
                domain,
                budgets,
                rank=5,
                n_neighbours=args.neighbours,
                tau_c=0.5,
                delta=args.delta,
                records=records,
                rng=np.random.default_rng(r),
                noise=noise,
            )
            for r in range(args.reps)
        ]
        scales = " / ".join(f"{cals[0].scales[t]:.3g}" for t in ("dx", "dy", "cy"))
        rates = [_ci([c.p_hat[t] for c in cals]) for t in ("dx", "dy", "cy")]
        print(f"| {noise} | {scales} | " + " | ".join(rates) + " |")


def table_quality(G, args) -> None:
    """Noise-free DistA-LP against the optimal LP on the same users (small N)."""
    print("\n### Server quality: noise-free DistA-LP / optimal LP (same users' loss)\n")
    print("| N | eps | optimal LP (km) | released over X / LP | own block / LP |")
    print("|---|---|---|---|---|")
    for size in args.quality_sizes:
        domain = Domain.from_network(G, n_points=size, seed=0)
        for eps in args.quality_eps:
            lp = make("lp", epsilon=eps).fit(domain)
            ratios, own, lp_loss = [], [], []
            for r in range(args.reps):
                users = np.sort(np.random.default_rng(r).choice(size, args.users, replace=False))
                mech = NoiseFreeDistALP(
                    eps, upload="strict", seed=r, n_neighbours=min(20, size),
                    delta=args.delta, confidence=args.confidence, audit_records=args.audit_records,
                ).fit(domain, users=users)  # fmt: skip
                base = _loss(lp, users)
                lp_loss.append(base)
                ratios.append(_loss(mech, users) / base)
                own.append(_own_loss(mech, users) / base)
                _log(section="quality", size=size, eps=eps, rep=r, ratio=ratios[-1], own=own[-1])
            print(f"| {size} | {eps:g} | {_ci(lp_loss)} | {_ci(ratios)} | {_ci(own)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", nargs="+", default=["tables", "share", "quality"])
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000, 6000])
    p.add_argument("--eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--neighbours", type=int, default=20)
    p.add_argument("--cap", type=float, default=60.0, help="COPT time limit (s)")
    p.add_argument("--copt-max", type=int, default=2000)
    p.add_argument("--delta", type=float, default=0.01)
    p.add_argument("--confidence", type=float, default=0.9)
    p.add_argument("--audit-records", type=int, default=50)
    p.add_argument("--skip-modes", nargs="*", default=[])
    p.add_argument("--baselines", nargs="*", default=list(BASELINES), choices=BASELINES)
    p.add_argument(
        "--none-planners",
        nargs="*",
        default=["default"],
        choices=list(NONE_ROWS),
        help="dista_lp none rows: its default planner (lp_medoids) and/or blocks",
    )
    p.add_argument(
        "--paper-noise",
        nargs="+",
        default=["lipschitz"],
        help="paper rows: 'lipschitz' (the paper's rule) and/or 'fidelity:f'",
    )
    p.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2, 0.3])
    p.add_argument("--share-size", type=int, default=2000)
    p.add_argument("--share-eps", type=float, default=7.0)
    p.add_argument("--plot", default="docs/img/dista_lp_upload_share.png")
    p.add_argument("--quality-sizes", type=int, nargs="+", default=[100])
    p.add_argument("--quality-eps", type=float, nargs="+", default=[4.0, 7.0, 10.0])
    args = p.parse_args()
    G = load_network("helsinki", network_type="walk")
    if "tables" in args.sections:
        table_mechanisms(G, args)
    if "share" in args.sections:
        table_share(G, args)
    if "paper-audit" in args.sections:
        table_paper_audit(G, args)
    if "quality" in args.sections:
        table_quality(G, args)


if __name__ == "__main__":
    main()
