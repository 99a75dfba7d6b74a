"""Interpolation-based lp-norm mDP (docs/design.md §4); importing this registers ``interp``."""

from sim.mechanisms.interp.mechanism import InterpMechanism

__all__ = ["InterpMechanism"]
