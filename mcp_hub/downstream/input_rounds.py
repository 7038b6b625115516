"""Input-required rounds: a 2025-era upstream's questions for a 2026-07-28 client.

A 2026-07-28 client cannot receive server-initiated requests. When an upstream
asks for sampling, elicitation or roots during a ``tools/call``,
``prompts/get`` or ``resources/read`` from such a client, the hub answers the
client's request with an ``InputRequiredResult`` carrying the upstream's
request(s) and a ``requestState``; the upstream call keeps running in a
:class:`~mcp_hub.eras.held.Round`. The client re-sends the same request with
``inputResponses`` and the state: the answers go to the waiting upstream
requests, and the hub answers with the final result or the next round.

The state on the wire is sealed by the SDK's :class:`RequestStateBoundary`
(AES-GCM, expiry, bound to method, target, arguments, the server name and the
caller's identity); inside it is a single-use token of the round store, so a
replayed state is refused like a forged, expired or foreign one, with the
SDK's standard error (-32602 "Invalid or expired requestState").

A 2026-07-28 client that declares none of sampling, elicitation or roots takes
the direct path (no background task): the upstream gets an error if it asks.

A first request (no ``requestState``) may already carry ``inputResponses``: a
client that knows what the server will ask answers ahead. Those answers are
*offered*: a question of the call with the same key takes its answer from the
offer (once) instead of becoming a round; keys nothing asks for are ignored, as
a server directly ignores what it does not recognise.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar, cast

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import (
    RequestStateBoundary,
    RequestStateSecurity,
    authenticated_principal,
)
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    GetPromptResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    ReadResourceResult,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter, ValidationError

from mcp_hub.downstream.call_context import SessionCallContext
from mcp_hub.eras.held import HeldRounds, Round, RoundsFull, owner_of
from mcp_hub.hub.interface import ServingHub
from mcp_hub.pipeline.context import INPUT_KEY

__all__ = ["RoundCallContext", "install_state_boundary", "resume_for_replica",
           "run_with_rounds", "wants_rounds"]

logger = logging.getLogger("mcp_hub.eras")

Ctx = ServerRequestContext[Any, Any]
ResultT = TypeVar("ResultT")
ModelT = TypeVar("ModelT", bound=BaseModel)


def wants_rounds(ctx: Ctx) -> bool:
    """A 2026-07-28 request from a client that can answer at least one kind of input."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return caps is not None and any(
        c is not None for c in (caps.sampling, caps.elicitation, caps.roots))


def _refuse() -> NoReturn:
    """The SDK boundary's frozen wire error, so clients see one shape for every refusal."""
    raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState",
                   data={"reason": "invalid_request_state"})


def hub_principal(ctx: Ctx) -> str | None:
    """Who may continue a round: the OAuth identity if any, else the bearer token's digest."""
    principal = authenticated_principal(ctx)
    if principal is not None:
        return principal
    request = ctx.request
    headers = getattr(request, "headers", None)
    auth = headers.get("authorization") if headers is not None else None
    if not auth:
        return None
    return "bearer:" + hashlib.sha256(auth.encode("utf-8", "surrogatepass")).hexdigest()


def state_key(secret: str) -> bytes:
    """The ``requestState`` key replicas sharing ``secret`` all derive (its own purpose)."""
    return hmac.new(secret.encode(), b"mcp-hub requestState key v1", hashlib.sha256).digest()


def install_state_boundary(server: Any, ttl: float, secret: str | None = None) -> None:
    """Seal and verify ``requestState`` on ``server`` (audience: its name).

    With ``secret`` (``[hub.http] session_secret``, shared by replicas) every
    replica opens the others' states; without it the key is this process's own.
    """
    security = (RequestStateSecurity(keys=[state_key(secret)], ttl=ttl) if secret
                else RequestStateSecurity.ephemeral(ttl=ttl))
    security.bind_principal = hub_principal
    server.middleware.append(RequestStateBoundary(security, default_audience=server.name))


