"""DistA-LP's upload schemes, one module per mode (docs/dista_lp.md, "Upload modes")."""

from mdpsim.mechanisms.dista_lp.uploads.base import CalibrationCache, Uploaded, UploadScheme
from mdpsim.mechanisms.dista_lp.uploads.location import LocationUpload
from mdpsim.mechanisms.dista_lp.uploads.none import NoUpload
from mdpsim.mechanisms.dista_lp.uploads.paper import PaperUpload
from mdpsim.mechanisms.dista_lp.uploads.strict import StrictUpload

#: The schemes by ``upload`` mode.
SCHEMES: dict[str, type[UploadScheme]] = {
    s.mode: s for s in (NoUpload, LocationUpload, StrictUpload, PaperUpload)
}

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
