"""mdpsim: metric differential privacy for mobile users on real road networks."""

__version__ = "0.1.0"
