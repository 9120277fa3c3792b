"""The session report's slot history: who ran what, when, rebuilt from a session's events
through the one reducer (protocol.apply), so the report and the TUI fold events the same way."""

from __future__ import annotations

import bisect
from typing import Any

from sgltui import protocol
from sgltui.session.report_values import num


class SlotHistory:
    """Per-slot intervals (start, end, profile, state, launch_id) rebuilt from events."""

    def __init__(self, events: list[dict[str, Any]], end_ts: float) -> None:
        self.intervals: dict[str, list[tuple[float, float, str | None, str, str | None]]] = {}
        # (since, profile, state, launch_id) per slot, from the one reducer (protocol.apply):
        # an interval ends whenever the folded slot's profile, state or launch changes.
        cur: dict[str, tuple[float, str | None, str, str | None]] = {}
        state = protocol.SessionState()
        for ev in events:
            event = protocol.decode_event(ev)
            if event.slot is None or num(ev.get("ts")) is None:
                continue
            state = protocol.apply(state, event)
            view = state.slots.get(event.slot)
            if view is None:
                continue
            now = (event.ts, view.profile, str(view.state), view.launch_id)
            before = cur.get(event.slot)
            if before is None or before[1:] != now[1:]:
                if before is not None:
                    self._close(event.slot, before, event.ts)
                cur[event.slot] = now
        for slot, since in cur.items():
            self._close(slot, since, max(end_ts, since[0]))
        self.state = state  # the whole session folded: its launches, swaps and failures
        # Interval starts per slot, for bisecting: a week of samples against many intervals.
        self._starts = {slot: [iv[0] for iv in ivs] for slot, ivs in self.intervals.items()}

    def _close(
        self, slot: str, since: tuple[float, str | None, str, str | None], ts: float
    ) -> None:
        if ts > since[0]:
            self.intervals.setdefault(slot, []).append((since[0], ts, *since[1:]))

    def interval(
        self, slot: str, ts: float
    ) -> tuple[float, float, str | None, str, str | None] | None:
        """(start, end, profile, state, launch_id) of `slot` at `ts`, or None."""
        starts = self._starts.get(slot)
        if not starts:
            return None
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0:
            iv = self.intervals[slot][i]
            if iv[0] <= ts < iv[1]:
                return iv
        return None

    def at(self, slot: str, ts: float) -> tuple[str | None, str] | None:
        """(profile, state) of `slot` at `ts`, or None if nothing was recorded then."""
        iv = self.interval(slot, ts)
        return (iv[2], iv[3]) if iv else None
