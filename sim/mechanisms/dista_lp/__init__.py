"""DistA-LP: distributed LP with privacy-protected surrogate uploads (SPEC §3)."""
