"""The mechanism contract (scikit-learn style) and the registry.

A mechanism stores its parameters in ``__init__`` (validated there; ``epsilon`` first, every
other parameter keyword-only, each kept under its own name so ``get_params`` reads them from
the signature), does its work in ``fit(domain)`` without changing them, and keeps what it
learned in attributes ending in ``_``:

* ``matrix_``: the N x K row-stochastic float64 matrix ``Z[i, k] = Pr[y_k | x_i]``;
* ``domain_``: the domain it was fitted on (``matrix_`` has one row per secret of it, and
  index ``i`` in ``sample_many`` is its secret ``i``);
* ``info_``: solver status, timings (seconds) and sizes.

Subclasses implement ``_fit(domain) -> (matrix, info)``. A mechanism built from its users'
uploads says so in ``takes_uploads`` (a property of the configured instance: ``dista_lp`` takes
uploads unless ``upload="none"``) and implements ``_fit_users(domain, users, rng) ->
(matrix, info, uploads)``: when ``takes_uploads``, ``fit(domain, users=..., rng=...)`` requires
``users``, the secret index of each user taking part (several users may share a secret), and
keeps what each user sent in ``uploads_`` (:class:`Uploads`); otherwise ``fit`` runs ``_fit``,
ignores ``users`` and ``rng`` and ``uploads_`` is ``None``. No code outside a mechanism's
folder needs its name: the simulation, the attack harness and the env read ``takes_uploads``
and ``uploads_``.

The base class checks the matrix
(``domain.n_x x domain.n_y``, finite, non-negative, rows summing to 1 within 1e-9, then
renormalised) and times the fit.

Guarantees are types (mdpsim.privacy.guarantees: ``PureMDP``, ``PMDP``, ``Composition``).
Fail closed: a report is a draw from ``matrix_``, so ``fit`` certifies the released matrix
against ``report_guarantee`` with :func:`~mdpsim.privacy.guarantees.certify` (the exact
verifier, sim/privacy/verifier.py, against ``domain_.dist_xx``; road metric: only
``constraint_pairs``, exact by chaining; lp norms: the full check) and raises
:class:`PrivacyViolation` if it is not ``epsilon_per_km * (1 + 1e-9)``-mDP, or if the report
guarantee is one no matrix can be certified against (any PmDP part);
``info_["verified_epsilon"]`` keeps the certified value.

Nothing is released that was not drawn from the certified matrix: ``fit``, ``sample``,
``sample_many`` and ``expected_loss`` are mdpsim's, and a subclass that defines one of them is
refused when the class is created (one ``TypeError`` line naming the method). The players
(server, env, ``mdpsim attack``, batch), ``mdpsim audit`` and ``check_mechanism`` fit through
:func:`fit_release`, which hands the certified matrix, a local value never read back from the
instance, to a :class:`~mdpsim.privacy.release.CertifiedRelease` the caller holds (its own
read-only copy and exact sampler), and draw every report from it: nothing the instance can
reach (an attribute, a property, a descriptor, ``__getattribute__``, a ``sample`` of its own,
``matrix_`` changed after the fit) changes what is drawn. The server also refuses a mechanism
whose ``matrix_`` was replaced after the fit. ``sample`` / ``sample_many`` (:func:`draw_reports`)
are conveniences for scripts over the instance's attributes; no player draws through them.
A plug-in's mistakes (its ``_fit`` raising, a wrongly
shaped or non-stochastic matrix, a matrix that fails the exact check) are one
:class:`~mdpsim.errors.PluginError` line naming it (mdpsim._core.component).

Absurd but finite budgets are refused by ``fit`` before any work: ``epsilon`` times the
domain's diameter must lie in the class's ``eps_diameter_range`` (default
:data:`EPS_DIAMETER_RANGE`), the range in which an eps-mDP matrix can be computed and certified
exactly in float64 (docs/reliability.md, "Absurd numbers"); one :class:`InputError` line names
``epsilon`` and the usable range on that domain.

Conformance tests (tests/mechanisms/test_mechanism_conformance.py) run every registered mechanism on
40-point domains. A mechanism with required extra parameters or a heavy fit declares the
small-instance parameters to use there as a class attribute, e.g.
``conformance_params: ClassVar[dict] = {"n_anchors": 8}`` (``epsilon`` is added by the test).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from mdpsim._core.component import Component, ReturnCheck, contract_error, describe, is_plugin
from mdpsim._core.registry import Registry
from mdpsim._core.validation import check_epsilon
from mdpsim.errors import InputError, plain
from mdpsim.privacy.guarantees import (
    PMDP,
    Composition,
    Guarantee,
    NoGuarantee,
    PureMDP,
    certify,
    check_guarantee,
)
from mdpsim.privacy.release import CertifiedRelease
from mdpsim.privacy.sampling import RowSampler
from mdpsim.privacy.verifier import ROW_SUM_TOL, PluginPrivacyViolation, PrivacyViolation

_MECHANISMS: Registry[Mechanism] = Registry("mechanism")
#: Class decorator: make a mechanism available as ``make(name, ...)``.
register = _MECHANISMS.register
#: Names of all registered mechanisms, in registration order.
available = _MECHANISMS.available
#: Construct a registered mechanism by name, e.g. ``make("lp", epsilon=4.0)``; a wrong name
#: or parameter is one :class:`~mdpsim.errors.InputError` line.
make = _MECHANISMS.make
#: The class registered under a name, e.g. ``mechanism_class("em").conformance_params``.
mechanism_class = _MECHANISMS.get


@dataclass(frozen=True)
class Uploads:
    """What each user sent at one fit: ``slot[u]`` indexes user u's upload in the mechanism's
    own record (-1: nothing)."""

    slot: np.ndarray  # (U,) int64, one entry per user given to fit


#: ``(floor, ceiling)`` of ``epsilon x the domain's diameter`` (km) a fit accepts by default.
#: Ceiling: a column of an eps-mDP matrix is positive in every row or in none, and its ratios
#: may reach ``e^(eps x diameter)``; past e^700 the small side falls below float64's smallest
#: normal number (e^-708), keeps too few digits for the exact check's relative tolerance 1e-9,
#: or rounds to 0 (an infinite loss). Floor: below 1e-3 every row is within a factor e^0.001 of
#: every other (any attacker's posterior stays within 0.1 % of its prior: nothing is released),
#: and the solvers' tolerances (1e-9) are no longer small against what the check certifies.
EPS_DIAMETER_RANGE = (1e-3, 700.0)


def _not_a_guarantee(value: Any, *, types: tuple[type, ...]) -> str | None:
    """What is wrong with a guarantee property's value (None: nothing)."""
    if isinstance(value, types):
        return None
    names = ", ".join(t.__name__ for t in types if t is not type(None))
    none = " or None" if type(None) in types else ""
    return f"{value!r}, not a guarantee ({names}{none}; mdpsim.privacy.guarantees)"


