"""A slot's lifecycle command while it runs (`Job`) and a reply that waits for it (`Wait`).

Operations (agent/swap/operations.py) makes them for start and stop; the swaps (agent/swap/coordinator.py) for a
swap, cold or warm, and a restart; the standby ops (agent/swap/standby_ops.py) for a standby add; the
supervisor reads them for status. A
module of their own so that none of those imports another for two small types.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sgltui import protocol

if TYPE_CHECKING:
    from sgltui.agent.slot.slot import Slot


@dataclass
class Job:
    """A slot's lifecycle command while it runs (and its outcome once it has)."""

    kind: str  # "launch" | "stop" | "swap" | "restart" | "standby"
    desc: str
    client: str | None
    started: float
    task: asyncio.Task | None = None
    result: protocol.Outcome | None = None

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class Wait:
    """A command reply deferred until its job is over (the `wait` argument), computed outside
    the slot's lock so other commands are not held up."""

    def __init__(self, slot: Slot, job: Job | None) -> None:
        self.slot, self.job = slot, job

    async def wait(self) -> protocol.Accepted:
        job, result = self.job, None
        if job is not None and job.task is not None:
            try:
                result = await asyncio.shield(job.task)
            except asyncio.CancelledError:
                result = protocol.Outcome(cancelled=True)
        if result is None and job is not None:
            result = job.result
        return protocol.Accepted(slot=self.slot.status(), result=result)
