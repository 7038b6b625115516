"""The ``clarify`` builtin: asking the calling client's user through elicitation."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_REQUEST,
    CallToolResult,
    ClientCapabilities,
    ElicitationCapability,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    FormElicitationCapability,
    TextContent,
    UrlElicitationCapability,
)

from builtin_tools.clarify import NOT_AVAILABLE, clarify_tool
from mcp_hub.pipeline.calls import handle_function_call
from mcp_hub.pipeline.context import CallContext

pytestmark = pytest.mark.anyio


class ElicitingContext(CallContext):
    """A call from a client that supports elicitation and answers with ``reply``."""

    def __init__(self, reply: ElicitResult | Exception,
                 capability: ElicitationCapability | None = None) -> None:
        super().__init__(
            tool_name="clarify",
            client_capabilities=ClientCapabilities(
                elicitation=capability or ElicitationCapability()
            ),
        )
        self.reply = reply
        self.asked: list[ElicitRequestParams] = []

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


async def call(args: dict[str, Any], ctx: CallContext | None = None) -> CallToolResult:
    with anyio.fail_after(5):
        return await handle_function_call("clarify", args,
                                          call=ctx or CallContext(tool_name="clarify"))


def text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def accepted(answer: str) -> ElicitResult:
    return ElicitResult(action="accept", content={"answer": answer})


async def test_an_open_question_is_asked_in_form_mode_and_the_answer_returned() -> None:
    ctx = ElicitingContext(accepted("Blue"))
    result = await call({"question": "Which colour?"}, ctx)
    assert not result.is_error
    assert json.loads(text(result)) == {"question": "Which colour?", "user_response": "Blue"}
    (params,) = ctx.asked
    assert isinstance(params, ElicitRequestFormParams)
    assert params.message == "Which colour?"
    answer = params.requested_schema["properties"]["answer"]
    assert answer["type"] == "string"
    assert "enum" not in answer
    assert params.requested_schema["required"] == ["answer"]


async def test_choices_are_offered_as_an_enum() -> None:
    ctx = ElicitingContext(accepted("tabs"))
    result = await call({"question": "Indent with?", "choices": ["tabs", "spaces"]}, ctx)
    assert json.loads(text(result))["user_response"] == "tabs"
    (params,) = ctx.asked
    assert isinstance(params, ElicitRequestFormParams)
    assert params.requested_schema["properties"]["answer"]["enum"] == ["tabs", "spaces"]


async def test_a_declined_question_returns_the_action_not_an_error() -> None:
    result = await call({"question": "Deploy now?"}, ElicitingContext(ElicitResult(action="decline")))
    assert not result.is_error
    body = json.loads(text(result))
    assert body["action"] == "decline"
    assert body["user_response"] is None
    assert body["question"] == "Deploy now?"


async def test_a_cancelled_question_returns_the_cancel_action() -> None:
    result = await call({"question": "Deploy now?"}, ElicitingContext(ElicitResult(action="cancel")))
    assert json.loads(text(result))["action"] == "cancel"


async def test_an_empty_question_is_rejected_before_the_user_is_asked() -> None:
    ctx = ElicitingContext(accepted("x"))
    for question in ("", "   "):
        result = await call({"question": question}, ctx)
        assert result.is_error
        assert "question" in text(result)
    assert ctx.asked == []


async def test_more_than_four_choices_are_rejected() -> None:
    ctx = ElicitingContext(accepted("a"))
    result = await call({"question": "Pick", "choices": ["a", "b", "c", "d", "e"]}, ctx)
    assert result.is_error
    assert "choices" in text(result)
    assert ctx.asked == []


async def test_the_handler_itself_refuses_bad_input_the_schema_would_catch() -> None:
    ctx = ElicitingContext(accepted("a"))
    empty = await clarify_tool({"question": " "}, call=ctx)
    too_many = await clarify_tool({"question": "Pick", "choices": list("abcde")}, call=ctx)
    not_strings = await clarify_tool({"question": "Pick", "choices": [1, 2]}, call=ctx)
    for result in (empty, too_many, not_strings):
        assert isinstance(result, CallToolResult) and result.is_error
    assert ctx.asked == []


async def test_a_client_without_elicitation_gets_clarify_not_available() -> None:
    result = await call({"question": "Which colour?"}, CallContext(tool_name="clarify"))
    assert result.is_error
    assert NOT_AVAILABLE in text(result)


async def test_a_client_with_only_url_elicitation_gets_clarify_not_available() -> None:
    ctx = ElicitingContext(accepted("x"), ElicitationCapability(url=UrlElicitationCapability()))
    result = await call({"question": "Which colour?"}, ctx)
    assert result.is_error and NOT_AVAILABLE in text(result)
    assert ctx.asked == []


async def test_a_client_with_form_elicitation_declared_explicitly_is_asked() -> None:
    ctx = ElicitingContext(accepted("x"), ElicitationCapability(form=FormElicitationCapability()))
    result = await call({"question": "Which colour?"}, ctx)
    assert not result.is_error and len(ctx.asked) == 1


async def test_an_elicitation_the_client_cannot_deliver_becomes_not_available() -> None:
    ctx = ElicitingContext(MCPError(INVALID_REQUEST, "no back-channel in stateless mode"))
    result = await call({"question": "Which colour?"}, ctx)
    assert result.is_error
    assert NOT_AVAILABLE in text(result)


async def test_unknown_arguments_are_rejected_by_the_strict_schema() -> None:
    result = await call({"question": "Q?", "urgent": True}, ElicitingContext(accepted("x")))
    assert result.is_error
