"""Where a hub keeps its state when ``[hub] state_dir`` is not set: one folder per config.

Pins, OAuth tokens and their key belong to the servers of one config: a hub run
from a project's ``servers.toml`` must not see the pins of another project's
``git`` server (a ``pins diff`` listing changes of a server it does not have, a
first start warning of tools "changed since pinned" that it never pinned). So
the default state folder is derived from the config file's resolved path::

    $XDG_STATE_HOME/mcp-hub/configs/<folder>-<12 hex of sha256(path)>

(``~/.local/state`` when ``XDG_STATE_HOME`` is unset; ``<folder>`` is the name
of the folder the config file is in, for a reader's eye only). A config that has
no file (built in code) keeps the per-user folder itself, ``…/mcp-hub``.

Earlier versions kept everything in the per-user folder. Its ``pins.json`` keeps
working: the first time a config's own pin file is opened and does not exist
yet, the pins of that config's servers are copied from it
(:func:`mcp_hub.pins.pinning.adopt_pins`); the per-user file is left as it was, for the
other configs. OAuth tokens are not copied (docs/upstreams.md, "Where tokens
are kept"). Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["config_state_dir", "user_state_dir"]


def user_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/mcp-hub``, or ``~/.local/state/mcp-hub``: the per-user folder."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-hub"


def config_state_dir(config_file: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The state folder of the config at ``config_file`` (see the module docstring)."""
    resolved = Path(os.path.realpath(config_file))
    digest = hashlib.sha256(str(resolved).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    folder = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved.parent.name).strip("._") or "root"
    return user_state_dir(environ) / "configs" / f"{folder[:40]}-{digest}"
