"""How far a slot's launch is: its phase, the time each phase took, the ready line, the
progress and ETA shown while it loads, and when it counts as hung.

The slot (agent/slot/slot.py) feeds it the server's lines and announces what changes; this holds
the clocks and the arithmetic, no processes and no events.
"""

from __future__ import annotations

import time
from typing import Any

from sgltui.core import causes, phases

# A launch with no history gets these ceilings per phase before it counts as hung: generous,
# because the first launch of a model may download weights or compile kernels.
NO_HISTORY_LIMIT_S = {
    phases.SPAWNED: 900.0,
    phases.LOADING_WEIGHTS: 3600.0,
    phases.ALLOCATING_KV: 900.0,
    phases.CAPTURING_GRAPHS: 1800.0,
    phases.WARMING_UP: 900.0,
}


class LaunchProgress:
    def __init__(self) -> None:
        self.phase: str | None = None
        self.phase_started = 0.0  # monotonic time the current phase began
        self.done: dict[str, float] = {}  # seconds each finished phase took in this launch
        self.ready_line_at: float | None = None  # monotonic time the ready line was printed
        self.timings: dict[str, float] = {}  # load and ready seconds, once ready
        self._forward = phases.Forward()  # progress never goes back within a launch

    def reset(self) -> None:
        """A new launch: nothing seen yet."""
        self.ready_line_at = None
        self.done, self.timings = {}, {}
        self.phase = None

    def enter(self, phase: str) -> None:
        """The server moved to `phase`: the one it leaves has its time counted."""
        now = time.monotonic()
        if self.phase:
            self.done[self.phase] = self.done.get(self.phase, 0.0) + now - self.phase_started
        self.phase, self.phase_started = phase, now

    def estimate(
        self, launch_id: str | None, learned: dict[str, float] | None
    ) -> tuple[float, float | None]:
        """(progress, ETA) of a launching server, rounded for viewers."""
        in_phase = time.monotonic() - self.phase_started
        progress, eta = phases.estimate(self.phase, in_phase, self.done, learned)
        progress = self._forward(launch_id, progress)
        return round(progress, 3), (round(eta, 1) if eta is not None else None)

    def observe(self, line: str) -> str | None:
        """A line of a launching server: the phase it moves to (None: no move); notes the
        ready line."""
        new = phases.advance(self.phase, line)
        if phases.is_ready_line(line) and self.ready_line_at is None:
            self.ready_line_at = time.monotonic()
        return new if new is not None and new != self.phase else None

    def replay(self, lines: list[str], done: dict[str, float]) -> None:
        """Rebuild the phase of a re-adopted server from its whole log; `done` as recorded."""
        self.done = dict(done)
        for line in lines:
            self.phase = phases.advance(self.phase, line)
            if phases.is_ready_line(line):
                self.ready_line_at = time.monotonic()
        self.phase = self.phase or phases.SPAWNED
        self.phase_started = time.monotonic()

    def finish(self, started_at: float | None) -> float:
        """The server answers /ready: count the last phase (up to its ready line) and the
        launch's load and ready times. -> the wall-clock ready time."""
        now = time.monotonic()
        line_at = self.ready_line_at or now
        if self.phase:
            self.done[self.phase] = self.done.get(self.phase, 0.0) + line_at - self.phase_started
        ready_at = time.time()
        self.timings = {
            "load": round(ready_at - (started_at or ready_at) - (now - line_at), 3),
            "ready": round(now - line_at, 3),
        }
        return ready_at

    def hang(
        self,
        now: float,
        learned: dict[str, float] | None,
        cfg: Any,
        where: str,
        tail: list[str],
    ) -> dict | None:
        """The cause when the launch counts as hung at `now` (None: not yet). `cfg`: the
        slot's SlotConfig (hang_factor, hang_min_s); `where`: host:port it answers on."""
        in_phase = now - self.phase_started
        phase = self.phase or phases.SPAWNED
        if learned and phase in learned:
            expected = learned[phase]
            limit = max(expected * cfg.hang_factor, expected + cfg.hang_min_s)
        else:
            expected = limit = NO_HISTORY_LIMIT_S.get(phase, 900.0)
        if self.ready_line_at is not None:
            # Past the ready line only the probe is pending; a server that never answers it
            # (bound elsewhere, firewalled) is as stuck as one that never loads.
            silent = now - self.ready_line_at
            if silent <= max(30.0, cfg.hang_min_s):
                return None
            return causes._cause(
                "hang",
                f"printed its ready line {silent:.0f}s ago but /ready on {where} does not answer",
                tail[-causes.MAX_LINES :],
                "check host/port in the profile and what listens there",
                None,
            )
        if in_phase <= limit:
            return None
        return causes.hang(phase, in_phase, expected, tail)
