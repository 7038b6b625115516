"""The HTTP face of the hub: the Starlette app, its fast path, limits, routes and sessions."""
