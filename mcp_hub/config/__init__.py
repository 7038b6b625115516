"""``servers.toml``: where it is, its typed models, and editing it in place."""
