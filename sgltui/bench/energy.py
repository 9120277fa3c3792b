"""GPU energy of a bench point: the agent's power samples (W, about one a second per GPU)
integrated over the point's wall-clock span (pure; the runner asks the agent for the samples)."""

from __future__ import annotations

from typing import Any


def integrate(points: list[Any], t0: float, t1: float) -> float | None:
    """Joules from (ts, watts) samples over [t0, t1]: trapezoids between samples, the value at
    the span's ends held from the nearest sample. None without a sample in or next to the span."""
    pts = sorted(
        (float(p[0]), float(p[1]))
        for p in points
        if isinstance(p, (list, tuple)) and len(p) >= 2 and isinstance(p[1], (int, float))
    )
    if not pts or t1 <= t0:
        return None
    inside = [p for p in pts if t0 <= p[0] <= t1]
    before = [p for p in pts if p[0] < t0]
    after = [p for p in pts if p[0] > t1]
    edge0 = before[-1][1] if before else (inside or after)[0][1]
    edge1 = after[0][1] if after else (inside or before)[-1][1]
    series = [(t0, edge0), *inside, (t1, edge1)]
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(series, series[1:], strict=False))


def energy_fields(joules: float | None, completed: int, out_tokens: int) -> dict[str, float | None]:
    """What a bench result carries: joules, per completion and tokens per joule."""
    if joules is None or joules <= 0:
        return {"joules": None, "j_per_completion": None, "tok_per_j": None}
    return {
        "joules": round(joules, 1),
        "j_per_completion": round(joules / completed, 3) if completed else None,
        "tok_per_j": round(out_tokens / joules, 4) if out_tokens else None,
    }
