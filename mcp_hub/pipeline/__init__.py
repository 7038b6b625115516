"""The call pipeline: from ``tools/call`` to a handler, with coercion, hooks, plugins and the call context."""
