"""Per-request records: one JSON object a line, written as requests finish.

Records go to disk instead of memory so a long run stays flat, and every
summary can be recomputed from them later. Times are seconds relative to the run's origin
(a perf_counter reading); `t_send` orders them.

Keys: i (request index), t_send, ttft, e2e (s; ttft/e2e null on failure), in, out (tokens from
the server), cached, chunks (content chunks seen), usage ("server" or "chunks" when the server
did not report usage), ok, error (one line or null).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from sgltui.bench.apis import dumps


class RecordWriter:
    """Writes one point's records to a fresh file; buffered, flushed every `flush_every`
    records and at close."""

    def __init__(self, path: Path, flush_every: int = 256) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] = self.path.open("wb")  # a rerun of a point must not mix in old records
        self._pending = 0
        self._flush_every = flush_every

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(dumps(record) + b"\n")
        self._pending += 1
        if self._pending >= self._flush_every:
            self._fh.flush()
            self._pending = 0

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Yields records; a torn last line (process killed mid-write) is skipped."""
    with Path(path).open("rb") as fh:
        for raw in fh:
            try:
                yield json.loads(raw)
            except ValueError:
                continue
