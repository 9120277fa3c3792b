"""GPU memory bars (the servers' share in the accent colour) and the host RAM bar."""

from __future__ import annotations

from typing import Any

from textual.widget import Widget
from textual.content import Content

from sgltui.tui import views


class MemoryPane(Widget, can_focus=True):
    DEFAULT_CSS = "MemoryPane { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._telemetry: dict[str, Any] = {}

    def show(self, telemetry: dict[str, Any]) -> None:
        self._telemetry = telemetry
        self.refresh(layout=True)

    def render(self) -> Content:
        width = self.content_region.width or 60
        lines = views.gpu_lines(self._telemetry, width) + views.host_lines(self._telemetry, width)
        return Content.from_markup("\n".join(lines))

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        gpus = len(self._telemetry.get("gpus") or []) or 0.5
        return int(gpus * 2) + 2
