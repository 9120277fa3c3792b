"""The agent's brain: slots, the session, telemetry, bench runs, and the ops that drive them.

The lifecycle commands (start, stop, restart, swap) are sequenced in agent/operations.py, under
one lock per slot. The other commands (bench runs, the demo load, batch jobs, shutdown) go
through one lock of their own, so two clients never interleave a half-applied change of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from sgltui import __version__, protocol
from sgltui.agent import keeper, preflight
from sgltui.agent.attach import Attacher
from sgltui.agent.children import ChildError, Children
from sgltui.agent.config import AgentConfig
from sgltui.agent.discovery import Discovery
from sgltui.agent.errors import OpError
from sgltui.agent.events import EventBus
from sgltui.agent.exposure import Exposures
from sgltui.agent.front import Front, FrontConfig
from sgltui.agent.jobs_host import Deferred, JobError, JobsHost
from sgltui.agent.jobs_site import AgentSite
from sgltui.agent.logbatch import LogBatch
from sgltui.agent.operations import Job, Operations, Wait
from sgltui.agent.pools import PoolArgs, Pools
from sgltui.agent.profile_rows import ProfileRows
from sgltui.agent.provenance import ProvenanceKeeper
from sgltui.agent.resolved import ProfileIndex, Resolved, from_record, server_env
from sgltui.agent.restart_policy import RestartPolicy
from sgltui.agent.slot import (
    CRASHED,
    FAILED,
    LAUNCHING,
    READY,
    RUNNING,
    STOPPED,
    Slot,
    SlotConfig,
)
from sgltui.agent.standby import Standbys, pick_records
from sgltui.agent.state import AgentState, LaunchHistory
from sgltui.core.redact import Redactor
from sgltui.core.tasks import watched
from sgltui.session.layout import SERVERS_DIR
from sgltui.session.writer import Recorder

log = logging.getLogger("sgltui.agent")

STATE_SAVE_DEBOUNCE_S = 0.05  # slot events this close together are saved in one write


class PushQueue(asyncio.Queue):
    """A subscriber's pushes; `overflowed` once the client stopped reading (then dropped)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize=maxsize)
        self.overflowed = False
        self.logs_per_tick = False  # subscribe logs="tick": one "logs" push per tick (logbatch)


