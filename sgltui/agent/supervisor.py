"""The agent's brain: it makes the agent's parts (slots, operations, pools, standbys, batch jobs,
fronts, telemetry's link, the state saver), wires them to the event bus and the session, and
hands each op to the part that handles it. Each part is given the agent's context
(agent/context.py: what the parts share) and the other parts it uses, typed, never this class
(the slots see it as their host: agent/slot/core.py's SlotHost).

The lifecycle commands (start, stop, restart, swap) are sequenced in agent/swap/operations.py and
agent/swap/coordinator.py, under one lock per slot. The other commands (bench runs, the demo load, batch jobs, shutdown) go
through one lock of their own, so two clients never interleave a half-applied change of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from sgltui import __version__, protocol
from sgltui.agent import keeper, op_routes
from sgltui.agent.agent_calls import AgentCalls
from sgltui.agent.agent_ops import AgentOps
from sgltui.agent.children import Children
from sgltui.agent.config import AgentConfig
from sgltui.agent.context import AgentContext
from sgltui.agent.endpoint.endpoint import Endpoint
from sgltui.agent.endpoint.leases import Leases
from sgltui.agent.errors import OpError
from sgltui.agent.events import EventBus
from sgltui.agent.jobs.agent_site import AgentSite
from sgltui.agent.jobs.batch_api import BatchApi, BatchStore
from sgltui.agent.jobs.jobs_host import Deferred, JobError, JobsHost
from sgltui.agent.pools.exposure import Exposures
from sgltui.agent.pools.pools import PoolArgs, Pools
from sgltui.agent.pools.slot_fronts import Fronts
from sgltui.agent.profile_catalog import ProfileCatalog
from sgltui.agent.provenance import ProvenanceKeeper
from sgltui.agent.pushes import Pushes
from sgltui.agent.slot.attach import Attacher
from sgltui.agent.slot.discovery import Discovery
from sgltui.agent.slot.resolved import from_record, server_env
from sgltui.agent.slot.restart_policy import RestartPolicy
from sgltui.agent.slot.running_command import Job, Wait
from sgltui.agent.slot.slot import RUNNING, STOPPED, Slot, SlotConfig
from sgltui.agent.state import AgentState, LaunchHistory
from sgltui.agent.state_saver import StateSaver
from sgltui.agent.swap.coordinator import Swaps
from sgltui.agent.swap.operations import Operations
from sgltui.agent.swap.standby import Standbys, pick_records
from sgltui.agent.swap.standby_ops import StandbyOps
from sgltui.agent.telemetry.link import TelemetryLink
from sgltui.core import config as env_config
from sgltui.core.placement import Placement
from sgltui.core.redact import Redactor
from sgltui.core.tasks import watched
from sgltui.session.writer import Recorder

if TYPE_CHECKING:
    from sgltui.agent.telemetry import Telemetry

log = logging.getLogger("sgltui.agent")
T = TypeVar("T")


class Supervisor:
    def __init__(
        self,
        state_dir: Path,
        socket_path: Path,
        profiles_dirs: list[Path] | None = None,
        config: AgentConfig | None = None,
        slot_ids: tuple[str, ...] | None = None,
        placement: Placement | None = None,
        session_dir: Path | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.socket_path = socket_path
        self.profiles_dirs = list(profiles_dirs or [])
        # agent/config.py: agent.toml and SGLTUI_* overrides, read once (by the daemon, before
        # it detaches, so that a bad value is one line on the starting command's stderr).
        self.agent_config = config or AgentConfig()
        self.config: SlotConfig = self.agent_config.slot  # what every slot reads (SlotHost)
        slot_ids = slot_ids or tuple(self.agent_config.slots)
        # host.toml's slots (core/placement.py), each with its GPUs and port; else `slot_ids`,
        # each running a profile where the profile says.
        self.placement = placement
        # What the parts share (agent/context.py). Slots, operations, pools, fronts, bench runs
        # and jobs publish on its bus; the rest of the agent subscribes below (agent/events.py).
        self.bus = EventBus()
        self.slots: dict[str, Slot] = {}
        self.redactor = Redactor()
        # the profiles: resolved by name, listed in status (agent/profile_catalog.py)
        self.catalog = ProfileCatalog(self.profiles_dirs, self._replaced_pids)
        self.ctx = ctx = AgentContext(
            bus=self.bus,
            slots=self.slots,
            config=self.agent_config,
            state_dir=state_dir,
            catalog=self.catalog,
            redactor=self.redactor,
        )
        places = {p.name: p for p in placement.slots} if placement is not None else {}
        for sid in list(places) or slot_ids:
            self.slots[sid] = Slot(sid, self, places.get(sid))
        # the agent's ops as its own parts send them: each the way a client's goes (handle)
        self.calls = AgentCalls(self.handle)
        # slots served to another host's gateway: address and key (agent/pools/exposure.py)
        self.exposures = Exposures(state_dir)
        # host.toml's pools: a front for one slot, the gateway for more (agent/pools/pools.py)
        self.pools = Pools(ctx, self.calls, placement)
        self._pool_tasks: set[asyncio.Task] = set()
        # profiles kept warm beside the slots' servers, asleep (agent/swap/standby.py)
        self.standbys = Standbys(ctx)
        self.children = Children(self.bus.publish, socket_path, state_dir, lambda: ctx.recorder)
        # start / stop, each slot's lock and job (agent/swap/operations.py); the batch jobs and
        # the leases it asks are bound below, once made (the jobs see the slots through it)
        self.ops = Operations(
            ctx,
            exposures=self.exposures,
            pools=self.pools,
            standbys=self.standbys,
            children=self.children,
        )
        # servers sgltui did not start: found (agent/slot/discovery.py), attached (agent/slot/attach.py)
        self.discovery = Discovery(self.ops.our_pids)
        self.provenance = ProvenanceKeeper(ctx)  # what each ready server runs, under a hash
        self._lock = asyncio.Lock()  # commands that are not a slot's lifecycle
        # (attach takes it itself, once the server it asks has answered)
        self.attacher = Attacher(ctx, self, self.provenance, self._lock)
        self.started = time.time()
        self.history = LaunchHistory(state_dir)
        self.agent_state = AgentState(state_dir)
        # the live viewers, and what is pushed to them (agent/pushes.py)
        self.pushes = Pushes(self.redactor)
        # it follows the slots, and sets the context's telemetry (agent/telemetry/link.py)
        self.tele = TelemetryLink(ctx, self.pools, self.pushes)
        # batch jobs (agent/jobs/jobs_host.py), seeing the agent through agent/jobs/agent_site.py
        self.batch = JobsHost(
            AgentSite(ctx, self.calls, self.ops, self.pools, self.provenance, self.children)
        )
        # the leases that keep the endpoint from evicting work (agent/endpoint/leases.py)
        self.leases = Leases(ctx, self.batch)
        self.ops.bind(self.batch, self.leases)
        # swap / restart, cold or warm (agent/swap/coordinator.py)
        self.swaps = Swaps(
            ctx,
            ops=self.ops,
            standbys=self.standbys,
            pools=self.pools,
            batch=self.batch,
            leases=self.leases,
            children=self.children,
        )
        # standby add / remove (agent/swap/standby_ops.py)
        self.standby_ops = StandbyOps(ctx, self.ops, self.standbys, self.pools, self.status)
        # a crashed server launched again (agent/slot/restart_policy.py), a subscriber of the events
        self.restart_policy = RestartPolicy(ctx, self.swaps, self.batch, self.agent_config.restart)
        # each slot's front (agent/pools/slot_fronts.py)
        self.fronts = Fronts(ctx, self.pools, self.calls)
        # the one OpenAI endpoint, routing by `model` (agent/endpoint/endpoint.py)
        self.endpoint = Endpoint(
            ctx,
            self.agent_config.endpoint,
            calls=self.calls,
            ops=self.ops,
            standbys=self.standbys,
            pools=self.pools,
            leases=self.leases,
        )
        # OpenAI's Batch API there too, as on each front; a batch goes to the agent's own choice
        # of slot (its only one), or the one its metadata names (agent/jobs/batch_api.py)
        self.endpoint.add_routes(BatchApi(BatchStore(state_dir / "batch-api"), self.calls).routes())
        # hello, status, logs, bench runs... (agent/agent_ops.py)
        self.agent_ops = AgentOps(
            ctx,
            status=self.status,
            shutdown=self.request_shutdown,
            discovery=self.discovery,
            exposures=self.exposures,
            pools=self.pools,
            children=self.children,
        )
        # each op's handler, found through this one table (agent/op_routes.py)
        self.routes = op_routes.routes(
            agent=self.agent_ops,
            lifecycle=self.ops,
            swaps=self.swaps,
            jobs=self.batch,
            standbys=self.standby_ops,
            leases=self.leases,
            attacher=self.attacher,
        )
        self.shutdown_requested = asyncio.Event()
        self.stop_servers_on_exit = False
        self._session_dir_override = session_dir
        self._learned_cache: dict[str, dict | None] = {}
        self._last_maintain = 0.0
        # agent-state.json, saved soon after each change (agent/state_saver.py)
        self.saver = StateSaver(
            self.agent_state,
            self._records,
            lambda: str(self.recorder.path) if self.recorder else None,
        )
        # Who reacts to the events, in this order: the recorder writes each first (what the
        # others get as `record`: stamped, redacted), clients are sent it, the restart policy
        # and telemetry follow the slots. On every state change the fronts and the pools'
        # gateways follow at once and agent-state.json is saved (debounced).
        self.bus.record_with(self._record)
        self.bus.subscribe(self._push_event)
        self.bus.subscribe(self.restart_policy.on_event)
        self.bus.subscribe(self.tele.follows)
        self.bus.subscribe(self.provenance.on_event)
        self.bus.on_change(self.fronts.follow)
        self.bus.on_change(self.pools.sync)
        self.bus.on_change(self.saver.later)
        self.bus.on_change(self.endpoint.changed)

    @property
    def recorder(self) -> Recorder | None:  # the session: opened by start (AgentContext)
        return self.ctx.recorder

    @property
    def telemetry(self) -> Telemetry | None:  # set by telemetry's link when it starts
        return self.ctx.telemetry

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        saved = self.agent_state.load()
        previous = saved.get("session_dir")
        reopened = False
        # Same session only when servers live on from it; otherwise this is a new sitting.
        if (
            self._session_dir_override is None
            and previous
            and Path(previous).is_dir()
            and saved.get("slots")
        ):
            recorder = Recorder.reopen(Path(previous))
            reopened = True
        else:
            recorder = Recorder.create(self.state_dir, self._session_dir_override)
        self.ctx.recorder = recorder
        # disk.error / disk.ok may not reach the disk; viewers must still hear about them.
        recorder.on_disk_change = lambda ev: self.pushes.broadcast("event", ev)
        await self.tele.start()
        await self.fronts.start()
        self.discovery.start()
        self.bus.publish(
            protocol.AgentStart(
                pid=os.getpid(),
                version=__version__,
                session_dir=str(recorder.path),
                reopened=reopened,
                state_dir=str(self.state_dir),
            )
        )
        saved_slots, sleepers = pick_records(saved.get("slots") or {})
        for slot_id, record in saved_slots.items():
            slot = self.slots.get(slot_id) or self.slots.setdefault(slot_id, Slot(slot_id, self))
            # Exactly what the earlier agent ran (its rollback target), not today's file.
            fresh = await asyncio.to_thread(self.catalog.try_get, record.get("profile"))
            # [env] secrets are not in the record: the running server's environment has them.
            profile = await asyncio.to_thread(
                from_record,
                record.get("resolved_profile"),
                fresh,
                functools.partial(server_env, record),
            )
            if profile is not None:
                # the rollback target runs where it ran (and with its key: not in the record)
                profile = profile.placed(slot.place, self.exposures.get(slot_id))
            try:
                ok = slot.adopt(record, profile)
            except Exception as exc:  # a corrupt record must not keep the agent from starting
                log.warning("cannot adopt slot %s: %s", slot_id, exc, exc_info=True)
                ok = False
            self.bus.publish(
                protocol.AgentAdopt(
                    slot=slot_id,
                    ok=ok,
                    profile=record.get("profile"),
                    launch_id=record.get("launch_id"),
                    pid=(record.get("tree") or {}).get("pid"),
                    state=slot.state if ok else None,
                )
            )
        for key, record in sleepers.items():  # still asleep: agent/swap/standby.py
            profile = await asyncio.to_thread(
                from_record,
                record.get("resolved_profile"),
                None,
                functools.partial(server_env, record),
            )
            try:
                ok = self.standbys.adopt(key, record, profile)
            except Exception as exc:  # a corrupt record must not keep the agent from starting
                log.warning("cannot adopt standby %s: %s", key, exc, exc_info=True)
                ok = False
            log.info("standby %s %s", key, "re-adopted, asleep" if ok else "is gone")
        await self.swaps.settle()  # a swap left half done
        self.bus.changed()
        await self.pools.start()  # after the slots: their ready servers are its first workers
        await asyncio.to_thread(self.catalog.refresh)
        await self.batch.start()  # after the slots: a resumed job finds its server
        await self.endpoint.start()

    async def close(self) -> None:
        stop_servers = self.stop_servers_on_exit
        await self.restart_policy.close()
        await self.endpoint.close()
        for job in list(self.jobs.values()):
            if job.task and not job.task.done() and not stop_servers:
                job.task.cancel()
        await self.batch.close()
        await self.discovery.close()
        await self.provenance.close()
        if stop_servers:
            for slot in self.slots.values():
                if slot.state != STOPPED and slot.external is None:  # never one we attached
                    try:
                        await slot.stop("agent", drain="force")
                    except Exception:
                        log.exception("stopping slot %s", slot.id)
        await self.children.stop_all()
        await self.standbys.close(stop_servers)
        await self.pools.close()
        for slot in self.slots.values():
            await slot.close()
            if slot.front is not None:
                await slot.front.close()
        self.saver.cancel()
        self.saver.save()  # the last word, written before the agent goes
        self.pushes.log_batch.flush()  # the servers' last lines before the agent's last event
        self.bus.publish(
            protocol.AgentStop(
                stop_servers=stop_servers,
                # an attached server runs on, but was never this agent's to re-adopt
                left_running=[
                    s.id for s in self.slots.values() if s.state in RUNNING and s.external is None
                ],
            )
        )
        await self.tele.stop()
        if self.recorder is not None:
            self.recorder.close()

    # ---- what slots call back (SlotHost) ------------------------------------------------------

    def _record(self, event: protocol.EventBase) -> dict:
        """events.jsonl gets the event first (the recorder stamps its time unless it has one)
        and gives it back as written: what clients are sent."""
        fields = protocol.event_dict(event)
        type_ = fields.pop("type")
        fields.pop("v", None)
        if not event.ts:
            fields.pop("ts", None)
        record: dict = self.ctx.session.event(type_, **fields)
        return record

    def _push_event(self, event: protocol.EventBase, record: dict) -> None:
        self.pushes.broadcast("event", record)

    def push_log(self, slot_id: str, launch_id: str, lines: list[str]) -> None:
        now = time.monotonic()
        if now - self._last_maintain > 1.0:
            self._last_maintain = now
            try:
                self.ctx.session.maintain()  # scrubs secrets from and rotates the server logs
            except Exception:
                log.exception("recorder maintenance")
        self.pushes.log_lines(slot_id, launch_id, lines)

    def add_secret(self, secret: str) -> None:
        self.ctx.add_secret(secret)

    def server_log_path(self, launch_id: str) -> Path:
        return self.ctx.server_log_path(launch_id)

    def learned(self, profile: str) -> dict[str, float] | None:
        if profile not in self._learned_cache:
            self._learned_cache[profile] = self.history.learned(profile)
        return self._learned_cache[profile]

    def record_launch(self, profile: str, durations: dict[str, float]) -> None:
        try:
            self.history.record(profile, durations)
        except OSError as exc:
            log.warning("cannot record launch history: %s", exc)
        self._learned_cache.pop(profile, None)

    def telemetry_line(self, slot_id: str, line: str) -> None:
        self.tele.line(slot_id, line)

    def _records(self) -> dict[str, dict]:
        records = {sid: r for sid, s in self.slots.items() if (r := s.record())}
        return {**records, **self.standbys.records()}

    # ---- profiles ------------------------------------------------------------------------------

    def _replaced_pids(self) -> frozenset[int]:
        """The processes of the server a profile key replaces, from a worker thread: their RAM
        counts as free for the host-pool mark. With several slots the list is not about one
        of them, so nothing counts as freed (the mark errs on the side of a warning)."""
        if len(self.slots) != 1:
            return frozenset()
        slot = next(iter(self.slots.values()))
        try:
            return self.ops.current(slot).pids
        except RuntimeError:  # the process tree changed while it was copied: next refresh
            return frozenset()

    # ---- status --------------------------------------------------------------------------------

    def status(self) -> protocol.StatusReply:
        slots = []
        for slot in self.slots.values():
            capacity = None
            if self.telemetry is not None:
                card = _safe(functools.partial(self.telemetry.capacity, slot.id))
                capacity = protocol.capacity_card(card)
            job = self.jobs.get(slot.id)
            st = msgspec.structs.replace(
                slot.status(),
                capacity=capacity,
                busy=job.desc if job and job.task and not job.task.done() else None,
                restart=self.restart_policy.note(slot.id),
                standbys=self.standbys.views(slot.id),
            )
            slots.append(st)
        tele = None
        if self.telemetry is not None:
            snap = _safe(self.telemetry.snapshot)
            tele = protocol.telemetry_view(snap) if snap is not None else None
        if tele is None:
            tele = protocol.TelemetryView(
                ts=time.time(),
                gpu_source=protocol.GpuSourceView(kind="none", message="telemetry not running"),
            )
        self.catalog.refresh_if_stale()  # a new or edited profile file shows up by itself
        disk = _safe(lambda: self.ctx.session.disk)
        kept = keeper.view(self.state_dir)
        return protocol.StatusReply(
            agent=protocol.AgentInfo(
                pid=os.getpid(),
                version=__version__,
                started=self.started,
                state_dir=str(self.state_dir),
                session_dir=str(self.ctx.session.path),
                socket=str(self.socket_path),
                disk=msgspec.convert(disk, protocol.DiskView) if disk else protocol.DiskView(),
                demo_load=self.children.demo_on,
                keeper=msgspec.convert(kept, protocol.KeeperView) if kept else None,
                host_file=env_config.host_file() or None,
            ),
            slots=slots,
            profiles=self.catalog.rows,
            telemetry=tele,
            bench=self.children.latest_bench(),
            jobs=self.batch.views(),
            pools=msgspec.convert(self.pools.status(), list[protocol.PoolStatus]),
            unmanaged=msgspec.convert(self.discovery.view(), list[protocol.Unmanaged]),
            endpoint=_safe(self.endpoint.view),
        )

    # ---- commands ------------------------------------------------------------------------------

    async def handle(self, op: str, args: protocol.Args, client: str | None) -> Any:
        # The ops and their arguments' Structs are protocol.OPS: the server parsed a client's
        # into one, and calls from inside the agent (pools, the --choose trial) build one.
        route = self.routes.get(op)
        if route is None:
            known = ", ".join(sorted(protocol.OPS))
            raise OpError(f"unknown op {op!r}", "invalid", fix=f"this agent knows: {known}")
        if not isinstance(args, protocol.OPS[op].args):
            raise OpError(f"{op} takes {protocol.OPS[op].args.__name__}", "internal")
        pool = getattr(args, "pool", None)
        if pool and op in Pools.OPS and isinstance(args, PoolArgs):
            return await self._pool_op(op, args, client)
        if pool and op == "job_run" and getattr(args, "slot", None) is None:
            # A job through a pool targets the pool (its record's and view's `target`:
            # agent/jobs/target.py); the pool's first slot is its reference slot, whose capacity
            # card sets its automatic concurrency. It is sent to the pool's endpoint and is not
            # held for that slot's swaps.
            args = msgspec.structs.replace(args, slot=self.pools.pool(str(pool)).slots[0])
        # none given: the only slot; not for attach, whose default is its own (the idle only
        # slot, else a new ext-PORT: agent/slot/attach.py)
        if isinstance(args, protocol.SlotArgs) and args.slot is None and op != "attach":
            if len(self.slots) == 1 or op == "job_run":
                args = msgspec.structs.replace(args, slot=self.slot_for(args).id)
        slot_id = getattr(args, "slot", None)
        if op in protocol.READ_ONLY_OPS:  # no "command" event: they would drown the session log
            return await route.handler(args, client)
        # A slot's lifecycle command takes that slot's lock (agent/swap/operations.py); the others
        # take the agent's; attach/adopt/detach take it themselves, once the server answered.
        lock = contextlib.nullcontext() if route.own_lock else self._lock
        async with lock:
            self.bus.publish(
                protocol.Command(client=client, slot=slot_id, op=op, args=_public_args(args))
            )
            try:
                result = await route.handler(args, client)
            except OpError as exc:
                self.bus.publish(
                    protocol.CommandRefused(client=client, slot=slot_id, op=op, reason=str(exc))
                )
                raise
        if isinstance(result, (Wait, Deferred)):
            try:
                result = await result.wait()
            except JobError as exc:
                raise OpError(str(exc), exc.code) from None
        await self.saver.saved()
        return result

    async def _pool_op(self, op: str, args: PoolArgs, client: str | None) -> Any:
        """An op on every slot of a pool (a swap rolls): agent/pools/pools.py. Without `wait` it runs
        on in the agent and the reply says it began."""
        name = str(args.pool)
        self.pools.pool(name)  # an unknown pool: one line
        self.bus.publish(protocol.Command(client=client, op=op, pool=name, args=_public_args(args)))
        if getattr(args, "wait", False) or op == "preflight":
            try:
                return await self.pools.op(op, args, client)
            except OpError as exc:
                self.bus.publish(protocol.CommandRefused(client=client, op=op, reason=str(exc)))
                raise
        task = asyncio.get_running_loop().create_task(self.pools.op(op, args, client))

        def failed(exc: BaseException) -> None:  # a refusal is said in events; anything else too
            if not isinstance(exc, OpError):
                reason = f"{op} failed inside the agent: {exc} (see agent.log)"
                self.bus.publish(protocol.CommandRefused(client=client, op=op, reason=reason))

        watched(task, f"pool {name}: {op}", failed, expected=(OpError,))
        self._pool_tasks.add(task)
        task.add_done_callback(self._pool_tasks.discard)
        return self.pools.reply(name, accepted=True)

    def slot_for(self, args: protocol.Args) -> Slot:
        """The slot an op addresses: by name, or the only one when none is given."""
        return self.ctx.slot_for(args)

    def request_shutdown(self, stop_servers: bool) -> None:
        """The agent stops soon (the daemon waits for `shutdown_requested`), after the reply."""
        self.stop_servers_on_exit = stop_servers
        asyncio.get_running_loop().call_later(0.05, self.shutdown_requested.set)

    @property
    def jobs(self) -> dict[str, Job]:
        """Each slot's latest lifecycle job (agent/swap/operations.py)."""
        return self.ops.jobs

    async def state_saved(self) -> None:
        """agent-state.json says what the slots and sleepers are now (a warm swap's steps:
        the next agent must know which servers are paused or released)."""
        self.bus.changed()
        await self.saver.saved()


def _public_args(args: protocol.Args) -> dict:
    """The arguments as the session records them (checked, defaults filled in)."""
    items = protocol.args_dict(args)
    out = {k: v for k, v in items.items() if k not in ("profiles_dirs",)}
    if "workers" in out:  # a remote pool's: their keys are secrets, their names are not
        out["workers"] = [w.get("name") if isinstance(w, dict) else w.name for w in out["workers"]]
    return out


def _safe(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:  # one part of a status reply must not fail the whole reply
        log.exception("status: %s failed", getattr(fn, "__name__", fn))
        return None
