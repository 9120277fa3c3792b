"""The agent's brain: it makes the agent's parts (slots, operations, pools, standbys, batch jobs,
fronts, telemetry's link, the state saver), wires them to the event bus and the session, and
hands each op to the part that handles it. Each part sees the supervisor through a narrow
Protocol of its own (agent/hosts.py), never this class.

The lifecycle commands (start, stop, restart, swap) are sequenced in agent/operations.py and
agent/swap.py, under one lock per slot. The other commands (bench runs, the demo load, batch jobs, shutdown) go
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
from typing import Any

import msgspec

from sgltui import __version__, protocol
from sgltui.agent import keeper, op_routes, preflight
from sgltui.agent.agent_calls import AgentCalls
from sgltui.agent.agent_ops import AgentOps
from sgltui.agent.attach import Attacher
from sgltui.agent.batch_api import BatchApi, BatchStore
from sgltui.agent.children import Children
from sgltui.agent.config import AgentConfig
from sgltui.agent.discovery import Discovery
from sgltui.agent.endpoint import Endpoint
from sgltui.agent.errors import OpError
from sgltui.agent.events import EventBus
from sgltui.agent.exposure import Exposures
from sgltui.agent.front import FrontConfig
from sgltui.agent.fronts import Fronts
from sgltui.agent.jobs_host import Deferred, JobError, JobsHost
from sgltui.agent.jobs_site import AgentSite
from sgltui.agent.leases import Leases
from sgltui.agent.logbatch import LogBatch
from sgltui.agent.operations import Operations
from sgltui.agent.pools import PoolArgs, Pools
from sgltui.agent.profile_catalog import ProfileCatalog
from sgltui.agent.provenance import ProvenanceKeeper
from sgltui.agent.resolved import Resolved, from_record, server_env
from sgltui.agent.restart_policy import RestartPolicy
from sgltui.agent.slot import RUNNING, STOPPED, Slot, SlotConfig
from sgltui.agent.slot_job import Job, Wait
from sgltui.agent.standby import Standbys, pick_records
from sgltui.agent.state import AgentState, LaunchHistory
from sgltui.agent.state_saver import StateSaver
from sgltui.agent.swap import Swaps
from sgltui.agent.telemetry_link import TelemetryLink
from sgltui.core import config as env_config
from sgltui.core.redact import Redactor
from sgltui.core.tasks import watched
from sgltui.session.writer import Recorder

log = logging.getLogger("sgltui.agent")


class PushQueue(asyncio.Queue):
    """A subscriber's pushes; `overflowed` once the client stopped reading (then dropped)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize=maxsize)
        self.overflowed = False
        self.logs_per_tick = False  # subscribe logs="tick": one "logs" push per tick (logbatch)


