"""The registered ``dista_lp`` mechanism: an upload scheme composed with a planner.

``make("dista_lp", epsilon=..., upload=...)``; each upload mode is a scheme of its own module
(uploads/, docs/dista_lp.md) with its own parameters and guarantee:

* ``"none"`` (uploads/none.py): no upload, pure ``epsilon``-mDP, all of it for the report.
* ``"location"`` (uploads/location.py): one EM location per user at
  ``eps_up = upload_share * epsilon``; pure ``eps_up + eps_pt``-mDP.
* ``"strict"`` (uploads/strict.py): the audited surrogate release, PmDP at the audited
  confidence.
* ``"paper"`` (uploads/paper.py): the paper's rules to the letter; its guarantee is the paper's
  claim and is not certified.

The planner (planner.py) turns what the server read from the uploads into the matrix the users
report from: a function of the uploads and public data only, exactly ``eps_pt``-mDP over ALL of
X, checked by the exact verifier on the domain's chaining pairs. ``matrix_`` has a row for
every secret of the domain given to ``fit`` and ``domain_`` is that domain. For the surrogate
modes each user's block checked on its own neighbourhood is kept in ``info_["own_blocks"]``:
the paper's per-neighbourhood guarantee, reported beside the exact release by the benchmark.

Regeneration: nothing here depends on when it is called; the simulation regenerates on a
public schedule and charges ``upload_guarantee`` once per fit and ``report_guarantee`` per
report (``guarantee`` is their sequential composition).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, Self

import numpy as np

from mdpsim._core.registry import Catalog
from mdpsim._core.validation import check_choice, check_margin, check_positive_int
from mdpsim.errors import InputError
from mdpsim.mechanisms.base import Mechanism, Uploads, register
from mdpsim.mechanisms.dista_lp.locate import prior_guess
from mdpsim.mechanisms.dista_lp.planner import (
    N_NEAR,
    PLANNERS,
    SWEEPS,
    TILE_SIZE,
    check_blocks_params,
    plan,
)
from mdpsim.mechanisms.dista_lp.uploads import SCHEMES, CalibrationCache, UploadScheme
from mdpsim.mechanisms.dista_lp.uploads.surrogate import SPLIT
from mdpsim.mechanisms.lp.repair import FIRST_MARGIN, MAX_MARGIN
from mdpsim.privacy.guarantees import PMDP, Guarantee, PureMDP, compose

__all__ = ["CalibrationCache", "DistALP"]

DEFAULT_UPLOAD = "none"
#: DistALP's own constructor parameters (``get_params(deep=False)``).
OWN_PARAMS = ("epsilon", "upload", "planner", "margin", "seed", "tile_size", "n_near", "sweeps")


@register("dista_lp")
class DistALP(Mechanism):
    """DistA-LP: the users' uploads (one scheme per ``upload`` mode), the server's plan, one
    exact release over X.

    Parameters
    ----------
    epsilon
        Total budget per km (upload + report).
    upload
        The scheme (uploads/), a component holding its own parameters: ``NoUpload()``,
        ``LocationUpload(...)``, ``StrictUpload(...)``, ``PaperUpload(...)``; or a mode's name
        (``"strict"``: its defaults) or a ``{"scheme": "strict", **params}`` table (TOML).
    planner
        ``"lp_medoids"`` (``none``/``location`` only: the city-scale LP over medoid outputs)
        or ``"blocks"``; ``None``: the scheme's default (``"lp_medoids"`` for ``none`` and
        ``location``, 0.58-0.62x EM at |X| = 2,000 against 0.89-0.97x for the blocks,
        docs/results/dista_lp.md; ``"blocks"`` for the surrogate modes).
    margin
        LPs run at ``eps_pt (1 - margin)``; the lift absorbs solver round-off in it.
    seed
        Users' random choices (permutations, noise, released locations; ``None``: drawn from
        the ``rng`` given to ``fit``, else 0).
    tile_size, n_near, sweeps
        The blocks planner (planner.py); ``None``: 40, 15, 2. Refused under the
        ``"lp_medoids"`` planner, which has no tiles.
    **flat
        Deprecated: the scheme's parameters as flat keywords (``upload="strict", delta=0.01``),
        folded into the scheme with a ``DeprecationWarning``. A parameter of another mode is
        refused, naming it.

    The uploading modes take the users with ``fit(domain, users=..., rng=...)``: their true
    secrets, one entry per user; users at the same secret upload the same blocks, so there is
    one DistA-LP user per distinct secret (``info_["users"]``, sorted) and ``uploads_.slot[u]``
    is user u's. ``upload="none"`` takes no uploads: ``fit(domain)``, nothing in it depends on
    the users (``uploads_`` is ``None``).
    """

    #: The surrogate modes' noise calibrations, shared by every instance (regenerations).
    calibrations: ClassVar[CalibrationCache] = CalibrationCache()
    #: The upload schemes by mode (a subclass may swap one, e.g. a noise-free ablation).
    schemes: ClassVar[Catalog[type[UploadScheme]] | Mapping[str, type[UploadScheme]]] = SCHEMES
    conformance_params: ClassVar[dict] = {}

    @classmethod
    def param_names(cls) -> list[str]:
        """The keywords ``make`` accepts: the constructor's own (``OWN_PARAMS``), then the
        schemes' as deprecated flat keywords (folded into ``upload`` with a warning)."""
        return [*OWN_PARAMS, *_SCHEME_PARAMS]

    def __init__(
        self,
        epsilon: float,
        *,
        upload: UploadScheme | str | dict = DEFAULT_UPLOAD,
        planner: str | None = None,
        margin: float = FIRST_MARGIN,
        seed: int | None = None,
        tile_size: int | None = None,
        n_near: int | None = None,
        sweeps: int | None = None,
        **flat: Any,
    ) -> None:
        super().__init__(epsilon)
        if flat:  # the old flat scheme keywords (deprecated): folded into the scheme
            unknown = [k for k in flat if k not in _SCHEME_PARAMS]
            if unknown:
                raise InputError(
                    f"dista_lp has no parameter {unknown[0]!r}; parameters: "
                    f"{', '.join(self.param_names())}, and the scheme's under upload="
                )
            warnings.warn(
                "dista_lp: scheme parameters as flat keywords are deprecated; nest them: "
                "upload=StrictUpload(delta=...) or a [mechanism.params.upload] table "
                "(scheme = 'strict', delta = ...)",
                DeprecationWarning,
                stacklevel=2,
            )
        scheme = self._resolve_upload(upload, flat)
        self.upload = scheme
        mode = scheme.mode
        self.tile_size, self.n_near, self.sweeps = tile_size, n_near, sweeps
        self._blocks = check_blocks_params(
            TILE_SIZE if tile_size is None else tile_size,
            N_NEAR if n_near is None else n_near,
            SWEEPS if sweeps is None else sweeps,
        )
        if planner is not None:
            check_choice(planner, "planner", (*PLANNERS, None), owner="dista_lp")
            if planner not in scheme.planners:
                raise InputError(
                    f"dista_lp: planner={planner!r} does not plan on upload={mode!r}'s "
                    f"uploads; use one of {', '.join(map(repr, scheme.planners))} or None"
                )
        self.planner = planner
        blocks_given = [k for k, v in (("tile_size", tile_size), ("n_near", n_near),
                                       ("sweeps", sweeps)) if v is not None]  # fmt: skip
        in_use = planner if planner is not None else scheme.planners[0]
        if blocks_given and in_use != "blocks":
            raise InputError(
                f"dista_lp: {blocks_given[0]} applies to planner='blocks' only, and the planner "
                f"here is {in_use!r}; drop {blocks_given[0]} or set planner='blocks'"
            )
        self.margin = check_margin(margin, MAX_MARGIN, include_boundaries="left")
        self.seed = None if seed is None else check_positive_int(seed, "seed", minimum=0)
        self._scheme = scheme.bind(self.epsilon)

    def _resolve_upload(self, upload: UploadScheme | str | dict, flat: dict) -> UploadScheme:
        """The scheme from a component, a mode's name or a ``{scheme = ..., **params}`` table
        (TOML), with the deprecated flat keywords ``flat`` merged in."""
        if isinstance(upload, UploadScheme):
            if not flat:
                return upload
            mode, params = upload.mode, {**upload.get_params(), **flat}
        elif isinstance(upload, dict):
            params = dict(upload)
            mode = params.pop("scheme", None)
            if mode is None:
                raise InputError(
                    "dista_lp: the upload table needs scheme = one of "
                    f"{', '.join(map(repr, self.schemes))}, e.g. scheme = 'strict'"
                )
            params.update(flat)
        elif isinstance(upload, str):
            mode, params = upload, dict(flat)
        else:
            raise InputError(
                f"dista_lp: upload={upload!r} is not a scheme; use a name "
                f"({', '.join(map(repr, self.schemes))}) or e.g. StrictUpload(...)"
            )
        check_choice(mode, "upload", self.schemes, owner="dista_lp")
        cls = self.schemes[mode]
        own = cls.param_names()
        for name in params:
            if name not in own:
                if name in _SCHEME_PARAMS:
                    raise InputError(_wrong_mode(name, mode))
                raise InputError(
                    f"dista_lp: upload {mode!r} has no parameter {name!r}; its parameters: "
                    f"{', '.join(own) or 'none'}"
                )
        return cls(**params)

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """Constructor parameters and their values (``make("dista_lp", **them)`` rebuilds it);
        ``deep``: also the upload scheme's by dotted name (``"upload.delta"``), as
        scikit-learn nests estimators (default False: the components' rebuild contract)."""
        params = {name: getattr(self, name) for name in OWN_PARAMS}
        if deep:
            params.update({f"upload.{k}": v for k, v in self.upload.get_params().items()})
        return params

    def set_params(self, **params: Any) -> Self:
        """Set parameters by name, the scheme's by dotted name (``**{"upload.delta": 0.01}``),
        everything checked again as by the constructor; returns ``self``."""
        own = self.get_params(deep=False)
        nested = {}
        for key, value in params.items():
            head, _, rest = key.partition(".")
            if rest and head == "upload":
                nested[rest] = value
            elif key in own:
                own[key] = value
            else:
                raise InputError(
                    f"dista_lp has no parameter {key!r}; parameters: {', '.join(own)} and "
                    "upload.<name>"
                )
        if nested:
            upload = own["upload"]
            base = upload if isinstance(upload, UploadScheme) else self._resolve_upload(upload, {})
            own["upload"] = {"scheme": base.mode, **base.get_params(), **nested}
        epsilon = own.pop("epsilon")
        checked = type(self)(epsilon, **own)  # all or nothing: a bad value changes nothing
        vars(self).update(vars(checked))
        return self

    @property
    def takes_uploads(self) -> bool:
        """Every mode but ``upload="none"`` is fitted on the users' uploads."""
        return self._scheme.takes_uploads

    def _planner(self) -> str:
        """The planner in use: as given, else the scheme's default."""
        return self.planner if self.planner is not None else self._scheme.planners[0]

    # ------------------------------------------------------------------ guarantees
    @property
    def report_guarantee(self) -> PureMDP:
        """One report: pure ``eps_pt``-mDP over all of X (exact verifier)."""
        return PureMDP(self._scheme.budgets()[1])

    @property
    def upload_guarantee(self) -> PureMDP | PMDP | None:
        """What each upload costs; the surrogate modes' audit once fitted (``None`` before)."""
        return self._scheme.guarantee(getattr(self, "upload_audit_", None))

    @property
    def guarantee(self) -> Guarantee:
        """Sequential composition of the upload and one report."""
        up = self.upload_guarantee
        if up is None:
            return PureMDP(self.epsilon)
        return compose(up, self.report_guarantee, labels=("upload", "report over X"))

    # ------------------------------------------------------------------ fit
    def check_domain_size(self, n_x: int, n_y: int) -> None:
        """The upload scheme's own size rules (strict / paper: ``n_neighbours <= n_x``)."""
        self._scheme.check_domain_size(n_x, n_y)

    def _fit(self, domain) -> tuple[np.ndarray, dict]:
        """``upload="none"``: the plan for the public prior, no user in it."""
        no_user = np.zeros(0, dtype=np.int64)
        return self._fit_unique(domain, no_user, np.random.default_rng(self.seed or 0))

    def _fit_users(
        self, domain, users: np.ndarray, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, dict, Uploads]:
        users, slot = np.unique(users, return_inverse=True)  # one DistA-LP user per secret
        if len(users) == 0:
            raise InputError(f"upload={self.upload.mode!r} needs at least one user to upload")
        seed = self.seed
        if seed is None:
            seed = 0 if rng is None else int(rng.integers(2**31))
        Z, info = self._fit_unique(domain, users, np.random.default_rng(seed))
        return Z, info, Uploads(slot=slot.astype(np.int64))

    def _fit_unique(self, domain, users: np.ndarray, rng) -> tuple[np.ndarray, dict]:
        eps_up, eps_pt = self._scheme.budgets()
        info: dict = {
            "upload": self.upload.mode, "planner": self._planner(),
            "epsilon_upload": eps_up, "epsilon_pt": eps_pt,
        }  # fmt: skip
        t0 = time.perf_counter()
        sent = self._scheme.upload(
            domain, users, rng, calibrations=self.calibrations, margin=self.margin
        )
        if sent.audit is not None:
            self.upload_audit_ = sent.audit
        info.update(sent.info)
        info["upload_seconds"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        tile_size, n_near, sweeps = self._blocks
        Z, release = plan(
            self._planner(), domain, eps_pt, sent.weights, sent.blocks, margin=self.margin,
            tile_size=tile_size, n_near=n_near, sweeps=sweeps,
        )  # fmt: skip
        info["server_seconds"] = time.perf_counter() - t0
        pg = prior_guess(domain)
        info.update(
            users=users,
            upload_guess=sent.guesses,
            upload_attack_error_km=np.asarray(domain.dist_xy[users, sent.guesses]),
            prior_guess_error_km=np.asarray(domain.dist_xy[users, pg]) if len(users) else [],
            **release,
        )
        return Z, info


#: Every scheme's own parameters (DistALP's keyword parameters after its own).
_SCHEME_PARAMS: dict[str, list[str]] = {}
for _mode, _scheme in SCHEMES.items():
    for _name in _scheme.param_names():
        if _name != "epsilon":
            _SCHEME_PARAMS.setdefault(_name, []).append(_mode)


def _wrong_mode(name: str, upload: str) -> str:
    """The one line refusing a parameter of another upload mode."""
    what = ", ".join(SPLIT) + " (the surrogate budget split)" if name in SPLIT else name
    modes = " or ".join(repr(m) for m in _SCHEME_PARAMS[name])
    return f"dista_lp: {what} applies to upload={modes}, not {upload!r}"
