"""Re-identification from a few known points (de Montjoye et al., Sci. Rep. 2013).

An adversary knows ``k`` true (place, hour) points of a person (seen in a café, a geotagged
photo) and looks for the pseudonym whose reports match them. The attack keeps every report
(the output and the release it came from) per pseudonym and tick; the estimate
(:class:`UniquenessEstimate`) is the adversary's linker. The scorer plays the side channel:
with ``seed`` it draws, for each of up to ``targets`` persons, 4 distinct ticks of the person's
true trace; a point is (the true secret, the hour of the run that tick falls in), and the first
``k`` points (k = 1..4) are the adversary's knowledge.

A pseudonym's match to a point ``(x, h)`` is its reports' posterior mass within ``match_km`` of
``x`` summed over the ticks of hour ``h`` (the spatial resolution is ``match_km``, the temporal
one an hour of the clock). A pseudonym matches ``k`` points by the product of its ``k`` matches
(every point must match; a floor of :data:`FLOOR` keeps a miss finite), and the person is linked
to the best pseudonym (ties broken in a random order drawn from ``seed``). Scored per person:
``linked_k1`` .. ``linked_k4`` (linked to one of its own pseudonyms), ``hit`` = ``linked_k4``,
and ``chance`` = 1 / the number of pseudonyms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mdpsim._core.clock import SECONDS_PER_HOUR, seconds_of_tick
from mdpsim._core.validation import check_positive_int, check_scalar
from mdpsim.attacks.base import (
    Attack,
    Observation,
    Release,
    Scores,
    Truth,
    register,
    register_scorer,
)
from mdpsim.attacks.bayes import posterior_table

NAME = "uniqueness"
#: The numbers of known points scored.
KS = (1, 2, 3, 4)
#: The smallest match a point counts with (a pseudonym far from one point is not ruled out
#: by a zero, only pushed far down).
FLOOR = 1e-6


@dataclass(frozen=True, eq=False)
class UniquenessEstimate:
    """The adversary's linker: every pseudonym's reports and what they say about each place.

    ``outputs`` is ``(T, P)`` (-1: no report) over ``ticks`` and ``pseudonyms``, ``release_of``
    the release of each tick, ``near_mass[r]`` the ``(K + 1, N)`` posterior mass within
    ``match_km`` of each secret per output of release r (its last row, zeros, is "no report").
    """

    ticks: np.ndarray
    hour_of: np.ndarray
    pseudonyms: np.ndarray
    outputs: np.ndarray
    release_of: np.ndarray
    near_mass: list[np.ndarray]
    match_km: float
    targets: int
    seed: int

    def match(self, places: np.ndarray, hours: np.ndarray) -> np.ndarray:
        """``(Q, P)``: each pseudonym's posterior mass within ``match_km`` of ``places[q]``
        over the ticks of hour ``hours[q]``."""
        out = np.zeros((len(places), len(self.pseudonyms)))
        for h in np.unique(hours).tolist():
            rows = np.flatnonzero(hours == h)
            xs = places[rows]
            for t in np.flatnonzero(self.hour_of == h).tolist():
                table = self.near_mass[self.release_of[t]][:, xs]  # (K + 1, n)
                out[rows] += table[self.outputs[t]].T
        return out

    def link(self, places: np.ndarray, hours: np.ndarray, order: np.ndarray) -> np.ndarray:
        """``(Q, len(KS))`` column indices (into ``pseudonyms``) of the pseudonym each person's
        first k points link to; ``places`` and ``hours`` are ``(Q, max(KS))``; ``order`` a
        permutation of the columns that breaks ties."""
        q, k = places.shape
        logm = np.log(np.maximum(self.match(places.ravel(), hours.ravel()), FLOOR))
        cum = np.cumsum(logm.reshape(q, k, -1)[:, :, order], axis=1)  # (Q, k, P)
        best = cum[:, [n - 1 for n in KS]].argmax(axis=2)  # first best in the random order
        return order[best]


@register(NAME)
class Uniqueness(Attack):
    """Link a person known by k (place, hour) points to a pseudonym; k = 1..4."""

    def __init__(self, *, match_km: float = 0.2, targets: int = 500) -> None:
        km: dict[str, Any] = {"min": 0, "include_boundaries": "neither", "finite": False}
        self.match_km = check_scalar(match_km, "match_km", owner=NAME, unit="km", **km)
        self.targets = check_positive_int(targets, "targets", owner=NAME)

    def start(self, context) -> None:
        """Keep the ticks' reports."""
        super().start(context)
        self.posts_: list[np.ndarray] = []
        self.ticks_: list[int] = []
        self.outputs_: list[np.ndarray] = []
        self.pseudonyms_: list[np.ndarray] = []
        self.release_of_: list[int] = []
        self._last_release: tuple[np.ndarray, np.ndarray] | None = None

    def release(self, release: Release) -> None:
        """Tabulate the new mechanism's single-report posteriors ``(K, N)`` (a release whose
        matrix and prior are the previous one's shares its table: a long run that regenerates
        a data-independent mechanism keeps one)."""
        matrix, prior = release.matrix, release.mechanism.domain_.prior
        last = self._last_release
        if last is not None and np.array_equal(last[0], matrix) and np.array_equal(last[1], prior):
            self.posts_.append(self.posts_[-1])
            return
        self._last_release = (matrix, prior)
        self.posts_.append(np.ascontiguousarray(posterior_table(matrix, prior).T))

    def observe(self, obs: Observation) -> list:
        """Store; the linker comes at the end."""
        if not self.posts_:
            raise RuntimeError(f"{NAME}: observe() before any release()")
        last = self.pseudonyms_[-1] if self.pseudonyms_ else None
        if last is None or not np.array_equal(last, obs.pseudonyms):  # else share the array
            last = np.array(obs.pseudonyms, dtype=np.int64)
        self.pseudonyms_.append(last)
        self.ticks_.append(obs.tick)
        self.outputs_.append(np.asarray(obs.outputs, dtype=np.int32))
        self.release_of_.append(len(self.posts_) - 1)
        return []

    def finish(self) -> list[Any]:
        """The linker over every pseudonym's reports (a :class:`UniquenessEstimate`, scored by
        :func:`score_uniqueness`)."""
        if not self.ticks_:
            return []
        ctx = self.context
        labels = np.unique(np.concatenate(self.pseudonyms_))
        outputs = np.full((len(self.ticks_), len(labels)), -1, dtype=np.int32)
        for t, (out, pseud) in enumerate(zip(self.outputs_, self.pseudonyms_, strict=True)):
            outputs[t, np.searchsorted(labels, pseud)] = out
        near = (ctx.domain.dist_xx <= self.match_km).astype(float)  # (N, N), symmetric
        near_mass: list[np.ndarray] = [np.zeros((0, 0))] * len(self.posts_)
        done: dict[int, np.ndarray] = {}  # by the table's identity: shared tables once
        for r in sorted(set(self.release_of_)):
            post = self.posts_[r]
            if id(post) not in done:
                table = post @ near  # (K, N): mass within match_km of each secret
                done[id(post)] = np.vstack([table, np.zeros((1, table.shape[1]))])
            near_mass[r] = done[id(post)]
        ticks = np.array(self.ticks_, dtype=np.int64)
        seconds = seconds_of_tick(ticks, ctx.tick_seconds, ctx.start_hour)
        return [
            UniquenessEstimate(
                ticks=ticks,
                hour_of=(seconds // SECONDS_PER_HOUR).astype(np.int64),
                pseudonyms=labels,
                outputs=outputs,
                release_of=np.array(self.release_of_, dtype=np.int64),
                near_mass=near_mass,
                match_km=self.match_km,
                targets=self.targets,
                seed=ctx.seed,
            )
        ]


def known_points(
    trace: np.ndarray, persons: np.ndarray, rng: np.random.Generator, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per person (a column of the ``(T, U)`` trace), ``k`` distinct ticks drawn at random
    (``T < k``: with repeats) and the true secret at each: ``(ticks, places)``, ``(Q, k)``."""
    n_ticks = trace.shape[0]
    if n_ticks >= k:
        ticks = np.argsort(rng.random((len(persons), n_ticks)), axis=1)[:, :k]
    else:
        ticks = rng.integers(0, n_ticks, size=(len(persons), k))
    return ticks, trace[ticks, persons[:, None]]


def score_uniqueness(est: UniquenessEstimate, truth: Truth, domain=None) -> Scores:
    """Per target person: linked correctly with k = 1..4 known points; the chance rate."""
    rng = np.random.default_rng(est.seed)
    trace = truth.trace()  # (T, U), rows in tick order, as est.ticks
    pseud = np.stack([truth.pseudonyms[t] for t in sorted(truth.positions)])
    persons = np.sort(rng.permutation(trace.shape[1])[: est.targets])
    rows, places = known_points(trace, persons, rng, max(KS))
    order = rng.permutation(len(est.pseudonyms))
    values: dict[str, np.ndarray] = {f"linked_k{k}": np.zeros(len(persons)) for k in KS}
    for s in range(0, len(persons), 128):  # bounded memory: (128 * 4, P) matches at a time
        part = slice(s, s + 128)
        linked = est.link(places[part], est.hour_of[rows[part]], order)
        for q, u in enumerate(persons[part].tolist()):
            own = est.pseudonyms[linked[q]]
            for j, k in enumerate(KS):
                values[f"linked_k{k}"][s + q] = float(np.any(pseud[:, u] == own[j]))
    n = len(persons)
    values["hit"] = values[f"linked_k{max(KS)}"].copy()
    values["chance"] = np.full(n, 1.0 / max(len(est.pseudonyms), 1))
    for name in ("error_km", "guess_error_km", "entropy_bits", "leakage_per_km"):
        values[name] = np.full(n, np.nan)
    return Scores(tick=None, users=persons.astype(np.int64), values=values)


register_scorer(UniquenessEstimate)(score_uniqueness)
