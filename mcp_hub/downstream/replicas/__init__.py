"""Several hub replicas as one: sealed sessions, the replica bus, mirrored events."""
