"""``[servers.S.tools.T]`` and ``[profiles.P.tools.T]``: how one tool is rewritten.

The models only; they import nothing of the project, so :mod:`mcp_hub.config.model`
can use them. What the keys do is in :mod:`mcp_hub.rewrite.tool` and
docs/rewriting.md.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ArgumentRewrite", "ToolRewrite"]

#: What a client accepts as a tool name (registry/naming.py applies the prefix to server-level names).
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_default=True)


class ArgumentRewrite(_Model):
    """``[...tools.T.arguments.A]``: one argument of a rewritten tool.

    TOML has no null, so None always means "not set".
    """

    #: Removed from the schema; always sent upstream; a client value is refused.
    fixed: Any = None
    #: The client uses this name; the upstream gets the argument's own name.
    rename: str | None = Field(default=None, pattern=r"^[^\s]{1,128}$")
    #: Replaces the argument's description in the schema.
    description: str | None = None
    #: Shown in the schema and filled in when the client leaves the argument out.
    default: Any = None
    #: Removed from the schema and refused from clients, like ``fixed``; sent only when a
    #: ``default`` fills it in.
    hide: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> ArgumentRewrite:
        if self.fixed is not None and (self.rename is not None or self.default is not None):
            raise ValueError("a 'fixed' argument is not shown: 'rename' and 'default' make no sense")
        return self


class ToolRewrite(_Model):
    """``[servers.S.tools.T]`` (keyed by the upstream's tool name) or
    ``[profiles.P.tools.T]`` (keyed by the exposed name)."""

    #: The new name: under a server the prefix still applies; under a profile it is the full name.
    name: str | None = Field(default=None, pattern=TOOL_NAME_PATTERN)
    title: str | None = None
    description: str | None = None
    #: Merged over the upstream's annotations (``readOnlyHint``, ``destructiveHint``, ...).
    annotations: dict[str, Any] | None = None
    #: Not listed, not searchable, not callable (the same error as an unknown tool).
    hide: bool = False
    arguments: dict[str, ArgumentRewrite] = Field(default_factory=dict)
