"""Bounded ring buffers of (timestamp, value) points: the timeline's storage.

A 24 h agent must hold flat memory, so every series is a fixed-capacity ring. Points live in two
`array('d')` columns (16 bytes a point, no per-point Python objects); a missing value is stored as
NaN and handed back as None.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator
from typing import Any

_NAN = float("nan")


class Ring:
    """A fixed-capacity series of (ts, value); appending past capacity drops the oldest point."""

    __slots__ = ("capacity", "_ts", "_val", "_head", "_len")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("ring capacity must be at least 1")
        self.capacity = capacity
        # Columns grow by append until full, so a short-lived series does not pay for a full ring.
        self._ts = array("d")
        self._val = array("d")
        self._head = 0  # index of the oldest point once the ring is full
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def append(self, ts: float, value: float | None) -> None:
        v = _NAN if value is None else float(value)
        if self._len < self.capacity:
            self._ts.append(float(ts))
            self._val.append(v)
            self._len += 1
            return
        self._ts[self._head] = float(ts)
        self._val[self._head] = v
        self._head = (self._head + 1) % self.capacity

    def _indices(self) -> Iterator[int]:
        n = self._len
        start = self._head if n == self.capacity else 0
        for k in range(n):
            yield (start + k) % self.capacity

    def items(self, since: float | None = None) -> list[list[Any]]:
        """Points oldest first as [ts, value|None]; with `since`, only points strictly after it."""
        out: list[list[Any]] = []
        for i in self._indices():
            ts = self._ts[i]
            if since is not None and ts <= since:
                continue
            v = self._val[i]
            out.append([ts, None if math.isnan(v) else v])
        return out

    def last(self) -> tuple[float, float | None] | None:
        if self._len == 0:
            return None
        i = (self._head - 1) % self.capacity if self._len == self.capacity else self._len - 1
        v = self._val[i]
        return self._ts[i], (None if math.isnan(v) else v)

    def nbytes(self) -> int:
        """Bytes held by the point columns (for the memory bench)."""
        return (
            self._ts.buffer_info()[1] * self._ts.itemsize
            + self._val.buffer_info()[1] * self._val.itemsize
        )


class RingSet:
    """Named rings, all of one capacity, with a cap on how many series may exist.

    The series cap keeps memory bounded even if names were ever made from unbounded input
    (e.g. slot ids): past it, new names are dropped and counted instead of stored.
    """

    def __init__(self, capacity: int = 3600, max_series: int = 512) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self._rings: dict[str, Ring] = {}
        self.dropped_series = 0

    def append(self, name: str, ts: float, value: float | None) -> None:
        ring = self._rings.get(name)
        if ring is None:
            if len(self._rings) >= self.max_series:
                self.dropped_series += 1
                return
            ring = self._rings[name] = Ring(self.capacity)
        ring.append(ts, value)

    def names(self) -> list[str]:
        return sorted(self._rings)

    def get(self, name: str) -> Ring | None:
        return self._rings.get(name)

    def nbytes(self) -> int:
        return sum(r.nbytes() for r in self._rings.values())
