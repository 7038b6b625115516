"""The hub's own stdio server transport and its fast path."""
