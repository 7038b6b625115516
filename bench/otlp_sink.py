"""A minimal OTLP/HTTP sink for benchmarks: answers every POST with 200, counts requests.

The benchmarks measure what the hub pays to record and export telemetry, so the
receiving end must cost the hub nothing: it runs in a thread of the benchmark
process, reads each body and drops it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["otlp_sink"]


@contextmanager
def otlp_sink() -> Iterator[tuple[str, dict[str, int]]]:
    """Yields ``(base_url, counts)``; ``counts`` maps a path to requests and bytes received."""
    counts: dict[str, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                counts[self.path] = counts.get(self.path, 0) + 1
                counts[f"{self.path} bytes"] = counts.get(f"{self.path} bytes", 0) + len(body)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counts
    finally:
        server.shutdown()
        server.server_close()
