"""What each part of the agent needs of the agent around it: one narrow Protocol per part.

slot.py's `SlotHost` is the model. The supervisor (agent/supervisor.py) makes the parts and is
each one's host; a part holds only its own Protocol and calls no more than it declares, so none
imports the supervisor or another part, and mypy checks that the supervisor gives what each
declares (where it passes itself). This module imports none of the parts it describes
(operations, pools, remote_pools, standby, restart_policy, jobs_host, jobs_site, fronts,
telemetry_link, agent_ops, supervisor):
what a part needs of another is declared here too, as a Protocol of its own. No import cycle,
TYPE_CHECKING imports included: tests/test_import_cycles.py.

The read-only `@property` members are parts the host holds (its operations, pools, batch jobs,
standbys): a property lets the supervisor's attribute of the part's own class stand for the
narrower Protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, Protocol

from sgltui import protocol
from sgltui.agent import preflight
from sgltui.agent.children import Children
from sgltui.agent.config import AgentConfig
from sgltui.agent.discovery import Discovery
from sgltui.agent.events import EventBus
from sgltui.agent.exposure import Exposures
from sgltui.agent.front import FrontConfig
from sgltui.agent.job_records import JobRecord
from sgltui.agent.logbatch import LogBatch
from sgltui.agent.profile_catalog import ProfileCatalog
from sgltui.agent.provenance import ProvenanceKeeper
from sgltui.agent.resolved import Resolved
from sgltui.agent.slot import Slot, SlotConfig
from sgltui.agent.slot_job import Job
from sgltui.core.placement import PoolPlace
from sgltui.core.redact import Redactor

# ---- what one part needs of another ---------------------------------------------------------


class SwapHolds(Protocol):
    """The batch jobs (agent/jobs_host.py JobsHost), as a slot's stop or swap holds them."""

    async def before_swap(self, slot_id: str, force: bool) -> None: ...
    def after_swap(self, slot_id: str) -> None: ...
    def pinned_on(self, slot_id: str) -> JobRecord | None: ...


class ActiveJobs(Protocol):
    """The batch jobs, as the restart policy asks whether a crashed slot is still wanted."""

    def active_on(self, slot_id: str) -> bool: ...


class PoolGuard(Protocol):
    """The pools (agent/pools.py), as a slot's stop or restart asks them first."""

    def refuse_taking_out(self, slot_id: str, doing: str, forced: bool) -> None: ...


class PoolLookup(Protocol):
    """The pools, as a standby op on a pool finds its slots."""

    def pool(self, name: str) -> PoolPlace: ...
    def front_port(self, slot_id: str) -> tuple[str, int] | None | bool: ...


class GatewaySamples(Protocol):
    """The pools, as telemetry's samples carry each gateway's metrics."""

    def telemetry(self) -> dict[str, Any]: ...


class FrontPorts(Protocol):
    """The pools, as each slot's front asks where it binds."""

    def front_port(self, slot_id: str) -> tuple[str, int] | None | bool: ...


class RemotePoolSet(Protocol):
    """The pools, as the fleet side sets a remote pool's workers."""

    async def remote_set(self, args: protocol.RemotePoolArgs) -> dict[str, Any]: ...


class PoolSight(Protocol):
    """The pools, as batch jobs see them (agent/jobs_site.py)."""

    places: dict[str, PoolPlace]

    def members(self, name: str) -> list[Slot]: ...
    def rolls_running(self) -> set[str]: ...
    def job_target(self, name: str) -> tuple[str | None, str | None, str]: ...
    def serving_profiles(self, name: str) -> list[str]: ...


class WarmSwaps(Protocol):
    """The standbys (agent/standby.py), as a launch or a preflight asks them."""

    def warm(self, slot: Slot, name: str) -> object | None: ...
    def cold_target(self, slot: Slot, target: Resolved) -> Resolved: ...


