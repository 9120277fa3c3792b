"""What the swap path's parts (agent/swap/operations.py, agent/swap/standby.py, agent/slot/pins.py)
need of the agent around them: one narrow Protocol each, the supervisor the one that gives it.

Every other part of the agent is handed the shared context (agent/context.py) and the parts it
uses, typed, when the supervisor makes it. These Protocols stay while the swap path is being
made one coordinator; they go with it (and this module, whose name means a machine anywhere
else in sgltui, with them). This module imports none of the parts it describes: no import
cycle, TYPE_CHECKING imports included (tests/test_import_cycles.py).

The read-only `@property` members are parts the supervisor holds (its operations, pools, batch
jobs, standbys): a property lets its attribute of the part's own class stand for the narrower
Protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sgltui import protocol
from sgltui.agent.config import AgentConfig
from sgltui.agent.events import EventBus
from sgltui.agent.jobs.records import JobRecord
from sgltui.agent.pools.exposure import Exposures
from sgltui.agent.slot.resolved import Resolved
from sgltui.agent.slot.running_command import Job
from sgltui.agent.slot.slot import Slot, SlotConfig
from sgltui.agent.swap import preflight
from sgltui.core.placement import PoolPlace

if TYPE_CHECKING:
    from sgltui.agent.telemetry import Telemetry

# ---- what one part needs of another ---------------------------------------------------------


class SwapHolds(Protocol):
    """The batch jobs (agent/jobs/jobs_host.py JobsHost), as a slot's stop or swap holds them."""

    async def before_swap(self, slot_id: str, force: bool) -> None: ...
    def after_swap(self, slot_id: str) -> None: ...
    def pinned_on(self, slot_id: str) -> JobRecord | None: ...


class PoolGuard(Protocol):
    """The pools (agent/pools/pools.py), as a slot's stop or restart asks them first."""

    def refuse_taking_out(self, slot_id: str, doing: str, forced: bool) -> None: ...


class PoolLookup(Protocol):
    """The pools, as a standby op on a pool finds its slots."""

    def pool(self, name: str) -> PoolPlace: ...
    def front_port(self, slot_id: str) -> tuple[str, int] | None | bool: ...


class WarmSwaps(Protocol):
    """The standbys (agent/swap/standby.py), as a launch or a preflight asks them."""

    def warm(self, slot: Slot, name: str) -> object | None: ...
    def cold_target(self, slot: Slot, target: Resolved) -> Resolved: ...


class BenchGuard(Protocol):
    """The bench runs (agent/children.py), as a swap of the slot a sweep uses asks them."""

    def bench_on(self, slot_id: str, client: str | None) -> dict | None: ...
    async def bench_cut(self, run: dict, cut: dict[str, Any]) -> None: ...


class LeaseGuard(Protocol):
    """The leases (agent/endpoint/leases.py) as a swap asks them: one held by hand on the slot's profile."""

    def by_hand_on(self, slot_id: str) -> protocol.LeaseView | None: ...


class StandbyOps(Protocol):
    """The operations, as the standbys run their jobs under the slot's lock."""

    def lock(self, slot_id: str) -> asyncio.Lock: ...
    def refuse_if_busy(self, slot: Slot, what: str) -> None: ...
    def place(self, slot: Slot, target: Resolved) -> Resolved: ...
    def run(self, slot: Slot, job: Job, coro: Coroutine[Any, Any, protocol.Outcome]) -> Job: ...
    def reply(self, slot: Slot, args: protocol.StandbyArgs, job: Job | None) -> Any: ...
    def server_going(
        self, slot: Slot, drain: str
    ) -> contextlib.AbstractAsyncContextManager[None]: ...
    async def launch(
        self, slot: Slot, profile: Any, client: str | None, skip: frozenset[str] = ...
    ) -> None: ...
    def launch_id(self, profile_name: str) -> str: ...


