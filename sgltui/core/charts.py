"""Unicode charts for plain-text reports: horizontal bars, stacked bars and sparklines.

They render in any terminal, Markdown viewer (inside code blocks) or e-mail, with no plotting
dependency; eighth-block characters give 8 steps per cell so short bars still differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_EIGHTHS = " ▏▎▍▌▋▊▉█"
_SPARK = "▁▂▃▄▅▆▇█"


def _finite(v: float | None) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def hbar(value: float | None, maximum: float, width: int = 24) -> str:
    """A bar of `width` cells at most, proportional to value/maximum (eighth-cell resolution)."""
    if not _finite(value) or maximum <= 0 or value <= 0:  # type: ignore[operator]
        return ""
    eighths = round(min(value / maximum, 1.0) * width * 8)  # type: ignore[operator]
    full, rest = divmod(eighths, 8)
    bar = "█" * full + (_EIGHTHS[rest] if rest else "")
    return bar or "▏"


def stacked_bar(parts: Sequence[tuple[float | None, str]], scale: float, width: int = 40) -> str:
    """One bar of segments, each drawn with its own fill character; `scale` seconds = width cells.

    Segments round to whole cells, but any non-zero part gets at least one cell so that it shows."""
    if scale <= 0:
        return ""
    out = []
    for value, char in parts:
        if not _finite(value) or value <= 0:  # type: ignore[operator]
            continue
        cells = max(1, round(value / scale * width))  # type: ignore[operator]
        out.append(char * cells)
    return "".join(out)


def sparkline(
    values: Sequence[float | None],
    width: int = 60,
    lo: float | None = None,
    hi: float | None = None,
) -> str:
    """Values squeezed into `width` cells (bucket means); None or NaN buckets print as a space."""
    if not values:
        return ""
    buckets: list[float | None] = []
    n = len(values)
    cells = min(width, n)
    for i in range(cells):
        chunk = [
            float(v)
            for v in values[i * n // cells : (i + 1) * n // cells]
            if v is not None and _finite(v)
        ]
        buckets.append(sum(chunk) / len(chunk) if chunk else None)
    finite = [b for b in buckets if b is not None]
    if not finite:
        return " " * cells
    lo = min(finite) if lo is None else lo
    hi = max(finite) if hi is None else hi
    span = hi - lo
    out = []
    for b in buckets:
        if b is None:
            out.append(" ")
        elif span <= 0:
            out.append(_SPARK[len(_SPARK) // 2] if hi > 0 else _SPARK[0])
        else:
            out.append(
                _SPARK[min(len(_SPARK) - 1, max(0, int((b - lo) / span * (len(_SPARK) - 1) + 0.5)))]
            )
    return "".join(out)
