"""A stdio upstream that never completes its handshake.

``BROKEN_MODE=junk``: every line it reads is answered with lines that are not
JSON-RPC at all. ``BROKEN_MODE=wrong_ids``: every request gets a well-formed
response, but for another id. Either way ``initialize`` never gets its answer.
Writes its pid to ``BROKEN_PID_FILE`` (one line per process) when set. With
``STAY_AFTER_EOF`` set it does not exit when its input ends: only a signal ends it.
"""

from __future__ import annotations

import json
import os
import signal
import sys


def main() -> None:
    mode = os.environ.get("BROKEN_MODE", "junk")
    pid_file = os.environ.get("BROKEN_PID_FILE")
    if pid_file:
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        if mode == "junk":
            sys.stdout.write("starting up...\n{not json\n[1, 2, 3]\n")
        else:
            message = json.loads(line)
            if "id" in message and "method" in message:
                rid = message["id"]
                wrong = rid + 1000 if isinstance(rid, int) else f"{rid}-wrong"
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": wrong, "result": {}}) + "\n")
        sys.stdout.flush()
    while os.environ.get("STAY_AFTER_EOF"):
        signal.pause()


if __name__ == "__main__":
    main()
