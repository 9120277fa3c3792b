"""The time-cursor bar: where the replay is, what happened when, and how fast it plays.

    ▶ 10x  08:01:44  +1:44 / 4:20  ━━━━━━━━━━◆━━━━●──────✖──────  space play · ←/→ step · [ ] events · g go to

Markers on the track: ◆ swap, ✖ failure or crash, ▲ launch, ■ bench run. Clicking the track
seeks there. The bar only reads the source and calls its cursor methods; keys live on the app.
"""

from __future__ import annotations

from rich.text import Text
from textual.events import Click
from textual.widget import Widget

from sgltui.core import units
from sgltui.tui.replay.source import ReplaySource

_MARKS = (  # (event test, glyph, style): later rows win when two events share a cell
    (lambda e: e.get("type") == "launch", "▲", "$accent"),
    (lambda e: e.get("type") in ("bench.start", "bench.done"), "■", "$secondary"),
    (lambda e: e.get("type") == "swap.done", "◆", "$primary"),
    (
        lambda e: e.get("type") == "slot.state" and e.get("state") in ("failed", "crashed"),
        "✖",
        "$error",
    ),
    (lambda e: e.get("type") == "disk.error", "!", "$error"),
)
_HELP = "space play · ←/→ step · [ ] events · -/+ speed · g go to"


def fmt_speed(speed: float) -> str:
    return f"{speed:g}x"


class TimeCursorBar(Widget, can_focus=False):
    DEFAULT_CSS = """
    TimeCursorBar {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    """

    def __init__(self, source: ReplaySource, **kwargs) -> None:
        super().__init__(**kwargs)
        self.source = source
        self._marks: list[tuple[float, str, str]] = []
        for ev in source.replay.events:
            for test, glyph, style in _MARKS:
                if test(ev):
                    self._marks.append((float(ev["ts"]), glyph, style))
        self._track_x = 0
        self._track_w = 0

    def on_mount(self) -> None:
        self.source.listeners.append(self._on_move)

    def on_unmount(self) -> None:
        if self._on_move in self.source.listeners:
            self.source.listeners.remove(self._on_move)

    def _on_move(self, _source: ReplaySource) -> None:
        self.refresh()

    def describe(self) -> str:
        """The bar's text without the track (also used by tests and the screen reader of logs)."""
        s = self.source
        state = "▶" if s.playing else "⏸"
        clock = units.clock(s.t)
        return f"{state} {fmt_speed(s.speed)}  {clock}  +{units.offset(s.offset)} / {units.offset(s.end - s.start)}"

    def _style(self, variable: str) -> str:
        # Theme variables ($error, ...) resolved for Rich text, so every theme works.
        try:
            return str(self.app.theme_variables.get(variable.lstrip("$"), "")) or ""
        except (AttributeError, LookupError, RuntimeError):  # not mounted in an app yet
            return ""

    def render(self) -> Text:
        s = self.source
        head = self.describe() + "  "
        width = max(10, self.size.width - 2)  # padding
        help_text = "  " + _HELP if width - len(head) > len(_HELP) + 30 else ""
        track_w = max(8, width - len(head) - len(help_text))
        self._track_x, self._track_w = len(head) + 1, track_w  # +1: left padding
        span = (s.end - s.start) or 1.0
        cursor = (
            min(track_w - 1, int((s.t - s.start) / span * (track_w - 1) + 0.5))
            if s.end > s.start
            else 0
        )
        cells = [
            ("━", self._style("$accent")) if i < cursor else ("─", "dim") for i in range(track_w)
        ]
        for ts, glyph, style in self._marks:
            i = min(track_w - 1, max(0, int((ts - s.start) / span * (track_w - 1) + 0.5)))
            cells[i] = (glyph, self._style(style))
        cells[cursor] = ("●", "bold " + self._style("$warning"))
        text = Text(head, style="bold")
        for glyph, style in cells:
            text.append(glyph, style=style or None)
        if help_text:
            text.append(help_text, style="dim")
        return text

    def on_click(self, event: Click) -> None:
        if self._track_w <= 1:
            return
        x = event.x - self._track_x
        if 0 <= x < self._track_w:
            s = self.source
            s.seek(s.start + (s.end - s.start) * x / (self._track_w - 1))
