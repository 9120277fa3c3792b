"""A main screen whose partial updates render only the widgets that overlap what changed.

Textual renders a partial update by cropping to the *union* of the dirty regions and asking
every widget whose clip overlaps that rectangle for all of its lines. On the sgltui screen the
chart (top right) and the log (bottom) change every second, so the union is nearly the whole
screen and every one of its ~30 widgets is re-rendered from its cache each second: the
largest part of an idle TUI's CPU. Here a widget takes part only when its visible area
overlaps one of the dirty regions themselves, and renders only the rows of those regions.
Only cells inside dirty regions are written (ChopsUpdate skips the rest), and every widget
visible in such a cell overlaps that region and renders that row, so the output is the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual._compositor import Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip


class SparseCompositor(Compositor):
    _sparse: list[Region] | None = None

    def render_partial_update(self):  # type: ignore[override]
        self._sparse = list(self._dirty_regions)
        try:
            return super().render_partial_update()
        finally:
            self._sparse = None

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        sparse = self._sparse
        if not sparse or crop is None:
            yield from super()._get_renders(crop)
            return
        intersection = Region.intersection
        for widget, (region, clip) in list(self.visible_widgets.items()):
            x, y, width, height = intersection(region, clip)
            if not (width and height):
                continue
            shown = Region(x, y, width, height)
            # The rows of this widget inside dirty regions (full width, so that the strips
            # line up with the compositor's cuts), as few row bands as possible.
            bands: list[list[int]] = []
            for dirty in sparse:
                part = intersection(shown, dirty)
                if part.height:
                    bands.append([part.y, part.y + part.height])
            if not bands:
                continue
            bands.sort()
            merged = [bands[0]]
            for y1, y2 in bands[1:]:
                if y1 <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], y2)
                else:
                    merged.append([y1, y2])
            for y1, y2 in merged:
                band = Region(x, y1, width, y2 - y1)
                yield (
                    region,
                    band,
                    widget.render_lines(Region(x - region.x, y1 - region.y, width, y2 - y1)),
                )


class MainScreen(Screen):
    """The app's default screen, with the sparse compositor."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = SparseCompositor()
