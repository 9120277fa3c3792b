"""GPU memory bars (the servers' share in the accent colour), the host RAM bar, and one line per
profile kept warm (agent/standby.py): what its sleeping server keeps on the GPU and pins in host
RAM, beside the slot's serving server."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from sgltui import protocol
from sgltui.tui import views


class MemoryPane(Widget, can_focus=True):
    """Drawn line by line (the Line API): a sample changes one or two lines (the host's CPU
    figure every second), and only those are rebuilt and repainted, not the whole pane."""

    DEFAULT_CSS = "MemoryPane { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._telemetry = protocol.TelemetryView()
        self._bar_text: list[str] = []  # the markup of each line, at the width of `_key`
        self._strips: dict[int, Strip] = {}  # line -> its Strip, built when first painted
        # markup -> its Strip at the width and theme of `_key`: the host's line each second
        # reads one of a few texts again (cpu 11%, 12%...), parsed and rendered once each.
        self._drawn: dict[str, Strip] = {}
        self._key: tuple | None = None  # (width, theme) the lines were built for
        self._warm: list[str] = []  # views.standby_lines of the slots, one per standby
        self._gpu_key: tuple | None = None  # (width, GPU readings) of _gpu_text
        self._gpu_text: list[str] = []

    def show(
        self, telemetry: protocol.TelemetryView, slots: list[protocol.SlotStatus] | None = None
    ) -> None:
        # A layout pass only when the number of GPUs or standbys (so the height) changes, and a
        # repaint of only the lines that read differently (none on most samples of an idle server).
        warm = views.standby_lines(slots or [])
        relayout = len(telemetry.gpus) != len(self._telemetry.gpus) or len(warm) != len(self._warm)
        self._telemetry, self._warm = telemetry, warm
        width = self.content_region.width
        if relayout or not width or self._key is None:
            self._key = None
            self.refresh(layout=relayout)
            return
        old, self._bar_text = self._bar_text, self._bar_markup(width)
        if len(old) != len(self._bar_text):
            self._strips.clear()
            self.refresh()
            return
        for y, (was, now) in enumerate(zip(old, self._bar_text, strict=True)):
            if was != now:
                self._strips.pop(y, None)
                self.refresh(Region(0, y, width, 1))

    def _bar_markup(self, width: int) -> list[str]:
        # The GPUs' lines are built again only when their readings changed (an idle host of 8
        # GPUs: 16 lines of markup each second for the same text); the host's change often.
        tel = self._telemetry
        key = (width, tel.gpus, tel.gpu_source.message if not tel.gpus else None)
        if key != self._gpu_key:
            self._gpu_key, self._gpu_text = key, views.gpu_lines(tel, width)
        return self._gpu_text + views.host_lines(tel, width) + self._warm

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        key = (width, self.app.theme)
        if key != self._key:
            self._key = key
            self._bar_text = self._bar_markup(width or 60)
            self._strips.clear()
            self._drawn.clear()
        strip = self._strips.get(y)
        if strip is None:
            if 0 <= y < len(self._bar_text):
                markup = self._bar_text[y]
                strip = self._drawn.get(markup)
                if strip is None:
                    content = Content.from_markup(markup)
                    strips = Visual.to_strips(self, content, width, 1, self.visual_style)
                    strip = strips[0] if strips else Strip.blank(width, self.rich_style)
                    if len(self._drawn) > 8 * max(8, len(self._bar_text)):
                        self._drawn.clear()  # bounded: texts of readings long gone
                    self._drawn[markup] = strip
            else:
                strip = Strip.blank(width, self.rich_style)
            self._strips[y] = strip
        return strip

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        gpus = len(self._telemetry.gpus) or 0.5
        return int(gpus * 2) + 2 + len(self._warm)
