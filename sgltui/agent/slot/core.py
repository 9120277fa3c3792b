"""A slot's state: what it runs, where, how far its launch is, its cause, its swap, and the
moves between its states by the lifecycle table (agent/slot/lifecycle.py), each announced on the
bus; the views STATUS and agent-state.json show of it.

agent/slot/slot.py's Slot builds on this: it drives the server's processes (agent/slot/server_process.py)
through these moves: launch, adopt, watch, stop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from sgltui import protocol
from sgltui.agent.events import EventBus
from sgltui.agent.slot import lifecycle, procs
from sgltui.agent.slot import resolved as resolved_mod
from sgltui.agent.slot.launch_progress import LaunchProgress
from sgltui.agent.slot.liveness import Liveness
from sgltui.agent.slot.server_process import ServerProcess
from sgltui.protocol import SlotState

S = TypeVar("S", bound=msgspec.Struct)

log = logging.getLogger("sgltui.agent.slot")  # its lines are the slot's in agent.log

# The states are the lifecycle table's (sgltui/agent/slot/lifecycle.py); re-exported here.
from sgltui.agent.slot.lifecycle import (  # noqa: E402
    CRASHED,
    DRAINING,
    FAILED,
    IDLE,
    LAUNCHING,
    READY,
    RUNNING,
    STOPPED,
    STOPPING,
    TERMINAL,
)

__all__ = [
    "CRASHED",
    "DRAINING",
    "FAILED",
    "IDLE",
    "LAUNCHING",
    "READY",
    "RUNNING",
    "STOPPED",
    "STOPPING",
]


@dataclass
class SlotConfig:
    """Timings the agent applies to every slot: agent.toml's [slot] (agent/config.py; the
    environment's overrides let tests run in seconds)."""

    hang_factor: float = 3.0  # hung when a phase takes this many times its learned duration...
    hang_min_s: float = 60.0  # ...and at least this much longer than it
    stop_grace_s: float = 20.0  # SIGTERM -> SIGKILL of the group (SGLang: drain, then 15 s)
    force_grace_s: float = 3.0
    release_timeout_s: float = 30.0  # wait for VRAM and the port after the processes are gone
    poll_s: float = 0.1


def as_cause(cause: dict | None) -> protocol.Cause | None:
    """A cause of core/causes.py (a dict: core does not know the protocol) as its Struct."""
    return None if not cause else msgspec.convert(cause, protocol.Cause, strict=False)


def _typed(data: dict | None, cls: type[S]) -> S | None:
    """A dict the slot keeps, as the Struct STATUS declares for it."""
    return None if data is None else msgspec.convert(data, cls)


def _describe(profile: resolved_mod.Resolved | None) -> dict | None:
    """The resolved profile a slot runs (sgltui/agent/slot/resolved.py), without secrets."""
    describe = getattr(profile, "describe", None)
    return describe() if callable(describe) else None


class SlotHost(Protocol):
    """What a slot needs from the agent around it."""

    config: SlotConfig

    bus: EventBus  # where it publishes its events and says its state moved (agent/events.py)

    def push_log(self, slot_id: str, launch_id: str, lines: list[str]) -> None: ...
    def server_log_path(self, launch_id: str) -> Path: ...
    def learned(self, profile: str) -> dict[str, float] | None: ...
    def record_launch(self, profile: str, durations: dict[str, float]) -> None: ...
    def telemetry_line(self, slot_id: str, line: str) -> None: ...
    def add_secret(self, secret: str) -> None: ...
    # agent-state.json says a server's sleep steps now (agent/swap/sleeper.py)
    async def state_saved(self) -> None: ...

    state_dir: Path


def redact_argv(argv: list[str]) -> list[str]:
    out, hide = [], False
    for a in argv:
        out.append("***" if hide else a)
        hide = a in ("--api-key", "--admin-api-key")
    return out