class BenchGuard(Protocol):
    """The bench runs (agent/children.py), as a swap of the slot a sweep uses asks them."""

    def bench_on(self, slot_id: str, client: str | None) -> dict | None: ...
    async def bench_cut(self, run: dict, cut: dict[str, Any]) -> None: ...


class SlotJobs(Protocol):
    """The operations (agent/operations.py), as a reader of each slot's latest job."""

    jobs: dict[str, Job]


class Relauncher(Protocol):
    """The swaps (agent/swap.py), as the restart policy relaunches a crashed slot."""

    async def relaunch(self, slot: Slot, client: str) -> Job: ...


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
    """The operations, as the swaps (agent/swap.py) run theirs: also the preflight that accepts
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
    """The standbys (agent/standby.py), as a warm swap wakes one and keeps the other asleep
    (agent/swap.py; a standby is agent/standby.py's Standby)."""

    by_slot: dict[str, dict[str, Any]]
    accept: dict[str, float]

    def warm(self, slot: Slot, name: str) -> Any: ...
    def drop(self, slot_id: str, name: str) -> Any: ...
    async def keep_asleep(
        self, slot: Slot, name: str, handed: dict, host_bytes: int = ...
    ) -> Any: ...


class SwapPools(PoolGuard, Protocol):
    """The pools, as a swap asks them: a restart of a pool's last worker, a warm swap's front
    (agent/standby_room.py) and its worker out of the gateway (agent/pool_worker.py)."""

    def front_port(self, slot_id: str) -> tuple[str, int] | None | bool: ...


# ---- each part's host (the supervisor) -------------------------------------------------------


class LeaseGuard(Protocol):
    """The leases (agent/leases.py) as a swap asks them: one held by hand on the slot's profile."""

    def by_hand_on(self, slot_id: str) -> protocol.LeaseView | None: ...


class OpsHost(Protocol):
    """What the lifecycle operations (agent/operations.py) need of the agent."""

    bus: EventBus
    recorder: Any  # session/writer.py Recorder: its path holds the server logs
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


class RemotePoolsHost(Protocol):
    """What the pools of other hosts' servers (agent/remote_pools.py) need of the agent."""

    bus: EventBus
    state_dir: Path


class PoolsHost(RemotePoolsHost, Protocol):
    """What the pools (agent/pools.py) need: a rolling swap is each slot's op, as sent."""

    slots: dict[str, Slot]

    async def call(self, args: protocol.Args, client: str | None, op: str | None = None) -> Any: ...
    async def preflight(
        self, args: protocol.PreflightArgs, client: str | None
    ) -> protocol.PreflightReply: ...
    async def swap(self, args: protocol.SwapArgs, client: str | None) -> protocol.Accepted: ...


class RestartHost(Protocol):
    """What the restart policy (agent/restart_policy.py) needs of the agent."""

    bus: EventBus
    slots: dict[str, Slot]

    @property
    def batch(self) -> ActiveJobs: ...
    @property
    def swaps(self) -> Relauncher: ...


class StandbysHost(Protocol):
    """What the standbys (agent/standby.py) need: what a sleeper's hidden slot needs (its
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
    """What the swap coordinator (agent/swap.py) needs: the slots, the operations' command
    layer, the standbys it wakes, and what holds a slot (leases, pinned jobs, bench runs)."""

    bus: EventBus
    slots: dict[str, Slot]
    telemetry: Any  # agent/telemetry.py Telemetry, None when it did not start: it follows

    def slot_for(self, args: protocol.Args) -> Slot: ...

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


class SiteHost(Protocol):
    """What the batch jobs' site (agent/jobs_site.py AgentSite) reads of the agent."""

    bus: EventBus
    state_dir: Path
    agent_config: AgentConfig
    slots: dict[str, Slot]
    provenance: ProvenanceKeeper
    children: Children
    telemetry: Any  # agent/telemetry.py Telemetry, None when it did not start

    async def call(self, args: protocol.Args, client: str | None, op: str | None = None) -> Any: ...

    @property
    def ops(self) -> SlotJobs: ...
    @property
    def pools(self) -> PoolSight: ...


class TelemetryHost(Protocol):
    """What telemetry's link to the agent (agent/telemetry_link.py) needs: it sets `telemetry`."""

    bus: EventBus
    slots: dict[str, Slot]
    agent_config: AgentConfig
    recorder: Any  # session/writer.py Recorder: samples are recorded
    telemetry: Any
    log_batch: LogBatch  # flushed before each sample (subscribe logs="tick")

    def broadcast(self, kind: str, data: Any) -> None: ...

    @property
    def pools(self) -> GatewaySamples: ...


class FrontsHost(Protocol):
    """What the slots' fronts (agent/fronts.py) need of the agent."""

    bus: EventBus
    slots: dict[str, Slot]
    front_config: FrontConfig
    state_dir: Path  # the Batch API's files and batches live under it

    @property
    def pools(self) -> FrontPorts: ...

    # the Batch API's jobs are the agent's ops (job_run, job_status, job_cancel)
    async def job_run(self, args: protocol.JobRunArgs, client: str | None) -> protocol.JobView: ...
    async def job_status(self, args: protocol.JobArgs, client: str | None) -> protocol.JobView: ...
    async def job_cancel(self, args: protocol.JobArgs, client: str | None) -> protocol.JobView: ...


class AgentOpsHost(Protocol):
    """What the ops on the agent itself (agent/agent_ops.py) need of it."""

    bus: EventBus
    recorder: Any  # session/writer.py Recorder: its path holds the server logs
    telemetry: Any  # agent/telemetry.py Telemetry, None when it did not start
    exposures: Exposures
    children: Children
    redactor: Redactor
    discovery: Discovery
    catalog: ProfileCatalog
    stop_servers_on_exit: bool
    shutdown_requested: asyncio.Event

    def status(self) -> protocol.StatusReply: ...
    def slot_for(self, args: protocol.Args) -> Slot: ...
    def add_secret(self, secret: str) -> None: ...
    def server_log_path(self, launch_id: str) -> Path: ...

    @property
    def pools(self) -> RemotePoolSet: ...


class JobRecords(Protocol):
    """The batch jobs (agent/jobs_host.py JobsHost), as the leases read their records."""

    @property
    def jobs(self) -> Mapping[str, JobRecord]: ...


class LeasesHost(Protocol):
    """What the leases (agent/leases.py) need: the slots, the batch jobs' records (a running
    job holds a lease), a profile resolved by name, the event bus."""

    bus: EventBus
    slots: dict[str, Slot]

    @property
    def batch(self) -> JobRecords: ...
    def get_profile(self, name: str | None, args: protocol.Args | None) -> Resolved: ...


class EndpointHost(Protocol):
    """What the agent endpoint (agent/endpoint.py) needs: what the slots run and keep warm, the
    pools, the profiles, the leases, and the agent's ops to send as a client would."""

    bus: EventBus
    slots: dict[str, Slot]
    catalog: ProfileCatalog

    @property
    def ops(self) -> Any: ...  # agent/operations.py: busy(slot_id)
    @property
    def standbys(self) -> Any: ...  # agent/standby.py: of(slot_id), warm(slot, name)
    @property
    def pools(self) -> Any: ...  # agent/pools.py: places
    @property
    def leases(self) -> Any: ...  # agent/leases.py: held(), views()

    # the agent's ops, sent as a client would (agent/agent_calls.py)
    async def preflight(
        self, args: protocol.PreflightArgs, client: str | None
    ) -> protocol.PreflightReply: ...
    async def start_slot(
        self, args: protocol.StartArgs, client: str | None
    ) -> protocol.Accepted: ...
    async def stop(self, args: protocol.StopArgs, client: str | None) -> protocol.Accepted: ...
    async def swap(self, args: protocol.SwapArgs, client: str | None) -> protocol.Accepted: ...
    async def standby_add(
        self, args: protocol.StandbyArgs, client: str | None
    ) -> protocol.Accepted: ...
