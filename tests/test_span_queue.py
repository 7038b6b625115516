"""The span export queue: an export round takes only the spans that wait when it starts."""

from __future__ import annotations

from typing import Any

from mcp_hub.telemetry.export import SpanQueue


class _Exporter:
    """Records each batch; while exporting, more spans arrive as if calls went on."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []
        self.queue: SpanQueue | None = None

    def export_records(self, records: list[Any]) -> None:
        self.batches.append(list(records))
        assert self.queue is not None
        for i in range(2):
            self.queue.queue.append(("late", len(self.batches), i))  # type: ignore[arg-type]

    def shutdown(self) -> None:
        pass


def test_a_round_exports_only_what_waited_when_it_started() -> None:
    exporter = _Exporter()
    queue = SpanQueue(exporter)
    exporter.queue = queue
    try:
        queue.batch = 4
        for i in range(10):
            queue.queue.append(("early", i))  # type: ignore[arg-type]
        queue.force_flush()
        # 10 waiting spans in batches of 4: three posts, then the round ends although
        # each post let two more spans in; those wait for the next round.
        assert [len(b) for b in exporter.batches] == [4, 4, 2]
        assert all(rec[0] == "early" for batch in exporter.batches for rec in batch)
        assert len(queue.queue) == 6
    finally:
        exporter.queue = None
        queue.queue.clear()
        queue.shutdown(timeout=5)
