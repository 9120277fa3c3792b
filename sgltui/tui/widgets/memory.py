"""GPU memory bars (the servers' share in the accent colour) and the host RAM bar."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widget import Widget

from sgltui.tui import views


class MemoryPane(Widget, can_focus=True):
    DEFAULT_CSS = "MemoryPane { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._telemetry: dict[str, Any] = {}
        self._last = ""

    def show(self, telemetry: dict[str, Any]) -> None:
        # A layout pass only when the number of GPUs (so the height) changes, and no repaint
        # at all when the bars read the same as before (most samples on an idle server).
        relayout = len(telemetry.get("gpus") or []) != len(self._telemetry.get("gpus") or [])
        self._telemetry = telemetry
        markup = self._bars_markup(self.content_region.width or 60)
        if relayout or markup != self._last:
            self.refresh(layout=relayout)

    def _bars_markup(self, width: int) -> str:
        return "\n".join(
            views.gpu_lines(self._telemetry, width) + views.host_lines(self._telemetry, width)
        )

    def render(self) -> Content:
        self._last = self._bars_markup(self.content_region.width or 60)
        return Content.from_markup(self._last)

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        gpus = len(self._telemetry.get("gpus") or []) or 0.5
        return int(gpus * 2) + 2
