"""The Hub: the object that owns the registry, the upstreams and the sessions, and its door for the serving side."""
