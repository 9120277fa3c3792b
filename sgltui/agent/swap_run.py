"""One swap of a slot as the session tells it: its steps (`swap.step`) and its end (`swap.done`,
the slot's `last_swap`). The cold swap (agent/operations.py: stop, launch, maybe roll back) and
the warm swap (agent/standby.py: sleep one server, wake another) sequence different work and
end the same way, through `SwapRun.done`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from sgltui import protocol
from sgltui.agent.slot import as_cause

if TYPE_CHECKING:
    from sgltui.agent.events import EventBus
    from sgltui.agent.slot import Slot


class SwapRun:
    """The swap of `slot` from `frm` to `to` for `client`, timed from its making."""

    def __init__(
        self, bus: EventBus, slot: Slot, client: str | None, frm: str | None, to: str
    ) -> None:
        self.bus, self.slot, self.client = bus, slot, client
        self.frm, self.to = frm, to
        self.t0 = time.monotonic()
        self.timings: dict[str, float] = {}  # what each step took, "total" once done

    def step(self, name: str) -> None:
        """The slot's swap is at step `name` (status shows it; the session records it)."""
        self.slot.swap_step(name)
        self.bus.publish(
            protocol.SwapStep(
                client=self.client,
                slot=self.slot.id,
                from_=self.frm,
                to=self.to,
                step=name,
                elapsed_s=round(time.monotonic() - self.t0, 3),
            )
        )

    def done(
        self,
        ok: bool,
        rolled_back: bool,
        cause: dict | None,
        kind: Literal["warm", "cold"] = "cold",
    ) -> float:
        """The swap is over: said (swap.done), a failure kept as the slot's cause when no server
        came back, the outcome kept as the slot's last_swap. `cause`: why it failed (unused
        when ok). The total seconds."""
        slot = self.slot
        total = self.timings["total"] = round(time.monotonic() - self.t0, 3)
        self.bus.publish(
            protocol.SwapDone(
                client=self.client,
                slot=slot.id,
                from_=self.frm,
                to=self.to,
                ok=ok,
                rolled_back=rolled_back,
                timings_s=dict(self.timings),
                kind=kind,
            )
        )
        if not ok:
            slot.keep_failure(cause)  # no-op once the slot has a cause or serves again
        slot.end_swap(
            protocol.LastSwap(
                from_=self.frm,
                to=self.to,
                ok=ok,
                rolled_back=rolled_back,
                timings_s=dict(self.timings),
                cause=None if ok else as_cause(cause),
                finished_at=time.time(),
                client=self.client,
                kind=kind,
                seconds=total,
            )
        )
        return total
