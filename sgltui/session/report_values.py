"""Number helpers every part of the session report shares (session/report.py and its parts):
a finite float or None, JSON-safe values, a quantile."""

from __future__ import annotations

import math
from typing import Any


def num(v: Any) -> float | None:
    return (
        float(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        else None
    )


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None (bench files may hold NaN for single runs)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
