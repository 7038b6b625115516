"""Which pin store a config uses: the file under the state dir, or Redis.

Kept apart from :mod:`mcp_hub.pins.pinning` (the store and its file) and
:mod:`mcp_hub.pins.redis_store` (the Redis store, which needs the optional ``redis``
package), so that neither imports the other's user and a file-only install never
imports ``redis``.
"""

from __future__ import annotations

from mcp_hub.config.model import HubConfig
from mcp_hub.config.state_dirs import user_state_dir
from mcp_hub.pins.pinning import PinStore, adopt_pins, pins_path
from mcp_hub.state import require_redis

__all__ = ["open_pin_store"]


def open_pin_store(config: HubConfig) -> PinStore:
    """The pin store of ``config``: ``<state dir>/pins.json``, or Redis when ``[state] url``
    names one, with the config's policies. A config's own pin file starts with the pins
    its servers had in the per-user file of earlier versions (:mod:`mcp_hub.config.state_dirs`)."""
    policies = {n: s.pin_policy for n, s in config.servers.items()}
    url = config.state.url
    if url and url.startswith(("redis://", "rediss://", "unix://")):
        require_redis()
        from mcp_hub.pins.redis_store import RedisPinStore  # only with [state] url: needs redis

        return RedisPinStore(url, policy=config.pins.policy, server_policies=policies)
    store = PinStore(pins_path(config), policy=config.pins.policy, server_policies=policies)
    if not config.shares_user_state():
        # A config's own state folder: its servers' pins from the per-user file, once.
        adopt_pins(store, user_state_dir() / "pins.json", config.servers)
    return store
