"""Pure statistics for benchmark runs (no I/O, no third-party imports).

Definitions: percentiles interpolate linearly
between order statistics (numpy's default, which SGLang's and vLLM's clients use), confidence
intervals are t-based, concurrency comes from Little's law, and the steady-state window is the
longest stretch where the in-flight count stays at or above a fraction of its peak.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

# Two-sided 95% Student t quantiles by degrees of freedom; between table entries the next
# smaller df is used (conservative: a wider interval).
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


def t95(df: int) -> float:
    """Two-sided 95% t quantile for `df` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError("t quantile needs at least 1 degree of freedom")
    if df in _T95:
        return _T95[df]
    if df > 120:
        return 1.960
    return _T95[max(k for k in _T95 if k <= df)]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """q-th percentile (0..100) of already sorted values, linear interpolation; nan if empty."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    if n == 1:
        return float(sorted_values[0])
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


_SUMMARY_KEYS = ("mean", "median", "std", "p90", "p95", "p99", "max", "min")
_SPREAD_KEYS = ("std", "cv", "se", "ci_low", "ci_high")  # unknown from fewer than two values


def summarize(values: Iterable[float]) -> dict[str, float]:
    """mean/median/std/p90/p95/p99/max/min/count of a population (std with ddof=0, as numpy)."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        return {"count": 0, **dict.fromkeys(_SUMMARY_KEYS, math.nan)}
    mean = math.fsum(data) / n
    var = math.fsum((x - mean) ** 2 for x in data) / n
    return {
        "count": n,
        "mean": mean,
        "median": percentile(data, 50),
        "std": math.sqrt(var),
        "p90": percentile(data, 90),
        "p95": percentile(data, 95),
        "p99": percentile(data, 99),
        "max": data[-1],
        "min": data[0],
    }


def mean_ci(values: Sequence[float]) -> dict[str, float]:
    """Mean across repeats with sample std, CV, standard error and a t-based 95% CI.

    With one value the spread is unknown: std/se/ci are nan, so callers can say "no CI".
    """
    n = len(values)
    if n < 2:
        mean = math.fsum(values) / n if n else math.nan
        return {"n": n, "mean": mean, **dict.fromkeys(_SPREAD_KEYS, math.nan)}
    mean = math.fsum(values) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
    se = std / math.sqrt(n)
    half = t95(n - 1) * se
    return {
        "n": n,
        "mean": mean,
        "std": std,
        "cv": std / mean if mean else math.nan,
        "se": se,
        "ci_low": mean - half,
        "ci_high": mean + half,
    }


def intervals_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two mean_ci results overlap (then the two are called a tie); False without CIs."""
    if any(math.isnan(x) for x in (a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"])):
        return False
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def avg_concurrency(e2e_latencies: Iterable[float], duration: float) -> float:
    """Little's law: time-averaged number of requests in flight = sum of E2E / duration."""
    if duration <= 0:
        return math.nan
    return math.fsum(e2e_latencies) / duration


def in_flight_steps(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, int]]:
    """Step function of the in-flight count: [(time, count from this time on), ...].

    At equal timestamps ends are applied before starts, so back-to-back requests on one
    connection do not count as two in flight.
    """
    events: list[tuple[float, int]] = []
    for start, end in intervals:
        events.append((start, 1))
        events.append((end, -1))
    events.sort(key=lambda e: (e[0], e[1]))
    steps: list[tuple[float, int]] = []
    level = 0
    for t, delta in events:
        level += delta
        if steps and steps[-1][0] == t:
            steps[-1] = (t, level)
        else:
            steps.append((t, level))
    return steps


def peak_concurrency(intervals: Iterable[tuple[float, float]]) -> int:
    """Maximum number of requests in flight at once (sweep over start/end events)."""
    return max((n for _, n in in_flight_steps(intervals)), default=0)


# A closed loop sends a lane's next request only after its last one ended: the in-flight count
# dips for the client's turnaround (well under a millisecond to a few ms) at every completion.
# Such a dip is no end of the steady state; a dip this long or longer is (a stall, the drain).
STEADY_MAX_DIP_S = 0.1


def steady_state_window(
    intervals: Sequence[tuple[float, float]],
    ratio: float = 0.8,
    max_dip: float = STEADY_MAX_DIP_S,
) -> tuple[float, float] | None:
    """Longest [start, end) where in-flight >= ratio * peak in-flight, dips shorter than
    max_dip (a lane between its requests) bridged; None without requests."""
    steps = in_flight_steps(intervals)
    peak = max((n for _, n in steps), default=0)
    if peak == 0:
        return None
    threshold = ratio * peak
    best: tuple[float, float] | None = None
    run_start: float | None = None
    dip_start: float | None = None

    def close(end: float) -> None:
        nonlocal best
        if run_start is not None and (best is None or end - run_start > best[1] - best[0]):
            best = (run_start, end)

    for t, n in steps:
        if n >= threshold:
            if run_start is None:
                run_start = t
            elif dip_start is not None and t - dip_start >= max_dip:
                close(dip_start)
                run_start = t
            dip_start = None
        elif run_start is not None and dip_start is None:
            dip_start = t
    if dip_start is not None:
        close(dip_start)
    return best