class RoundCallContext(SessionCallContext):
    """A call context whose client questions become asks of a round.

    Progress and log messages go to whichever downstream request is currently
    waiting on the round; while none is (between requests) they are dropped.
    """

    def __init__(self, ctx: Ctx, target: str, hub: ServingHub) -> None:
        super().__init__(ctx, target, hub)
        self._serving = hub  # typed: ``self.hub`` is the narrower ToolHub of every call
        self.round: Round | None = None
        self.attached = True
        #: While another replica's request waits on the round: where progress and logs go.
        self.remote: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None
        #: Answers the first request carried unasked, by key (each used at most once).
        self.offered: dict[str, Any] = {}

    def attach(self, ctx: Ctx) -> None:
        """Relay to ``ctx`` from now on: the request that is waiting on the round."""
        meta = ctx.meta
        self._downstream = SessionCallContext(ctx, self.tool_name, self._serving)._downstream
        self.request_id = ctx.request_id
        self.progress_token = meta.get("progress_token") if meta else None
        self.attached = True

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.attached:
            await super().report_progress(progress, total, message)
        elif self.remote is not None:
            await self.remote("progress", {"progress": progress, "total": total,
                                           "message": message})

    async def log(self, level: Any, data: Any, logger: str | None = None) -> None:
        if self.attached:
            await super().log(level, data, logger)
        elif self.remote is not None:
            await self.remote("log", {"level": level, "data": data, "logger": logger})

    async def _ask(self, method: str, request: BaseModel, result_type: type[ModelT]) -> ModelT:
        round_ = self.round
        if round_ is None:
            raise MCPError(INVALID_PARAMS, f"{method} cannot be relayed outside an input round")
        key = INPUT_KEY.get()
        offered = self._offered_answer(key, result_type)
        if offered is not None:
            return offered
        ask = round_.add_ask(method, request, key)
        try:
            await ask.done.wait()
        finally:
            round_.drop_ask(ask)
        if ask.error is not None:
            raise MCPError.from_error_data(ask.error)
        try:
            return result_type.model_validate(ask.response)
        except ValidationError:
            raise MCPError(INVALID_PARAMS,
                           f"the client's answer to {method} is not a valid result") from None

    def _offered_answer(self, key: str | None, result_type: type[ModelT]) -> ModelT | None:
        """The answer the first request offered for ``key``, if any and valid (used once)."""
        if key is None or key not in self.offered:
            return None
        try:
            return result_type.model_validate(self.offered.pop(key))
        except ValidationError:
            return None  # not an answer to this question: ask it as usual

    async def create_message(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        if not self.can_sample:
            return await super().create_message(params)
        return await self._ask("sampling/createMessage", CreateMessageRequest(params=params),
                               CreateMessageResult)

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult:
        if not self.can_elicit:
            return await super().elicit(params)
        return await self._ask("elicitation/create", ElicitRequest(params=params), ElicitResult)

    async def list_roots(self) -> ListRootsResult:
        if not self.can_list_roots:
            return await super().list_roots()
        return await self._ask("roots/list", ListRootsRequest(), ListRootsResult)


def _deliver(round_: Round, responses: dict[str, Any] | None) -> None:
    """Hand the client's answers to the waiting asks; unanswered ones are asked again."""
    responses = responses or {}
    for key, ask in list(round_.asks.items()):
        if not ask.sent or ask.done.is_set():
            continue
        answer = responses.get(key)
        if answer is None:
            ask.sent = False
            continue
        if isinstance(answer, BaseModel):
            answer = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        ask.answer(answer)


async def _step(store: HeldRounds, round_: Round, call: RoundCallContext) -> Any:
    """Wait until the call ends (its result) or asks again (the next round)."""
    try:
        await round_.wait_for_stop()
    except anyio.get_cancelled_exc_class():
        round_.abandon("the client cancelled the call")
        store.release(round_)
        raise
    if round_.finished:
        store.release(round_)
        if round_.error is not None:
            raise round_.error
        return round_.result
    asks = round_.unsent()
    for ask in asks:
        ask.sent = True
    call.attached = False
    token = store.hold(round_)
    return InputRequiredResult(input_requests={a.key: a.request for a in asks},
                               request_state=token)


#: The results a retry can end in, by method (a forwarded answer is validated with these).
_RESULTS: dict[str, TypeAdapter[Any]] = {
    "tools/call": TypeAdapter(CallToolResult | InputRequiredResult),
    "prompts/get": TypeAdapter(GetPromptResult | InputRequiredResult),
    "resources/read": TypeAdapter(ReadResourceResult | InputRequiredResult),
}


def _wire_responses(responses: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, answer in (responses or {}).items():
        out[str(key)] = (answer.model_dump(by_alias=True, mode="json", exclude_none=True)
                         if isinstance(answer, BaseModel) else answer)
    return out


async def resume_for_replica(
    store: HeldRounds, token: str, method: str, target: str, responses: dict[str, Any],
    notes: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Serve a retry another replica received for a round held here; its result's wire form.

    The round's progress and log messages go to ``notes`` (to the replica whose
    request waits) until it ends or asks again.
    """
    held = store.claim(token)
    if held is None or held.method != method or held.target != target:
        logger.warning("requestState refused on %s %s (from another replica): no such held "
                       "round (replayed or ended)", method, target)
        _refuse()
    call: RoundCallContext = held.attached
    call.attached = False
    call.remote = notes
    _deliver(held, responses)
    try:
        result = await _step(store, held, call)
    finally:
        call.remote = None
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


async def run_with_rounds(
    store: HeldRounds, ctx: Ctx, params: Any, *, method: str, target: str, hub: ServingHub,
    invoke: Callable[[SessionCallContext], Awaitable[ResultT]],
) -> ResultT | InputRequiredResult:
    """Run ``invoke`` for a request that may span input rounds (see the module doc)."""
    state = getattr(params, "request_state", None)
    if state is None:
        if not wants_rounds(ctx):
            return await invoke(SessionCallContext(ctx, target, hub))
        call = RoundCallContext(ctx, target, hub)
        call.offered = _wire_responses(getattr(params, "input_responses", None))
        try:
            round_ = store.start(method, target, lambda r: invoke(call))
        except RoundsFull as exc:
            logger.warning("%s; %s %s runs without input rounds", exc, method, target)
            return await invoke(SessionCallContext(ctx, target, hub))
        call.round = round_
        round_.attached = call
        return cast("ResultT | InputRequiredResult", await _step(store, round_, call))
    owner = owner_of(state) if isinstance(state, str) else None
    if isinstance(state, str) and owner is not None and owner != store.replica:
        forwarder = store.forwarder
        if forwarder is None:
            _refuse()
        raw = await forwarder.forward(state, method, target,
                                      _wire_responses(getattr(params, "input_responses", None)),
                                      SessionCallContext(ctx, target, hub))
        return cast("ResultT | InputRequiredResult", _RESULTS[method].validate_python(raw))
    held = store.claim(state) if isinstance(state, str) else None
    if held is None or held.method != method or held.target != target:
        logger.warning("requestState refused on %s %s: no such held round (replayed or ended)",
                       method, target)
        _refuse()
    resumed: RoundCallContext = held.attached
    resumed.attach(ctx)
    _deliver(held, getattr(params, "input_responses", None))
    return cast("ResultT | InputRequiredResult", await _step(store, held, resumed))
