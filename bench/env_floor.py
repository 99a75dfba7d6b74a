"""The floor of a fused engine: the default env tick's array work as one straight pass.

``bench/env_speed.py``'s single-agent env (5 users, 80 secrets, EM, the default attacks and
queries) asks 0.05x CartPole's steps per second. This script answers whether writing its tick
as one pass of numpy calls, without mdpsim's layers, could get there: :class:`SketchTick` does
the shapes and kinds of array operations of that tick (reports drawn from EM rows, exact filter
charges, range and KDE by PIE with 4 rounds drawn at once and the rng set back, kNN's short
path at k = users, bayes, the tracking filter, the upload guess, their scores and means, the
tick's row, a reward and an observation) with no validation, no edge cases, no per-user
columns, a trivial reset and its own draws. It is a lower bound for such an engine, not one:
nothing here is mdpsim's semantics or bytes.

``--compiled`` adds the same sketch compiled by numba (``bench/env_floor_kernel.py``; numba is
not a dependency of mdpsim, ``pip install numba`` first): what a compiled tick would buy.

One process, one run: CartPole, mdpsim's env and the sketches are timed in turn, best CPU time
of ``--repeats`` runs each. Usage: ``python bench/env_floor.py [--steps 10000] [--repeats 3]
[--compiled]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import time

import numpy as np
from env_speed import cartpole_seconds_per_step, single_seconds_per_step

from mdpsim.privacy.filters import add_up, sub_down  # the filters' exact arithmetic

U, N, C = 5, 80, 4  # users, secrets, PIE rounds


class World:
    """What a seed fixes, in the default tick's shapes: secrets, distances, the EM rows and
    their CDFs, the prior, a mobility kernel (float32, as the tracking filter's) and moves."""

    def __init__(self, seed: int) -> None:
        g = np.random.default_rng(seed)
        self.xy = g.uniform(0, 2000, (N, 2))
        d = np.sqrt(((self.xy[:, None] - self.xy[None]) ** 2).sum(-1)) / 1000
        self.dist = d
        k = np.exp(-3 * d)
        self.K = k / k.sum(1, keepdims=True)
        self.cdf = np.cumsum(self.K, 1)
        self.prior = np.full(N, 1 / N)
        self.prior_cdf = np.cumsum(self.prior)
        self.loss = self.dist  # d(x, y) at y = x's index
        t = np.exp(-10 * d)
        self.T32 = (t / t.sum(1, keepdims=True)).astype(np.float32)
        self.lik32 = np.vstack([self.K.T, np.ones(N)]).astype(np.float32)
        self.next_hop = g.integers(0, N, N)


class SketchTick:
    """One 20-tick episode of the sketch; :meth:`step` is one tick, user 0's action given."""

    def __init__(self, world: World, seed: int) -> None:
        self.w = world
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> None:
        self.pos = self.rng.integers(0, N, U)
        self.spent = np.zeros(U)
        self.cap = np.full(U, 10.0)
        self.halted = np.zeros(U, bool)
        self.belief = np.tile(self.w.prior.astype(np.float32), (U, 1))
        self.tick = 0
        self.log: list[dict] = []

    def charge(self, costs):
        """Charge every user ``costs`` exactly; a user past its capacity halts instead."""
        s = add_up(self.spent, costs)
        over = s > self.cap
        self.halted = self.halted | over
        self.spent = np.where(over, self.spent, s)

    def pie(self, phi, budgets, lo, hi, lam):
        """PIE's rounds drawn at once, settled on ``(lo, hi)``, the rng set back to the round
        that settled somebody: the last estimates, who settled either way, the spend."""
        parts = np.broadcast_to(budgets / C, (C, U))
        std = 1 / np.sqrt(2 * parts)
        state = self.rng.bit_generator.state
        noise = self.rng.standard_normal((C, U))
        terms = parts * (phi + noise * std)
        sums = np.add.accumulate(terms, axis=0)
        totals = np.add.accumulate(parts, axis=0)
        est = sums / totals
        h = lam / np.sqrt(2 * totals)
        out0, out1 = est - h > hi, est + h < lo
        settled = (out0 | out1).any(axis=1)
        r = int(settled.argmax()) if settled[:-1].any() else C - 1
        if r < C - 1:
            self.rng.bit_generator.state = state
            self.rng.standard_normal((r + 1) * U)
        spent = np.where(budgets > 0, totals[r], 0.0)
        return est[r], out0[r], out1[r], spent

    def step(self, action: int):
        """One tick: decisions, charges, reports, queries, attacks, row, reward, move."""
        w, rng = self.w, self.rng
        self.tick += 1
        remaining = np.where(self.halted, 0.0, sub_down(self.cap, self.spent))
        report = ~self.halted & (remaining >= 0.3)
        report[0] = action > 0
        self.charge(np.where(report, 0.3, 0.0))
        # reports from the mechanism's rows
        u = rng.random(U)
        out = np.where(report, (w.cdf[self.pos] < u[:, None]).sum(1), -1)
        loss = w.loss[self.pos[report], out[report]]
        # queries: range and KDE by PIE, kNN's short path
        row: dict[str, float] = {}
        locs = w.xy[self.pos] / 1000
        for kind in ("range", "kde"):
            point = w.xy[np.searchsorted(w.prior_cdf, rng.random())] / 1000
            budgets = np.where(self.halted, 0.0, 0.5)
            dist = np.sqrt(np.add.reduce((locs - point) ** 2, axis=1))
            phi = dist - 0.25 if kind == "range" else dist
            est, s0, s1, spent = self.pie(
                phi,
                budgets,
                0.0 if kind == "range" else -math.inf,
                0.0 if kind == "range" else 0.3,
                2.0,
            )
            active = ~(s0 | s1)
            if kind == "range":
                value = float(np.count_nonzero(est[active] < 0) + np.count_nonzero(s1))
                truth = float(np.count_nonzero(phi < 0))
            else:
                value = float(np.exp(-(est[active] ** 2) / 0.02).sum() / U)
                truth = float(np.add.reduce(np.exp(-(dist**2) / 0.02)) / U)
            row[f"{kind}_error"] = abs(value - truth)
            row[f"{kind}_privacy_saving"] = float(1 - spent.sum() / budgets.sum())
            self.charge(spent * 2)
        dist = np.sqrt(np.add.reduce((locs - w.xy[0] / 1000) ** 2, axis=1))
        row["knn_error"] = float((dist.sum() - np.sort(dist)[:U].sum()) / dist.sum())
        # attacks: bayes, the tracking filter, the upload guess; scored
        seen = out >= 0
        secrets = self.pos[seen]
        post = w.prior * w.K[:, out[seen]].T
        post /= np.add.reduce(post, axis=1)[:, None]
        pred = (w.T32.T @ self.belief.T).T
        pred *= w.lik32[out]
        pred /= np.add.reduce(pred, axis=1)[:, None]
        pred[pred < 1e-30] = 0.0
        self.belief = pred
        table = []
        for p in (post, pred[seen]):
            top = p.argmax(axis=1)
            logp = np.log(np.maximum(p, 1e-38))
            ent = np.einsum("ux,ux->u", p, logp) / -math.log(2)
            err = np.einsum("ux,ux->u", p, w.dist[secrets].astype(p.dtype)).astype(float)
            table.append(np.array([w.dist[secrets, top], err, (top == secrets).astype(float), ent]))
        guess = out[seen]
        table.append(
            np.array(
                [
                    w.dist[secrets, guess],
                    w.dist[secrets, guess],
                    (guess == secrets).astype(float),
                    np.full(len(guess), np.nan),
                ]
            )
        )
        for label, t in zip(("bayes", "tracking", "upload"), table, strict=True):
            means = (np.add.reduce(t, axis=1) / t.shape[1]).tolist()
            for metric, v in zip(
                ("guess_error_km", "error_km", "hit", "entropy_bits"), means, strict=True
            ):
                row[f"{label}_{metric}"] = v
        hit = np.zeros(U)
        hit[seen] = table[0][2]
        # the tick's row, the reward, the observation
        remaining = np.where(self.halted, 0.0, sub_down(self.cap, self.spent))
        row.update(
            tick=self.tick,
            n_reports=int(report.sum()),
            n_halted=int(self.halted.sum()),
            remaining_budget_mean=float(np.add.reduce(remaining) / U),
            remaining_budget_min=float(remaining.min()),
            utility_loss_km=float(loss.mean()) if len(loss) else math.nan,
        )
        self.log.append(row)
        reward = float(-(loss[0] if report[0] else 1.0) - hit[0])
        obs = np.array(
            [self.tick / 20, remaining[0] / 10, 0.03, 0.4, 0.2, 1.0, self.halted[0], report[0]],
            dtype=np.float32,
        )
        # users move
        move = rng.random(U) < 0.5
        self.pos = np.where(move, w.next_hop[self.pos], self.pos)
        return obs, reward, self.tick >= 20


def sketch_seconds_per_step(steps: int, repeats: int) -> float:
    """Best CPU seconds per step of :class:`SketchTick` (20-tick episodes)."""
    game = SketchTick(World(0), 1)
    return _best_episodes(lambda: game.step(1)[2], game.reset, steps, repeats)


def compiled_seconds_per_step(steps: int, repeats: int) -> float:
    """Best CPU seconds per step of the numba sketch (compiled before the timing)."""
    from env_floor_kernel import CompiledTick

    game = CompiledTick(World(0), 1)
    game.step(1)  # compile
    game.reset()
    return _best_episodes(lambda: game.step(1), game.reset, steps, repeats)


def _best_episodes(step, reset, steps: int, repeats: int) -> float:
    """Best CPU seconds per call of ``step()`` (True ends an episode: ``reset()``)."""
    best = math.inf
    with np.errstate(all="ignore"):  # halted users have zero budgets (no edge cases here)
        for _ in range(repeats):
            start = time.process_time()
            for _ in range(steps):
                if step():
                    reset()
            best = min(best, (time.process_time() - start) / steps)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row (best)")
    parser.add_argument("--compiled", action="store_true", help="add the numba sketch's row")
    args = parser.parse_args()
    if args.compiled and importlib.util.find_spec("numba") is None:
        parser.error("--compiled needs numba, which mdpsim does not install: pip install numba")
    print(f"load average {os.getloadavg()[0]:.2f} at start\n")
    cart = cartpole_seconds_per_step(args.steps, args.repeats)[0]
    env = single_seconds_per_step(5, 80, max(args.steps // 10, 100), args.repeats)[0]
    sketch = sketch_seconds_per_step(args.steps, args.repeats)
    rows = [("CartPole-v1", cart), ("mdpsim single-agent env", env),
            ("fused sketch (SketchTick)", sketch)]  # fmt: skip
    if args.compiled:
        rows.append(
            ("compiled sketch (numba)", compiled_seconds_per_step(args.steps, args.repeats))
        )
    print("| 5 users, 80 points | CPU us per step | steps per CPU s | ratio to CartPole |")
    print("|---|---:|---:|---:|")
    for label, s in rows:
        print(f"| {label} | {s * 1e6:,.1f} | {1 / s:,.0f} | {cart / s:.4f} |")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
