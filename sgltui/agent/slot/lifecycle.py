"""A server slot's life in one table: its states, the events that move it, what each state
clears on entry.

    stopped -> launching(phase) -> ready -> draining -> stopping -> stopped
                     \\-> failed(cause)        ready -> crashed(cause)

The slot (sgltui/agent/slot/slot.py) fires events; nothing else changes its state. An event that
the table does not allow from the current state is a bug: `next_state` raises, so a missed case
shows up in the tests instead of as a slot stuck in a state no command can leave.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgltui.protocol import SlotState

# The states are the protocol's (defined once: protocol.SlotState, a str enum).
STOPPED, LAUNCHING, READY, DRAINING, STOPPING, FAILED, CRASHED = (
    SlotState.STOPPED,
    SlotState.LAUNCHING,
    SlotState.READY,
    SlotState.DRAINING,
    SlotState.STOPPING,
    SlotState.FAILED,
    SlotState.CRASHED,
)
STATES = tuple(SlotState)
TERMINAL = (READY, STOPPED, FAILED, CRASHED)  # where a command's wait ends
RUNNING = (LAUNCHING, READY, DRAINING)  # a server process is (meant to be) up
IDLE = (STOPPED, FAILED, CRASHED)  # nothing runs: a launch may start here

# Events.
SPAWN = "spawn"  # the server process was started
REFUSE = "refuse"  # a pre-launch check refused it: nothing was started
ADOPT_READY = "adopt_ready"  # an earlier agent's server, found ready
ADOPT_LAUNCHING = "adopt_launching"  # ... found still starting
READY_EV = "ready"  # /ready answered
EXIT = "exit"  # the server ended on its own
HANG = "hang"  # a start-up phase took far longer than it should (the server was killed)
DRAIN = "drain"  # waiting for requests in flight before the stop
STOP = "stop"  # SIGTERM (then SIGKILL) sent to the tree
STOPPED_EV = "stopped"  # the tree is gone (and its memory and port, or the report says not)

TRANSITIONS: dict[tuple[str, str], SlotState] = {
    **{(s, SPAWN): LAUNCHING for s in IDLE},
    **{(s, REFUSE): FAILED for s in IDLE},
    (STOPPED, ADOPT_READY): READY,
    (STOPPED, ADOPT_LAUNCHING): LAUNCHING,
    (LAUNCHING, READY_EV): READY,
    (LAUNCHING, EXIT): FAILED,
    (LAUNCHING, HANG): FAILED,
    (READY, EXIT): CRASHED,
    (DRAINING, EXIT): CRASHED,
    (READY, DRAIN): DRAINING,
    **{(s, STOP): STOPPING for s in RUNNING},
    **{(s, STOPPED_EV): STOPPED for s in (STOPPING, FAILED, CRASHED, STOPPED)},
}


@dataclass(frozen=True)
class Entry:
    """What entering a state does to the slot's other fields."""

    clears_phase: bool  # no start-up phase (and no progress/ETA) outside launching
    keeps_cause: bool  # the cause survives entering this state (unless the event brings one)


ENTRY: dict[str, Entry] = {
    STOPPED: Entry(clears_phase=True, keeps_cause=False),
    LAUNCHING: Entry(clears_phase=False, keeps_cause=False),
    READY: Entry(clears_phase=True, keeps_cause=False),  # healthy: past failures are history
    DRAINING: Entry(clears_phase=True, keeps_cause=False),
    STOPPING: Entry(clears_phase=True, keeps_cause=True),
    FAILED: Entry(clears_phase=False, keeps_cause=True),  # the phase it failed in is evidence
    CRASHED: Entry(clears_phase=True, keeps_cause=True),
}


class LifecycleError(RuntimeError):
    """An event the table does not allow in the current state (a bug in the caller)."""


def next_state(state: str, event: str) -> SlotState:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        allowed = sorted(e for (s, e) in TRANSITIONS if s == state)
        raise LifecycleError(
            f"event {event!r} is not allowed in state '{state}' (allowed: {', '.join(allowed)})"
        ) from None
