"""The swap coordinator: one slot's server replaced by another profile's, cold or warm.

Every swap enters here: the `swap` op (a client's, or a pool's rolling swap, one slot at a time:
agent/pools/pools.py sends each slot's `swap` op), `restart` (a cold swap to the profile it runs, its
file read again) and the restart policy's relaunch after a crash. The choice between warm and
cold is made in one place (`Swaps.warm_for`); the steps, their undo and their records (`SwapRun`:
swap.step, swap.done, the slot's last_swap) are all here.

    cold:  hold the front -> drain -> stop -> launch -> ready
           | the launch failed, rollback asked: stop -> relaunch what ran (as it was resolved)
    warm:  (the profile is kept warm on the slot, asleep: agent/swap/standby.py)
           hold the front -> drain -> pause -> release (or stop: it cannot sleep)
           -> memory back (GPU source) -> resume the standby -> continue -> canary
           -> the slot takes the woken server, the one it served becomes a standby (asleep)
           | a wake that failed: the one that served resumed (rollback), the standby asleep again
           | a bad canary (MTP accept length fell): the woken sleeper stopped, the profile
             launched cold on the slot, saying why; the one that served stays warm
    settle: the next agent after a kill -9 mid-swap (or mid standby add) undoes what was left
           half done: every standby left awake asleep again first (its GPU memory back before
           another server maps its own again), then each slot's server woken, only as far as it
           was released and paused.

The memory saver's rules are kept per server by agent/swap/sleeper.py, which every step goes through:
a server is never released twice (torch-memory-saver exits on it), never resumed unless it was
released (SGLang ends it), and each step is saved before its call (agent-state.json), so that
`settle` knows what to undo. This module uses the slot's command layer (agent/swap/operations.py:
its lock, its job, the preflight, the launch) and the standbys' registry (agent/swap/standby.py);
neither calls back here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.pools import worker as pool_worker
from sgltui.agent.slot import attach
from sgltui.agent.slot import pins as slot_pins
from sgltui.agent.slot.resolved import Resolved
from sgltui.agent.slot.running_command import Job
from sgltui.agent.slot.server_url import connect_host
from sgltui.agent.slot.slot import DRAINING, READY, RUNNING, STOPPED, STOPPING, Slot, as_cause
from sgltui.agent.swap import sleeper, standby_room
from sgltui.agent.swap.sleeper import WakeError, can_sleep, with_saver
from sgltui.core import causes, units

if TYPE_CHECKING:
    from sgltui.agent.children import Children
    from sgltui.agent.context import AgentContext
    from sgltui.agent.endpoint.leases import Leases
    from sgltui.agent.events import EventBus
    from sgltui.agent.jobs.jobs_host import JobsHost
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.swap.operations import Operations
    from sgltui.agent.swap.standby import Standby, Standbys

log = logging.getLogger("sgltui.agent.swap")


class SwapRun:
    """One swap of `slot` from `frm` to `to` for `client`, as the session tells it: its steps
    (`swap.step`) and its end (`swap.done`, the slot's `last_swap`), timed from its making."""

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

    def mark(self, name: str, since: float) -> float:
        """Step `name` took from `since` to now (kept in the timings); now, for the next."""
        self.timings[name] = round(time.monotonic() - since, 3)
        return time.monotonic()

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


class Swaps:
    """swap and restart of the agent's slots, and the relaunch after a crash."""

    def __init__(
        self,
        ctx: AgentContext,
        *,
        ops: Operations,
        standbys: Standbys,
        pools: Pools,
        batch: JobsHost,
        leases: Leases,
        children: Children,
    ) -> None:
        self.ctx = ctx  # the slots, the event bus, telemetry (followed to a woken server)
        self.ops = ops  # each slot's lock, job, preflight and launch
        self.standbys = standbys  # what sleeps beside each slot: a warm swap wakes one
        self.pools = pools  # a pool's last routable worker; a slot's front and gateway worker
        # what holds a slot, asked first: a pinned batch job, a lease by hand, a bench sweep
        self.batch = batch
        self.leases = leases
        self.children = children

    # ---- the entries ----------------------------------------------------------------------------

    async def op_swap(self, args: protocol.SwapArgs, client: str | None) -> Any:
        slot = self.ctx.slot_for(args)
        attach.refuse(slot, "swap")  # a server sgltui did not start: the way forward
        ops = self.ops
        async with ops.lock(slot.id):
            job = ops.busy(slot.id)
            if job and job.kind == "swap":
                ago = time.time() - job.started
                raise OpError(
                    f"swap refused: {job.desc} is already running (by {job.client or 'agent'}, "
                    f"{units.duration(ago)} ago)",
                    "busy",
                    fix="wait for it to finish",
                )
            ops.refuse_if_busy(slot, "swap")
            name = args.profile
            if slot.state == READY and slot.profile_name == name:
                raise OpError(
                    f"slot {slot.id} already runs {name}",
                    "already",
                    fix="use `sgltui restart` to relaunch it",
                    tui="press {key:server.restart} to relaunch it",
                )
            if slot.state in (DRAINING, STOPPING):  # a stop is on (its job is over: a bug)
                raise OpError(
                    f"swap refused: slot {slot.id} is {slot.state}",
                    "busy",
                    fix="wait for it to settle",
                )
            drain = str(args.drain)
            if self.standbys.warm(slot, name) is not None:
                # kept warm on this slot: no preflight (it runs already, its port is its own)
                self._refuse_if_pinned(slot, args, "swap")
                await self._stop_bench_if_confirmed(slot, args, "swap", client, name)
                sb = self.warm_for(slot, name)
                if sb is not None:
                    job = self._start_warm(slot, sb, client, drain, args.rollback)
                    return ops.reply(slot, args, job)
            # else launched cold (able to sleep when the slot has standbys: Operations.place)
            profile = await ops.accept(slot, name, args)
            if slot.state == READY and slot.profile_name == profile.name:
                raise OpError(
                    f"slot {slot.id} already runs {profile.name}",
                    "already",
                    fix="use `sgltui restart` to relaunch it",
                    tui="press {key:server.restart} to relaunch it",
                )
            self._refuse_if_pinned(slot, args, "swap")
            await self._stop_bench_if_confirmed(slot, args, "swap", client, profile.name)
            job = self._start_cold(
                slot, profile, client, args.rollback, drain, "swap", ops.forced(args)
            )
            return ops.reply(slot, args, job)

    async def op_restart(self, args: protocol.RestartArgs, client: str | None) -> Any:
        slot = self.ctx.slot_for(args)
        attach.refuse(slot, "restart")  # a server sgltui did not start: the way forward
        self.pools.refuse_taking_out(slot.id, "restarting it", forced=args.drain == "force")
        ops = self.ops
        async with ops.lock(slot.id):
            ops.refuse_if_busy(slot, "restart")
            if not slot.profile_name:
                raise OpError(
                    f"slot {slot.id} has never run a profile",
                    fix="use `sgltui start PROFILE`",
                    tui="highlight a profile and press {key:server.start}",
                )
            # Restart re-reads the profile on purpose (that is how an edit is applied), says so.
            before = slot.profile if isinstance(slot.profile, Resolved) else None
            source = str(before.source) if before is not None and before.source else None
            profile = await ops.accept(slot, slot.profile_name, args)
            _refuse_dropping_keys(slot.id, before, profile)
            changed = before is not None and before.content_hash != profile.content_hash
            if before is not None and changed:
                self.ctx.bus.publish(
                    protocol.ProfileChanged(
                        client=client,
                        slot=slot.id,
                        profile=profile.name,
                        source=source,
                        old_hash=before.content_hash,
                        new_hash=profile.content_hash,
                    )
                )
            self._refuse_if_pinned(slot, args, "restart")
            await self._stop_bench_if_confirmed(slot, args, "restart", client, profile.name)
            drain = str(args.drain)
            job = self._start_cold(slot, profile, client, False, drain, "restart", ops.forced(args))
            reply = ops.reply(slot, args, job)
            if isinstance(reply, protocol.Accepted):
                reply = msgspec.structs.replace(reply, profile_changed=changed)
            return reply

    async def relaunch(self, slot: Slot, client: str) -> Job:
        """Launch again exactly what the slot ran (its resolved profile, not today's file): the
        restart policy's path after a crash (agent/slot/restart_policy.py). A busy slot refuses."""
        ops = self.ops
        async with ops.lock(slot.id):
            ops.refuse_if_busy(slot, "relaunch")
            return self._start_cold(slot, slot.profile, client, False, "force", "restart")

    # ---- warm or cold -------------------------------------------------------------------------

    def warm_for(self, slot: Slot, name: str) -> Standby | None:
        """The standby a swap of the slot to `name` wakes; None: the swap is cold. Warm only
        when `name` is kept warm there (asleep, its server alive) and the slot serves a server
        of its own (a sleeper wakes beside a ready server, which goes to sleep in turn). A slot
        whose clients could not follow the woken server (no front) refuses."""
        sb = self.standbys.warm(slot, name)
        if sb is None or slot.state != READY or slot.external is not None:
            return None
        refused = standby_room.front_off(slot, self.pools)
        if refused:
            raise OpError(
                f"warm swap to {name} refused: {refused}",
                fix=standby_room.FRONT_OFF_FIX,
                tui=standby_room.FRONT_OFF_FIX_TUI,
            )
        return sb

    # ---- what holds the slot: asked first -----------------------------------------------------

    def _refuse_if_pinned(
        self, slot: Slot, args: protocol.RestartArgs | protocol.SwapArgs, what: str
    ) -> None:
        """A lease by hand or a pinned batch job asks first: confirm=true (`--yes`)."""
        pin = slot_pins.held(self.leases, self.batch, slot.id)
        if pin is None or args.confirm:
            return
        if pin.by == "lease":
            profile = slot.profile_name
            fix = f"confirm with `--yes` or drop the lease with `sgltui lease drop {profile}`"
            tui = f"answer Yes when asked, or drop the lease (`sgltui lease drop {profile}`)"
        else:
            fix = (
                "confirm with `--yes` (the job pauses and resumes on the new server) "
                "or unpin it with `sgltui job set --unpin`"
            )
            tui = "answer Yes when asked (the job pauses and resumes on the new server)"
        raise OpError(f"{what} refused: {pin.what}", "pinned", fix=fix, tui=tui)

    async def _stop_bench_if_confirmed(
        self,
        slot: Slot,
        args: protocol.RestartArgs | protocol.SwapArgs,
        what: str,
        client: str | None,
        to: str,
    ) -> None:
        """A bench sweeping this slot asks first, as a pinned job does; confirmed, it stops now
        (before the drain, which would wait on its load) and its result says this swap cut it."""
        children = self.children
        found = slot_pins.bench(children, slot.id, client)
        if found is None:
            return
        run, pin = found
        if not args.confirm:
            raise OpError(
                f"{what} refused: {pin.what}",
                "pinned",
                fix="confirm with `--yes` (the bench stops; its result is marked as cut by "
                f"this {what}) or wait for it (`sgltui bench list`)",
                tui=f"answer Yes when asked (the bench stops; its result is marked as cut by "
                f"this {what}), or wait for it, or stop it with B",
            )
        cut = {"by": what, "slot": slot.id, "to": to, "client": client, "at": time.time()}
        await children.bench_cut(run, cut)

    # ---- cold: stop, launch, ready (or roll back) ---------------------------------------------

    def _start_cold(
        self,
        slot: Slot,
        profile: Any,
        client: str | None,
        rollback: bool,
        drain: str,
        kind: str,
        skip: frozenset[str] = frozenset(),
    ) -> Job:
        old = slot.profile_name if slot.state in RUNNING else None
        desc = (
            f"{kind} {old or '-'} -> {profile.name}"
            if kind == "swap"
            else f"restart of {profile.name}"
        )
        job = Job(kind, desc, client, time.time())
        # The state moves now, before the reply: whoever reads status next sees the swap.
        slot.begin_swap(old, profile.name, job.started, rollback, client)
        work = self._cold(slot, profile, old, client, rollback, drain, skip)
        return self.ops.run(slot, job, work)

    async def _cold(
        self,
        slot: Slot,
        target: Resolved,
        old: str | None,
        client: str | None,
        rollback: bool,
        drain: str,
        skip: frozenset[str],
    ) -> protocol.Outcome:
        ops = self.ops
        run = SwapRun(self.ctx.bus, slot, client, old, target.name)
        timings, step = run.timings, run.step
        # Rollback relaunches exactly what ran (resolved when it was accepted), even if its file
        # has been edited or deleted since.
        previous = slot.profile if old and slot.profile is not None else None
        async with ops.server_going(slot, drain):
            slot.hold_front(f"slot {slot.id}: {old or '-'} -> {target.name}")
            report = await _stop_if_running(slot, client, drain, on_step=step)
            if report is not None:
                timings.update(report.timings_s)
                if report.problems:
                    log.warning("swap: %s", "; ".join(report.problems))
            step("launching")
            t_launch = time.monotonic()
            await ops.launch(slot, target, client, skip)
            state = await slot.wait_settled()
            timings["load"] = slot.timings.get("load", round(time.monotonic() - t_launch, 3))
            timings["ready"] = slot.timings.get("ready", 0.0)
            rolled_back = False
            ok = state == READY
            failure = None if ok else slot.cause
            if ok:
                step("ready")
            elif rollback and old:
                step("rolling back")
                await _stop_if_running(slot, client, "force")
                if previous is None:
                    step("failed")
                else:
                    await ops.launch(slot, previous, client)
                    back = await slot.wait_settled()
                    rolled_back = back == READY
                    step("ready" if rolled_back else "failed")
                # A healthy rolled-back slot has no cause; the failure stays in last_failure.
                slot.keep_failure(failure)
                self.ctx.bus.publish(
                    protocol.SwapFailure(
                        client=client,
                        slot=slot.id,
                        from_=old,
                        to=target.name,
                        cause=as_cause(failure),
                    )
                )
            else:
                step("failed")
            run.done(ok, rolled_back, failure or slot.cause)
        return protocol.Outcome(
            state=slot.state,
            ok=ok,
            rolled_back=rolled_back,
            timings_s=timings,
            cause=None if ok else as_cause(failure if rolled_back else slot.cause),
        )

    # ---- warm: sleep one server, wake another -------------------------------------------------

    def _start_warm(
        self, slot: Slot, sb: Standby, client: str | None, drain: str, rollback: bool
    ) -> Job:
        old = slot.profile_name
        job = Job("swap", f"swap {old} -> {sb.name} (warm)", client, time.time())
        slot.begin_swap(old, sb.name, job.started, rollback, client)
        return self.ops.run(slot, job, self._out_of_pool(slot, self._warm(slot, sb, client, drain)))

    async def _out_of_pool(self, slot: Slot, work: Any) -> Any:
        """`work` on the slot with its worker out of its pool's gateway (agent/pools/worker.py)."""
        async with pool_worker.worker_out(self.pools, slot):
            return await work

    async def _warm(
        self, slot: Slot, sb: Standby, client: str | None, drain: str
    ) -> protocol.Outcome:
        frm, to = slot.profile_name, sb.name
        run = SwapRun(self.ctx.bus, slot, client, frm, to)
        step, accept = run.step, self.standbys.accept
        ok, rolled_back, cold, cause = True, False, False, None
        async with self.ops.server_going(slot, drain):
            slot.hold_front(f"slot {slot.id}: {frm or '-'} -> {to} (warm)")
            step("draining")
            t = time.monotonic()
            drained = await sleeper.drain(slot, wait=drain == "wait")
            t = run.mark("drain", t)
            sleeps = can_sleep(slot)
            try:
                step("pausing")
                await sleeper.pause(slot, abort=not drained)
                t = run.mark("pause", t)
                if sleeps:
                    step("releasing")
                    run.timings["memory_back"] = round(await sleeper.release(slot), 3)
                    t = run.mark("release", t)
                else:
                    step("stopping")  # it cannot sleep: not kept
                    await slot.stop(client, drain="force")
                    t = run.mark("stop", t)
                step("resuming")
                await sleeper.wake(sb.server)
                t = run.mark("resume", t)
            except WakeError as exc:
                ok, rolled_back = False, True
                cause = causes._cause("exit", str(exc), [], "see `sgltui logs`", None)
                step("rolling back")
                await self._warm_undo(slot, sb, sleeps, client)
            if ok:
                step("canary")
                good, length, why = await sleeper.canary(sb.server, accept.get(to))
                t = run.mark("canary", t)
                if good:
                    if length:
                        accept[to] = length
                    await self._exchange(slot, sb, sleeps, client)
                else:
                    cold = True
                    step("relaunching cold")
                    log.warning("slot %s: %s; relaunching %s cold", slot.id, why, to)
                    ok, cause = await self._cold_after_bad_canary(slot, sb, sleeps, why, client)
                    t = run.mark("cold_launch", t)
            step("ready" if ok or rolled_back else "failed")
            run.done(ok, rolled_back, cause, kind="cold" if cold else "warm")
        return protocol.Outcome(
            state=slot.state,
            ok=ok,
            rolled_back=rolled_back,
            timings_s=run.timings,
            cause=as_cause(cause),
        )

    async def _warm_undo(self, slot: Slot, sb: Standby, sleeps: bool, client: str | None) -> None:
        """A wake that failed: the one that served is resumed (only as far as it went: wake);
        the standby goes back to sleep (or, gone, is dropped)."""
        try:
            if sleeps and slot.state == READY:
                await sleeper.wake(slot)
            elif slot.state != READY and slot.profile is not None:
                await self.ops.launch(slot, with_saver(slot.profile), client)
                await slot.wait_settled()
        except WakeError:
            log.exception("slot %s: the rollback could not wake %s", slot.id, slot.profile_name)
        if sb.alive:
            try:
                await sleeper.sleep(sb.server)
            except WakeError:
                log.exception("slot %s: standby %s did not go back to sleep", slot.id, sb.name)
        else:
            self.standbys.drop(slot.id, sb.name)
            await sb.server.close()

    async def _exchange(self, slot: Slot, sb: Standby, sleeps: bool, client: str | None) -> None:
        """The slot takes the woken server; the one it served (asleep) becomes a standby."""
        standbys = self.standbys
        old_name = slot.profile_name
        handed_old = slot.hand_over() if sleeps and slot.tree is not None else None
        slot.take_over(sb.server.hand_over())
        # What the session's fold (report, replay, viewers) learns the slot serves now.
        self.ctx.bus.publish(
            protocol.SlotStateChanged(
                client=client,
                slot=slot.id,
                state=READY,
                prev=READY,
                reason=f"{sb.name} woken (warm swap)"
                + (f"; {old_name} asleep" if handed_old is not None else ""),
                profile=sb.name,
                launch_id=slot.launch_id,
            )
        )
        standbys.drop(slot.id, sb.name)
        if handed_old is not None and old_name:
            await standbys.keep_asleep(slot, old_name, handed_old, sb.host_bytes)
        self._follow(slot)
        self.ctx.bus.changed()

    async def _cold_after_bad_canary(
        self, slot: Slot, sb: Standby, sleeps: bool, why: str, client: str | None
    ) -> tuple[bool, dict | None]:
        """The woken draft is bad: its sleeper is stopped and the profile launched cold on the
        slot (its own port: the one that served stays asleep, a standby now)."""
        standbys = self.standbys
        target = sb.server.profile
        old_name = slot.profile_name
        standbys.drop(slot.id, sb.name)
        await sb.server.stop(client, drain="force")
        await sb.server.close()
        if sleeps and slot.tree is not None and old_name:
            await standbys.keep_asleep(slot, old_name, slot.hand_over())
        elif slot.tree is not None:
            await slot.stop(client, drain="force")
        await self.ops.launch(slot, target, client)
        state = await slot.wait_settled()
        self._follow(slot)
        if state == READY:
            return True, None
        return False, slot.cause or causes._cause("exit", why, [], "see `sgltui logs`", None)

    def _follow(self, slot: Slot) -> None:
        """Telemetry follows the server the slot has now (no event says it: the slot took it)."""
        tele = self.ctx.telemetry
        if tele is None:
            return
        tele.detach(slot.id)
        if slot.tree is not None:
            tele.attach(
                slot.id,
                slot.tree.pid,
                f"http://{connect_host(slot.server_host)}:{slot.port}",
                slot.api_key,
                tp_size=slot.tp_size,
            )

    # ---- settle: a swap an earlier agent was killed in the middle of, undone ------------------

    async def settle(self) -> None:
        """After re-adoption (agent-state.json keeps each server's steps, agent/swap/sleeper.py):
        every standby left awake asleep again, then every slot's server woken. The slot serves
        the profile it served before the swap."""
        standbys = self.standbys
        for sbs in standbys.by_slot.values():
            for sb in list(sbs.values()):
                srv = sb.server
                if srv.tree is None or (srv.paused and srv.released):
                    continue
                log.warning("standby %s was left awake by a swap: put back to sleep", sb.key)
                try:
                    # Its resume may still be in flight (the release is queued behind it): what
                    # it kept asleep before tells the release happened.
                    await sleeper.pause(srv)
                    await sleeper.release(srv, asleep_bytes=sb.gpu_bytes)
                except WakeError:
                    log.exception("standby %s did not go back to sleep: stopped", sb.key)
                    sbs.pop(sb.name, None)
                    await srv.stop("agent", drain="force")
                    await srv.close()
        for slot in self.ctx.slots.values():
            if slot.tree is None or not (slot.paused or slot.released):
                continue
            log.warning(
                "slot %s: %s was left %s by a swap: woken",
                slot.id,
                slot.profile_name,
                "released" if slot.released else "paused",
            )
            try:
                await sleeper.wake(slot)
            except WakeError:
                log.exception("slot %s: its server did not wake", slot.id)


async def _stop_if_running(
    slot: Slot, client: str | None, drain: str, on_step: Callable[[str], None] | None = None
) -> protocol.StopReport | None:
    """Stop the slot's server if it has one (a swap's first step, a rollback's); its report."""
    if slot.tree is None or slot.state == STOPPED:
        return None
    return await slot.stop(client, drain=drain, on_step=on_step)


def _refuse_dropping_keys(slot_id: str, before: Resolved | None, after: Resolved) -> None:
    """A restart that would bring the server back without a key it runs with is refused
    (issue 51: an adopted server restarted from a profile without its keys answered anyone)."""
    if before is None:
        return
    dropped = [k for k in ("api-key", "admin-api-key") if before.server.get(k)]
    dropped = [k for k in dropped if not after.server.get(k)]
    if dropped:
        where = after.source or after.name
        raise OpError(
            f"restart refused: slot {slot_id}'s server runs with {' and '.join(dropped)}, and "
            f"profile {after.name} now gives none (it would come back answering anyone)",
            fix=f"name the file holding it in [key-files] of {where} "
            f'({dropped[0]} = "/path/to/file"), or stop and start the profile on purpose',
            tui=f"name the file holding it in [key-files] of {where} "
            f'({dropped[0]} = "/path/to/file"), or stop ({{key:server.stop}}) and start '
            "({key:server.start}) the profile on purpose",
        )
