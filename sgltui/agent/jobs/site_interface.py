"""What batch jobs see of the agent (`JobsSite`) and of one slot (`SlotSight`): the interface
alone, so that the jobs' modules (agent/jobs/jobs_host.py and its parts) depend on it and not on the
supervisor; agent/jobs/agent_site.py's AgentSite implements it over the supervisor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sgltui import protocol
from sgltui.agent.config import JobsConfig


@dataclass(frozen=True)
class SlotSight:
    """One slot as a job sees it, read when asked (a copy: the slot's state stays its own)."""

    id: str
    state: str  # lifecycle.py's states: "ready" is the one a job sends to
    swapping: bool  # a swap of it is on (its jobs are held)
    busy: bool  # a lifecycle command (start, stop, restart, swap) runs on it now
    launch_id: str | None
    profile_name: str | None
    url: str  # its server, straight
    front_url: str | None  # its front, when that routes to the server; else None
    api_key: str | None
    unresponsive: str | None = None  # a ready server that does not answer, and why
    # wall seconds per server second: the simulator's --sim-time-scale (a real server: 1), so
    # a trial's minimum window is the server's time, not the bench's faster clock
    time_scale: float = 1.0


class JobsSite(Protocol):
    """The agent, as far as batch jobs see it."""

    jobs_dir: Path  # where job records, runner logs and nothing else of the agent live
    jobs_config: JobsConfig  # agent.toml's [jobs]

    def slot_ids(self) -> list[str]: ...

    def slot(self, slot_id: str) -> SlotSight | None: ...

    def has_pool(self, pool: str) -> bool: ...

    def pool_members(self, pool: str) -> list[SlotSight]:
        """The pool's slots; an unknown pool raises OpError (one line naming the pools)."""
        ...

    def pool_rolling(self, pool: str) -> bool: ...

    def pool_target(self, pool: str) -> tuple[str | None, str | None, str]:
        """(url, api_key, why not) for a job sent through the pool now."""
        ...

    def pool_profiles(self, pool: str) -> list[str]:
        """The profiles the pool's routable slots run now, sorted (none: nothing routable)."""
        ...

    def gpu_power_w(self) -> float | None:
        """The GPUs' power now (W), summed; None without readings."""
        ...

    def info_hash(self, launch_id: str | None) -> str | None:
        """The hash of what that launch's server runs (agent/provenance.py), once kept."""
        ...

    def engine(self, slot_id: str) -> dict | None:
        """The slot's latest engine reading (gen_throughput, ts, ...), if any."""
        ...

    def capacity(self, slot_id: str) -> dict | None:
        """The slot's capacity card (max_running_requests, ...), if any."""
        ...

    def bench_runs(self) -> list[dict]:
        """This agent's bench runs, oldest first (each with its results file's path)."""
        ...

    def publish(self, event: protocol.EventBase) -> Any: ...

    async def command(self, op: str, args: protocol.Args, client: str) -> Any:
        """A command as a client sends it (paused around, drained, recorded, refused alike)."""
        ...
