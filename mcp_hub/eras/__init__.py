"""Where the two protocol eras (2025 handshake, 2026-07-28) meet inside the hub."""
