"""``clarify``: ask the calling client's user a question through MCP elicitation.

The question goes to the downstream client whose ``tools/call`` is running, as a
form-mode ``elicitation/create`` request with one string field ``answer`` (an
enum of the choices when choices are given). The result is
``{question, user_response}`` when the user answers, or the action
(``decline``/``cancel``) when they do not — a refusal is information for the
model, not a tool failure. A client that did not declare the elicitation
capability (or declared only URL mode) gets the isError result
"Clarify not available in this context.".

The tool is always listed: availability depends on the calling client, which a
process-wide ``check_fn`` cannot see.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import ElicitRequestFormParams, ElicitResult

from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import registry, tool_error

__all__ = ["CLARIFY_SCHEMA", "MAX_CHOICES", "clarify_tool", "client_supports_form_elicitation"]

MAX_CHOICES = 4
MAX_QUESTION_CHARS = 2000
MAX_CHOICE_CHARS = 200
NOT_AVAILABLE = "Clarify not available in this context."


def client_supports_form_elicitation(call: CallContext | None) -> bool:
    """Whether the calling client can answer a form-mode elicitation.

    An empty ``elicitation: {}`` capability means form mode (the spec's backward
    compatible reading); a capability naming only ``url`` does not.
    """
    if call is None or not call.can_elicit:
        return False
    caps = call.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


def _clean_choices(raw: Any) -> list[str] | str:
    """The choices as a list of distinct non-empty strings, or an error message."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        return "choices must be a list of strings."
    choices: list[str] = []
    for item in raw:
        if not isinstance(item, str) or not item.strip():
            return "Each choice must be a non-empty string."
        if len(item) > MAX_CHOICE_CHARS:
            return f"Each choice must be at most {MAX_CHOICE_CHARS} characters."
        if item not in choices:
            choices.append(item)
    if len(choices) > MAX_CHOICES:
        return f"At most {MAX_CHOICES} choices are allowed; got {len(choices)}."
    return choices


def _requested_schema(question: str, choices: list[str]) -> dict[str, Any]:
    answer: dict[str, Any] = {"type": "string", "title": "Answer", "description": question}
    if choices:
        answer["enum"] = choices
    return {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}


# ── 1. handler ──────────────────────────────────────────────────────────────────


async def clarify_tool(args: dict[str, Any], *, call: CallContext | None = None,
                       **_context: Any) -> Any:
    """Ask the user ``question`` (optionally with up to four ``choices``) and return the answer."""
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        return tool_error("Question text is required.")
    if len(question) > MAX_QUESTION_CHARS:
        return tool_error(f"The question must be at most {MAX_QUESTION_CHARS} characters.")
    choices = _clean_choices(args.get("choices"))
    if isinstance(choices, str):
        return tool_error(choices)
    if call is None or not client_supports_form_elicitation(call):
        return tool_error(NOT_AVAILABLE)

    params = ElicitRequestFormParams(
        message=question, requested_schema=_requested_schema(question, choices)
    )
    try:
        result: ElicitResult = await call.elicit(params)
    except MCPError as exc:
        # No back-channel (stateless HTTP) or the client refused the request.
        return tool_error(NOT_AVAILABLE, detail=exc.error.message)

    if result.action != "accept":
        verb = "declined to answer" if result.action == "decline" else "cancelled the question"
        return {
            "question": question,
            "action": result.action,
            "user_response": None,
            "message": f"The user {verb}.",
        }
    answer = (result.content or {}).get("answer")
    if answer is None:
        return tool_error("The client accepted the question but returned no answer.",
                          question=question)
    return {"question": question, "user_response": str(answer)}


# ── 2. check_fn ─────────────────────────────────────────────────────────────────


def check_clarify_requirements() -> bool:
    """Always listed; the handler tells clients without elicitation so."""
    return True


# ── 3. schema ───────────────────────────────────────────────────────────────────

CLARIFY_SCHEMA: dict[str, Any] = {
    "name": "clarify",
    "description": (
        "Ask the user a question when you need clarification or a decision before going on. "
        "Two modes: multiple choice (give up to 4 `choices`; the user picks one) or "
        "open-ended (no choices; the user types an answer). Returns "
        "{question, user_response}, or the user's action when they decline or cancel. "
        "Works only with clients that support MCP elicitation; elsewhere it returns an "
        "error. Use it when ambiguity blocks progress, not for confirmations you can infer."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUESTION_CHARS,
                "pattern": r"\S",
                "description": "The question to show the user.",
            },
            "choices": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_CHOICE_CHARS},
                "maxItems": MAX_CHOICES,
                "uniqueItems": True,
                "description": "Up to 4 answers to pick from; omit for an open-ended question.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    "annotations": {
        "title": "Ask the user",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    },
}

# ── 4. registration ─────────────────────────────────────────────────────────────

registry.register(
    name="clarify",
    toolset="clarify",
    schema=CLARIFY_SCHEMA,
    handler=clarify_tool,
    check_fn=check_clarify_requirements,
    is_async=True,
    emoji="❓",
)
