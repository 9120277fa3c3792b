"""Standbys: profiles kept warm beside a slot's server, asleep; their registry (which sleeps
beside which slot, what it holds, its re-adoption). Adding and removing one are the standby ops'
(agent/swap/standby_ops.py); the warm swap that wakes one is the swap coordinator's
(agent/swap/coordinator.py).

No profile setting changes inside a running SGLang server, so a swap in seconds needs a second
server process per profile, asleep: launched with the memory saver (--enable-memory-saver
--enable-weights-cpu-backup, SGLANG_MEMORY_SAVER_CUDA_GRAPH=1), then paused and released (its
weights in pinned host RAM, its KV cache and graphs freed). A standby's server lives in a slot
object of its own (`Slot`, so launching, watching for its exit and stopping are the slot's),
hidden from status and with its own event bus: nothing that watches slots (restart policy,
fronts, pools, telemetry) ever sees a sleeper, so none can call it hung or relaunch it. It only
notices the sleeper's exit (the standby is then `lost`).

The sleepers are saved in agent-state.json with the slots ("SLOT~PROFILE") and re-adopted,
still asleep, by the next agent (agent/swap/coordinator.py settles one a swap or an add left awake).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.events import EventBus
from sgltui.agent.slot import procs
from sgltui.agent.slot.slot import READY, Slot
from sgltui.agent.swap import sleeper
from sgltui.agent.swap import standby_memory as mem
from sgltui.agent.swap.sleeper import with_saver

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext
    from sgltui.agent.slot.core import SlotHost
    from sgltui.agent.slot.resolved import Resolved

log = logging.getLogger("sgltui.agent.standby")

SEP = "~"  # agent-state.json keys a sleeper as SLOT~PROFILE


class _QuietHost:
    """A sleeper's slot host: the one of the slot it sleeps beside (the agent), less everything
    that would make it visible (its own event bus, no log pushes or telemetry lines)."""

    def __init__(self, host: SlotHost) -> None:
        self.host = host
        self.bus = EventBus()
        self.config = host.config
        self.state_dir = host.state_dir

    def push_log(self, slot_id: str, launch_id: str, lines: list[str]) -> None:
        pass  # the log file has them; no viewer shows a sleeper's log live

    def server_log_path(self, launch_id: str) -> Path:
        return self.host.server_log_path(launch_id)

    def learned(self, profile: str) -> dict[str, float] | None:
        return self.host.learned(profile)

    def record_launch(self, profile: str, durations: dict[str, float]) -> None:
        self.host.record_launch(profile, durations)

    def telemetry_line(self, slot_id: str, line: str) -> None:
        pass

    async def state_saved(self) -> None:
        await self.host.state_saved()

    def add_secret(self, secret: str) -> None:
        self.host.add_secret(secret)


@dataclass
class Standby:
    slot_id: str
    name: str
    server: Slot  # the hidden slot that holds the sleeping server
    state: str = "starting"  # starting | asleep (lost is read off the server)
    host_bytes: int = 0  # measured after its release (0: not yet)
    gpu_bytes: int = 0
    host_estimate: int = 0  # said before it was added (agent/swap/standby_memory.py)
    gpu_estimate: int = 0

    @property
    def key(self) -> str:
        return f"{self.slot_id}{SEP}{self.name}"

    @property
    def alive(self) -> bool:
        return self.server.state == READY and self.server.tree is not None

    async def measure(self) -> None:
        """What it holds asleep, measured (agent/swap/sleeper.py)."""
        self.gpu_bytes, self.host_bytes = await sleeper.held(self.server)
        if not self.host_estimate and self.server.profile is not None:
            said = await asyncio.to_thread(mem.pins_estimate, self.server.profile)
            self.host_estimate = said or 0
        self.gpu_estimate = self.gpu_estimate or mem.DEFAULT_REMAINDER

    def view(self, accept: float | None) -> protocol.StandbyView:
        state = self.state if self.server.state in (READY, "launching") else "lost"
        return protocol.StandbyView(
            profile=self.name,
            state=state,  # type: ignore[arg-type]
            host_bytes=self.host_bytes or self.host_estimate,
            gpu_bytes=self.gpu_bytes or self.gpu_estimate,
            host_estimate_bytes=self.host_estimate,
            gpu_estimate_bytes=self.gpu_estimate,
            measured=bool(self.host_bytes),
            port=self.server.port,
            pid=self.server.tree.pid if self.server.tree else None,
            accept_length=accept,
        )


class Standbys:
    """Every slot's standbys: the registry the standby ops (agent/swap/standby_ops.py), a launch
    (agent/swap/operations.py) and a warm swap (agent/swap/coordinator.py) read and change."""

    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx  # the slots a sleeper sleeps beside; agent.toml's reserve
        self.by_slot: dict[str, dict[str, Standby]] = {}
        self.accept: dict[str, float] = {}  # profile -> its draft's last measured accept length
        self.reserve = int(ctx.config.standby_reserve_gb * 1e9)

    # ---- views and records ----------------------------------------------------------------------
    def of(self, slot_id: str) -> dict[str, Standby]:
        return self.by_slot.setdefault(slot_id, {})

    def views(self, slot_id: str) -> list[protocol.StandbyView]:
        return [sb.view(self.accept.get(sb.name)) for sb in self.of(slot_id).values()]

    def warm(self, slot: Slot, name: str) -> Standby | None:
        sb = self.of(slot.id).get(name)
        return sb if sb is not None and sb.state == "asleep" and sb.alive else None

    def pids(self) -> set[int]:
        out: set[int] = set()
        for sbs in self.by_slot.values():
            for sb in sbs.values():
                if sb.server.tree is not None:
                    out |= set(sb.server.tree.seen)
        return out

    def records(self) -> dict[str, dict]:
        """agent-state.json entries of the sleepers (SLOT~PROFILE), to re-adopt them asleep."""
        out = {}
        for sbs in self.by_slot.values():
            for sb in sbs.values():
                rec = sb.server.record() if sb.state == "asleep" else None
                if rec:
                    rec["standby"] = {
                        "slot": sb.slot_id,
                        "host_bytes": sb.host_bytes,
                        "gpu_bytes": sb.gpu_bytes,
                        "estimate": [sb.host_estimate, sb.gpu_estimate],
                        "accept_length": self.accept.get(sb.name),
                    }
                    out[sb.key] = rec
        return out

    def adopt(self, key: str, record: dict, profile: Any) -> bool:
        """A sleeper an earlier agent left (agent-state.json): taken over, still asleep."""
        meta = record.get("standby") or {}
        slot_id, _, name = key.partition(SEP)
        if slot_id not in self.ctx.slots or not name:
            return False
        server = Slot(key, _QuietHost(self.ctx.slots[slot_id].host))
        if not server.adopt(record, profile):
            return False
        if "released" not in record:  # written before the steps were kept: it was asleep
            server.paused = server.released = True
        sb = Standby(
            slot_id,
            name,
            server,
            "asleep",
            int(meta.get("host_bytes") or 0),
            int(meta.get("gpu_bytes") or 0),
            *[int(v or 0) for v in (meta.get("estimate") or [0, 0])[:2]],
        )
        if meta.get("accept_length"):
            self.accept[name] = float(meta["accept_length"])
        self.of(slot_id)[name] = sb
        return True

    async def close(self, stop_servers: bool) -> None:
        for sbs in self.by_slot.values():
            for sb in sbs.values():
                if stop_servers and sb.server.tree is not None:
                    try:
                        await sb.server.stop("agent", drain="force")
                    except Exception:
                        log.exception("stopping standby %s", sb.key)
                await sb.server.close()

    # ---- a sleeper's port and slot --------------------------------------------------------------
    def free_port(self, base: int) -> int:
        """A port for a sleeper near `base`: no slot's, no other sleeper's, free now."""
        taken = {sb.server.port for sbs in self.by_slot.values() for sb in sbs.values()}
        taken |= {s.port for s in self.ctx.slots.values()}
        for port in range(base + 1000, base + 1200):
            if port <= 65535 and port not in taken and procs.port_free("127.0.0.1", port):
                return port
        raise OpError(
            f"no free port near {base + 1000} for a standby", fix="free one and try again"
        )

    def hidden(self, slot: Slot, name: str) -> Slot:
        """The hidden slot that holds the sleeper of `name` beside `slot`'s server."""
        return Slot(f"{slot.id}{SEP}{name}", _QuietHost(slot.host))

    # ---- what a launch or a swap asks of them ----------------------------------------------
    def cold_target(self, slot: Slot, target: Resolved) -> Resolved:
        """A launch on a slot with standbys: able to sleep (the warm swap that later leaves it
        keeps it warm), and on a port of its own when a sleeper holds the profile's."""
        sb = self.of(slot.id).get(target.name)
        if sb is not None and not sb.alive:
            self.of(slot.id).pop(target.name)  # lost: the cold launch replaces it
        sleepers = self.of(slot.id)
        if not sleepers:
            return target
        held = {s.server.port for s in sleepers.values() if s.server.tree is not None}
        port = self.free_port(target.port) if target.port in held else None
        return with_saver(target, port)

    def drop(self, slot_id: str, name: str) -> Standby | None:
        """`name` no longer kept warm on the slot (its server is the caller's to stop/close)."""
        return self.of(slot_id).pop(name, None)

    async def keep_asleep(
        self, slot: Slot, name: str, handed: dict, host_bytes: int = 0
    ) -> Standby:
        """A server the slot handed over asleep (Slot.hand_over: a warm swap left it) kept as
        the standby of `name` from now on, measured."""
        srv = self.hidden(slot, name)
        srv.take_over(handed)
        sb = Standby(slot.id, name, srv, "asleep", host_bytes, 0)
        self.of(slot.id)[name] = sb
        await sb.measure()
        return sb


def pick_records(saved: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """agent-state.json's slot entries split into (slots, sleepers)."""
    slots = {k: v for k, v in saved.items() if SEP not in k}
    sleepers = {k: v for k, v in saved.items() if SEP in k}
    return slots, sleepers