class Supervisor(AgentCalls):
    def __init__(
        self,
        state_dir: Path,
        socket_path: Path,
        profiles_dirs: list[Path] | None = None,
        config: AgentConfig | None = None,
        slot_ids: tuple[str, ...] | None = None,
        placement: Any = None,
        session_dir: Path | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.socket_path = socket_path
        self.profiles_dirs = list(profiles_dirs or [])
        # the profiles: resolved by name, listed in status (agent/profile_catalog.py)
        self.catalog = ProfileCatalog(self.profiles_dirs, self._replaced_pids)
        # agent/config.py: agent.toml and SGLTUI_* overrides, read once (by the daemon, before
        # it detaches, so that a bad value is one line on the starting command's stderr).
        self.agent_config = config or AgentConfig()
        self.config: SlotConfig = self.agent_config.slot  # what every slot reads (SlotHost)
        slot_ids = slot_ids or tuple(self.agent_config.slots)
        # host.toml's slots (core/placement.py), each with its GPUs and port; else `slot_ids`,
        # each running a profile where the profile says.
        self.placement = placement
        # Slots, operations, pools, fronts, bench runs and jobs publish here; the rest of the
        # agent subscribes below (agent/events.py).
        self.bus = EventBus()
        places = {p.name: p for p in placement.slots} if placement is not None else {}
        self.slots: dict[str, Slot] = {
            sid: Slot(sid, self, places.get(sid)) for sid in (list(places) or slot_ids)
        }
        self.ops = Operations(self)  # start / stop, each slot's lock and job (agent/operations.py)
        self.swaps = Swaps(self)  # swap / restart, cold or warm (agent/swap.py)
        self.agent_ops = AgentOps(self)  # hello, status, logs, bench runs... (agent/agent_ops.py)
        # servers sgltui did not start: found (agent/discovery.py), attached (agent/attach.py)
        self.discovery = Discovery(self.our_pids)
        self.attacher = Attacher(self)
        self.provenance = ProvenanceKeeper(self)  # what each ready server runs, under a hash
        # slots served to another host's gateway: address and key (agent/exposure.py)
        self.exposures = Exposures(state_dir)
        # host.toml's pools: a front for one slot, the gateway for more (agent/pools.py)
        self.pools = Pools(self, placement)
        self._pool_tasks: set[asyncio.Task] = set()
        # a crashed server launched again (agent/restart_policy.py), a subscriber of the events
        self.restart_policy = RestartPolicy(self, self.agent_config.restart)
        # profiles kept warm beside the slots' servers, asleep (agent/standby.py)
        self.standbys = Standbys(self)
        self.started = time.time()
        self.recorder: Any = None
        self.telemetry: Any = None  # agent/telemetry.py, once started (None: it did not)
        self.tele = TelemetryLink(self)  # it follows the slots (agent/telemetry_link.py)
        self.redactor = Redactor()
        self.history = LaunchHistory(state_dir)
        self.agent_state = AgentState(state_dir)
        self.subscribers: set[PushQueue] = set()
        self.log_batch = LogBatch(lambda batch: self.broadcast("logs", batch, logs_per_tick=True))
        self.children = Children(self.bus.publish, socket_path, state_dir, lambda: self.recorder)
        # batch jobs (agent/jobs_host.py), seeing the agent through agent/jobs_site.py
        self.batch = JobsHost(AgentSite(self))
        self.front_config: FrontConfig = self.agent_config.front
        self.fronts = Fronts(self)  # each slot's front endpoint (agent/fronts.py)
        # the one OpenAI endpoint, routing by `model` (agent/endpoint.py), and the leases that
        # keep it from evicting work (agent/leases.py)
        self.leases = Leases(self, state_dir)
        self.endpoint = Endpoint(self, self.agent_config.endpoint)
        # OpenAI's Batch API there too, as on each front; a batch goes to the agent's own choice
        # of slot (its only one), or the one its metadata names (agent/batch_api.py)
        self.endpoint.add_routes(BatchApi(BatchStore(state_dir / "batch-api"), self).routes())
        # each op's handler, found through this one table (agent/op_routes.py)
        self.routes = op_routes.routes(
            agent=self.agent_ops,
            lifecycle=self.ops,
            swaps=self.swaps,
            jobs=self.batch,
            standbys=self.standbys,
            leases=self.leases,
            attacher=self.attacher,
        )
        self.shutdown_requested = asyncio.Event()
        self.stop_servers_on_exit = False
        self._lock = asyncio.Lock()  # commands that are not a slot's lifecycle
        self.command_lock = self._lock  # (agent/attach.py takes it after asking a server)
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
            self.recorder = Recorder.reopen(Path(previous))
            reopened = True
        else:
            self.recorder = Recorder.create(self.state_dir, self._session_dir_override)
        # disk.error / disk.ok may not reach the disk; viewers must still hear about them.
        self.recorder.on_disk_change = lambda ev: self.broadcast("event", ev)
        await self.tele.start()
        await self.fronts.start()
        self.discovery.start()
        self.bus.publish(
            protocol.AgentStart(
                pid=os.getpid(),
                version=__version__,
                session_dir=str(self.recorder.path),
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
        for key, record in sleepers.items():  # still asleep: agent/standby.py
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
        self.log_batch.flush()  # the servers' last lines before the agent's last event
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
        record: dict = self.recorder.event(type_, **fields)
        return record

    def _push_event(self, event: protocol.EventBase, record: dict) -> None:
        self.broadcast("event", record)

    def broadcast(self, kind: str, data: Any, logs_per_tick: bool | None = None) -> None:
        """To every subscriber, or (`logs_per_tick` given) those that take log lines so."""
        msg = {"push": kind, "data": data}
        for q in list(self.subscribers):
            if logs_per_tick is not None and q.logs_per_tick != logs_per_tick:
                continue
            try:
                q.put_nowait(msg)
            except asyncio.QueueFull:
                # A client that stopped reading is dropped rather than buffered without bound.
                self.subscribers.discard(q)
                q.overflowed = True  # the connection closes itself once it drained the rest

    def push_log(self, slot_id: str, launch_id: str, lines: list[str]) -> None:
        now = time.monotonic()
        if now - self._last_maintain > 1.0:
            self._last_maintain = now
            try:
                self.recorder.maintain()  # scrubs secrets from and rotates the server logs
            except Exception:
                log.exception("recorder maintenance")
        if not self.subscribers:
            return
        lines = [self.redactor.text(ln) for ln in lines]
        if any(q.logs_per_tick for q in self.subscribers):
            self.log_batch.add(slot_id, launch_id, lines)
        if not all(q.logs_per_tick for q in self.subscribers):
            self.broadcast(
                "log",
                {"slot": slot_id, "launch_id": launch_id, "lines": lines},
                logs_per_tick=False,
            )

    def add_secret(self, secret: str) -> None:
        self.redactor.add_secret(secret)
        self.recorder.add_secret(secret)

    def server_log_path(self, launch_id: str) -> Path:
        return Path(self.recorder.server_log_path(launch_id))

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

    def get_profile(self, name: str | None, args: protocol.Args | None) -> Resolved:
        """Resolve once (blocking file reads: call from a worker thread)."""
        return self.catalog.get(name, args)

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

    def _replaced_pids(self) -> frozenset[int]:
        """The processes of the server a profile key replaces, from a worker thread: their RAM
        counts as free for the host-pool mark. With several slots the list is not about one
        of them, so nothing counts as freed (the mark errs on the side of a warning)."""
        if len(self.slots) != 1:
            return frozenset()
        slot = next(iter(self.slots.values()))
        try:
            return self.current(slot).pids
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
        disk = _safe(lambda: self.recorder.disk)
        kept = keeper.view(self.state_dir)
        return protocol.StatusReply(
            agent=protocol.AgentInfo(
                pid=os.getpid(),
                version=__version__,
                started=self.started,
                state_dir=str(self.state_dir),
                session_dir=str(self.recorder.path),
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
            raise OpError(f"unknown op {op!r}; this agent knows: {known}", "invalid")
        if not isinstance(args, protocol.OPS[op].args):
            raise OpError(f"{op} takes {protocol.OPS[op].args.__name__}", "internal")
        pool = getattr(args, "pool", None)
        if pool and op in Pools.OPS and isinstance(args, PoolArgs):
            return await self._pool_op(op, args, client)
        if pool and op == "job_run" and getattr(args, "slot", None) is None:
            # A job through a pool targets the pool (its record's and view's `target`:
            # agent/job_target.py); the pool's first slot is its reference slot, whose capacity
            # card sets its automatic concurrency. It is sent to the pool's endpoint and is not
            # held for that slot's swaps.
            args = msgspec.structs.replace(args, slot=self.pools.pool(str(pool)).slots[0])
        # none given: the only slot; not for attach, whose default is its own (the idle only
        # slot, else a new ext-PORT: agent/attach.py)
        if isinstance(args, protocol.SlotArgs) and args.slot is None and op != "attach":
            if len(self.slots) == 1 or op == "job_run":
                args = msgspec.structs.replace(args, slot=self.slot_for(args).id)
        slot_id = getattr(args, "slot", None)
        if op in protocol.READ_ONLY_OPS:  # no "command" event: they would drown the session log
            return await route.handler(args, client)
        # A slot's lifecycle command takes that slot's lock (agent/operations.py); the others
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
        """An op on every slot of a pool (a swap rolls): agent/pools.py. Without `wait` it runs
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
        sid = getattr(args, "slot", None)
        if sid is None:
            if len(self.slots) == 1:
                return next(iter(self.slots.values()))
            raise OpError(
                f"this agent has several slots; name one with --slot: {', '.join(self.slots)}",
                "invalid",
            )
        if str(sid) not in self.slots:
            raise OpError(f"no slot {sid!r}; slots: {', '.join(self.slots)}", "not_found")
        return self.slots[str(sid)]

    @property
    def jobs(self) -> dict[str, Job]:
        """Each slot's latest lifecycle job (agent/operations.py)."""
        return self.ops.jobs

    async def state_saved(self) -> None:
        """agent-state.json says what the slots and sleepers are now (a warm swap's steps:
        the next agent must know which servers are paused or released)."""
        self.bus.changed()
        await self.saver.saved()

    def our_pids(self) -> set[int]:
        pids: set[int] = set()
        for s in self.slots.values():
            if s.tree:
                pids |= set(s.tree.seen)
        return pids | self.standbys.pids()


def _public_args(args: protocol.Args) -> dict:
    """The arguments as the session records them (checked, defaults filled in)."""
    items = protocol.args_dict(args)
    out = {k: v for k, v in items.items() if k not in ("profiles_dirs",)}
    if "workers" in out:  # a remote pool's: their keys are secrets, their names are not
        out["workers"] = [w.get("name") if isinstance(w, dict) else w.name for w in out["workers"]]
    return out


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # one part of a status reply must not fail the whole reply
        log.exception("status: %s failed", getattr(fn, "__name__", fn))
        return None
