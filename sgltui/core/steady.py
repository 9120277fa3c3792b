"""A jittery figure shown at a steady pace, as `top` shows CPU: the mean of each window,
replaced once a window.

A host's CPU percentage read every second moves by a point or two on every read; drawn as it
comes, the figure flickers and every read repaints the screen (on an idle TUI, most of its
repaints). `top` shows CPU as the mean of its 3 s refresh interval; this does the same for the
figures the TUI shows, while the agent still records every sample.
"""

from __future__ import annotations

TOP_DELAY_S = 3.0  # top's default refresh interval (`top -d`)


class WindowMean:
    """Feed (time, value) pairs; `shown` is the first value until a window has passed, then
    the mean of the last whole window. A repeated or older time is ignored (the same sample
    can reach the TUI twice: pushed, and in the next status snapshot)."""

    def __init__(self, window_s: float = TOP_DELAY_S) -> None:
        self.window_s = window_s
        self.shown: float | None = None
        self._start: float | None = None
        self._last: float | None = None
        self._sum = 0.0
        self._n = 0

    def add(self, ts: float, value: float | None) -> float | None:
        if value is None or (self._last is not None and ts <= self._last):
            return self.shown
        self._last = ts
        if self._start is None:
            self._start, self.shown = ts, value
        self._sum += value
        self._n += 1
        if ts - self._start >= self.window_s:
            self.shown = self._sum / self._n
            self._start, self._sum, self._n = ts, 0.0, 0
        return self.shown
