"""DistA-LP: distributed LP with privacy-protected surrogate uploads (docs/design.md §3)."""
