"""Plumbing every layer uses: components and registries, validation, threads, atomic outputs."""