_GUARANTEES = (PureMDP, PMDP, Composition, NoGuarantee)


#: Methods only mdpsim defines: they fit, certify, sample and price the released matrix.
FINAL_METHODS = ("fit", "sample", "sample_many", "expected_loss", "matrix_")


class Mechanism(Component):
    """Base class of all location-privacy mechanisms over a finite domain."""

    name: ClassVar[str] = "?"
    component_kind: ClassVar[str] = "mechanism"
    # What a fit sets (module docstring; ``_publish``): annotations only, no class attributes.
    matrix_: np.ndarray
    domain_: Any
    uploads_: Uploads | None
    info_: dict
    # Extra constructor parameters for the 40-point conformance test (see module docstring).
    conformance_params: ClassVar[dict] = {}
    # epsilon x diameter a fit accepts (module docstring); tighter numerics narrow it.
    eps_diameter_range: ClassVar[tuple[float, float]] = EPS_DIAMETER_RANGE
    # A plug-in's guarantee properties must return guarantees (one line naming it otherwise).
    return_checks: ClassVar[dict[str, ReturnCheck]] = {
        "guarantee": lambda g: _not_a_guarantee(g, types=_GUARANTEES),
        "report_guarantee": lambda g: _not_a_guarantee(g, types=_GUARANTEES),
        "upload_guarantee": lambda g: _not_a_guarantee(g, types=(PureMDP, PMDP, type(None))),
    }

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    def __init_subclass__(cls, **kwargs) -> None:
        for method in FINAL_METHODS:
            if method in vars(cls):
                raise TypeError(
                    f"{cls.__qualname__} defines {method}, which only mdpsim may: every report "
                    "is drawn by mdpsim from the certified matrix_; implement _fit instead "
                    "(docs/plugins.md)"
                )
        super().__init_subclass__(**kwargs)
        if not (_implements(cls, "_fit") or _implements(cls, "_fit_users")):
            raise TypeError(
                f"{cls.__name__} must implement _fit (or _fit_users, if it takes uploads)"
            )

    # --------------------------------------------------------------- the contract
    def check_domain_size(self, n_x: int, n_y: int) -> None:
        """Raise :class:`InputError` if no domain of ``n_x`` secrets and ``n_y`` outputs can be
        fitted with these parameters (by the sizes alone). ``fit`` calls it first, and a
        scenario at load, so a bad combination is refused before anything runs."""

    @property
    def takes_uploads(self) -> bool:
        """Whether this mechanism, as configured, is fitted on its users' uploads (``fit``
        then runs ``_fit_users`` on the users given; False: ``_fit``, no users)."""
        return False

    def check_epsilon_range(self, domain) -> None:
        """Raise one :class:`InputError` line if ``epsilon`` x ``domain``'s diameter lies
        outside ``eps_diameter_range`` (a one-place domain, diameter 0, takes any epsilon; a
        matrix with no mDP claim, no ``epsilon``, is not checked)."""
        epsilon = getattr(self, "epsilon", None)
        diameter_km = float(np.max(domain.dist_xx)) if domain.n_x > 1 else 0.0
        if epsilon is None or diameter_km == 0:
            return
        low, high = self.eps_diameter_range
        product = epsilon * diameter_km
        if not low <= product <= high:
            who = describe(type(self)) if is_plugin(type(self)) else self.name
            shown = f"{product:.3g}" if np.isfinite(product) else "inf (overflow)"
            raise InputError(
                f"{who}: epsilon={epsilon:g} per km times the domain's diameter "
                f"{diameter_km:.3g} km is {shown}, outside [{low:g}, {high:g}], the range "
                "where its matrix can be computed and certified exactly "
                "(docs/reliability.md); on this domain use epsilon in "
                f"[{low / diameter_km:.3g}, {high / diameter_km:.3g}] per km"
            )

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        """Build the N x K matrix for ``domain``; return it with an info dict."""
        raise NotImplementedError

    def _fit_users(
        self, domain, users: np.ndarray, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, dict, Uploads]:
        """``takes_uploads`` mechanisms: the matrix, info and each user's upload slot."""
        raise NotImplementedError

    @property
    def guarantee(self) -> Guarantee:
        """The end-to-end guarantee: pure eps-mDP unless a subclass says otherwise."""
        return PureMDP(self.epsilon)

    @property
    def report_guarantee(self) -> Guarantee:
        """What one report drawn from ``matrix_`` costs its user (charged per report)."""
        return self.guarantee

    @property
    def upload_guarantee(self) -> PureMDP | PMDP | None:
        """What each user's upload costs, charged once per fit (``None``: no upload).

        ``guarantee`` is the sequential composition of this and ``report_guarantee``.
        """
        return None

    def fit(
        self,
        domain,
        *,
        users: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> Self:
        """Build the mechanism for ``domain`` and return ``self``.

        ``users``: the (U,) secret indices of the users taking part, required when
        ``takes_uploads`` (ignored otherwise, like ``rng``, the fit's randomness).
        """
        fitted = _fit_certified(self, domain, users=users, rng=rng)
        _publish(self, fitted)
        return self

    def sample(self, i: int, rng: np.random.Generator) -> int:
        """Index of one output drawn for secret ``i``."""
        return int(self.sample_many(np.array([i]), rng)[0])

    def sample_many(self, indices, rng: np.random.Generator) -> np.ndarray:
        """Output indices drawn independently for each secret index in ``indices``."""
        return draw_reports(self, indices, rng)

    def _certified_matrix(self) -> np.ndarray:
        """The matrix ``fit`` certified; refused if ``matrix_`` no longer is that matrix."""
        matrix = self._fitted_matrix()
        certified = getattr(self, "_Mechanism__certified", None)
        if certified is None or matrix is not certified:
            raise contract_error(
                type(self), "matrix_ is not the matrix fit certified (was it replaced?)"
            )
        return certified

    def expected_loss(self, cost: np.ndarray | None = None) -> float:
        """``sum_i pi_i sum_k Z[i,k] c(x_i, y_k)`` in km (``c = dist_xy`` by default)."""
        matrix = self._fitted_matrix()
        c = self.domain_.dist_xy if cost is None else np.asarray(cost, dtype=float)
        return float(self.domain_.prior @ np.einsum("ik,ik->i", matrix, c))

    def _fitted_matrix(self) -> np.ndarray:
        try:
            return self.matrix_
        except AttributeError:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(domain)") from None


def draw_reports(mechanism: Mechanism, indices, rng: np.random.Generator) -> np.ndarray:
    """One report (output index) per secret index in ``indices``, drawn by mdpsim's exact
    sampler from the matrix ``mechanism.fit`` certified, as the instance's attributes give it
    (``sample_many``'s convenience for scripts). The players draw from the
    :class:`~mdpsim.privacy.release.CertifiedRelease` :func:`fit_release` returned instead,
    which nothing the instance does can change."""
    matrix = Mechanism._certified_matrix(mechanism)
    idx = np.asarray(indices, dtype=np.int64)
    if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= len(matrix))):
        raise InputError(f"secret indices must lie in [0, {len(matrix)})")
    sampler = getattr(mechanism, "_Mechanism__sampler", None)
    if sampler is None or sampler.matrix is not matrix:  # one per certified matrix
        sampler = RowSampler(matrix)
        mechanism._Mechanism__sampler = sampler  # type: ignore[attr-defined]
    return sampler.draw(idx, rng)


