"""The sequencing of lifecycle commands: start, stop, restart and swap, and nothing else.

A command becomes an operation here; the operation calls the slot's methods (sgltui/agent/slot.py),
the slot changes its own state and publishes events. Commands on one slot are serialized by that
slot's lock, held while the command is accepted (preflight included) and its job created: a swap
or a preflight on one slot never waits on another's. A slot runs one job at a time (launch, stop,
swap, restart); a second start/swap/restart on a busy slot is refused with what it is busy with,
and a stop aborts what runs (no rollback) and waits for it to be over before stopping. The stop
part of a slot's work runs to its end even when its job is cancelled (Slot.stop), so no order of
racing commands strands a slot in `stopping` or spawns a server the slot does not track.

Jobs run as tasks owned by the agent, not by the connection: a client that dies mid-command
changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from sgltui import protocol
from sgltui.agent import attach, preflight, slot_pins
from sgltui.agent.errors import OpError
from sgltui.agent.resolved import Resolved
from sgltui.agent.slot import (
    DRAINING,
    IDLE,
    READY,
    RUNNING,
    STOPPED,
    STOPPING,
    LaunchError,
    Slot,
    as_cause,
)
from sgltui.agent.slot_job import Job, Wait
from sgltui.agent.swap_run import SwapRun
from sgltui.core import placement, units
from sgltui.session.layout import SERVERS_DIR

if TYPE_CHECKING:
    from sgltui.agent.hosts import OpsHost

log = logging.getLogger("sgltui.agent.operations")


class Operations:
    """start / stop / restart / swap on the supervisor's slots, one lock per slot."""

    def __init__(self, sup: OpsHost) -> None:
        self.sup = sup
        self.jobs: dict[str, Job] = {}  # slot id -> its latest job
        self._locks: dict[str, asyncio.Lock] = {}
        # Launch ids handed out: a pool's slots start in the same second with one profile, and
        # each log file is created only later (the slots shared one id and one log file, each
        # slot reading every server's lines as its own).
        self._launch_ids: set[str] = set()

    def lock(self, slot_id: str) -> asyncio.Lock:
        """The slot's command lock (made on first use: a slot added later gets one too)."""
        return self._locks.setdefault(slot_id, asyncio.Lock())

    def busy(self, slot_id: str) -> Job | None:
        job = self.jobs.get(slot_id)
        return job if job and job.running else None

    # ---- the ops --------------------------------------------------------------------------------

    async def op_start(self, args: protocol.StartArgs, client: str | None) -> Any:
        slot = self.sup.slot_for(args)
        attach.refuse(slot, "start")  # a server sgltui did not start: the way forward
        async with self.lock(slot.id):
            self.refuse_if_busy(slot, "start")
            if slot.state not in IDLE:
                raise OpError(
                    f"slot {slot.id} already runs {slot.profile_name} ({slot.state}); "
                    f"use `sgltui swap PROFILE` or `sgltui stop` first",
                    "already",
                )
            profile = await self._accept(slot, args.profile, args)
            try:
                await asyncio.to_thread(
                    slot.precheck, profile, self.sup.our_pids(), _force_arg(args)
                )
            except LaunchError as exc:
                raise OpError(str(exc)) from None
            slot.end_swap()
            await self._spawn(slot, profile, client)

            async def job() -> protocol.Outcome:
                state = await slot.wait_settled()
                return protocol.Outcome(state=state, cause=_cause(slot.cause))

            started = self.run(
                slot, Job("launch", f"launch of {profile.name}", client, time.time()), job()
            )
            return self.reply(slot, args, started)

    async def op_preflight(
        self, args: protocol.PreflightArgs, client: str | None
    ) -> protocol.PreflightReply:
        """The checks a start/swap of `profile` on the slot would run, all of them, stopping
        nothing: for the TUI's swap dialog and `--dry-run`. Read-only: takes no lock."""
        slot = self.sup.slot_for(args)
        target = await asyncio.to_thread(self.sup.get_profile, args.profile, args)
        target = self.place(slot, target)
        current = await asyncio.to_thread(self.sup.current, slot)
        force = _force_arg(args)
        if self.sup.standbys.warm(slot, target.name) is not None:
            # kept warm: it runs already, on its own port and in its own GPU memory
            force |= {"port", "gpu-memory"}
        checks = await asyncio.to_thread(preflight.run, target, current, force)
        failed = preflight.first_failure(checks)
        return protocol.PreflightReply(
            profile=target.name,
            launcher=target.launcher,
            ok=failed is None,
            error=failed.line() if failed else None,
            checks=[protocol.PreflightCheck(**c.to_dict()) for c in checks],
            resolved=msgspec.convert(target.describe(), protocol.ResolvedView),
            pinned=slot_pins.of(
                self.sup.leases, self.sup.batch, self.sup.children, slot.id, client
            ),
        )

    async def op_stop(self, args: protocol.StopArgs, client: str | None) -> Any:
        slot = self.sup.slot_for(args)
        attach.refuse(slot, "stop")  # a server sgltui did not start: the way forward
        drain = str(args.drain)
        timeout = args.timeout
        # a pool's last routable worker while a roll holds the other out: --force to go on
        self.sup.pools.refuse_taking_out(slot.id, "stopping it", forced=drain == "force")
        async with self.lock(slot.id):
            running = self.busy(slot.id)
            if running and running.kind == "stop":
                raise OpError(
                    f"slot {slot.id} is already stopping (by {running.client or 'agent'}); wait for it",
                    "busy",
                )
            if running is not None:
                await self._abort(slot, running, client)
            if slot.state == STOPPED and slot.tree is None and running is None:
                raise OpError(f"slot {slot.id} is not running anything", "already")

            async def job() -> protocol.Outcome:
                async with self.server_going(slot, drain):
                    report = await slot.stop(client, drain=drain, timeout=timeout)
                return protocol.Outcome(
                    state=slot.state,
                    report=report,
                )

            started = self.run(
                slot, Job("stop", f"stop of {slot.profile_name}", client, time.time()), job()
            )
            return self.reply(slot, args, started)

    async def op_restart(self, args: protocol.RestartArgs, client: str | None) -> Any:
        slot = self.sup.slot_for(args)
        attach.refuse(slot, "restart")  # a server sgltui did not start: the way forward
        self.sup.pools.refuse_taking_out(slot.id, "restarting it", forced=args.drain == "force")
        async with self.lock(slot.id):
            self.refuse_if_busy(slot, "restart")
            if not slot.profile_name:
                raise OpError(f"slot {slot.id} has never run a profile; use `sgltui start PROFILE`")
            # Restart re-reads the profile on purpose (that is how an edit is applied), says so.
            before = slot.profile if isinstance(slot.profile, Resolved) else None
            source = str(before.source) if before is not None and before.source else None
            profile = await self._accept(slot, slot.profile_name, args)
            _refuse_dropping_keys(slot.id, before, profile)
            changed = before is not None and before.content_hash != profile.content_hash
            if before is not None and changed:
                self.sup.bus.publish(
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
            job = self._start_swap(
                slot,
                profile,
                client,
                rollback=False,
                drain=str(args.drain),
                kind="restart",
                skip=_force_arg(args),
            )
            reply = self.reply(slot, args, job)
            if isinstance(reply, protocol.Accepted):
                reply = msgspec.structs.replace(reply, profile_changed=changed)
            return reply

    async def op_swap(self, args: protocol.SwapArgs, client: str | None) -> Any:
        slot = self.sup.slot_for(args)
        attach.refuse(slot, "swap")  # a server sgltui did not start: the way forward
        async with self.lock(slot.id):
            job = self.busy(slot.id)
            if job and job.kind == "swap":
                ago = time.time() - job.started
                raise OpError(
                    f"swap refused: {job.desc} is already running (by {job.client or 'agent'}, "
                    f"{units.duration(ago)} ago); wait for it to finish",
                    "busy",
                )
            self.refuse_if_busy(slot, "swap")
            name = args.profile
            if slot.state == READY and slot.profile_name == name:
                raise OpError(
                    f"slot {slot.id} already runs {name}; use `sgltui restart` to relaunch it",
                    "already",
                )
            if slot.state in (DRAINING, STOPPING):  # a stop is on (its job is over: a bug)
                raise OpError(
                    f"swap refused: slot {slot.id} is {slot.state}; wait for it to settle", "busy"
                )
            rollback = args.rollback
            # Kept warm on this slot: woken in seconds, no preflight (it runs already: its
            # port is its own) (agent/standby.py); else launched cold, able to sleep when the
            # slot has standbys.
            standbys = self.sup.standbys
            if standbys.warm(slot, name) is not None:
                self._refuse_if_pinned(slot, args, "swap")
                await self._stop_bench_if_confirmed(slot, args, "swap", client, name)
                warm = standbys.swap_job(slot, name, client, str(args.drain), rollback)
                if warm is not None:
                    return self.reply(slot, args, warm)
            profile = await self._accept(slot, name, args)
            if slot.state == READY and slot.profile_name == profile.name:
                raise OpError(
                    f"slot {slot.id} already runs {profile.name}; use `sgltui restart` to relaunch it",
                    "already",
                )
            self._refuse_if_pinned(slot, args, "swap")
            await self._stop_bench_if_confirmed(slot, args, "swap", client, profile.name)
            started = self._start_swap(
                slot,
                profile,
                client,
                rollback=rollback,
                drain=str(args.drain),
                kind="swap",
                skip=_force_arg(args),
            )
            return self.reply(slot, args, started)

    # ---- what they share --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def server_going(self, slot: Slot, drain: str) -> AsyncIterator[None]:
        """Around a stop or a swap of the slot's server: its batch jobs stop sending and let (or,
        forced, make) their requests in flight finish before the server goes; after, whatever
        happened, they wait for the slot to be ready again (and resume on the new server)."""
        await self.sup.batch.before_swap(slot.id, force=drain == "force")
        try:
            yield
        finally:
            self.sup.batch.after_swap(slot.id)

    async def _abort(self, slot: Slot, running: Job, client: str | None) -> None:
        """A stop aborts a launch or a swap (no rollback). The job is cancelled and awaited:
        a stop it was in the middle of runs to its end first (Slot.stop), so the slot is
        settled before the new stop looks at it."""
        assert running.task is not None
        running.task.cancel()
        try:
            await running.task
        except asyncio.CancelledError:
            pass
        except Exception:  # the op's own failure; the stop goes on
            log.exception("slot %s: the cancelled %s failed", slot.id, running.desc)
        swap = slot.swap
        if swap is not None and swap.step != "failed":
            slot.swap_step("failed")
            self.sup.bus.publish(
                protocol.SwapDone(
                    client=client,
                    slot=slot.id,
                    from_=swap.from_,
                    to=swap.to,
                    ok=False,
                    rolled_back=False,
                    aborted=True,
                    timings_s={},
                )
            )

    async def _accept(self, slot: Slot, name: str | None, args: protocol.LaunchArgs) -> Resolved:
        """Resolve `name` once and preflight it, before anything running is touched. A failed
        check refuses the command with its one line."""
        force = _force_arg(args)
        target = await asyncio.to_thread(self.sup.get_profile, name, args)
        target = self.place(slot, target)
        current = await asyncio.to_thread(self.sup.current, slot)
        checks = await asyncio.to_thread(preflight.run, target, current, force)
        self.sup.bus.publish(
            protocol.PreflightDone(
                slot=slot.id,
                profile=target.name,
                ok=preflight.first_failure(checks) is None,
                checks=[c.to_dict() for c in checks],
            )
        )
        failed = preflight.first_failure(checks)
        if failed:
            raise OpError(failed.line())
        return target

    def place(self, slot: Slot, target: Resolved) -> Resolved:
        """`target` as it runs on `slot` (host.toml's port and GPUs; the address and key of a
        slot served to another host's gateway); a profile that needs another number of GPUs
        than the slot has is refused with the fix."""
        if slot.place is not None:
            problem = placement.tp_problem(target.name, target.server, slot.place)
            if problem:
                raise OpError(problem)
        placed = target.placed(slot.place, self.sup.exposures.get(slot.id))
        # On a slot with standbys: launched able to sleep, off the ports its sleepers hold.
        return self.sup.standbys.cold_target(slot, placed)

    def refuse_if_busy(self, slot: Slot, what: str) -> None:
        job = self.busy(slot.id)
        if job:
            ago = time.time() - job.started
            raise OpError(
                f"{what} refused: slot {slot.id} is busy with {job.desc} (by {job.client or 'agent'}, "
                f"{units.duration(ago)} ago); wait for it or run `sgltui stop`",
                "busy",
            )

    def _refuse_if_pinned(
        self, slot: Slot, args: protocol.RestartArgs | protocol.SwapArgs, what: str
    ) -> None:
        """A lease by hand or a pinned batch job asks first: confirm=true (`--yes`)."""
        pin = slot_pins.held(self.sup.leases, self.sup.batch, slot.id)
        if pin is None or args.confirm:
            return
        if pin.by == "lease":
            profile = slot.profile_name
            fix = f"confirm with `--yes` or drop the lease with `sgltui lease drop {profile}`"
        else:
            fix = (
                "confirm with `--yes` (the job pauses and resumes on the new server) "
                "or unpin it with `sgltui job set --unpin`"
            )
        raise OpError(f"{what} refused: {pin.what}", "pinned", fix=fix)

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
        children = self.sup.children
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
            )
        cut = {"by": what, "slot": slot.id, "to": to, "client": client, "at": time.time()}
        await children.bench_cut(run, cut)

    def reply(
        self,
        slot: Slot,
        args: protocol.StartArgs | protocol.StopArgs | protocol.RestartArgs | protocol.StandbyArgs,
        job: Job | None,
    ) -> Any:
        if args.wait:
            return Wait(slot, job)
        return protocol.Accepted(slot=slot.status(), accepted=True)

    def run(self, slot: Slot, job: Job, coro: Any) -> Job:
        job.task = asyncio.get_running_loop().create_task(
            self._job_wrapper(slot, job, coro), name=f"job-{slot.id}-{job.kind}"
        )
        self.jobs[slot.id] = job
        return job

    async def _job_wrapper(self, slot: Slot, job: Job, coro: Any) -> protocol.Outcome:
        try:
            job.result = await coro
        except asyncio.CancelledError:
            job.result = protocol.Outcome(cancelled=True)
            raise
        except Exception as exc:
            log.exception("job %s on slot %s", job.desc, slot.id)
            job.result = protocol.Outcome(error=f"{type(exc).__name__}: {exc}")
            if slot.swap:  # a swap that broke is over: its front must not hold any longer
                slot.swap_step("failed")
        return job.result

    def launch_id(self, profile_name: str) -> str:
        base = time.strftime("%Y%m%d-%H%M%S") + "-" + re.sub(r"[^A-Za-z0-9._-]", "_", profile_name)
        candidate, n = base, 1
        servers = Path(self.sup.recorder.path) / SERVERS_DIR
        # Checked directly: the recorder's server_log_path() creates the file it names.
        while (servers / f"{candidate}.log").exists() or candidate in self._launch_ids:
            n += 1
            candidate = f"{base}-{n}"
        self._launch_ids.add(candidate)
        return candidate

    async def _spawn(self, slot: Slot, profile: Any, client: str | None) -> None:
        """Spawn `profile` on `slot` (Popen and the log relay in a worker thread)."""
        launch_id = self.launch_id(profile.name)
        await slot.launch(profile, client, launch_id)

    async def launch(
        self, slot: Slot, profile: Any, client: str | None, skip: frozenset[str] = frozenset()
    ) -> None:
        """Pre-check and spawn; a refused pre-check leaves the slot failed with the cause.
        `skip`: the checks the command forced (its preflight skipped them too)."""
        try:
            await asyncio.to_thread(slot.precheck, profile, self.sup.our_pids(), skip)
            await self._spawn(slot, profile, client)
        except LaunchError as exc:
            slot.refuse(profile, client, exc.cause)

    async def relaunch(self, slot: Slot, client: str) -> Job:
        """Launch again exactly what the slot ran (its resolved profile, not today's file): the
        restart policy's path after a crash (agent/restart_policy.py). A busy slot refuses."""
        async with self.lock(slot.id):
            self.refuse_if_busy(slot, "relaunch")
            return self._start_swap(
                slot, slot.profile, client, rollback=False, drain="force", kind="restart"
            )

    # ---- swap and restart -------------------------------------------------------------------

    def _start_swap(
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
        swap = self._swap(slot, profile, old, client, rollback, drain, skip)
        return self.run(slot, job, swap)

    async def _swap(
        self,
        slot: Slot,
        target: Any,
        old: str | None,
        client: str | None,
        rollback: bool,
        drain: str,
        skip: frozenset[str],
    ) -> protocol.Outcome:
        run = SwapRun(self.sup.bus, slot, client, old, target.name)
        timings, step = run.timings, run.step
        # Rollback relaunches exactly what ran (resolved when it was accepted), even if its file
        # has been edited or deleted since.
        previous = slot.profile if old and slot.profile is not None else None
        async with self.server_going(slot, drain):
            slot.hold_front(f"slot {slot.id}: {old or '-'} -> {target.name}")
            report = await _stop_if_running(slot, client, drain, on_step=step)
            if report is not None:
                timings.update(report.timings_s)
                if report.problems:
                    log.warning("swap: %s", "; ".join(report.problems))
            step("launching")
            t_launch = time.monotonic()
            await self.launch(slot, target, client, skip)
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
                    await self.launch(slot, previous, client)
                    back = await slot.wait_settled()
                    rolled_back = back == READY
                    step("ready" if rolled_back else "failed")
                # A healthy rolled-back slot has no cause; the failure stays in last_failure.
                slot.keep_failure(failure)
                self.sup.bus.publish(
                    protocol.SwapFailure(
                        client=client,
                        slot=slot.id,
                        from_=old,
                        to=target.name,
                        cause=_cause(failure),
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
            cause=None if ok else _cause(failure if rolled_back else slot.cause),
        )


async def _stop_if_running(
    slot: Slot, client: str | None, drain: str, on_step: Callable[[str], None] | None = None
) -> protocol.StopReport | None:
    """Stop the slot's server if it has one (a swap's first step, a rollback's); its report."""
    if slot.tree is None or slot.state == STOPPED:
        return None
    return await slot.stop(client, drain=drain, on_step=on_step)


_cause = as_cause  # a slot's cause (core/causes.py's dict) as the protocol's Cause


def _force_arg(args: protocol.LaunchArgs) -> frozenset[str]:
    raw = args.force
    names = [raw] if isinstance(raw, str) else list(raw)
    unknown = [x for x in names if x not in preflight.CHECKS]
    if unknown:
        raise OpError(
            f"unknown preflight check {unknown[0]!r}; checks: {', '.join(preflight.CHECKS)}",
            "invalid",
        )
    return frozenset(names)


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
        )
