"""Replace a file at once: readers see the old bytes or the new ones, never half of them.

The new bytes go to a temporary file beside the target (same folder, so the
rename stays on one file system), created by :func:`tempfile.mkstemp`: an
unpredictable name, ``O_CREAT|O_EXCL|O_NOFOLLOW``, mode 0600, so a planted name
or symlink is never written through. The bytes are flushed and ``fsync``-ed, the
file gets the requested mode, and :func:`os.replace` renames it over the target.
If anything fails the temporary file is removed and the target is untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["replace_file"]


def replace_file(target: Path, data: bytes | Iterable[bytes], *, prefix: str,
                 suffix: str = ".tmp", mode: int | None = None) -> None:
    """Replace ``target`` with ``data`` (one ``bytes`` or its pieces) atomically.

    The temporary file is ``PREFIX<random>SUFFIX`` in ``target``'s folder; ``mode``
    is given to it before the rename (``None`` keeps mkstemp's 0600).
    """
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            if isinstance(data, bytes):
                out.write(data)
            else:
                out.writelines(data)
            out.flush()
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
