"""Interpolation-based lp-norm mDP (docs/design.md §4); importing this registers ``interp``."""

from mdpsim.mechanisms.interp.mechanism import InterpMechanism

__all__ = ["InterpMechanism"]
