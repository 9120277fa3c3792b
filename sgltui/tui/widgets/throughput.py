"""Throughput over the last minutes: one sparkline row per series with its latest value.

One widget drawing its own lines instead of a Sparkline + Label per series: the chart changes
every second, and ten small widgets repainting through Rich cost most of an idle TUI's CPU.
Lines are built once per change (cached Strips) and served by render_line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from sgltui.core import units
from sgltui.tui import fmt

# (series name in TuiModel, label, formatter of the latest value)
ROWS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("gen_throughput", "gen tok/s", units.sig3),
    ("running", "running", lambda v: fmt.num(v)),
    ("queued", "queued", lambda v: fmt.num(v)),
    ("token_usage", "KV usage", lambda v: f"{v * 100:.0f}%"),
    ("accept_length", "accept len", lambda v: f"{v:.2f}"),
)
BLOCKS = " ▁▂▃▄▅▆▇█"
LABEL_W, VALUE_W = 11, 8


def buckets(values: list[float], width: int) -> list[float]:
    """Mean of the values falling in each of `width` columns (the newest on the right)."""
    if width <= 0 or not values:
        return []
    n = len(values)
    if n <= width:
        return list(values)
    out = []
    for i in range(width):
        a, b = i * n // width, (i + 1) * n // width
        chunk = values[a:b] or [values[a]]
        out.append(sum(chunk) / len(chunk))
    return out


def spark_rows(values: list[float], width: int, height: int) -> list[str]:
    """`height` text rows (top first) of a sparkline scaled to 0..max of `values`."""
    cols = buckets(values, width)
    top = max(cols) if cols else 0.0
    rows = []
    for level in range(height - 1, -1, -1):
        chars = []
        for v in cols:
            cells = (v / top * height * 8) if top > 0 else 0.0
            part = min(8, max(0, int(round(cells - level * 8))))
            if v > 0 and level == 0 and part == 0:
                part = 1  # a non-zero value never looks like no data
            chars.append(BLOCKS[part])
        rows.append("".join(chars).ljust(width))
    return rows


class ThroughputPane(Widget, can_focus=True):
    DEFAULT_CSS = "ThroughputPane { height: auto; }"

    def __init__(self, window_points: int = 300, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window_points = window_points
        self._series: dict[str, list[float]] = {}
        self._has_spec = False
        self._strips: list[Strip] = []
        self._key: tuple | None = None

    def show(self, series: dict[str, list[float]], has_spec: bool) -> None:
        relayout = has_spec != self._has_spec
        self._series = {k: v[-self.window_points :] for k, v in series.items()}
        self._has_spec = has_spec
        width = self.content_region.width
        if relayout or not width or self._key is None:
            self._key = None
            self.refresh(layout=relayout)
            return
        # Rebuild now and repaint only the rows that differ (often just the latest values:
        # a five-minute sparkline moves by a block only now and then), inside the border.
        old = self._strips
        self._key = None
        self.render_line(0)
        for y, strip in enumerate(self._strips):
            if y >= len(old) or list(strip) != list(old[y]):
                self.refresh(Region(0, y, width, 1))

    def _rows(self) -> list[tuple[str, str, Callable[[float], str], int]]:
        tall = 1 if self.screen.has_class("-short") else 2
        return [
            (n, label, form, tall if n == "gen_throughput" else 1)
            for n, label, form in ROWS
            if n != "accept_length" or self._has_spec
        ]

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        return sum(h for *_, h in self._rows())

    def _build_rows(self, width: int) -> list[Strip]:
        theme = self.app.theme_variables
        base = self.rich_style
        bar = base + Style.parse(theme.get("accent", "yellow"))
        dim = base + Style(dim=True)
        spark_w = max(1, width - LABEL_W - VALUE_W)
        strips: list[Strip] = []
        for name, label, form, height in self._rows():
            values = self._series.get(name) or []
            value = form(values[-1]) if values else "-"
            for i, text in enumerate(spark_rows(values, spark_w, height)):
                first = i == 0
                segs = [
                    Segment((label if first else "").ljust(LABEL_W)[:LABEL_W], base),
                    Segment(text, bar if values else dim),
                    Segment((value if first else "").rjust(VALUE_W)[:VALUE_W], base),
                ]
                strips.append(Strip(segs, width))
        return strips

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        key = (width, self.app.theme, self.screen.has_class("-short"))
        if key != self._key:
            self._strips = self._build_rows(width)
            self._key = key
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self.rich_style)
