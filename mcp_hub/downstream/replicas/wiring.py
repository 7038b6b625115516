"""Wiring of the replica features into the HTTP app (small, so the app stays small).

* :func:`replica_sessions_for` — sealed session ids when ``[hub.http]
  session_secret`` is set (any replica can then serve any session);
* :func:`attach_bus` — the bus between replicas when the state store is
  shared (``[state] url``), hooked to the event store for GET-stream messages;
* :func:`state_readiness`, :func:`replication_status` — what ``/readyz`` and
  ``/status.json`` say about them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from starlette.applications import Starlette

from mcp_hub.compat.sdk_http import HookedSessionManager
from mcp_hub.config.model import HttpConfig
from mcp_hub.downstream.http.resume import Resumption
from mcp_hub.downstream.replicas.bus import BusTap, ReplicaBus
from mcp_hub.downstream.replicas.event_mirror import EventMirror, MirroredReplay
from mcp_hub.downstream.replicas.round_relay import relay_rounds
from mcp_hub.downstream.replicas.sealed_session import SessionSealer
from mcp_hub.downstream.replicas.sessions import Lifetimes, ReplicaSessions
from mcp_hub.downstream.replicas.task_relay import relay_tasks
from mcp_hub.hub.interface import ServingHub
from mcp_hub.state import StateBackend

__all__ = ["add_replica_middleware", "attach_bus", "replica_sessions_for", "replication_status",
           "state_readiness"]

logger = logging.getLogger(__name__)


def replica_sessions_for(hub: ServingHub, http: HttpConfig) -> ReplicaSessions:
    """Sealed sessions if a secret is configured; plain (one-replica) sessions otherwise."""
    secret = http.session_secret
    if not secret and hub.state.shared:
        logger.warning("[state] url is set but [hub.http] session_secret is not: sessions stay "
                       "on the replica that opened them (use sticky sessions, or set the secret)")
    return ReplicaSessions(SessionSealer(secret) if secret else None, hub.state, hub,
                           Lifetimes(http.session_max_lifetime, http.session_idle_timeout))


def attach_bus(state: StateBackend, managers: Iterable[HookedSessionManager],
               resumption: Resumption, replicas: ReplicaSessions) -> ReplicaBus | None:
    """The bus between replicas, if they share a store and sessions move between them;
    dropped streams are then mirrored to the store so any replica can resume them."""
    if not state.shared or replicas.sealer is None:
        return None
    bus = ReplicaBus(state, managers)
    events = resumption.events
    events.on_standalone = bus.standalone
    events.id_prefix = f"{bus.replica}-"
    replicas.on_closed = bus.session_closed
    resumption.mirror = EventMirror(state, events, resumption.grace)
    bus.on_resumed = resumption.resumed
    relay_rounds(bus, replicas.hub.rounds)  # a round's retry may reach another replica
    relay_tasks(bus, replicas.hub)  # so may a task's tasks/get, tasks/result, ...
    return bus


def add_replica_middleware(app: Starlette, bus: ReplicaBus | None, replicas: ReplicaSessions,
                           resumption: Resumption) -> None:
    """The layers that pass answers and cancels on, and replay mirrored streams."""
    if bus is None or resumption.mirror is None:
        return
    app.add_middleware(BusTap, bus=bus, owns=replicas.owns)
    app.add_middleware(MirroredReplay, mirror=resumption.mirror, prefix=f"{bus.replica}-",
                       owns=replicas.owns, resumed=bus.stream_resumed)


def state_readiness(state: StateBackend) -> dict[str, Any]:
    """The state store's part of ``/readyz``: its backend, and whether it answers."""
    status = state.status()
    # The bus counts: a store that answers but whose subscription is not back yet
    # still loses cross-replica messages.
    available = bool(status["available"] and status.get("bus_subscribed", True))
    return {"state": {"backend": status["backend"], "available": available},
            "degraded": not available}


def replication_status(replicas: ReplicaSessions, bus: ReplicaBus | None,
                       resumption: Resumption) -> dict[str, Any]:
    """For ``/status.json``: sealed sessions on or off, rebuilt sessions, bus traffic."""
    mirror = resumption.mirror
    return {"sealed_sessions": replicas.sealer is not None, "recovered": replicas.recovered,
            "bus": bus.stats() if bus is not None else None,
            "mirrored_events": mirror.mirrored_events if mirror is not None else 0,
            "replayed_streams": mirror.replayed if mirror is not None else 0}
