"""Interpolation-based lp-norm mDP (SPEC §4); importing this registers ``interp``."""

from sim.mechanisms.interp.mechanism import InterpMechanism

__all__ = ["InterpMechanism"]
