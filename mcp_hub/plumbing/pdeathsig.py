"""Stdio upstreams die with the hub, even when the hub is killed with ``kill -9``.

On Linux a process can ask the kernel for a signal when its parent dies
(``prctl(PR_SET_PDEATHSIG)``). Every stdio upstream the hub starts — by the
transport or by the early start in :mod:`mcp_hub.upstream.stdio.prespawn` — sets it to
``SIGKILL`` between ``fork`` and ``exec`` (the setting survives ``exec``), so
no upstream outlives a hub that had no chance to clean up. A child whose hub
died before the setting took effect kills itself at once.

This complements, and does not replace, the ordinary clean-up: on a normal
exit the hub still closes each child's stdin, waits, then terminates the
child's whole process group. Standard library only (the early start imports it
before anything heavy).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["available", "child_setup"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_prctl = _load_prctl()


def available() -> bool:
    """Whether stdio children can be tied to the hub's life on this platform."""
    return _prctl is not None


def child_setup() -> Callable[[], None] | None:
    """A ``preexec_fn`` that ties the child to this process (None where unsupported).

    The parent-death signal is sent when the *thread* that forked the child ends,
    so children must be started from a thread that lives as long as the hub (the
    event loop's thread, or the main thread for the early start).
    """
    prctl = _prctl
    if prctl is None:
        return None
    parent = os.getpid()
    sigkill = int(signal.SIGKILL)

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if os.getppid() != parent:  # the hub died before the signal was armed
            os.kill(os.getpid(), sigkill)

    return setup
