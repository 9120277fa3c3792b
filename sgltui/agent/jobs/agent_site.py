"""What batch jobs see of the agent: `JobsSite`, and `AgentSite`, its implementation over the
agent's parts.

The jobs host (agent/jobs/jobs_host.py) and a --choose job's trial (agent/jobs/choice.py) read which
slots and pools exist, what each runs and where its server answers, whether a lifecycle command
is on, the GPUs' power, the engine's latest reading and capacity card, and the bench runs'
results; they send lifecycle commands as any client does and emit events. They see this much
and nothing else, so that the supervisor's insides (its slots, operations, pools, telemetry,
children) can change without the jobs following. The other direction, a swap holding the jobs
of its slot, is the operations' calls of JobsHost.before_swap / after_swap.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent.jobs.site_interface import JobsSite, SlotSight
from sgltui.agent.slot.server_url import slot_url

if TYPE_CHECKING:
    from sgltui.agent.agent_calls import AgentCalls
    from sgltui.agent.children import Children
    from sgltui.agent.context import AgentContext
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.provenance import ProvenanceKeeper
    from sgltui.agent.slot.slot import Slot
    from sgltui.agent.swap.operations import Operations
    from sgltui.core.profiles import Profile

__all__ = ["AgentSite", "JobsSite", "SlotSight"]  # the interface: agent/jobs/site_interface.py


class AgentSite:
    """JobsSite over the agent's parts (made by the supervisor, for its JobsHost)."""

    def __init__(
        self,
        ctx: AgentContext,
        calls: AgentCalls,
        ops: Operations,
        pools: Pools,
        provenance: ProvenanceKeeper,
        children: Children,
    ) -> None:
        self._ctx = ctx
        self._calls = calls  # lifecycle commands, sent as any client sends them
        self._ops = ops  # each slot's latest lifecycle job: is one on?
        self._pools = pools
        self._provenance = provenance  # a launch's hash
        self._children = children  # the bench runs
        self.jobs_dir = ctx.state_dir / "jobs"
        self.jobs_config = ctx.config.jobs

    def info_hash(self, launch_id: str | None) -> str | None:
        return self._provenance.by_launch.get(launch_id or "")

    def _sight(self, slot: Slot) -> SlotSight:
        job = self._ops.jobs.get(slot.id)
        front = slot.front
        routes = front is not None and not front.error and front.backend is not None
        return SlotSight(
            id=slot.id,
            state=str(slot.state),
            swapping=slot.swap is not None,
            busy=job is not None and job.task is not None and not job.task.done(),
            launch_id=slot.launch_id,
            profile_name=slot.profile_name,
            url=slot_url(slot),
            front_url=front.url if routes and front is not None else None,
            api_key=slot.api_key,
            unresponsive=slot.liveness.reason if str(slot.state) == "ready" else None,
            time_scale=_time_scale(slot.profile.profile if slot.profile else None),
        )

    def slot_ids(self) -> list[str]:
        return list(self._ctx.slots)

    def slot(self, slot_id: str) -> SlotSight | None:
        slot = self._ctx.slots.get(slot_id)
        return None if slot is None else self._sight(slot)

    def has_pool(self, pool: str) -> bool:
        return pool in self._pools.places

    def pool_members(self, pool: str) -> list[SlotSight]:
        return [self._sight(s) for s in self._pools.members(pool)]

    def pool_rolling(self, pool: str) -> bool:
        return pool in self._pools.rolls_running()

    def pool_target(self, pool: str) -> tuple[str | None, str | None, str]:
        return self._pools.job_target(pool)

    def pool_profiles(self, pool: str) -> list[str]:
        return self._pools.serving_profiles(pool)

    def gpu_power_w(self) -> float | None:
        # The agent serves one slot per GPU set; all GPUs it reads are counted (a host shared
        # with other slots over-counts).
        tele = self._ctx.telemetry
        if tele is None:
            return None
        gpus: list = []
        with contextlib.suppress(AttributeError, KeyError, TypeError, ValueError):
            gpus = list(tele.snapshot().get("gpus") or [])
        readings = [g.get("power_w") for g in gpus if isinstance(g, dict)]
        watts = [float(w) for w in readings if isinstance(w, (int, float))]
        return sum(watts) if watts else None

    def engine(self, slot_id: str) -> dict | None:
        tele = self._ctx.telemetry
        if tele is None:
            return None
        with contextlib.suppress(AttributeError, KeyError, TypeError):
            return (tele.snapshot().get("engine") or {}).get(slot_id)
        return None

    def capacity(self, slot_id: str) -> dict | None:
        tele = self._ctx.telemetry
        if tele is None:
            return None
        with contextlib.suppress(AttributeError, KeyError, TypeError, ValueError):
            return tele.capacity(slot_id)
        return None

    def bench_runs(self) -> list[dict]:
        return sorted(self._children.bench_runs.values(), key=lambda r: r["started"])

    def publish(self, event: protocol.EventBase) -> Any:
        return self._ctx.bus.publish(event)

    async def command(self, op: str, args: protocol.Args, client: str) -> Any:
        return await self._calls.call(args, client, op)


def _time_scale(profile: Profile | None) -> float:
    """Wall seconds per server second of what the slot runs: the simulator's time scale (its
    own default 1), 1 for a real server."""
    if profile is None or profile.launcher != "sim":
        return 1.0
    try:
        return max(0.0, float(profile.server.get("sim-time-scale", 1.0)))
    except (TypeError, ValueError):
        return 1.0
