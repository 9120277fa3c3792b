"""The agent's ops as its own parts send them (pools, the endpoint, the batch jobs, the Batch
API): typed methods, each taking its op's arguments' Struct and giving its reply's type, never
an op named by its text. Each goes the way a client's request goes (Supervisor.handle): the
op's lock, its "command" event, its refusal recorded, a `wait` awaited, the state saved.
The supervisor makes one over its `handle` and gives it to each part that sends ops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from sgltui import protocol

# Supervisor.handle: an op by its name, its arguments' Struct, the client that sends it
Handle = Callable[[str, protocol.Args, str | None], Awaitable[Any]]


class AgentCalls:
    """The agent's ops, each sent through `handle` as a client's request would be."""

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    async def call(self, args: protocol.Args, client: str | None, op: str | None = None) -> Any:
        """The op its arguments' Struct names (protocol.op_for); `op` only where that Struct
        serves several ops (JobArgs, StandbyArgs, LeaseArgs), checked against it."""
        return await self.handle(protocol.op_for(args, op), args, client)

    # a slot's (or a pool's) lifecycle (`start_slot`, not `start`: the agent's own start)
    async def preflight(
        self, args: protocol.PreflightArgs, client: str | None
    ) -> protocol.PreflightReply:
        return cast(protocol.PreflightReply, await self.call(args, client))

    async def start_slot(self, args: protocol.StartArgs, client: str | None) -> protocol.Accepted:
        return cast(protocol.Accepted, await self.call(args, client))

    async def stop(self, args: protocol.StopArgs, client: str | None) -> protocol.Accepted:
        return cast(protocol.Accepted, await self.call(args, client))

    async def restart(self, args: protocol.RestartArgs, client: str | None) -> protocol.Accepted:
        return cast(protocol.Accepted, await self.call(args, client))

    async def swap(self, args: protocol.SwapArgs, client: str | None) -> protocol.Accepted:
        return cast(protocol.Accepted, await self.call(args, client))

    async def standby_add(
        self, args: protocol.StandbyArgs, client: str | None
    ) -> protocol.Accepted:
        return cast(protocol.Accepted, await self.call(args, client, "standby_add"))

    # batch jobs
    async def job_run(self, args: protocol.JobRunArgs, client: str | None) -> protocol.JobView:
        return cast(protocol.JobView, await self.call(args, client))

    async def job_status(self, args: protocol.JobArgs, client: str | None) -> protocol.JobView:
        return cast(protocol.JobView, await self.call(args, client, "job_status"))

    async def job_cancel(self, args: protocol.JobArgs, client: str | None) -> protocol.JobView:
        return cast(protocol.JobView, await self.call(args, client, "job_cancel"))
