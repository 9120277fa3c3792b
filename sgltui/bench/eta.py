"""How long a bench run takes: the whole run's estimate and a running ETA, from its spec and the
progress its points report (bench/runner.py's messages). Pure: the caller passes the clock.

A point of `--duration S` takes S (plus its warmup); a point of `--requests N` takes N requests
at the rate its concurrency completes them, known once a point at that concurrency has run a
while. An unmeasured concurrency is guessed from the nearest measured one, its rate scaled by
the square root of the ratio (between no gain and a linear one: batching gains, but less than
linearly); the guess is replaced as points are measured.
"""

from __future__ import annotations

import math
from typing import Any

from sgltui.core import units

# A rate from fewer completions than this is noise (the first requests of a point).
MIN_DONE = 3


class RunClock:
    def __init__(self, spec: dict[str, Any]) -> None:
        profiles = list(spec.get("profiles") or []) or [None]
        self.order = [
            (p, int(c), k)
            for p in profiles
            for c in spec.get("concurrency") or []
            for k in range(int(spec.get("repeat") or 1))
        ]
        self.requests: int | None = spec.get("requests")
        self.duration: float | None = spec.get("duration")
        self.warmup: int | None = spec.get("warmup")
        self.rates: dict[tuple[Any, int], float] = {}  # completions/s, by (profile, conc)
        self.point = 0
        self.phase = ""
        self.done = 0
        self.phase_since: float | None = None
        self.started: float | None = None
        self.swaps: list[float] = []  # how long each swap to a profile took

    def observe(self, msg: dict[str, Any], now: float) -> None:
        """One progress message (bench.progress as the runner sends it)."""
        if self.started is None:
            self.started = now
        point, phase = msg.get("point") or 0, msg.get("phase") or ""
        if (point, phase) != (self.point, self.phase):
            if self.phase == "swapping" and self.phase_since is not None:
                self.swaps.append(now - self.phase_since)
            self.point, self.phase, self.phase_since = point, phase, now
        self.done = int(msg.get("done") or 0)
        if phase == "measure" and 1 <= point <= len(self.order) and self.phase_since is not None:
            took = now - self.phase_since
            if self.done >= MIN_DONE and took > 0:
                profile, conc, _ = self.order[point - 1]
                self.rates[(profile, conc)] = self.done / took

    def _rate(self, profile: Any, conc: int) -> float | None:
        known = self.rates.get((profile, conc))
        if known is not None:
            return known
        same = [r for (p, c), r in self.rates.items() if c == conc]
        if same:
            return sum(same) / len(same)
        if not self.rates:
            return None
        (_, near), rate = min(self.rates.items(), key=lambda kv: abs(math.log(kv[0][1] / conc)))
        return rate * math.sqrt(conc / near)

    def point_seconds(self, index: int) -> float | None:
        """The whole of point `index` (1-based): its warmup and its measured part."""
        profile, conc, _ = self.order[index - 1]
        rate = self._rate(profile, conc)
        warmup = conc if self.warmup is None else self.warmup
        if self.duration:
            return self.duration + (warmup / rate if rate else 0.0)
        if rate is None or not self.requests:
            return None
        return (self.requests + warmup) / rate

    def total(self) -> float | None:
        """The whole run's estimate (None until it can be told: `--requests` before a rate)."""
        parts = [self.point_seconds(i) for i in range(1, len(self.order) + 1)]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)

    def remaining(self, now: float) -> float | None:
        """What is left: the rest of the current point and every point after it."""
        if not self.order:
            return None
        cur = min(max(self.point, 1), len(self.order))
        later = [self.point_seconds(i) for i in range(cur + 1, len(self.order) + 1)]
        this = self.point_seconds(cur)
        if this is None or any(p is None for p in later):
            return None
        left = this
        if self.phase == "measure" and self.phase_since is not None:
            if self.duration:
                left = max(0.0, self.duration - (now - self.phase_since))
            elif self.requests:
                rate = self._rate(*self.order[cur - 1][:2]) or 0.0
                left = max(0, self.requests - self.done) / rate if rate else this
        # the swaps still to come: one per later profile, as long as those seen so far
        profiles_left = len({p for p, _, _ in self.order[cur:]} - {self.order[cur - 1][0]})
        swap = sum(self.swaps) / len(self.swaps) if self.swaps else 0.0
        return left + sum(p for p in later if p is not None) + profiles_left * swap


def opening_line(spec: dict[str, Any]) -> str:
    """What `sgltui bench` says before the first point: the run's size and, when the spec alone
    tells (`--duration`), its time; else when it will tell."""
    clock = RunClock(spec)
    n = len(clock.order)
    profiles = len(spec.get("profiles") or []) or 1
    size = (
        f"{n} point{'s' if n != 1 else ''} ({profiles} profile{'s' if profiles != 1 else ''} x "
        f"{len(spec.get('concurrency') or [])} concurrencies x {spec.get('repeat') or 1} repeats)"
    )
    if clock.duration:
        least = n * clock.duration
        return f"{size}: about {units.estimate(least)} of load, plus warmups and swaps"
    return (
        f"{size} of {clock.requests} requests each: the whole run's estimate follows the "
        "first point's first requests"
    )


def estimate_words(seconds: float | None) -> str:
    return "?" if seconds is None else units.estimate(seconds)
