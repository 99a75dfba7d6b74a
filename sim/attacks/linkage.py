"""Re-identification: link the pseudonyms of a later period to those of an earlier one.

The run is split at ``split_tick`` (default: the tick where most slots changed pseudonym,
else the middle). A period-A pseudonym's profile is its visit density (the sum of its reports'
posteriors, :class:`~mdpsim.attacks.places.VisitDensity`), blurred by a Gaussian of
``bandwidth_km`` over the road distance (a trip is rarely walked twice on the same secrets)
and mixed with the prior (weight ``prior_weight``). A period-B pseudonym's reports are scored
under each profile as independent draws,
``log Pr[reports_b | a] = sum_y n_b(y) log sum_x profile_a(x) Z[x, y]``, grouped by the release
each report came from; the link posterior is their softmax over the A pseudonyms (a
uniform prior), and the links are the one-to-one assignment of largest total log-likelihood
(``one_to_one``, Hungarian) or each row's best. Pseudonym values are only labels: two periods'
labels are never compared.

Success is the share of B pseudonyms linked to their own A pseudonym, against the chance rate
``1 / |A|``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import logsumexp

from mdpsim._core.validation import check_probability, check_scalar
from mdpsim.attacks.base import (
    Attack,
    LinkEstimate,
    Observation,
    Release,
    Scores,
    Truth,
    entropy_bits,
    register,
    register_scorer,
)
from mdpsim.attacks.places import VisitDensity

NAME = "linkage"


@register(NAME)
class Linkage(Attack):
    """Link pseudonyms across two periods by their visit profiles."""

    def __init__(
        self,
        *,
        split_tick: int = 0,
        prior_weight: float = 0.1,
        bandwidth_km: float = 0.0,
        one_to_one: bool = True,
    ) -> None:
        self.split_tick = check_scalar(split_tick, "split_tick", kind=int, min=0, owner=NAME)
        self.prior_weight = check_probability(prior_weight, "prior_weight", owner=NAME)
        self.bandwidth_km = check_scalar(
            bandwidth_km, "bandwidth_km", min=0, finite=False, owner=NAME, unit="km"
        )
        self.one_to_one = check_scalar(one_to_one, "one_to_one", kind=bool, owner=NAME)

    def start(self, context) -> None:
        """Keep the ticks' reports; the split is decided at the end."""
        super().start(context)
        self.obs_: list[Observation] = []
        self.release_of_: list[int] = []
        self.releases_: list[Release] = []

    def release(self, release: Release) -> None:
        """Remember the mechanism the next reports come from."""
        self.releases_.append(release)

    def observe(self, obs: Observation) -> list:
        """Store; links come at the end."""
        if not self.releases_:
            raise RuntimeError("linkage: observe() before any release()")
        self.obs_.append(obs)
        self.release_of_.append(len(self.releases_) - 1)
        return []

    def _split(self) -> int:
        if self.split_tick:
            return self.split_tick
        changed = [
            int(np.sum(b.pseudonyms != a.pseudonyms))
            for a, b in zip(self.obs_, self.obs_[1:], strict=False)
        ]
        if changed and max(changed) > 0:
            return self.obs_[int(np.argmax(changed)) + 1].tick
        return self.obs_[len(self.obs_) // 2].tick

    def finish(self) -> list[LinkEstimate]:
        """Profiles of period A, likelihoods of period B's reports, links."""
        domain = self.context.domain
        split = self._split()
        ticks = [o.tick for o in self.obs_]
        density = VisitDensity(domain.n_x)
        shown = -1
        for o, r in zip(self.obs_, self.release_of_, strict=True):
            if o.tick >= split:
                break
            if r != shown:
                density.release(self.releases_[r])
                shown = r
            density.add(o)
        labels_a, dens = density.matrix()
        # candidates in a random order: the order slots arrive in must not break ties
        order = np.random.default_rng(self.context.seed).permutation(len(labels_a))
        labels_a, dens = labels_a[order], dens[order]
        if self.bandwidth_km > 0:  # visits blur over nearby secrets (a Gaussian kernel)
            blur = np.exp(-0.5 * (domain.dist_xx / self.bandwidth_km) ** 2)
            dens = dens @ (blur / blur.sum(axis=1, keepdims=True))
        total = dens.sum(axis=1, keepdims=True)
        profile = (1 - self.prior_weight) * dens / np.where(total > 0, total, 1.0)
        profile += self.prior_weight * domain.prior
        labels_b, loglik = self._period_b(split, profile)
        if len(labels_a) == 0 or len(labels_b) == 0:
            return []
        post = np.exp(loglik - logsumexp(loglik, axis=1, keepdims=True))
        if self.one_to_one:
            rows, cols = linear_sum_assignment(-loglik)
            linked = np.full(len(labels_b), -1, dtype=np.int64)
            linked[rows] = labels_a[cols]
        else:
            linked = labels_a[loglik.argmax(axis=1)]
        return [
            LinkEstimate(
                period_a=(ticks[0], split - 1),
                period_b=(split, ticks[-1]),
                pseudonyms_a=labels_a,
                pseudonyms_b=labels_b,
                linked=linked,
                posterior=post,
            )
        ]

    def _period_b(self, split: int, profile: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Labels of period B and ``(B, A)`` log-likelihoods of their reports per profile."""
        n_y = self.releases_[0].matrix.shape[1]
        index: dict[int, int] = {}
        counts: dict[int, np.ndarray] = {}  # release -> (B, K) report counts
        for o, r in zip(self.obs_, self.release_of_, strict=True):
            if o.tick < split:
                continue
            users = o.reporting
            for p in o.pseudonyms[users].tolist():
                index.setdefault(p, len(index))
            rows = np.array([index[p] for p in o.pseudonyms[users].tolist()], dtype=np.int64)
            c = counts.setdefault(r, np.zeros((0, n_y)))
            if len(c) < len(index):
                c = np.vstack([c, np.zeros((len(index) - len(c), n_y))])
            np.add.at(c, (rows, o.outputs[users]), 1.0)
            counts[r] = c
        labels = np.array(list(index), dtype=np.int64)
        loglik = np.zeros((len(labels), len(profile)))
        for r, c in counts.items():
            release = self.releases_[r]
            lik = release.matrix  # (N, K)
            with np.errstate(divide="ignore"):
                log_py = np.log(profile @ lik)  # (A, K)
            c = np.vstack([c, np.zeros((len(labels) - len(c), n_y))])
            used = c.sum(axis=0) > 0
            # 0 * log 0 = 0: outputs a B pseudonym never reported do not count
            loglik += c[:, used] @ np.where(np.isfinite(log_py[:, used]), log_py[:, used], -1e300).T
        return labels, loglik


def score_links(est: LinkEstimate, truth: Truth, domain=None) -> Scores:
    """Per B pseudonym: whether its link is right (hit), the chance rate, link entropy."""
    users_b = truth.users_of(est.pseudonyms_b, est.period_b)
    users_linked = truth.users_of(est.linked, est.period_a)
    n = len(users_b)
    hit = ((users_linked == users_b) & (users_b >= 0)).astype(float)
    nan = np.full(n, np.nan)
    values = {
        "hit": hit,
        "chance": np.full(n, 1.0 / len(est.pseudonyms_a)),
        "entropy_bits": entropy_bits(est.posterior),
        "error_km": nan,
        "guess_error_km": nan,
        "leakage_per_km": nan,
    }
    return Scores(tick=None, users=users_b, values=values)


register_scorer(LinkEstimate)(score_links)
