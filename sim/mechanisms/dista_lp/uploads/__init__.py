"""DistA-LP's upload schemes, one module per mode (docs/dista_lp.md, "Upload modes")."""

from mdpsim._core.registry import Catalog
from mdpsim.mechanisms.dista_lp.uploads.base import CalibrationCache, Uploaded, UploadScheme
from mdpsim.mechanisms.dista_lp.uploads.location import LocationUpload
from mdpsim.mechanisms.dista_lp.uploads.none import NoUpload
from mdpsim.mechanisms.dista_lp.uploads.paper import PaperUpload
from mdpsim.mechanisms.dista_lp.uploads.strict import StrictUpload

#: The schemes by ``upload`` mode (a new scheme: ``SCHEMES.register(mode)`` on its class).
SCHEMES: Catalog[type[UploadScheme]] = Catalog("upload scheme")
for _scheme in (NoUpload, LocationUpload, StrictUpload, PaperUpload):
    SCHEMES.add(_scheme.mode, _scheme)

__all__ = [
    "SCHEMES",
    "CalibrationCache",
    "LocationUpload",
    "NoUpload",
    "PaperUpload",
    "StrictUpload",
    "UploadScheme",
    "Uploaded",
]
