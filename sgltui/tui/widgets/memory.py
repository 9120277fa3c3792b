"""GPU memory bars (the servers' share in the accent colour), the host RAM bar, and one line per
profile kept warm (agent/swap/standby.py): what its sleeping server keeps on the GPU and pins in host
RAM, beside the slot's serving server."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from sgltui import protocol
from sgltui.tui import views
from sgltui.tui.widgets.strips import at, shifted


class MemoryPane(Widget, can_focus=True):
    """Drawn line by line (the Line API): a sample changes one or two lines (the host's CPU
    figure every second), and only those are rebuilt and repainted, not the whole pane."""

    DEFAULT_CSS = "MemoryPane { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._telemetry = protocol.TelemetryView()
        # Each line as (styled markup, plain figures, styled markup) at the width of `_key`.
        self._bar_text: list[views.LineParts] = []
        self._strips: dict[int, Strip] = {}  # line -> its Strip, built when first painted
        # A styled part -> its Strip, at the theme of `_key`: a sample changes a line's figures
        # (the host's cpu %, a GPU's watts), appended as plain text to the parts kept; the
        # markup is parsed once per bar length, not once per reading.
        self._pieces: dict[str, Strip] = {}
        self._plain: Style | None = None  # the style of unstyled text (and of the padding)
        # A line too long for the width -> its Strip cut with an ellipsis (drawn whole).
        self._drawn: dict[str, Strip] = {}
        self._key: tuple | None = None  # (width, theme) the lines were built for
        self._warm: list[str] = []  # views.standby_lines of the slots, one per standby
        self._warm_pids: frozenset[int] = frozenset()  # their servers (their bar segment)
        # The slots the standbys' lines were last made of, and those lines (see show).
        self._slots_in: list[protocol.SlotStatus] | None = None
        self._warm_read: list[str] = []
        # GPU index -> (width, its reading, its lines): an idle host's sample changes one
        # GPU's power or temperature figure, not all 8.
        self._gpu_rows: dict[int, tuple[int, protocol.GpuView, list[views.LineParts]]] = {}

    def show(
        self, telemetry: protocol.TelemetryView, slots: list[protocol.SlotStatus] | None = None
    ) -> None:
        # A layout pass only when the number of GPUs or standbys (so the height) changes, and a
        # repaint of only the lines that read differently (none on most samples of an idle server).
        # The standbys' lines are made again only for another list of slots: the model keeps
        # its list while its slots are the same (TuiModel.slots), and each sample's draw gives
        # it again (its lines, escaped and formatted, were most of a sample's memory draw).
        if slots is None or slots is not self._slots_in:
            self._slots_in = slots
            self._warm_read = views.standby_lines(slots or [])
            self._warm_pids = frozenset(views.standby_pids(slots or []))
        warm = self._warm_read
        before = self._telemetry
        if (
            self._key is not None
            and warm == self._warm
            and telemetry.gpus == before.gpus
            and telemetry.host == before.host
            and telemetry.gpu_source == before.gpu_source
        ):
            return  # the same readings (GPUs that hold still): nothing to look at again
        relayout = len(telemetry.gpus) != len(before.gpus) or len(warm) != len(self._warm)
        if relayout:
            self._gpu_rows.clear()  # (one line or two per GPU)
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
        changed = []
        for y, (was, now) in enumerate(zip(old, self._bar_text, strict=True)):
            if was != now:
                self._strips.pop(y, None)
                changed.append(Region(0, y, width, 1))
        if changed:
            self.refresh(*changed)

    @property
    def compact(self) -> bool:
        """One line per GPU and for the RAM: a host of more than views.COMPACT_GPUS GPUs (the
        slots view says whose share each is)."""
        return len(self._telemetry.gpus) > views.COMPACT_GPUS

    def _bar_markup(self, width: int) -> list[views.LineParts]:
        # A GPU's lines are built again only when its readings changed (an idle host of 8
        # GPUs: the same text each second for most); the host's change often.
        tel, compact = self._telemetry, self.compact
        gpu_text: list[views.LineParts] = []
        if not tel.gpus:
            gpu_text = [(line, "", "") for line in views.gpu_lines(tel, width)]
        for g in tel.gpus:
            known = self._gpu_rows.get(g.index)
            if known is None or known[0] != width or known[1] != g:
                known = (width, g, views.gpu_row_parts(g, width, compact, self._warm_pids))
                self._gpu_rows[g.index] = known
            gpu_text += known[2]
        warm = [(line, "", "") for line in self._warm]
        return gpu_text + views.host_line_parts(tel, width, compact) + warm

    def _rendered(self, markup: str, width: int | None, kept: dict[str, Strip], most: int) -> Strip:
        """`markup` as Content renders it at `width` (None: its own length), kept in `kept`,
        which holds `most` times the pane's lines at most (texts of readings long gone)."""
        strip = kept.get(markup)
        if strip is None:
            content = Content.from_markup(markup)
            cells = content.cell_length if width is None else width
            strips = Visual.to_strips(self, content, cells, 1, self.visual_style)
            strip = strips[0] if strips else Strip.blank(cells, self.rich_style)
            if len(kept) > most * max(8, len(self._bar_text)):
                kept.clear()
            kept[markup] = strip
        return strip

    def _piece(self, markup: str) -> Strip:
        """A styled part of a line, rendered at its own length (kept: a bar's markup
        changes only when its cells do)."""
        return self._rendered(markup, None, self._pieces, 16)

    def _line(self, parts: views.LineParts, width: int) -> Strip:
        """The line's Strip, as Content would render the whole markup: the styled parts as
        kept, the figures in the text's own style, each segment with its offset."""
        head, plain, tail = parts
        pieces = [self._piece(head)] if head else []
        x = pieces[0].cell_length if pieces else 0
        if plain:
            if self._plain is None:
                blank = Visual.to_strips(self, Content(" "), 1, 1, self.visual_style)
                segments = list(blank[0]) if blank else []
                style = segments[0].style if segments and segments[0].style else self.rich_style
                self._plain = style.clear_meta_and_links()
            pieces.append(Strip([Segment(plain, self._plain + at(x))], cell_len(plain)))
            x += cell_len(plain)
        if tail:
            pieces.append(shifted(self._piece(tail), x))
        if sum(p.cell_length for p in pieces) <= width:
            return Strip.join(pieces)
        # Too long for the pane: the whole line, cut with an ellipsis (text-overflow).
        return self._rendered(views.joined(parts), width, self._drawn, 8)

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        key = (width, self.app.theme)
        if key != self._key:
            self._key = key
            self._bar_text = self._bar_markup(width or 60)
            self._strips.clear()
            self._pieces.clear()
            self._drawn.clear()
            self._plain = None
        strip = self._strips.get(y)
        if strip is None:
            if 0 <= y < len(self._bar_text):
                strip = self._line(self._bar_text[y], width)
            else:
                strip = Strip.blank(width, self.rich_style)
            self._strips[y] = strip
        return strip

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[override]
        return self.wanted_height()

    def wanted_height(self) -> int:
        """Its lines: two per GPU (one when compact) or the line saying why there are none,
        the RAM's two (one), and a line per standby."""
        gpus = len(self._telemetry.gpus)
        if self.compact:
            return gpus + 1 + len(self._warm)
        return (gpus * 2 or 1) + 2 + len(self._warm)