class SlotCore:
    """A slot's state and its transitions; agent/slot/slot.py's Slot adds what it does to servers."""

    def __init__(self, slot_id: str, host: SlotHost, place: Any = None) -> None:
        self.id = slot_id
        self.host = host
        # Where it runs (core/placement.SlotPlace: GPUs, port), from host.toml; None: where
        # the profile says (one slot, no host.toml).
        self.place = place
        self.state: SlotState = STOPPED
        self.profile: resolved_mod.Resolved | None = None  # what the current launch runs
        self.profile_name: str | None = None
        # its processes: spawn, the log relay, the tree, kill, reap (agent/slot/server_process.py)
        self.proc = ServerProcess(slot_id)
        # Used bytes per target GPU just before the launch (None: simulated, or no NVML).
        self.gpu_baseline: dict[int, int] | None = None
        self.launch_id: str | None = None
        self.started_at: float | None = None
        self.ready_at: float | None = None
        self.cause: dict | None = None  # why the slot is failed/crashed; None when healthy
        self.last_failure: dict | None = None  # the latest failure, kept after recovery
        self.draining: dict | None = None  # requests still in flight while a stop waits
        # a ready server that stopped answering (SIGSTOP, a wedge): agent/slot/liveness.py
        self.liveness = Liveness(slot_id, self._on_liveness)
        self.swap: protocol.SwapView | None = None  # None: no swap in progress
        self.last_swap: protocol.LastSwap | None = None  # the latest swap's outcome, kept
        self.command: list[str] = []
        self.command_hash: str | None = None
        self.server_host = "127.0.0.1"
        self.port = 30000
        self.api_key: str | None = None
        self.tp_size = 1
        self.client: str | None = None  # who issued the command now driving this slot
        # the slot's stable endpoint (agent/pools/front.py), set by the agent
        self.front: Any = None
        self.last_stop: protocol.StopView | None = None  # how the latest stop went
        # the launch's phase, its clocks, progress and hang check (agent/slot/launch_progress.py)
        self.progress = LaunchProgress()
        self._tail: collections.deque[str] = collections.deque(maxlen=300)
        self._monitor: asyncio.Task | None = None
        self._stopping = False
        self._changed = asyncio.Event()
        self._last_refresh = 0.0
        # A server sgltui did not start, watched here (agent/slot/attach.py External); None: ours.
        self.external: Any = None
        # Which of the memory saver's steps this server is in (agent/swap/sleeper.py keeps them):
        # SGLang cannot be asked, and a second release, or a resume of a server not released,
        # ends it (torch-memory-saver's exit(1)). Kept in agent-state.json with the server.
        self.paused = False
        self.released = False
        self.pinned_once = False  # its first release pinned the backup (later ones only copy)

    # ---- the process side (agent/slot/server_process.py), as readers know it ------------------------

    @property
    def tree(self) -> procs.ProcTree | None:
        return self.proc.tree

    @property
    def popen(self) -> subprocess.Popen | None:
        return self.proc.popen

    @property
    def live_pids(self) -> list[int]:
        """The tree's live pids at the watcher's last look."""
        return self.proc.live_pids

    @property
    def log_path(self) -> Path | None:
        return self.proc.log_path

    @property
    def phase(self) -> str | None:
        return self.progress.phase

    @phase.setter
    def phase(self, phase: str | None) -> None:
        self.progress.phase = phase

    @property
    def timings(self) -> dict[str, float]:
        """The latest launch's load and ready seconds (empty until it is ready)."""
        return self.progress.timings

    # ---- views -------------------------------------------------------------------------------

    def status(self) -> protocol.SlotStatus:
        progress, eta = self._estimate()
        now = time.time()
        # The watcher's last look (each second, in a worker thread): a status must not walk
        # the process tree on the loop.
        pids = list(self.live_pids) if self.tree and self.state in RUNNING + (STOPPING,) else []
        return protocol.SlotStatus(
            id=self.id,
            profile=self.profile_name,
            state=SlotState(self.state),
            phase=self.phase,
            progress=progress,
            eta_s=eta,
            host=self.server_host,
            port=self.port,
            pid=self.tree.pid if self.tree else None,
            pids=pids,
            launch_id=self.launch_id,
            log_path=str(self.log_path) if self.log_path else None,
            started_at=self.started_at,
            ready_at=self.ready_at,
            uptime_s=round(now - self.started_at, 1)
            if self.started_at and self.state in RUNNING
            else None,
            command=redact_argv(self.command),
            command_hash=self.command_hash,
            # the slot keeps these as the dicts its events carry (core/causes.py, the drain)
            cause=_typed(self.cause, protocol.Cause),
            last_failure=self.last_failure,
            drain=_typed(self.draining, protocol.DrainView),
            swap=self.swap,
            last_swap=self.last_swap,
            api_key_set=bool(self.api_key),
            resolved=_typed(_describe(self.profile), protocol.ResolvedView),
            front=_typed(self.front.status(), protocol.FrontView) if self.front else None,
            last_stop=self.last_stop,
            gpus=list(self.place.gpus) if self.place is not None else [],
            external=self.external.view() if self.external is not None else None,
            unresponsive=self.liveness.reason if self.state == READY else None,
        )

    def _on_liveness(self, reason: str | None) -> None:
        if reason is None:
            log.info("slot %s: its server answers again", self.id)
        else:
            log.warning("slot %s: its server is unresponsive: %s", self.id, reason)
        self.host.bus.changed()

    def record(self) -> dict | None:
        """What agent-state.json keeps to re-adopt this server (no secrets)."""
        if self.external is not None:  # not ours: a new agent finds it again (discovery)
            return None
        if not self.tree or self.state not in RUNNING + (STOPPING,):
            return None
        return {
            "profile": self.profile_name,
            "state": self.state,
            "phase": self.phase,
            "tree": self.tree.to_json(),
            "launch_id": self.launch_id,
            "log_path": str(self.log_path),
            "started_at": self.started_at,
            "ready_at": self.ready_at,
            "host": self.server_host,
            "port": self.port,
            "command": redact_argv(self.command),
            "command_hash": self.command_hash,
            "tp_size": self.tp_size,
            "gpu_baseline": {str(i): b for i, b in (self.gpu_baseline or {}).items()} or None,
            "phase_done": self.progress.done,
            "resolved": _describe(self.profile),
            "resolved_profile": resolved_mod.to_record(self.profile),
            "paused": self.paused,
            "released": self.released,
            "pinned_once": self.pinned_once,
            # a swap in progress (slot, from, to, step): the next agent finishes or undoes it
            "swap": (
                {"from": self.swap.from_, "to": self.swap.to, "step": self.swap.step}
                if self.swap is not None
                else None
            ),
        }

    def _estimate(self) -> tuple[float | None, float | None]:
        if self.state != LAUNCHING:
            return None, None
        return self.progress.estimate(self.launch_id, self.host.learned(self.profile_name or ""))

    # ---- state ---------------------------------------------------------------------------------

    def _fire(self, event: str, reason: str, cause: dict | None = None) -> None:
        """Move the slot by the lifecycle table (sgltui/agent/slot/lifecycle.py) and announce it."""
        prev = self.state
        state = lifecycle.next_state(prev, event)
        entry = lifecycle.ENTRY[state]
        self.state = state
        if entry.clears_phase:
            self.phase = None
        if cause is not None:
            if cause is not self.cause:
                self.last_failure = dict(cause, profile=self.profile_name, at=time.time())
            self.cause = cause
        elif not entry.keeps_cause:
            self.cause = None
        self._announce(
            protocol.SlotStateChanged(
                state=state,
                prev=prev,
                phase=self.phase,
                reason=reason,
                cause=as_cause(cause),
                profile=self.profile_name,
                launch_id=self.launch_id,
            )
        )

    def _announce(self, event: protocol.EventBase) -> None:
        """Publish a slot event (its client and slot filled in), wake wait_settled()."""
        self.host.bus.publish(msgspec.structs.replace(event, client=self.client, slot=self.id))
        self.host.bus.changed()
        self._changed.set()

    def _set_phase(self, phase: str) -> None:
        self.progress.enter(phase)
        progress, eta = self._estimate()
        self._announce(protocol.SlotPhase(phase=phase, progress=progress, eta_s=eta))

    async def wait_settled(self, timeout: float | None = None) -> SlotState:
        """Wait until the slot is ready, stopped, failed or crashed; return that state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.state not in TERMINAL:
            self._changed.clear()
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            if remaining == 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                break
        return self.state

    def refuse(self, profile: resolved_mod.Resolved, client: str | None, cause: dict) -> None:
        """A pre-launch check refused `profile`: failed with the cause, nothing started."""
        self.client = client
        self.profile, self.profile_name = profile, profile.name
        self.proc.tree, self.proc.popen = None, None
        self._fire(lifecycle.REFUSE, f"{profile.name} not launched: {cause['summary']}", cause)

    def keep_failure(self, cause: dict | None) -> None:
        """A swap failed and its rollback brought no server back: the slot keeps that swap's
        failure as its cause (a ready slot never has one)."""
        if cause is not None and self.state != READY and self.cause is None:
            self.cause = cause
            self.host.bus.changed()
            self._changed.set()

    # ---- a swap's state (sequenced by agent/swap/coordinator.py) -------------------------------------------

    def begin_swap(
        self, old: str | None, to: str, started: float, rollback: bool, client: str | None
    ) -> None:
        self.swap = protocol.SwapView(
            from_=old, to=to, step="stopping", started_at=started, rollback=rollback, client=client
        )
        self.client = client
        self.host.bus.changed()

    def swap_step(self, step: str) -> None:
        self.swap = msgspec.structs.replace(self.swap or protocol.SwapView(), step=step)
        self.host.bus.changed()

    def end_swap(self, outcome: protocol.LastSwap | None = None) -> None:
        """No swap in progress (None means that to every viewer); `outcome` is kept for late
        readers as last_swap."""
        self.swap = None
        if outcome is not None:
            self.last_swap = outcome
        self.host.bus.changed()

    def attach_front(self, front: Any) -> None:
        """The slot's stable endpoint (agent/pools/front.py), opened by the agent at start."""
        self.front = front

    def hold_front(self, why: str) -> None:
        """New requests wait at the front (agent/pools/front.py) from here: the old server only
        drains. Called once the batch jobs have paused: their requests held here would be in
        flight for them, and they wait for those to finish."""
        if self.front is not None:
            self.front.hold(why, held_from=self.launch_id)

    # ---- a launch's fresh start, an attached server (agent/slot/attach.py) ---------------------------

    def _reset_launch(self) -> None:
        self.proc.reset_output()
        self.cause, self.ready_at = None, None
        self.progress.reset()
        self._tail.clear()
        self._stopping = False

    def describe_external(
        self,
        *,
        name: str,
        host: str,
        port: int,
        api_key: str | None,
        launch_id: str,
        client: str | None,
        command: list[str],
        command_hash: str,
        tp_size: int,
        started_at: float,
    ) -> None:
        """What a server sgltui did not start is (agent/slot/attach.py), before it is watched: no
        profile, a name, where it answers, its command line and the hash of what it runs."""
        self.profile, self.profile_name = None, name
        self.server_host, self.port, self.api_key = host, port, api_key
        self.launch_id, self.client = launch_id, client
        self.command, self.command_hash, self.tp_size = command, command_hash, tp_size
        self.started_at, self.ready_at = started_at, time.time()

    def note_live_pids(self, pids: list[int]) -> None:
        """The attached server's processes as its watcher last found them (agent/slot/attach.py)."""
        self.proc.live_pids = pids

    def unwatch_for_adoption(self) -> None:
        """An attached server about to be adopted: no longer external, and stopped without an
        event, so that adopt() takes it as a server of its own (its event says what happened)."""
        self.external = None
        self.state = STOPPED

    def external_gone(self, cause: dict | None) -> None:
        """The attached server ended or was let go: crashed with `cause`, or stopped (None)."""
        if cause is not None and self.state in (READY, DRAINING):
            self._fire(lifecycle.EXIT, cause["summary"], cause)
        elif self.state in RUNNING:
            self._fire(lifecycle.STOP, "detaching (the server runs on)")
            self._fire(lifecycle.STOPPED_EV, "detached: the server runs on, unwatched")
        self.proc.tree, self.proc.live_pids, self.external = None, [], None

    def tail(self, n: int) -> list[str]:
        return list(self._tail)[-n:]
