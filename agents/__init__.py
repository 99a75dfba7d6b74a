"""Mesa agents of the simulation: mobile users and the honest-but-curious server."""
