"""A browser signs in to the hub, or connects an account for an upstream."""
