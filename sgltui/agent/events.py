"""The agent's event bus: slots, operations, pools, fronts, bench runs and jobs publish typed
events here; every part that reacts to them subscribes (the recorder, connected clients, the
restart policy, telemetry). So a slot changes its own state and says so once, and knows nothing
of who listens.

Two things travel on it:
- events (`publish`): recorded in events.jsonl first, then handed to each subscriber as the
  Struct and as the dict the recorder wrote (stamped with its time, secrets redacted: what
  clients are sent);
- "what the slots are has moved" (`changed`): after every slot event and after a change that
  has no event of its own (a swap's step on the slot); the fronts follow it (hold, route,
  release), the pools' gateways too, and the state file is saved (debounced).

A subscriber that raises is logged and the others still get the event: one part's bug must not
take the event stream down with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sgltui import protocol

log = logging.getLogger("sgltui.agent.events")

OnEvent = Callable[[protocol.EventBase, dict[str, Any]], None]
OnChange = Callable[[], None]


def _unrecorded(event: protocol.EventBase) -> dict[str, Any]:
    """The event as it would be recorded, where no recorder is attached (yet)."""
    record = protocol.event_dict(event)
    record["ts"] = event.ts or time.time()
    return record


class EventBus:
    def __init__(self) -> None:
        self._record: Callable[[protocol.EventBase], dict[str, Any]] = _unrecorded
        self._on_event: list[OnEvent] = []
        self._on_change: list[OnChange] = []

    def record_with(self, record: Callable[[protocol.EventBase], dict[str, Any]]) -> None:
        """The recorder: writes each event first and gives it back as written."""
        self._record = record

    def subscribe(self, callback: OnEvent) -> Callable[[], None]:
        """`callback(event, record)` for every event from now on; returns the unsubscribe."""
        self._on_event.append(callback)
        return lambda: self._on_event.remove(callback) if callback in self._on_event else None

    def on_change(self, callback: OnChange) -> None:
        """`callback()` each time what the slots are has moved (see the module's docstring)."""
        self._on_change.append(callback)

    def publish(self, event: protocol.EventBase) -> dict[str, Any]:
        """Record `event`, hand it to every subscriber in the order they subscribed; the record."""
        try:
            record = self._record(event)
        except Exception:  # the recorder promises not to raise; do not let it take the agent down
            log.exception("recording event %s", type(event).__name__)
            record = _unrecorded(event)
        for callback in list(self._on_event):
            try:
                callback(event, record)
            except Exception:
                log.exception("event subscriber %r on %s", callback, record.get("type"))
        return record

    def changed(self) -> None:
        for callback in list(self._on_change):
            try:
                callback()
            except Exception:
                log.exception("state subscriber %r", callback)