def fit_release(
    mechanism: Mechanism,
    domain,
    *,
    users: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> CertifiedRelease:
    """Fit ``mechanism`` on ``domain`` (as ``Mechanism.fit``, which it does not look up on the
    instance) and return the release of the matrix the exact check certified, built from that
    local matrix before the instance gets its attributes: every report of the players is drawn
    from it (docs/plugins.md)."""
    if not issubclass(type(mechanism), Mechanism):
        raise TypeError(f"{type(mechanism).__name__} is not a Mechanism")
    fitted = _fit_certified(mechanism, domain, users=users, rng=rng)
    release = CertifiedRelease(
        fitted.matrix,
        report_guarantee=fitted.report_guarantee,
        verified_epsilon=fitted.verified_epsilon,
    )
    _publish(mechanism, fitted)
    return release


@dataclass(frozen=True)
class _Fitted:
    """What a fit found, before the instance gets it."""

    matrix: np.ndarray
    domain: Any
    info: dict
    uploads: Uploads | None
    report_guarantee: Guarantee
    verified_epsilon: float | None


def _fit_certified(
    mech: Mechanism, domain, *, users: np.ndarray | None, rng: np.random.Generator | None
) -> _Fitted:
    """Run the plug-in's fit hook, check its matrix (a fresh copy no code of the instance
    holds) and certify it; nothing is set on the instance yet."""
    cls = type(mech)
    who = cls.__name__
    start = time.perf_counter()
    uploads: Uploads | None = None
    mech.check_domain_size(domain.n_x, domain.n_y)
    mech.check_epsilon_range(domain)
    takes_uploads = mech.takes_uploads
    hook = "_fit_users" if takes_uploads else "_fit"
    if not _implements(cls, hook):
        raise contract_error(cls, f"takes_uploads is {takes_uploads}: implement {hook}")
    if takes_uploads:
        if users is None:
            raise InputError(f"{who} needs its users' uploads: fit(domain, users=<secret indices>)")
        idx = _checked_users(users, domain)
        with_uploads: Any = mech._fit_users(domain, idx, rng)
        if not (isinstance(with_uploads, tuple) and len(with_uploads) == 3):
            raise contract_error(cls, "_fit_users must return (matrix, info, uploads)")
        matrix, info, uploads = with_uploads
        if not isinstance(uploads, Uploads) or np.shape(uploads.slot) != idx.shape:
            got = np.shape(uploads.slot) if isinstance(uploads, Uploads) else "no"
            raise contract_error(cls, f"_fit_users gave {got} upload slots for {idx.shape} users")
    else:
        fitted: Any = mech._fit(domain)
        if not (isinstance(fitted, tuple) and len(fitted) == 2):
            raise contract_error(cls, "_fit must return (matrix, info dict)")
        matrix, info = fitted
    if not isinstance(info, dict):
        raise contract_error(cls, f"the fit's info is {type(info).__name__}, not a dict")
    elapsed = time.perf_counter() - start
    report = check_guarantee(mech.report_guarantee, "report guarantee")
    matrix = _checked_matrix(matrix, domain, cls)  # a copy: the plug-in holds no reference
    try:
        verified = certify(report, matrix, domain, who=who)
    except PrivacyViolation as exc:
        if not is_plugin(cls):
            raise
        message = f"{describe(cls)}: fit refused: {plain(str(exc))}"
        raise PluginPrivacyViolation(message) from exc
    info = {"fit_seconds": elapsed, "n_x": domain.n_x, "n_y": domain.n_y, **info,
            "verified_epsilon": verified}  # fmt: skip
    return _Fitted(matrix, domain, info, uploads, report, verified)


def _publish(mech: Mechanism, fitted: _Fitted) -> None:
    """Give the instance what its fit found (``matrix_``, ``domain_``, ``uploads_``,
    ``info_``; ``matrix_`` is also kept as the certified one :func:`draw_reports` checks)."""
    mech.matrix_ = fitted.matrix
    mech._Mechanism__certified = fitted.matrix  # type: ignore[attr-defined]
    mech.domain_ = fitted.domain
    mech.uploads_ = fitted.uploads
    mech.info_ = fitted.info


def _implements(cls: type, hook: str) -> bool:
    """Whether ``cls`` overrides the base class's ``hook`` (``_fit`` or ``_fit_users``)."""
    return getattr(cls, hook) is not getattr(Mechanism, hook)


def _checked_users(users, domain) -> np.ndarray:
    idx = np.asarray(users)
    if idx.ndim != 1 or not (idx.size == 0 or np.issubdtype(idx.dtype, np.integer)):
        raise InputError("users must be a 1-D array of secret indices")
    if idx.size and (idx.min() < 0 or idx.max() >= domain.n_x):
        raise InputError(f"users must be secret indices in [0, {domain.n_x})")
    return idx.astype(np.int64)


def _checked_matrix(matrix: np.ndarray, domain, cls: type) -> np.ndarray:
    try:
        Z = np.array(matrix, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise contract_error(cls, f"the fit's matrix is not an array of floats ({exc})") from None
    if Z.shape != (domain.n_x, domain.n_y):
        raise contract_error(
            cls, f"the fit produced a {Z.shape} matrix for a {domain.n_x}x{domain.n_y} domain"
        )
    if not np.all(np.isfinite(Z)) or np.any(Z < 0):
        raise contract_error(cls, "the fit produced negative or non-finite probabilities")
    sums = Z.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > ROW_SUM_TOL):
        worst = int(np.argmax(np.abs(sums - 1.0)))
        raise contract_error(
            cls, f"row {worst} of the fit's matrix sums to {float(sums[worst])!r}, not 1"
        )
    Z /= sums[:, None]
    Z.setflags(write=False)
    return Z
