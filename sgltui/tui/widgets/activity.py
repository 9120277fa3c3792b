"""Activity: commands from every client (this TUI, the CLI, another TUI) and notable events."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from sgltui.core import units
from sgltui.tui.model import ActivityItem
from sgltui.tui.widgets.colors import level_style


class ActivityPane(RichLog):
    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=500, wrap=False, markup=False, highlight=False, **kwargs)
        self._shown_total = 0

    def show(self, items: list[ActivityItem], total: int) -> None:
        """`total` counts every item ever added, so new ones are found even after old ones
        fell out of the bounded list."""
        count = min(total - self._shown_total, len(items))
        for item in items[len(items) - count :] if count > 0 else []:
            line = Text(f"{units.clock(item.ts)} ")
            who = item.client or "agent"
            line.append(f"{who:<20.20} ", style="bold" if item.foreign else "dim")
            line.append(item.text, style=level_style(self.app, item.level))
            self.write(line)
        self._shown_total = total
