"""Rates and ETA of a running job, from its cumulative counters (pure; no I/O).

The ETA is the bench's estimator (bench/compare.py `job_estimate`): tokens still to generate over
the output token throughput, with the tokens still to generate taken as the remaining
completions times the mean output length seen so far.
"""

from __future__ import annotations

import math
from collections import deque

WINDOW_S = 30.0  # the rate is over the last 30 s: recent enough to follow a swap
HISTORY_EVERY_S = 5.0
HISTORY_LEN = 240  # 20 min of 5-s points for the rate chart


class Rates:
    def __init__(self) -> None:
        self._pts: deque[tuple[float, int, int]] = deque()
        self.history: deque[tuple[float, float]] = deque(maxlen=HISTORY_LEN)
        self._last_hist = 0.0

    def add(self, t: float, completions: int, out_tokens: int, wall: float) -> None:
        pts = self._pts
        if pts and completions < pts[-1][1]:
            pts.clear()  # counters restarted (a new runner): a new series
        pts.append((t, completions, out_tokens))
        while len(pts) > 2 and t - pts[0][0] > WINDOW_S:
            pts.popleft()
        if t - self._last_hist >= HISTORY_EVERY_S:
            self._last_hist = t
            self.history.append((round(wall, 1), round(self.tok_s(), 1)))

    def reset(self) -> None:
        """After a pause or swap: the old rate says nothing about the new server."""
        self._pts.clear()

    def _span(self) -> tuple[float, int, int]:
        if len(self._pts) < 2:
            return 0.0, 0, 0
        t0, c0, k0 = self._pts[0]
        t1, c1, k1 = self._pts[-1]
        return t1 - t0, c1 - c0, k1 - k0

    def completions_s(self) -> float:
        dt, dc, _ = self._span()
        return dc / dt if dt > 0 else 0.0

    def tok_s(self) -> float:
        dt, _, dk = self._span()
        return dk / dt if dt > 0 else 0.0


def eta_s(remaining: int, answered: int, out_tokens: int, tok_s: float) -> float | None:
    """Seconds to finish `remaining` completions at `tok_s` (None until there is a rate)."""
    if remaining <= 0:
        return 0.0
    if answered <= 0 or tok_s <= 0 or out_tokens <= 0:
        return None
    tokens = remaining * (out_tokens / answered)
    seconds = tokens / tok_s
    return seconds if math.isfinite(seconds) else None
