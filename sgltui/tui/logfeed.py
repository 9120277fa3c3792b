"""The log lines on their way from the agent to the Logs tab.

On (re)connect the app reads each live server's tail; pushes follow. LogFeed puts both into the
log buffer, marks where a new launch's output starts, drops the lines a first push repeats from
the tail, and holds what the Logs tab has not drawn yet (the app draws in one batch per tick).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sgltui import protocol
from sgltui.tui.logbuffer import LogBuffer, LogLine


class LogFeed:
    def __init__(self, buffer: LogBuffer) -> None:
        self.buffer = buffer
        self.new_lines: list[LogLine] = []  # added since the Logs tab drew last
        self.redraw = False  # the Logs tab draws the whole buffer again next time
        self._launch_of: dict[str, str] = {}  # slot -> launch id of the log lines shown last
        self._tail_read: dict[str, list[str]] = {}  # slot -> the lines its tail read on connect

    def restart(self) -> None:
        """A (re)connect: the tails read next replace whatever the buffer held."""
        self.buffer.clear()
        self._tail_read.clear()

    def keep(self, lines: list[LogLine]) -> None:
        """Lines for the Logs tab's next draw. More than the buffer holds (the tab hidden a
        long while, drawn only when shown): the next draw is the whole buffer's instead."""
        self.new_lines.extend(lines)
        cap = self.buffer.lines.maxlen
        if cap is not None and len(self.new_lines) > cap:
            self.new_lines, self.redraw = [], True

    def add_tail(self, slot: str, tail: protocol.LogsReply) -> None:
        self.keep(self.buffer.add(slot, tail.lines))
        self._tail_read[slot] = list(tail.lines[-500:])
        if tail.launch_id:
            self._launch_of[slot] = tail.launch_id

    def add_push(self, data: dict[str, Any], current: str | None) -> list[LogLine]:
        """A `log` push's lines, added to the buffer (returned: the caller decides whether the
        pane shows them); `current` is the slot of a push that names none."""
        return self.add_pushes([data], lambda: current)

    def add_pushes(self, pushed: Iterable[Any], current: Callable[[], str | None]) -> list[LogLine]:
        """The lines of each push's data in order (a `logs` push's, a slot's each; what is
        no dict is skipped), added to the buffer and returned; `current()` is the slot of
        one that names none, asked only then (the model's followed slot: three calls).
        One call for a tick's pushes, each read with `in` and subscripts."""
        added: list[LogLine] = []
        buffer, known = self.buffer, self._launch_of
        for data in pushed:
            if type(data) is not dict and not isinstance(data, dict):
                continue
            slot = str((data["slot"] if "slot" in data else None) or current())
            launch = data["launch_id"] if "launch_id" in data else None
            if launch:
                if slot in known and known[slot] != launch:
                    # A new server's output follows: mark where, so a swap reads clearly in
                    # the tail.
                    added += buffer.add(slot, [f"──── {launch} ────"])
                known[slot] = launch
            lines = (data["lines"] if "lines" in data else None) or []
            read = self._tail_read.pop(slot, None) if self._tail_read else None
            if read:
                # The first push after connecting starts with the lines the tail read ended
                # with: the agent pushed them too, queued while the tail was read (a first
                # launch's lines showed twice). Dropped only where the push covers the tail's
                # whole end, so a line that merely repeats (a batch line) is kept.
                lines = list(lines)
                lines = lines[overlap(read, lines) :]
            added += buffer.add(slot, lines)
        return added


def overlap(tail: list[str], pushed: list[str]) -> int:
    """How many of `pushed`'s first lines are `tail`'s last ones (the longest such run)."""
    for start in range(max(0, len(tail) - len(pushed)), len(tail)):
        end = tail[start:]
        if pushed[: len(end)] == end:
            return len(end)
    return 0