class TokenBuckets:
    """Output tokens per fixed-width time bucket: constant memory per second of run time.

    Used for the peak output tok/s (max over 1-s buckets, tokens weighted per chunk) and for
    the tokens inside the steady-state window (buckets cut by the window are prorated).
    """

    def __init__(self, origin: float, width: float = 0.1) -> None:
        self.origin = origin
        self.width = width
        self.counts: list[float] = []

    def add(self, t: float, tokens: float) -> None:
        i = int((t - self.origin) / self.width)
        if i < 0:
            i = 0
        counts = self.counts
        if i >= len(counts):
            counts.extend([0.0] * (i + 1 - len(counts)))
        counts[i] += tokens

    def total(self) -> float:
        return math.fsum(self.counts)

    def peak_rate(self, window: float = 1.0) -> float:
        """Max tokens/s over consecutive non-overlapping `window`-second buckets from the origin."""
        per = max(1, round(window / self.width))
        best = 0.0
        for i in range(0, len(self.counts), per):
            best = max(best, math.fsum(self.counts[i : i + per]))
        return best / (per * self.width)

    def tokens_between(self, start: float, end: float) -> float:
        """Tokens in [start, end), prorating the buckets that the bounds cut."""
        if end <= start:
            return 0.0
        total = 0.0
        first = max(0, int((start - self.origin) / self.width))
        last = min(len(self.counts) - 1, int((end - self.origin) / self.width))
        for i in range(first, last + 1):
            b0 = self.origin + i * self.width
            b1 = b0 + self.width
            overlap = min(b1, end) - max(b0, start)
            if overlap > 0:
                total += self.counts[i] * overlap / self.width
        return total

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "width": self.width, "counts": self.counts}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenBuckets:
        tb = cls(data["origin"], data["width"])
        tb.counts = list(data["counts"])
        return tb


def steady_state_throughput(
    intervals: Sequence[tuple[float, float]], buckets: TokenBuckets, ratio: float = 0.8
) -> tuple[float, tuple[float, float] | None]:
    """Output tokens inside the steady-state window / window length, and the window."""
    window = steady_state_window(intervals, ratio)
    if window is None or window[1] <= window[0]:
        return math.nan, window
    return buckets.tokens_between(*window) / (window[1] - window[0]), window


class LogHistogram:
    """Fixed-memory histogram with log-spaced buckets (relative width `rel`) for pooled samples.

    Inter-token gaps number one per token, too many to keep in a list on long runs
    (millions on a long run); percentiles from here are within `rel`/2 relative error, while
    count, mean and max stay exact.
    """

    def __init__(self, lo: float = 1e-6, hi: float = 1e4, rel: float = 0.002) -> None:
        self.lo = lo
        self.log_base = math.log1p(rel)
        self.nbuckets = int(math.log(hi / lo) / self.log_base) + 2
        self.buckets = [0] * self.nbuckets
        self.count = 0
        self.sum = 0.0
        self.max = 0.0

    def add(self, value: float, n: int = 1) -> None:
        if value <= self.lo:
            i = 0
        else:
            i = min(self.nbuckets - 1, int(math.log(value / self.lo) / self.log_base) + 1)
        self.buckets[i] += n
        self.count += n
        self.sum += value * n
        if value > self.max:
            self.max = value

    def percentile(self, q: float) -> float:
        if self.count == 0:
            return math.nan
        rank = q / 100.0 * (self.count - 1)
        seen = 0
        for i, c in enumerate(self.buckets):
            if c and seen + c > rank:
                if i == 0:
                    return 0.0  # at or below the resolution: effectively no gap
                # geometric middle of the bucket, clamped to the exact max
                mid = self.lo * math.exp((i - 0.5) * self.log_base)
                return min(mid, self.max)
            seen += c
        return self.max

    def summary(self) -> dict[str, float]:
        if self.count == 0:
            return {
                "count": 0,
                "mean": math.nan,
                "median": math.nan,
                "p90": math.nan,
                "p95": math.nan,
                "p99": math.nan,
                "max": math.nan,
            }
        return {
            "count": self.count,
            "mean": self.sum / self.count,
            "median": self.percentile(50),
            "p90": self.percentile(90),
            "p95": self.percentile(95),
            "p99": self.percentile(99),
            "max": self.max,
        }
