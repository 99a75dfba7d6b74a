"""Geography: road networks (``load_network``), shortest paths, and the secrets' ``Domain``."""

from mdpsim.geo.domain import Domain
from mdpsim.geo.network import load_network

__all__ = ["Domain", "load_network"]
