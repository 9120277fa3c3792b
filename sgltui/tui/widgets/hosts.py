"""The Hosts view (a fleet's main screen, beside the slots view): one line per host, reachable
with its GPUs, running/all slots and tok/s, or "unreachable since 14:02, retrying" and why.

The rows are views.host_line; this widget only shows them, and repaints only when one reads
differently (a host that answers the same each poll costs nothing to draw).
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from sgltui.fleet.view import HostState
from sgltui.tui import views


class HostsPane(Static):
    DEFAULT_CSS = """
    HostsPane {
        height: auto; max-height: 12; width: auto; max-width: 50%; padding: 0 1;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.text = ""  # the markup shown (tests read it)

    def show(self, hosts: list[HostState], focus: str | None) -> None:
        width = views.host_name_width([h.name for h in hosts])
        text = "\n".join(views.host_line(h, h.name == focus, width) for h in hosts) or "no hosts"
        if text != self.text:
            self.text = text
            self.update(text)