class Supervisor:
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
        self.index = ProfileIndex(self.profiles_dirs)
        self._profiles_refresh: asyncio.Task | None = None
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
        self.ops = Operations(self)  # start / stop / restart / swap (agent/operations.py)
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
        self.telemetry: Any = None
        self.redactor = Redactor()
        self.history = LaunchHistory(state_dir)
        self.agent_state = AgentState(state_dir)
        self.subscribers: set[PushQueue] = set()
        self.log_batch = LogBatch(lambda batch: self.broadcast("logs", batch, logs_per_tick=True))
        self.children = Children(self.bus.publish, socket_path, state_dir, lambda: self.recorder)
        # batch jobs (agent/jobs_host.py), seeing the agent through agent/jobs_site.py
        self.batch = JobsHost(AgentSite(self))
        self.front_config: FrontConfig = self.agent_config.front
        self.shutdown_requested = asyncio.Event()
        self.stop_servers_on_exit = False
        self._lock = asyncio.Lock()  # commands that are not a slot's lifecycle
        self._session_dir_override = session_dir
        self._profiles_cache: list[protocol.ProfileRow] = []
        self.profile_rows = ProfileRows()
        self._learned_cache: dict[str, dict | None] = {}
        self._last_maintain = 0.0
        self._profiles_at = 0.0
        self._state_save_failing = False
        self._save_task: asyncio.Task | None = None
        self._save_now = asyncio.Event()  # skips the debounce: a command's reply waits
        self._save_wanted = False
        # Who reacts to the events, in this order: the recorder writes each first (what the
        # others get as `record`: stamped, redacted), clients are sent it, the restart policy
        # and telemetry follow the slots. On every state change the fronts and the pools'
        # gateways follow at once and agent-state.json is saved (debounced).
        self.bus.record_with(self._record)
        self.bus.subscribe(self._push_event)
        self.bus.subscribe(self.restart_policy.on_event)
        self.bus.subscribe(self._telemetry_follows)
        self.bus.subscribe(self.provenance.on_event)
        self.bus.on_change(self._fronts_follow)
        self.bus.on_change(self.pools.sync)
        self.bus.on_change(self._save_later)

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
        await self._start_telemetry()
        await self._start_fronts()
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
            fresh = await asyncio.to_thread(self._try_profile, record.get("profile"))
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
        self.bus.changed()
        await self.pools.start()  # after the slots: their ready servers are its first workers
        await asyncio.to_thread(self._refresh_profiles)
        await self.batch.start()  # after the slots: a resumed job finds its server

    async def _start_fronts(self) -> None:
        """One front endpoint per slot, on FrontConfig.port + the slot's index (agent/front.py)."""
        from sgltui.agent import config as agent_config
        from sgltui.core import placement

        cfg = self.front_config
        if cfg.port is None:
            return
        for i, slot in enumerate(self.slots.values()):
            host, port = cfg.host, cfg.port + i
            setting = f"[front] port in {agent_config.default_path()}" + (f" (+{i})" if i else "")
            where = self.pools.front_port(slot.id)
            if where is False:
                continue  # a slot of a pool of two or more: the pool's gateway is its endpoint
            if isinstance(where, tuple):
                host, port = where  # a pool of one: the front is the pool's endpoint
                setting = f"the pool's port in {placement.default_path()}"
            front = Front(slot.id, host, port, cfg, on_event=self._front_event, setting=setting)
            await front.start()  # a port already taken leaves front.error for status to show
            slot.attach_front(front)

    def _front_event(self, event: protocol.EventBase) -> None:
        s = self.slots.get(event.slot or "")
        event.client = s.client if s else None
        self.bus.publish(event)

    def _sync_front(self, slot: Slot) -> None:
        """Point the slot's front at what the slot runs: a ready server gets the requests; while a
        swap or a launch is on they are held (bounded); otherwise they get 503 at once."""
        front = slot.front
        if front is None or front.error:
            return
        swapping = slot.swap is not None and slot.swap.step != "failed"
        if slot.state == READY and not (swapping and slot.launch_id == front.held_from):
            front.route_to(slot.server_host, slot.port)
        elif swapping or slot.state == LAUNCHING:
            front.hold(
                f"slot {slot.id}: " + ("swap" if swapping else "launch") + " in progress",
                held_from=slot.launch_id,
            )
        else:
            cause = (slot.cause or {}).get("summary")
            if slot.state in (STOPPED, FAILED, CRASHED):
                what = f"no server runs on this slot ({slot.state}" + (
                    f": {cause})" if cause else ")"
                )
            else:
                what = f"its server is {slot.state} and takes no new requests"
            front.release(what + "; start one with `sgltui start PROFILE`")

    async def _start_telemetry(self) -> None:
        from sgltui.agent.telemetry import Telemetry

        try:
            source = self.agent_config.gpu_source
            self.telemetry = Telemetry(
                on_sample=self._on_sample,
                on_capacity=self._on_capacity,
                gpu_source=None if source == "auto" else source,
            )
            await self.telemetry.start()
        except Exception:
            log.exception("telemetry failed to start; continuing without it")
            self.telemetry = None

    async def close(self) -> None:
        stop_servers = self.stop_servers_on_exit
        await self.restart_policy.close()
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
        if self._save_task is not None:
            self._save_task.cancel()
        self._save_state()  # the last word, written before the agent goes
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
        if self.telemetry is not None:
            try:
                await self.telemetry.stop()
            except Exception:
                log.exception("telemetry stop")
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
        lines = self._redact_lines(lines)
        if any(q.logs_per_tick for q in self.subscribers):
            self.log_batch.add(slot_id, launch_id, lines)
        if not all(q.logs_per_tick for q in self.subscribers):
            self.broadcast(
                "log",
                {"slot": slot_id, "launch_id": launch_id, "lines": lines},
                logs_per_tick=False,
            )

    def _redact_lines(self, lines: list[str]) -> list[str]:
        return [self.redactor.text(ln) for ln in lines]

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

    def _telemetry_follows(self, event: protocol.EventBase, record: dict) -> None:
        """The samplers watch a server from its launch (or its adoption by this agent) until
        its slot has none: stopped, failed or crashed."""
        if self.telemetry is None or event.slot is None:
            return
        slot = self.slots.get(event.slot)
        attached = isinstance(event, protocol.SlotAttached) and event.action == "attached"
        if (
            isinstance(event, protocol.Launch)
            or (isinstance(event, protocol.AgentAdopt) and event.ok)
            or attached
        ):
            if slot is not None and (slot.tree is not None or attached):
                self.telemetry.attach(
                    slot.id,
                    slot.tree.pid if slot.tree else 0,  # 0: a remote server, no process here
                    f"http://{_connect_host(slot.server_host)}:{slot.port}",
                    slot.api_key,
                    tp_size=slot.tp_size,
                )
        elif isinstance(event, protocol.SlotStateChanged) and event.state in (
            STOPPED,
            FAILED,
            CRASHED,
        ):
            self.telemetry.detach(event.slot)

    def telemetry_line(self, slot_id: str, line: str) -> None:
        if self.telemetry is not None:
            try:
                self.telemetry.on_log_line(slot_id, line)
            except Exception:
                log.exception("telemetry log line")

    def _fronts_follow(self) -> None:
        """A slot changed: its front follows at once (hold, route, release)."""
        for slot in self.slots.values():
            self._sync_front(slot)

    def _save_later(self) -> None:
        """A slot changed: the slots to re-adopt are saved soon (debounced, in a worker
        thread: an fsync per slot event held up the loop that serves clients and proxies
        traffic)."""
        self._save_wanted = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (shutdown's last word): write it now
            self._save_state()
            return
        if self._save_task is None or self._save_task.done():
            self._save_task = loop.create_task(self._save_soon(), name="agent-state-save")

    async def state_saved(self) -> None:
        """Wait until what the slots are now is on disk (or its save failed): a command's
        reply comes after it, so an agent killed right after a reply still re-adopts."""
        task = self._save_task
        if task is None or task.done() or self._state_save_failing:
            return  # a disk that refuses writes must not hold replies up: it is retried
        self._save_now.set()  # a reply waits on it: no debounce
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), 2.0)

    async def _save_soon(self) -> None:
        while self._save_wanted:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._save_now.wait(), STATE_SAVE_DEBOUNCE_S)
            self._save_now.clear()
            self._save_wanted = False
            saved = await asyncio.to_thread(self._save_state, self._records())
            if not saved:
                await asyncio.sleep(1.0)  # the disk refused: retry every second
                self._save_wanted = True

    def _records(self) -> dict[str, dict]:
        records = {sid: r for sid, s in self.slots.items() if (r := s.record())}
        return {**records, **self.standbys.records()}

    def _save_state(self, records: dict[str, dict] | None = None) -> bool:
        """Write agent-state.json (blocking). A failed save (full disk) keeps the last good
        file and is said once per outage."""
        records = self._records() if records is None else records
        try:
            self.agent_state.save(str(self.recorder.path) if self.recorder else None, records)
        except OSError as exc:
            if not self._state_save_failing:
                log.warning(
                    "cannot write %s (%s); keeping its last good copy, retrying every second",
                    self.agent_state.path,
                    exc.strerror or exc,
                )
            self._state_save_failing = True
            return False
        if self._state_save_failing:
            log.info("%s written again", self.agent_state.path)
        self._state_save_failing = False
        return True

    def _on_capacity(self, slot_id: str, card: dict) -> None:
        slot = self.slots.get(slot_id)
        self.bus.publish(
            protocol.Capacity(
                client=slot.client if slot else None,
                slot=slot_id,
                launch_id=slot.launch_id if slot else None,
                card=card,
            )
        )

    def _on_sample(self, sample: dict) -> None:
        gateways = self.pools.telemetry()
        if gateways:  # each pool's gateway: requests active per worker, retries, errors, breaker
            sample = {**sample, "gateways": gateways}
        try:
            self.recorder.sample(sample)
        except Exception:
            log.exception("recording sample")
        self.log_batch.flush()  # the tick's lines first: a client reads both in one wake-up
        self.broadcast("sample", sample)

    # ---- profiles ------------------------------------------------------------------------------

    def _dirs(self, args: protocol.Args | None) -> list[Path]:
        extra = [Path(d).expanduser() for d in getattr(args, "profiles_dirs", None) or []]
        return self.profiles_dirs + [d for d in extra if d not in self.profiles_dirs]

    def _extra_dirs(self, args: protocol.Args | None) -> list[Path]:
        return [d for d in self._dirs(args) if d not in self.profiles_dirs]

    def get_profile(self, name: str | None, args: protocol.Args | None) -> Resolved:
        """Resolve once (blocking file reads: call from a worker thread)."""
        from sgltui.core.profiles import ProfileError

        if not name or not isinstance(name, str):
            raise OpError(
                "a profile name is required, e.g. `sgltui start demo-mtp` (see `sgltui profiles list`)",
                "invalid",
            )
        try:
            return self.index.resolve(name, self._extra_dirs(args))
        except ProfileError as exc:
            raise OpError(str(exc).splitlines()[0] if str(exc) else f"bad profile {name}") from None

    def _try_profile(self, name: str | None) -> Resolved | None:
        if not name:
            return None
        try:
            return self.get_profile(name, None)
        except OpError:
            return None

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

    def _refresh_profiles(self, args: protocol.Args | None = None) -> list[protocol.ProfileRow]:
        """Rescan the profile folders (blocking: from a worker thread)."""
        try:
            self.index.rescan(self._extra_dirs(args))
            profs = self.index.profiles()
        except (OSError, ValueError) as exc:
            log.warning("cannot list profiles: %s", exc)
            return self._profiles_cache
        self._profiles_at = time.monotonic()
        from sgltui.core.validate import key_clashes

        rows = self.profile_rows.rows(
            profs, self.index.broken(), key_clashes(profs.values()), self._replaced_pids()
        )
        self._profiles_cache = msgspec.convert(rows, list[protocol.ProfileRow])
        return self._profiles_cache

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

    def _refresh_profiles_soon(self) -> None:
        """Rescan in a worker thread, at most one at a time, never on the event loop."""
        if self._profiles_refresh is not None and not self._profiles_refresh.done():
            return
        self._profiles_at = time.monotonic()
        self._profiles_refresh = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self._refresh_profiles), name="profiles-rescan"
        )

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
        if time.monotonic() - self._profiles_at > 5.0:
            self._refresh_profiles_soon()  # a new or edited profile file shows up by itself
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
            ),
            slots=slots,
            profiles=self._profiles_cache,
            telemetry=tele,
            bench=self.children.latest_bench(),
            jobs=self.batch.views(),
            pools=msgspec.convert(self.pools.status(), list[protocol.PoolStatus]),
            unmanaged=msgspec.convert(self.discovery.view(), list[protocol.Unmanaged]),
        )

    # ---- commands ------------------------------------------------------------------------------

    def _handler(self, op: str) -> Callable | None:
        if op not in protocol.OPS:
            return None
        if op.startswith("job_"):  # the batch jobs' ops: jobs_host.py's op_<name>
            fn = getattr(self.batch, f"op_{op.removeprefix('job_')}", None)
            return None if fn is None else functools.partial(self._job_op, fn)
        if op in Operations.OPS:  # a slot's lifecycle: agent/operations.py
            return getattr(self.ops, f"op_{op}", None)
        if op.startswith("standby_"):  # profiles kept warm: agent/standby.py
            return getattr(self.standbys, f"op_{op.removeprefix('standby_')}", None)
        if op in Attacher.OPS:  # servers sgltui did not start: agent/attach.py
            return getattr(self.attacher, f"op_{op}", None)
        return getattr(self, f"op_{op}", None)

    async def handle(self, op: str, args: protocol.Args, client: str | None) -> Any:
        # The ops and their arguments' Structs are protocol.OPS: the server parsed a client's
        # into one, and calls from inside the agent (pools, the --choose trial) build one.
        handler = self._handler(op)
        if handler is None:
            known = ", ".join(sorted(protocol.OPS))
            raise OpError(f"unknown op {op!r}; this agent knows: {known}", "invalid")
        if not isinstance(args, protocol.OPS[op].args):
            raise OpError(f"{op} takes {protocol.OPS[op].args.__name__}", "internal")
        pool = getattr(args, "pool", None)
        if pool and op in Pools.OPS and isinstance(args, PoolArgs):
            return await self._pool_op(op, args, client)
        if pool and op == "job_run" and getattr(args, "slot", None) is None:
            # A job through a pool is filed under its first slot (jobs_host sends it to the
            # pool's endpoint and does not hold it for that slot's swaps).
            args = msgspec.structs.replace(args, slot=self.pools.pool(str(pool)).slots[0])
        if isinstance(args, protocol.SlotArgs) and args.slot is None:
            if len(self.slots) == 1 or op == "job_run":  # none given: the only slot
                args = msgspec.structs.replace(args, slot=self.slot_for(args).id)
        slot_id = getattr(args, "slot", None)
        if op in protocol.READ_ONLY_OPS:  # no "command" event: they would drown the session log
            return await handler(args, client)
        # A slot's lifecycle command takes that slot's lock (agent/operations.py); the others
        # take the agent's.
        lock = contextlib.nullcontext() if op in Operations.OPS else self._lock
        async with lock:
            self.bus.publish(
                protocol.Command(client=client, slot=slot_id, op=op, args=_public_args(args))
            )
            try:
                result = await handler(args, client)
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
        await self.state_saved()
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

    async def op_hello(self, args: protocol.HelloArgs, client: str | None) -> protocol.HelloReply:
        problem = protocol.version_mismatch(
            __version__, protocol.PROTOCOL_VERSION, args.version, args.protocol
        )
        if problem:
            raise OpError(problem, "version")
        return protocol.HelloReply(
            version=__version__, protocol=protocol.PROTOCOL_VERSION, pid=os.getpid()
        )

    async def op_ping(self, args: protocol.Args, client: str | None) -> protocol.PingReply:
        return protocol.PingReply(pong=True, pid=os.getpid(), version=__version__)

    async def op_status(self, args: protocol.Args, client: str | None) -> protocol.StatusReply:
        await self.discovery.first()  # an agent just started has looked for servers once
        return self.status()

    async def op_profiles(
        self, args: protocol.ProfilesArgs, client: str | None
    ) -> list[protocol.ProfileRow]:
        return await asyncio.to_thread(self._refresh_profiles, args)

    async def op_slot_expose(
        self, args: protocol.ExposeArgs, client: str | None
    ) -> protocol.Exposed:
        """Serve a slot to another host's gateway (agent/exposure.py): from its next launch."""
        slot = self.slot_for(args)
        exp = await asyncio.to_thread(self.exposures.set, slot.id, args.address)
        if exp is not None:
            self.add_secret(exp.api_key)
        self.bus.publish(protocol.SlotExposed(client=client, slot=slot.id, address=args.address))
        applied = (
            slot.state == READY and slot.server_host == exp.address and slot.api_key == exp.api_key
            if exp is not None
            else slot.server_host == "127.0.0.1"
        )
        url = None
        if exp is not None and applied:
            host = f"[{exp.address}]" if ":" in exp.address else exp.address
            url = f"http://{host}:{slot.port}"
        return protocol.Exposed(
            slot=slot.id,
            url=url,
            api_key=exp.api_key if exp else None,
            applied=applied,
            profile=slot.profile_name if applied else None,
        )

    async def op_remote_pool(
        self, args: protocol.RemotePoolArgs, client: str | None
    ) -> protocol.PoolStatus:
        """A gateway here whose workers the fleet side names (agent/pools.py, remote pools)."""
        for w in args.workers:
            if w.api_key:
                self.add_secret(w.api_key)
        return msgspec.convert(await self.pools.remote_set(args), protocol.PoolStatus)

    async def op_subscribe(self, args: protocol.Args, client: str | None) -> protocol.Subscribed:
        return protocol.Subscribed(subscribed=True)  # the connection handler registers the queue

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

    def our_pids(self) -> set[int]:
        pids: set[int] = set()
        for s in self.slots.values():
            if s.tree:
                pids |= set(s.tree.seen)
        return pids | self.standbys.pids()

    async def op_logs(self, args: protocol.LogsArgs, client: str | None) -> protocol.LogsReply:
        n = args.lines
        launch_id = args.launch_id
        path: Path | None
        if launch_id:
            if not re.fullmatch(r"[A-Za-z0-9._-]+", str(launch_id)):
                raise OpError(f"bad launch id {launch_id!r}", "invalid")
            path = self.server_log_path(str(launch_id))
        else:
            slot = self.slot_for(args)
            path = slot.log_path
            if path is None:
                logs = sorted(
                    Path(self.recorder.path, SERVERS_DIR).glob("*.log"),
                    key=lambda p: p.stat().st_mtime,
                )
                path = logs[-1] if logs else None
        if path is None or not Path(path).exists():
            raise OpError(
                "no server log yet in this session; start a profile first (`sgltui start PROFILE`)",
                "not_found",
            )
        lines = await asyncio.to_thread(_tail_file, Path(path), n)
        return protocol.LogsReply(
            lines=self._redact_lines(lines), path=str(path), launch_id=Path(path).stem
        )

    async def op_timeline(
        self, args: protocol.TimelineArgs, client: str | None
    ) -> protocol.TimelineReply:
        if self.telemetry is None:
            return protocol.TimelineReply(series={})
        series = self.telemetry.series(args.series, args.since)["series"]
        return protocol.TimelineReply(series=series)

    async def op_shutdown(
        self, args: protocol.ShutdownArgs, client: str | None
    ) -> protocol.ShutdownReply:
        self.stop_servers_on_exit = args.stop_servers
        asyncio.get_running_loop().call_later(0.05, self.shutdown_requested.set)
        return protocol.ShutdownReply(stopping=True, stop_servers=self.stop_servers_on_exit)

    # ---- bench runs and demo load (sgltui/agent/children.py) -----------------------------------

    async def op_bench_start(
        self, args: protocol.BenchStartArgs, client: str | None
    ) -> protocol.BenchStarted:
        return self._child(lambda: self.children.bench_start(args.spec, client))

    async def op_bench_progress(
        self, args: protocol.BenchProgressArgs, client: str | None
    ) -> protocol.Noted:
        return self.children.bench_progress(args, client)

    async def op_bench_stop(
        self, args: protocol.BenchStopArgs, client: str | None
    ) -> protocol.BenchRun:
        try:
            return await self.children.bench_stop(args.run_id)
        except ChildError as exc:
            raise OpError(str(exc), exc.code) from None

    async def op_bench_list(
        self, args: protocol.Args, client: str | None
    ) -> list[protocol.BenchRun]:
        return self.children.bench_list()

    async def op_demo_load(
        self, args: protocol.DemoLoadArgs, client: str | None
    ) -> protocol.DemoLoadReply:
        return await self.children.demo_load(args.on)

    # ---- batch jobs (sgltui/agent/jobs_host.py) ----------------------------------------------

    @staticmethod
    async def _job_op(fn: Callable, args: protocol.Args, client: str | None) -> Any:
        try:
            return await fn(args, client)
        except JobError as exc:
            raise OpError(str(exc), exc.code) from None

    @staticmethod
    def _child(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except ChildError as exc:
            raise OpError(str(exc), exc.code) from None


def _tail_file(path: Path, n: int) -> list[str]:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        block, data = 64 * 1024, b""
        while size > 0 and data.count(b"\n") <= n:
            step = min(block, size)
            size -= step
            fh.seek(size)
            data = fh.read(step) + data
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[-n:] if n > 0 else []


def _public_args(args: protocol.Args) -> dict:
    """The arguments as the session records them (checked, defaults filled in)."""
    items = protocol.args_dict(args)
    out = {k: v for k, v in items.items() if k not in ("profiles_dirs",)}
    if "workers" in out:  # a remote pool's: their keys are secrets, their names are not
        out["workers"] = [w.get("name") if isinstance(w, dict) else w.name for w in out["workers"]]
    return out


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # one part of a status reply must not fail the whole reply
        log.exception("status: %s failed", getattr(fn, "__name__", fn))
        return None
