"""A slot's command layer and the lifecycle commands that are not swaps: start, stop, preflight.

A command becomes an operation here; the operation calls the slot's methods (sgltui/agent/slot/slot.py),
the slot changes its own state and publishes events. Commands on one slot are serialized by that
slot's lock, held while the command is accepted (preflight included) and its job created: a swap
or a preflight on one slot never waits on another's. A slot runs one job at a time (launch, stop,
swap, restart, standby add); a second start/swap/restart on a busy slot is refused with what it is
busy with, and a stop aborts what runs (no rollback) and waits for it to be over before stopping.
The stop part of a slot's work runs to its end even when its job is cancelled (Slot.stop), so no
order of racing commands strands a slot in `stopping` or spawns a server the slot does not track.

The swaps (swap, restart, the relaunch after a crash) are sequenced by agent/swap/coordinator.py, the standby
add by agent/swap/standby_ops.py: both run their jobs through this layer (`lock`, `accept`, `run`,
`launch`, `server_going`), which calls neither back. It reads the standbys' registry
(agent/swap/standby.py): a profile kept warm, a launch beside sleepers.

Jobs run as tasks owned by the agent, not by the connection: a client that dies mid-command
changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.slot import attach
from sgltui.agent.slot import pins as slot_pins
from sgltui.agent.slot.resolved import Resolved
from sgltui.agent.slot.running_command import Job, Wait
from sgltui.agent.slot.slot import IDLE, STOPPED, LaunchError, Slot, as_cause
from sgltui.agent.swap import preflight
from sgltui.core import placement, units
from sgltui.session.layout import SERVERS_DIR

if TYPE_CHECKING:
    from sgltui.agent.children import Children
    from sgltui.agent.context import AgentContext
    from sgltui.agent.endpoint.leases import Leases
    from sgltui.agent.jobs.jobs_host import JobsHost
    from sgltui.agent.pools.exposure import Exposures
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.swap.standby import Standbys

log = logging.getLogger("sgltui.agent.operations")


class Operations:
    """start / stop / preflight on the agent's slots, one lock per slot, and the jobs."""

    # What holds a slot (a pinned batch job, a lease by hand) and what its batch jobs do around
    # a stop: given by `bind`, once they are made (the batch jobs see the slots through these
    # operations: agent/jobs/agent_site.py).
    batch: JobsHost
    leases: Leases

    def __init__(
        self,
        ctx: AgentContext,
        *,
        exposures: Exposures,
        pools: Pools,
        standbys: Standbys,
        children: Children,
    ) -> None:
        self.ctx = ctx  # the slots, a profile resolved by name, the event bus, the session
        self.exposures = exposures  # a slot served to another host's gateway: its address, key
        self.pools = pools  # a pool's last routable worker is not stopped unasked
        self.standbys = standbys  # a profile kept warm; a launch beside sleepers
        self.children = children  # a bench run sweeping the slot
        self.jobs: dict[str, Job] = {}  # slot id -> its latest job
        self._locks: dict[str, asyncio.Lock] = {}
        # Launch ids handed out: a pool's slots start in the same second with one profile, and
        # each log file is created only later (the slots shared one id and one log file, each
        # slot reading every server's lines as its own).
        self._launch_ids: set[str] = set()

    def bind(self, batch: JobsHost, leases: Leases) -> None:
        """The batch jobs and the leases, made after these operations (they use them)."""
        self.batch = batch
        self.leases = leases

    def lock(self, slot_id: str) -> asyncio.Lock:
        """The slot's command lock (made on first use: a slot added later gets one too)."""
        return self._locks.setdefault(slot_id, asyncio.Lock())

    def busy(self, slot_id: str) -> Job | None:
        job = self.jobs.get(slot_id)
        return job if job and job.running else None

    # ---- the ops --------------------------------------------------------------------------------

    async def op_start(self, args: protocol.StartArgs, client: str | None) -> Any:
        slot = self.ctx.slot_for(args)
        attach.refuse(slot, "start")  # a server sgltui did not start: the way forward
        async with self.lock(slot.id):
            self.refuse_if_busy(slot, "start")
            if slot.state not in IDLE:
                raise OpError(
                    f"slot {slot.id} already runs {slot.profile_name} ({slot.state})",
                    "already",
                    fix="use `sgltui swap PROFILE` or `sgltui stop` first",
                    tui="press a profile's key to swap to it, or {key:server.stop} to stop first",
                )
            profile = await self.accept(slot, args.profile, args)
            try:
                await asyncio.to_thread(slot.precheck, profile, self.our_pids(), _force_arg(args))
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
        slot = self.ctx.slot_for(args)
        target = await asyncio.to_thread(self.ctx.get_profile, args.profile, args)
        target = self.place(slot, target)
        current = await asyncio.to_thread(self.current, slot)
        force = _force_arg(args)
        if self.standbys.warm(slot, target.name) is not None:
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
            pinned=slot_pins.of(self.leases, self.batch, self.children, slot.id, client),
        )

    async def op_stop(self, args: protocol.StopArgs, client: str | None) -> Any:
        slot = self.ctx.slot_for(args)
        attach.refuse(slot, "stop")  # a server sgltui did not start: the way forward
        drain = str(args.drain)
        timeout = args.timeout
        # a pool's last routable worker while a roll holds the other out: --force to go on
        self.pools.refuse_taking_out(slot.id, "stopping it", forced=drain == "force")
        async with self.lock(slot.id):
            running = self.busy(slot.id)
            if running and running.kind == "stop":
                raise OpError(
                    f"slot {slot.id} is already stopping (by {running.client or 'agent'})",
                    "busy",
                    fix="wait for it",
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

    # ---- what they share --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def server_going(self, slot: Slot, drain: str) -> AsyncIterator[None]:
        """Around a stop or a swap of the slot's server: its batch jobs stop sending and let (or,
        forced, make) their requests in flight finish before the server goes; after, whatever
        happened, they wait for the slot to be ready again (and resume on the new server)."""
        await self.batch.before_swap(slot.id, force=drain == "force")
        try:
            yield
        finally:
            self.batch.after_swap(slot.id)

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
            self.ctx.bus.publish(
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

    async def accept(self, slot: Slot, name: str | None, args: protocol.LaunchArgs) -> Resolved:
        """Resolve `name` once and preflight it, before anything running is touched. A failed
        check refuses the command with its one line."""
        force = _force_arg(args)
        target = await asyncio.to_thread(self.ctx.get_profile, name, args)
        target = self.place(slot, target)
        current = await asyncio.to_thread(self.current, slot)
        checks = await asyncio.to_thread(preflight.run, target, current, force)
        self.ctx.bus.publish(
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
        placed = target.placed(slot.place, self.exposures.get(slot.id))
        # On a slot with standbys: launched able to sleep, off the ports its sleepers hold.
        return self.standbys.cold_target(slot, placed)

    def refuse_if_busy(self, slot: Slot, what: str) -> None:
        job = self.busy(slot.id)
        if job:
            ago = time.time() - job.started
            raise OpError(
                f"{what} refused: slot {slot.id} is busy with {job.desc} (by {job.client or 'agent'}, "
                f"{units.duration(ago)} ago)",
                "busy",
                fix="wait for it or run `sgltui stop`",
                tui="wait for it or press {key:server.stop} to stop",
            )

    def reply(
        self,
        slot: Slot,
        args: protocol.StartArgs | protocol.StopArgs | protocol.RestartArgs | protocol.StandbyArgs,
        job: Job | None,
    ) -> Any:
        if args.wait:
            return Wait(slot, job)
        return protocol.Accepted(slot=slot.status(), accepted=True)

    def run(self, slot: Slot, job: Job, coro: Coroutine[Any, Any, protocol.Outcome]) -> Job:
        job.task = asyncio.get_running_loop().create_task(
            self._job_wrapper(slot, job, coro), name=f"job-{slot.id}-{job.kind}"
        )
        self.jobs[slot.id] = job
        return job

    async def _job_wrapper(
        self, slot: Slot, job: Job, coro: Coroutine[Any, Any, protocol.Outcome]
    ) -> protocol.Outcome:
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
        servers = Path(self.ctx.session.path) / SERVERS_DIR
        # Checked directly: the recorder's server_log_path() creates the file it names.
        while (servers / f"{candidate}.log").exists() or candidate in self._launch_ids:
            n += 1
            candidate = f"{base}-{n}"
        self._launch_ids.add(candidate)
        return candidate

    async def _spawn(self, slot: Slot, profile: Resolved, client: str | None) -> None:
        """Spawn `profile` on `slot` (Popen and the log relay in a worker thread)."""
        launch_id = self.launch_id(profile.name)
        await slot.launch(profile, client, launch_id)

    async def launch(
        self, slot: Slot, profile: Any, client: str | None, skip: frozenset[str] = frozenset()
    ) -> None:
        """Pre-check and spawn; a refused pre-check leaves the slot failed with the cause.
        `skip`: the checks the command forced (its preflight skipped them too)."""
        try:
            await asyncio.to_thread(slot.precheck, profile, self.our_pids(), skip)
            await self._spawn(slot, profile, client)
        except LaunchError as exc:
            slot.refuse(profile, client, exc.cause)

    def forced(self, args: protocol.LaunchArgs) -> frozenset[str]:
        """The preflight checks a command forced (`--force`); an unknown name refuses it."""
        return _force_arg(args)

    # ---- what a launch replaces ------------------------------------------------------------------

    def our_pids(self) -> set[int]:
        """Every process of the agent's servers: the slots' and the sleepers'."""
        pids: set[int] = set()
        for s in self.ctx.slots.values():
            if s.tree:
                pids |= set(s.tree.seen)
        return pids | self.standbys.pids()

    def current(self, slot: Slot) -> preflight.Current:
        """What a launch on `slot` replaces, for the preflight checks."""
        mine = set(slot.tree.seen) if slot.tree and slot.state != STOPPED else set()
        others = self.our_pids() - mine
        return preflight.Current(
            host=slot.server_host if mine else None,
            port=slot.port if mine else None,
            pids=frozenset(mine),
            other_pids=frozenset(others),
        )


_cause = as_cause  # a slot's cause (core/causes.py's dict) as the protocol's Cause


def _force_arg(args: protocol.LaunchArgs) -> frozenset[str]:
    raw = args.force
    names = [raw] if isinstance(raw, str) else list(raw)
    unknown = [x for x in names if x not in preflight.CHECKS]
    if unknown:
        raise OpError(
            f"unknown preflight check {unknown[0]!r}",
            "invalid",
            fix=f"checks: {', '.join(preflight.CHECKS)}",
        )
    return frozenset(names)