class SwapOps(StandbyOps, Protocol):
    """The operations, as the swaps (agent/swap/coordinator.py) run theirs: also the preflight that accepts
    a cold swap's profile, and the slot's job a second swap is refused with."""

    def busy(self, slot_id: str) -> Job | None: ...
    async def accept(self, slot: Slot, name: str | None, args: protocol.LaunchArgs) -> Resolved: ...
    def forced(self, args: protocol.LaunchArgs) -> frozenset[str]: ...
    def reply(
        self,
        slot: Slot,
        args: protocol.StandbyArgs | protocol.RestartArgs | protocol.SwapArgs,
        job: Job | None,
    ) -> Any: ...


class StandbyShelf(Protocol):
    """The standbys (agent/swap/standby.py), as a warm swap wakes one and keeps the other asleep
    (agent/swap/coordinator.py; a standby is agent/swap/standby.py's Standby)."""

    by_slot: dict[str, dict[str, Any]]
    accept: dict[str, float]

    def warm(self, slot: Slot, name: str) -> Any: ...
    def drop(self, slot_id: str, name: str) -> Any: ...
    async def keep_asleep(
        self, slot: Slot, name: str, handed: dict, host_bytes: int = ...
    ) -> Any: ...


class SwapPools(PoolGuard, Protocol):
    """The pools, as a swap asks them: a restart of a pool's last worker, a warm swap's front
    (agent/swap/standby_room.py) and its worker out of the gateway (agent/pools/worker.py)."""

    def front_port(self, slot_id: str) -> tuple[str, int] | None | bool: ...


# ---- what the swap path's parts need of the supervisor -------------------------------------


class OpsHost(Protocol):
    """What the lifecycle operations (agent/swap/operations.py) need of the agent."""

    bus: EventBus

    # session/writer.py Recorder, set when the agent starts: its path holds the server logs
    # (Any: operations.py reads it unchecked; agent/context.py's `session` is the checked one)
    @property
    def recorder(self) -> Any: ...

    exposures: Exposures

    def slot_for(self, args: protocol.Args) -> Slot: ...
    def get_profile(self, name: str | None, args: protocol.Args | None) -> Resolved: ...
    def current(self, slot: Slot) -> preflight.Current: ...
    def our_pids(self) -> set[int]: ...

    @property
    def batch(self) -> SwapHolds: ...
    @property
    def pools(self) -> PoolGuard: ...
    @property
    def standbys(self) -> WarmSwaps: ...
    @property
    def children(self) -> BenchGuard: ...
    @property
    def leases(self) -> LeaseGuard: ...


class StandbysHost(Protocol):
    """What the standbys (agent/swap/standby.py) need: what a sleeper's hidden slot needs (its
    launch history, log files, secrets), the slots, and the operations' lock and jobs."""

    bus: EventBus
    config: SlotConfig
    state_dir: Path
    agent_config: AgentConfig
    slots: dict[str, Slot]

    def server_log_path(self, launch_id: str) -> Path: ...
    def learned(self, profile: str) -> dict[str, float] | None: ...
    def record_launch(self, profile: str, durations: dict[str, float]) -> None: ...
    def add_secret(self, secret: str) -> None: ...
    def get_profile(self, name: str | None, args: protocol.Args | None) -> Resolved: ...
    def slot_for(self, args: protocol.Args) -> Slot: ...
    def our_pids(self) -> set[int]: ...
    def status(self) -> protocol.StatusReply: ...
    async def state_saved(self) -> None: ...

    @property
    def ops(self) -> StandbyOps: ...
    @property
    def pools(self) -> PoolLookup: ...


class SwapsHost(Protocol):
    """What the swap coordinator (agent/swap/coordinator.py) needs: the slots, the operations' command
    layer, the standbys it wakes, and what holds a slot (leases, pinned jobs, bench runs)."""

    bus: EventBus
    slots: dict[str, Slot]

    def slot_for(self, args: protocol.Args) -> Slot: ...

    @property
    def telemetry(self) -> Telemetry | None: ...  # None until it started, and when it did not

    @property
    def ops(self) -> SwapOps: ...
    @property
    def standbys(self) -> StandbyShelf: ...
    @property
    def pools(self) -> SwapPools: ...
    @property
    def batch(self) -> SwapHolds: ...
    @property
    def leases(self) -> LeaseGuard: ...
    @property
    def children(self) -> BenchGuard: ...
