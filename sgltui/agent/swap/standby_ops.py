"""The standby ops: a profile kept warm beside a slot's server, asleep (`standby add`), and
no longer (`standby remove`), on one slot or on each slot of a pool. The standbys themselves
(which sleeps where, re-adoption) are agent/swap/standby.py's registry; the slot's lock, job and
launch are the operations' (agent/swap/operations.py).

    standby add B:  hold the front -> drain A -> pause A -> release A -> launch B beside it (cold)
                    -> canary B (its accept length, the baseline) -> pause B -> release B
                    -> resume A -> continue A -> route            (any failure: A resumed)

A server that was launched without the memory saver cannot sleep: the add stops and relaunches
it with the memory saver (one more cold start, said).
A relaunch with the saver that fails relaunches the command that served before, and the add is
refused (its new sleeper stopped), saying why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.pools import worker as pool_worker
from sgltui.agent.slot.running_command import Job, Wait
from sgltui.agent.slot.slot import READY, LaunchError, Slot, as_cause
from sgltui.agent.swap import sleeper, standby_room
from sgltui.agent.swap.sleeper import WakeError, can_sleep, with_saver
from sgltui.agent.swap.standby import Standby, Standbys
from sgltui.core import causes

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.slot.resolved import Resolved
    from sgltui.agent.swap.operations import Operations

log = logging.getLogger("sgltui.agent.standby")


class StandbyOps:
    """standby add and standby remove, on the standbys' registry, under each slot's lock."""

    def __init__(
        self,
        ctx: AgentContext,
        ops: Operations,
        standbys: Standbys,
        pools: Pools,
        status: Callable[[], protocol.StatusReply],
    ) -> None:
        self.ctx = ctx  # the slots, a profile resolved by name, the event bus
        self.ops = ops  # each slot's lock, job and launch
        self.standbys = standbys
        self.pools = pools  # a pool's slots; its front and gateway, held while one is added
        self.status = status  # the agent's status: a remove's reply is its slot's line there

    def _slots(self, args: protocol.StandbyArgs) -> list[Slot]:
        if args.pool:
            pool = self.pools.pool(str(args.pool))
            return [self.ctx.slots[s] for s in pool.slots if s in self.ctx.slots]
        return [self.ctx.slot_for(args)]

    async def op_add(self, args: protocol.StandbyArgs, client: str | None) -> Any:
        slots = self._slots(args)
        if len(slots) == 1:
            return await self._add_one(slots[0], args, client)
        # A pool: one slot at a time (each one's server sleeps while its standby starts, and
        # the gateway routes to the others meanwhile); the first that fails ends it.
        reply: Any = None
        for slot in slots:
            reply = await self._add_one(slot, msgspec.structs.replace(args, wait=True), client)
            reply = await reply.wait()
            if not (reply.result and reply.result.ok):
                break
        return reply

    async def _add_one(self, slot: Slot, args: protocol.StandbyArgs, client: str | None) -> Any:
        ops = self.ops
        async with ops.lock(slot.id):
            ops.refuse_if_busy(slot, "standby add")
            if slot.external is not None:  # agent/slot/attach.py: not ours to put to sleep
                raise OpError(
                    f"slot {slot.id} watches a server sgltui did not start",
                    fix="`sgltui adopt` it or start a profile there before keeping another warm",
                    tui="start a profile there ({key:server.start}) before keeping another warm",
                )
            refused = standby_room.front_off(slot, self.pools)
            if refused:
                raise OpError(
                    f"standby add refused: {refused}",
                    fix=standby_room.FRONT_OFF_FIX,
                    tui=standby_room.FRONT_OFF_FIX_TUI,
                )
            refused = pool_worker.refusal(self.pools, slot, "standby add")
            if refused:
                raise OpError(refused, fix=pool_worker.REFUSAL_FIX, tui=pool_worker.REFUSAL_FIX_TUI)
            target = await asyncio.to_thread(self.ctx.get_profile, args.profile, args)
            if target.name in self.standbys.of(slot.id):
                raise OpError(f"{target.name} is already kept warm on slot {slot.id}")
            if slot.profile_name == target.name and slot.state == READY:
                raise OpError(
                    f"slot {slot.id} serves {target.name} itself",
                    fix="keep another profile warm (`sgltui standby add OTHER`)",
                    tui="highlight another profile and press {key:server.keep_warm}",
                )
            target = ops.place(slot, target)
            port = await asyncio.to_thread(self.standbys.free_port, target.port)
            target = with_saver(target, port)
            fraction = await sleeper.mem_fraction_now(slot) if slot.state == READY else None
            problem = await asyncio.to_thread(
                standby_room.check, self.standbys, slot, target, fraction
            )
            if problem:
                raise OpError(problem)
            job = Job("standby", f"standby add {target.name}", client, time.time())
            started = ops.run(slot, job, self._out_of_pool(slot, self._add(slot, target, client)))
            if args.wait:
                return _WaitWithStandbys(slot, started, self.standbys)
            return ops.reply(slot, args, started)

    async def op_remove(self, args: protocol.StandbyArgs, client: str | None) -> Any:
        slots = self._slots(args)
        for slot in slots:
            sb = self.standbys.of(slot.id).get(args.profile)
            if sb is None:
                kept = ", ".join(self.standbys.of(slot.id)) or "none"
                raise OpError(
                    f"{args.profile} is not kept warm on slot {slot.id} (standbys: {kept})",
                    fix="see `sgltui standby list`",
                    tui="the Profiles pane marks the ones kept warm",
                )
            async with self.ops.lock(slot.id):
                self.ops.refuse_if_busy(slot, "standby remove")
                self.standbys.drop(slot.id, args.profile)
                if sb.server.tree is not None:
                    await sb.server.stop(client, drain="force")
                await sb.server.close()
                self.ctx.bus.changed()
        mine = next(s for s in self.status().slots if s.id == slots[0].id)
        return protocol.Accepted(slot=mine, accepted=True)

    async def _out_of_pool(self, slot: Slot, work: Any) -> Any:
        """`work` on the slot with its worker out of its pool's gateway (agent/pools/worker.py)."""
        async with pool_worker.worker_out(self.pools, slot):
            return await work

    # ---- standby add --------------------------------------------------------------------------------
    async def _add(self, slot: Slot, target: Resolved, client: str | None) -> protocol.Outcome:
        ops = self.ops
        t0 = time.monotonic()
        serving = slot.state == READY and slot.tree is not None
        frm = slot.profile_name
        sleeps = serving and can_sleep(slot)
        previous = slot.profile
        slot.begin_swap(frm, frm or target.name, time.time(), True, client)
        slot.swap_step(f"keeping {target.name} warm")
        sb = Standby(slot.id, target.name, self.standbys.hidden(slot, target.name))
        self.standbys.of(slot.id)[target.name] = sb
        self.ctx.bus.changed()
        cause: dict | None = None
        try:
            async with ops.server_going(slot, "wait"):
                slot.hold_front(f"slot {slot.id}: keeping {target.name} warm")
                if serving:
                    drained = await sleeper.drain(slot, wait=True)
                    if sleeps:
                        slot.swap_step(f"keeping {target.name} warm: {frm} asleep")
                        await sleeper.sleep(slot, abort=not drained)
                    else:
                        slot.swap_step(f"keeping {target.name} warm: stopping {frm}")
                        await slot.stop(client, drain="force")
                slot.swap_step(f"keeping {target.name} warm: launching it")
                cause = await self._launch_hidden(sb, target, client)
                if cause is None:
                    good, accept, _ = await sleeper.canary(
                        sb.server, self.standbys.accept.get(target.name)
                    )
                    if accept:
                        self.standbys.accept[target.name] = accept
                    await sleeper.sleep(sb.server)
                    sb.state = "asleep"
                    await sb.measure()
                slot.swap_step(f"keeping {target.name} warm: {frm} back")
                refused = await self._back(
                    slot, previous, serving, sleeps, client, standby=target.name
                )
                cause = cause or refused
        except (WakeError, LaunchError) as exc:
            cause = causes._cause("exit", str(exc), [], "see `sgltui logs`", None)
            back = self._back(slot, previous, serving, sleeps, client, True, standby=target.name)
            cause = await back or cause
        finally:
            slot.end_swap()
            if cause is not None or sb.state != "asleep":
                self.standbys.of(slot.id).pop(target.name, None)
                if sb.server.tree is not None:
                    await sb.server.stop(client, drain="force")
            self.ctx.bus.changed()
        took = round(time.monotonic() - t0, 3)
        if cause is None:
            log.info("slot %s: %s kept warm (%.1fs)", slot.id, target.name, took)
        return protocol.Outcome(
            state=slot.state, ok=cause is None, timings_s={"total": took}, cause=as_cause(cause)
        )

    async def _launch_hidden(
        self, sb: Standby, target: Resolved, client: str | None
    ) -> dict | None:
        """Launch `target` cold into the standby's own slot; None once ready, else the cause."""
        srv = sb.server
        try:
            await asyncio.to_thread(srv.precheck, target, self.ops.our_pids())
        except LaunchError as exc:
            return exc.cause
        await srv.launch(target, client, self.ops.launch_id(target.name))
        state = await srv.wait_settled()
        return None if state == READY else (srv.cause or {"summary": f"it ended {state}"})

    async def _back(
        self,
        slot: Slot,
        previous: Resolved | None,
        serving: bool,
        sleeps: bool,
        client: str | None,
        quiet: bool = False,
        standby: str = "",
    ) -> dict | None:
        """The serving profile back as it was: woken, or (it could not sleep) relaunched with
        the memory saver so that it can from now on. None when it is; else why the standby
        cannot stay (it came back without the saver, so it cannot sleep, or not at all)."""
        if not serving:
            return None
        try:
            if sleeps and slot.state == READY:
                await sleeper.wake(slot)
            elif slot.state != READY and previous is not None:
                await self.ops.launch(slot, with_saver(previous), client)
                if await slot.wait_settled() != READY:
                    # the memory saver did not start there: the command that served before
                    return await self._back_without_saver(slot, previous, client, standby)
        except WakeError:
            if not quiet:
                raise
            log.exception("slot %s: the serving server did not come back", slot.id)
        return None

    async def _back_without_saver(
        self, slot: Slot, previous: Resolved, client: str | None, standby: str
    ) -> dict:
        """`previous` failed to start with the memory saver: its own command again (the one it
        served with). The standby is refused either way: kept, it would hide that the slot's server
        cannot sleep until a warm swap had to stop that server cold."""
        why = slot.cause["summary"] if slot.cause else f"it ended {slot.state}"
        log.warning("slot %s: %s failed with the memory saver: %s", slot.id, previous.name, why)
        await self.ops.launch(slot, previous, client)
        back = await slot.wait_settled() == READY
        return causes._cause(
            "exit",
            f"{previous.name} did not start with the memory saver ({why}) "
            + ("and serves again without it" if back else "nor without it: the slot is down"),
            [],
            f"see why in `sgltui logs {slot.id}` (torch_memory_saver missing: install it in "
            f"the profile's interpreter), then `sgltui standby add {standby}` again"
            + ("" if back else f"; `sgltui start {previous.name}` to serve it meanwhile"),
            None,
        )


class _WaitWithStandbys(Wait):
    """A standby add's deferred reply: its slot with its standbys (Slot.status has none)."""

    def __init__(self, slot: Slot, job: Job | None, standbys: Standbys) -> None:
        super().__init__(slot, job)
        self.standbys = standbys

    async def wait(self) -> protocol.Accepted:
        reply = await super().wait()
        views = self.standbys.views(self.slot.id)
        return msgspec.structs.replace(
            reply, slot=msgspec.structs.replace(reply.slot, standbys=views)
        )
