"""Tool pinning: trust on first use, fingerprints and diffs, and the stores pins live in."""
