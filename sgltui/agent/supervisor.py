"""The agent's brain: slots, the session, telemetry, bench runs, and the commands that drive them.

Commands from every client go through one lock, so two clients never interleave a half-applied
change; a slot runs one job at a time (launch, stop, swap, restart) and a second lifecycle
command on a busy slot is refused with what it is busy with. Jobs run as tasks owned by the
agent, not by the connection: a client that dies mid-command changes nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgltui import __version__, protocol
from sgltui.agent import preflight
from sgltui.agent.children import ChildError, Children
from sgltui.agent.front import Front, FrontConfig
from sgltui.agent.jobs_host import Deferred, JobError, JobsHost
from sgltui.agent.profile_rows import ProfileRows
from sgltui.agent.resolved import ProfileIndex, Resolved, from_record
from sgltui.agent.slot import (
    CRASHED,
    FAILED,
    LAUNCHING,
    READY,
    RUNNING,
    STOPPED,
    LaunchError,
    Slot,
    SlotConfig,
)
from sgltui.agent.state import AgentState, LaunchHistory
from sgltui.core import units
from sgltui.core.redact import Redactor
from sgltui.session.layout import SERVERS_DIR
from sgltui.session.writer import Recorder

log = logging.getLogger("sgltui.agent")


class PushQueue(asyncio.Queue):
    """A subscriber's pushes; `overflowed` once the client stopped reading (then dropped)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize=maxsize)
        self.overflowed = False


class OpError(Exception):
    """A refused or failed command: one line for the client."""


@dataclass
class Job:
    kind: str  # "launch" | "stop" | "swap" | "restart"
    desc: str
    client: str | None
    started: float
    task: asyncio.Task | None = None
    result: dict | None = None


class Supervisor:
    def __init__(
        self,
        state_dir: Path,
        socket_path: Path,
        profiles_dirs: list[Path] | None = None,
        config: SlotConfig | None = None,
        slot_ids: tuple[str, ...] = ("0",),
        session_dir: Path | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.socket_path = socket_path
        self.profiles_dirs = list(profiles_dirs or [])
        self.index = ProfileIndex(self.profiles_dirs)
        self._profiles_refresh: asyncio.Task | None = None
        self.config = config or SlotConfig.from_env()
        self.slots: dict[str, Slot] = {sid: Slot(sid, self) for sid in slot_ids}
        self.jobs: dict[str, Job] = {}
        self.started = time.time()
        self.recorder: Any = None
        self.telemetry: Any = None
        self.redactor = Redactor()
        self.history = LaunchHistory(state_dir)
        self.agent_state = AgentState(state_dir)
        self.subscribers: set[PushQueue] = set()
        self.children = Children(self.emit, socket_path, state_dir, lambda: self.recorder)
        self.batch = JobsHost(self)  # batch jobs (sgltui/agent/jobs_host.py)
        self.front_config = FrontConfig.from_env(dict(os.environ))
        self.shutdown_requested = asyncio.Event()
        self.stop_servers_on_exit = False
        self._lock = asyncio.Lock()
        self._session_dir_override = session_dir
        self._profiles_cache: list[dict] = []
        self.profile_rows = ProfileRows()
        self._learned_cache: dict[str, dict | None] = {}
        self._last_maintain = 0.0
        self._profiles_at = 0.0
        self._state_save_failing = False
        self._state_retry: asyncio.TimerHandle | None = None

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
        self.emit(
            "agent.start",
            pid=os.getpid(),
            version=__version__,
            session_dir=str(self.recorder.path),
            reopened=reopened,
            state_dir=str(self.state_dir),
        )
        for slot_id, record in (saved.get("slots") or {}).items():
            slot = self.slots.get(slot_id) or self.slots.setdefault(slot_id, Slot(slot_id, self))
            # Exactly what the earlier agent ran (its rollback target), not today's file.
            fresh = await asyncio.to_thread(self._try_profile, record.get("profile"))
            profile = from_record(record.get("resolved_profile"), fresh)
            try:
                ok = slot.adopt(record, profile)
            except Exception as exc:  # a corrupt record must not keep the agent from starting
                log.warning("cannot adopt slot %s: %s", slot_id, exc, exc_info=True)
                ok = False
            self.emit(
                "agent.adopt",
                slot=slot_id,
                ok=ok,
                profile=record.get("profile"),
                launch_id=record.get("launch_id"),
                pid=(record.get("tree") or {}).get("pid"),
                state=slot.state if ok else None,
            )
        self.state_changed()
        await asyncio.to_thread(self._refresh_profiles)
        await self.batch.start()  # after the slots: a resumed job finds its server

    async def _start_fronts(self) -> None:
        """One front endpoint per slot, on FrontConfig.port + the slot's index (agent/front.py)."""
        cfg = self.front_config
        if cfg.port is None:
            return
        for i, slot in enumerate(self.slots.values()):
            front = Front(slot.id, cfg.host, cfg.port + i, cfg, on_event=self._front_event)
            await front.start()  # a port already taken leaves front.error for status to show
            slot.front = front

    def _front_event(self, type: str, slot: str | None = None, **fields: Any) -> None:
        s = self.slots.get(slot or "")
        self.emit(type, client=s.client if s else None, slot=slot, **fields)

    def _sync_front(self, slot: Slot) -> None:
        """Point the slot's front at what the slot runs: a ready server gets the requests; while a
        swap or a launch is on they are held (bounded); otherwise they get 503 at once."""
        front = slot.front
        if front is None or front.error:
            return
        swapping = bool(slot.swap) and (slot.swap or {}).get("step") != "failed"
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
            self.telemetry = Telemetry(on_sample=self._on_sample, on_capacity=self._on_capacity)
            await self.telemetry.start()
        except Exception:
            log.exception("telemetry failed to start; continuing without it")
            self.telemetry = None

    async def close(self) -> None:
        stop_servers = self.stop_servers_on_exit
        for job in list(self.jobs.values()):
            if job.task and not job.task.done() and not stop_servers:
                job.task.cancel()
        await self.batch.close()
        if stop_servers:
            for slot in self.slots.values():
                if slot.state != STOPPED:
                    try:
                        await slot.stop("agent", drain="force")
                    except Exception:
                        log.exception("stopping slot %s", slot.id)
        await self.children.stop_all()
        for slot in self.slots.values():
            await slot.close()
            if slot.front is not None:
                await slot.front.close()
        self.state_changed()
        self.emit(
            "agent.stop",
            stop_servers=stop_servers,
            left_running=[s.id for s in self.slots.values() if s.state in RUNNING],
        )
        if self.telemetry is not None:
            try:
                await self.telemetry.stop()
            except Exception:
                log.exception("telemetry stop")
        if self.recorder is not None:
            self.recorder.close()

    # ---- what slots call back (SlotHost) ------------------------------------------------------

    def emit(
        self, type: str, client: str | None = None, slot: str | None = None, **fields: Any
    ) -> dict:
        try:
            event = self.recorder.event(type, client=client, slot=slot, **fields)
        except Exception:  # the recorder promises not to raise; do not let it take the agent down
            log.exception("recording event %s", type)
            event = {
                "v": 1,
                "ts": time.time(),
                "type": type,
                "client": client,
                "slot": slot,
                **fields,
            }
        self.broadcast("event", event)
        return event

    def broadcast(self, kind: str, data: Any) -> None:
        msg = {"push": kind, "data": data}
        for q in list(self.subscribers):
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
        if self.subscribers:
            self.broadcast(
                "log", {"slot": slot_id, "launch_id": launch_id, "lines": self._redact_lines(lines)}
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

    def telemetry_attach(self, slot: Slot) -> None:
        if self.telemetry is not None and slot.tree is not None:
            try:
                self.telemetry.attach(
                    slot.id,
                    slot.tree.pid,
                    f"http://{_connect_host(slot.server_host)}:{slot.port}",
                    slot.api_key,
                    tp_size=slot.tp_size,
                )
            except Exception:
                log.exception("telemetry attach")

    def telemetry_detach(self, slot_id: str) -> None:
        if self.telemetry is not None:
            try:
                self.telemetry.detach(slot_id)
            except Exception:
                log.exception("telemetry detach")

    def telemetry_line(self, slot_id: str, line: str) -> None:
        if self.telemetry is not None:
            try:
                self.telemetry.on_log_line(slot_id, line)
            except Exception:
                log.exception("telemetry log line")

    def state_changed(self) -> None:
        """Save the slots to re-adopt. A failed save (full disk) keeps the last good file, is
        said once per outage, and is retried every second until the disk takes it."""
        for slot in self.slots.values():
            self._sync_front(slot)
        records = {sid: r for sid, s in self.slots.items() if (r := s.record())}
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
            self._retry_state_save()
            return
        if self._state_save_failing:
            log.info("%s written again", self.agent_state.path)
        self._state_save_failing = False

    def _retry_state_save(self) -> None:
        if self._state_retry is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        def retry() -> None:
            self._state_retry = None
            self.state_changed()

        self._state_retry = loop.call_later(1.0, retry)

    def _on_capacity(self, slot_id: str, card: dict) -> None:
        slot = self.slots.get(slot_id)
        self.emit(
            "capacity",
            client=slot.client if slot else None,
            slot=slot_id,
            launch_id=slot.launch_id if slot else None,
            card=card,
        )

    def _on_sample(self, sample: dict) -> None:
        try:
            self.recorder.sample(sample)
        except Exception:
            log.exception("recording sample")
        self.broadcast("sample", sample)

    # ---- profiles ------------------------------------------------------------------------------

    def _dirs(self, args: dict) -> list[Path]:
        extra = [Path(d).expanduser() for d in (args.get("profiles_dirs") or [])]
        return self.profiles_dirs + [d for d in extra if d not in self.profiles_dirs]

    def _extra_dirs(self, args: dict) -> list[Path]:
        return [d for d in self._dirs(args) if d not in self.profiles_dirs]

    def _get_profile(self, name: str | None, args: dict) -> Resolved:
        """Resolve once (blocking file reads: call from a worker thread)."""
        from sgltui.core.profiles import ProfileError

        if not name or not isinstance(name, str):
            raise OpError(
                "a profile name is required, e.g. `sgltui start demo-mtp` (see `sgltui profiles list`)"
            )
        try:
            return self.index.resolve(name, self._extra_dirs(args))
        except ProfileError as exc:
            raise OpError(str(exc).splitlines()[0] if str(exc) else f"bad profile {name}") from None

    def _try_profile(self, name: str | None) -> Resolved | None:
        if not name:
            return None
        try:
            return self._get_profile(name, {})
        except OpError:
            return None

    def _current(self, slot: Slot) -> preflight.Current:
        """What a launch on `slot` replaces, for the preflight checks."""
        mine = set(slot.tree.seen) if slot.tree and slot.state != STOPPED else set()
        others = self._our_pids() - mine
        return preflight.Current(
            host=slot.server_host if mine else None,
            port=slot.port if mine else None,
            pids=frozenset(mine),
            other_pids=frozenset(others),
        )

    async def _accept(self, slot: Slot, name: str | None, args: dict) -> Resolved:
        """Resolve `name` once and preflight it, before anything running is touched. A failed
        check refuses the command with its one line."""
        force = _force_arg(args)
        target = await asyncio.to_thread(self._get_profile, name, args)
        checks = await asyncio.to_thread(preflight.run, target, self._current(slot), force)
        self.emit(
            "preflight",
            slot=slot.id,
            profile=target.name,
            ok=preflight.first_failure(checks) is None,
            checks=[c.to_dict() for c in checks],
        )
        failed = preflight.first_failure(checks)
        if failed:
            raise OpError(failed.line())
        return target

    def _refresh_profiles(self, args: dict | None = None) -> list[dict]:
        """Rescan the profile folders (blocking: from a worker thread)."""
        try:
            self.index.rescan(self._extra_dirs(args or {}))
            profs = self.index.profiles()
        except (OSError, ValueError) as exc:
            log.warning("cannot list profiles: %s", exc)
            return self._profiles_cache
        self._profiles_at = time.monotonic()
        from sgltui.core.validate import key_clashes

        self._profiles_cache = self.profile_rows.rows(
            profs, self.index.broken(), key_clashes(profs.values()), self._slot0_pids()
        )
        return self._profiles_cache

    def _slot0_pids(self) -> frozenset[int]:
        """The processes of the server a profile key replaces (slot 0's), from a worker
        thread: their RAM counts as free for the host-pool mark."""
        slot = self.slots.get("0")
        if slot is None:
            return frozenset()
        try:
            return self._current(slot).pids
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

    def status(self) -> dict:
        slots = []
        for slot in self.slots.values():
            st = slot.status()
            if self.telemetry is not None:
                st["capacity"] = _safe(functools.partial(self.telemetry.capacity, slot.id))
            job = self.jobs.get(slot.id)
            st["busy"] = job.desc if job and job.task and not job.task.done() else None
            slots.append(st)
        tele = None
        if self.telemetry is not None:
            tele = _safe(self.telemetry.snapshot)
        if tele is None:
            tele = {
                "ts": time.time(),
                "gpus": [],
                "gpu_source": {"kind": "none", "message": "telemetry not running"},
                "host": {},
                "engine": {},
            }
        if time.monotonic() - self._profiles_at > 5.0:
            self._refresh_profiles_soon()  # a new or edited profile file shows up by itself
        return {
            "agent": {
                "pid": os.getpid(),
                "version": __version__,
                "started": self.started,
                "state_dir": str(self.state_dir),
                "session_dir": str(self.recorder.path),
                "socket": str(self.socket_path),
                "disk": _safe(lambda: self.recorder.disk) or {"ok": True, "error": None},
                "demo_load": self.children.demo_on,
            },
            "slots": slots,
            "profiles": self._profiles_cache,
            "telemetry": tele,
            "bench": self.children.latest_bench(),
            "jobs": self.batch.views(),
        }

    # ---- commands ------------------------------------------------------------------------------

    def _handler(self, op: str) -> Callable | None:
        if op not in protocol.OPS:
            return None
        if op.startswith("job_"):  # the batch jobs' ops: jobs_host.py's op_<name>
            fn = getattr(self.batch, f"op_{op.removeprefix('job_')}", None)
            return None if fn is None else functools.partial(self._job_op, fn)
        return getattr(self, f"op_{op}", None)

    async def handle(self, op: str, args: dict, client: str | None) -> Any:
        # The ops and their arguments' types are protocol.OPS; the server checked `args` already.
        handler = self._handler(op)
        if handler is None:
            raise OpError(f"unknown op {op!r}; this agent knows: {', '.join(sorted(protocol.OPS))}")
        if op in protocol.READ_ONLY_OPS:  # no "command" event: they would drown the session log
            return await handler(args, client)
        async with self._lock:
            self.emit(
                "command", client=client, slot=args.get("slot"), op=op, args=_public_args(args)
            )
            try:
                result = await handler(args, client)
            except OpError as exc:
                self.emit(
                    "command.refused", client=client, slot=args.get("slot"), op=op, reason=str(exc)
                )
                raise
        if isinstance(result, (_Wait, Deferred)):
            try:
                return await result.wait()
            except JobError as exc:
                raise OpError(str(exc)) from None
        return result

    async def op_hello(self, args: dict, client: str | None) -> dict:
        problem = protocol.version_mismatch(
            __version__, protocol.PROTOCOL_VERSION, args["version"], args["protocol"]
        )
        if problem:
            raise OpError(problem)
        return {"version": __version__, "protocol": protocol.PROTOCOL_VERSION, "pid": os.getpid()}

    async def op_ping(self, args: dict, client: str | None) -> dict:
        return {"pong": True, "pid": os.getpid(), "version": __version__}

    async def op_status(self, args: dict, client: str | None) -> dict:
        return self.status()

    async def op_profiles(self, args: dict, client: str | None) -> list[dict]:
        return await asyncio.to_thread(self._refresh_profiles, args)

    async def op_subscribe(self, args: dict, client: str | None) -> dict:
        return {"subscribed": True}  # the connection handler registers the queue

    def _slot(self, args: dict) -> Slot:
        sid = str(args.get("slot", "0"))
        if sid not in self.slots:
            raise OpError(f"no slot {sid!r}; slots: {', '.join(self.slots)}")
        return self.slots[sid]

    def _busy(self, slot: Slot) -> Job | None:
        job = self.jobs.get(slot.id)
        return job if job and job.task and not job.task.done() else None

    def _refuse_if_busy(self, slot: Slot, what: str) -> None:
        job = self._busy(slot)
        if job:
            ago = time.time() - job.started
            raise OpError(
                f"{what} refused: slot {slot.id} is busy with {job.desc} (by {job.client or 'agent'}, "
                f"{units.duration(ago)} ago); wait for it or run `sgltui stop`"
            )

    def _refuse_if_pinned(self, slot: Slot, args: dict, what: str) -> None:
        """A pinned batch job asks first: the swap needs confirm=true (`--yes`)."""
        rec = self.batch.pinned_on(slot.id)
        if rec is not None and not args.get("confirm"):
            raise OpError(
                f"{what} refused: batch job {rec['name']} ({rec['id']}) is pinned to slot {slot.id}; "
                f"confirm with `--yes` (the job pauses and resumes on the new server) "
                f"or unpin it with `sgltui job set --unpin`"
            )

    def _run_job(self, slot: Slot, job: Job, coro) -> Job:
        job.task = asyncio.get_running_loop().create_task(
            self._job_wrapper(slot, job, coro), name=f"job-{slot.id}-{job.kind}"
        )
        self.jobs[slot.id] = job
        return job

    async def _job_wrapper(self, slot: Slot, job: Job, coro) -> dict:
        try:
            job.result = await coro
        except asyncio.CancelledError:
            job.result = {"cancelled": True}
            raise
        except Exception as exc:
            log.exception("job %s on slot %s", job.desc, slot.id)
            job.result = {"error": f"{type(exc).__name__}: {exc}"}
            if slot.swap:  # a swap that broke is over: its front must not hold any longer
                slot.swap = dict(slot.swap, step="failed")
                self.state_changed()
        return job.result

    def _launch_id(self, profile_name: str) -> str:
        base = time.strftime("%Y%m%d-%H%M%S") + "-" + re.sub(r"[^A-Za-z0-9._-]", "_", profile_name)
        candidate, n = base, 1
        servers = Path(self.recorder.path) / SERVERS_DIR
        # Checked directly: the recorder's server_log_path() creates the file it names.
        while (servers / f"{candidate}.log").exists():
            n += 1
            candidate = f"{base}-{n}"
        return candidate

    def _our_pids(self) -> set[int]:
        pids: set[int] = set()
        for s in self.slots.values():
            if s.tree:
                pids |= set(s.tree.seen)
        return pids

    async def _launch(self, slot: Slot, profile: Any, client: str | None) -> None:
        """Pre-check and spawn; a refused pre-check leaves the slot failed with the cause."""
        try:
            await asyncio.to_thread(slot.precheck, profile, self._our_pids())
            slot.launch(profile, client, self._launch_id(profile.name))
        except LaunchError as exc:
            slot.refuse(profile, client, exc.cause)

    async def op_start(self, args: dict, client: str | None) -> Any:
        slot = self._slot(args)
        self._refuse_if_busy(slot, "start")
        if slot.state in RUNNING:
            raise OpError(
                f"slot {slot.id} already runs {slot.profile_name} ({slot.state}); "
                f"use `sgltui swap PROFILE` or `sgltui stop` first"
            )
        profile = await self._accept(slot, args.get("profile"), args)
        try:
            await asyncio.to_thread(slot.precheck, profile, self._our_pids())
        except LaunchError as exc:
            raise OpError(str(exc)) from None
        slot.swap = None
        slot.launch(profile, client, self._launch_id(profile.name))

        async def job() -> dict:
            state = await slot.wait_settled()
            return {"state": state, "cause": slot.cause}

        self._run_job(slot, Job("launch", f"launch of {profile.name}", client, time.time()), job())
        return self._reply(slot, args)

    async def op_preflight(self, args: dict, client: str | None) -> dict:
        """The checks a start/swap of `profile` on the slot would run, all of them, stopping
        nothing: for the TUI's swap dialog and `--dry-run`."""
        slot = self._slot(args)
        target = await asyncio.to_thread(self._get_profile, args.get("profile"), args)
        checks = await asyncio.to_thread(
            preflight.run, target, self._current(slot), _force_arg(args)
        )
        failed = preflight.first_failure(checks)
        return {
            "profile": target.name,
            "launcher": target.launcher,
            "ok": failed is None,
            "error": failed.line() if failed else None,
            "checks": [c.to_dict() for c in checks],
            "resolved": target.describe(),
        }

    async def op_stop(self, args: dict, client: str | None) -> Any:
        slot = self._slot(args)
        drain = _drain_arg(args)
        timeout = _num_arg(args, "timeout", 30.0)
        running = self._busy(slot)
        if running and running.kind == "stop":
            raise OpError(
                f"slot {slot.id} is already stopping (by {running.client or 'agent'}); wait for it"
            )
        if running and running.task is not None:  # a stop aborts a launch or a swap (no rollback)
            running.task.cancel()
            try:
                await running.task
            except asyncio.CancelledError:
                pass
            except Exception:  # the op's own failure; the stop goes on
                log.exception("slot %s: the cancelled %s failed", slot.id, running.desc)
            if slot.swap:
                slot.swap = dict(slot.swap, step="failed")
                self.emit(
                    "swap.done",
                    client=client,
                    slot=slot.id,
                    **{"from": slot.swap.get("from"), "to": slot.swap.get("to")},
                    ok=False,
                    rolled_back=False,
                    aborted=True,
                    timings_s={},
                )
        if slot.state == STOPPED and slot.tree is None:
            raise OpError(f"slot {slot.id} is not running anything")

        async def job() -> dict:
            # batch jobs stop sending first (their requests finish, or are re-sent later)
            await self.batch.before_swap(slot.id, force=drain == "force")
            try:
                report = await slot.stop(client, drain=drain, timeout=timeout)
            finally:
                self.batch.after_swap(slot.id)  # they wait for the slot to be ready again
            return {"state": slot.state, "report": report}

        self._run_job(slot, Job("stop", f"stop of {slot.profile_name}", client, time.time()), job())
        return self._reply(slot, args)

    async def op_restart(self, args: dict, client: str | None) -> Any:
        slot = self._slot(args)
        self._refuse_if_busy(slot, "restart")
        if not slot.profile_name:
            raise OpError(f"slot {slot.id} has never run a profile; use `sgltui start PROFILE`")
        # Restart re-reads the profile on purpose (that is how an edit is applied) and says so.
        before = slot.profile if isinstance(slot.profile, Resolved) else None
        source = str(before.source) if before is not None and before.source else None
        profile = await self._accept(slot, slot.profile_name, args)
        changed = before is not None and before.content_hash != profile.content_hash
        if before is not None and changed:
            self.emit(
                "profile.changed",
                client=client,
                slot=slot.id,
                profile=profile.name,
                source=source,
                old_hash=before.content_hash,
                new_hash=profile.content_hash,
            )
        self._refuse_if_pinned(slot, args, "restart")
        self._start_swap(
            slot, profile, client, rollback=False, drain=_drain_arg(args), kind="restart"
        )
        reply = self._reply(slot, args)
        if isinstance(reply, dict):
            reply["profile_changed"] = changed
        return reply

    async def op_swap(self, args: dict, client: str | None) -> Any:
        slot = self._slot(args)
        job = self._busy(slot)
        if job and job.kind == "swap":
            ago = time.time() - job.started
            raise OpError(
                f"swap refused: {job.desc} is already running (by {job.client or 'agent'}, {units.duration(ago)} ago); "
                f"wait for it to finish"
            )
        self._refuse_if_busy(slot, "swap")
        name = args.get("profile")
        if slot.state == READY and slot.profile_name == name:
            raise OpError(
                f"slot {slot.id} already runs {name}; use `sgltui restart` to relaunch it"
            )
        profile = await self._accept(slot, name, args)
        if slot.state == READY and slot.profile_name == profile.name:
            raise OpError(
                f"slot {slot.id} already runs {profile.name}; use `sgltui restart` to relaunch it"
            )
        rollback = args.get("rollback", True)
        if not isinstance(rollback, bool):
            raise OpError("rollback must be true or false")
        self._refuse_if_pinned(slot, args, "swap")
        self._start_swap(
            slot, profile, client, rollback=rollback, drain=_drain_arg(args), kind="swap"
        )
        return self._reply(slot, args)

    def _start_swap(
        self, slot: Slot, profile: Any, client: str | None, rollback: bool, drain: str, kind: str
    ) -> None:
        old = slot.profile_name if slot.state in RUNNING else None
        desc = (
            f"{kind} {old or '-'} -> {profile.name}"
            if kind == "swap"
            else f"restart of {profile.name}"
        )
        job = Job(kind, desc, client, time.time())
        slot.swap = {
            "from": old,
            "to": profile.name,
            "step": "stopping",
            "started_at": job.started,
            "rollback": rollback,
            "client": client,
        }
        # Move the state now, before replying: whoever reads status next must see the swap.
        slot.client = client
        self._run_job(
            slot, job, self._swap(slot, profile, old, client, rollback, drain, job.started)
        )

    async def _swap(
        self,
        slot: Slot,
        target: Any,
        old: str | None,
        client: str | None,
        rollback: bool,
        drain: str,
        started: float,
    ) -> dict:
        t0 = time.monotonic()
        timings: dict[str, float] = {}
        frm, to = old, target.name
        # Rollback relaunches exactly what ran (resolved when it was accepted), even if its file
        # has been edited or deleted since.
        previous = slot.profile if old and slot.profile is not None else None

        def step(name: str) -> None:
            slot.swap = dict(slot.swap or {}, step=name)
            self.emit(
                "swap.step",
                client=client,
                slot=slot.id,
                **{"from": frm, "to": to},
                step=name,
                elapsed_s=round(time.monotonic() - t0, 3),
            )
            self.state_changed()

        # Batch jobs on this slot stop sending and let (or, forced, make) their requests in
        # flight finish before the server goes; they resume on the new one (after_swap below).
        await self.batch.before_swap(slot.id, force=drain == "force")
        if slot.front is not None:
            # From here new requests wait at the front (agent/front.py): the old server only
            # drains. Not before the jobs have paused: their requests held here would be in
            # flight for them, and they wait for those to finish.
            slot.front.hold(f"slot {slot.id}: {frm or '-'} -> {to}", held_from=slot.launch_id)
        if slot.tree is not None and slot.state != STOPPED:
            report = await slot.stop(client, drain=drain, on_step=step)
            timings.update(report["timings_s"])
            if report.get("problems"):
                log.warning("swap: %s", "; ".join(report["problems"]))
        step("launching")
        t_launch = time.monotonic()
        await self._launch(slot, target, client)
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
            if slot.tree is not None and slot.state not in (STOPPED,):
                await slot.stop(client, drain="force")
            if previous is None:
                step("failed")
            else:
                await self._launch(slot, previous, client)
                back = await slot.wait_settled()
                rolled_back = back == READY
                step("ready" if rolled_back else "failed")
            # A healthy rolled-back slot has no cause; the failure stays in last_failure.
            slot.keep_failure(failure)
            self.emit(
                "swap.failure",
                client=client,
                slot=slot.id,
                **{"from": frm, "to": to},
                cause=failure,
            )
        else:
            step("failed")
        timings["total"] = round(time.monotonic() - t0, 3)
        self.emit(
            "swap.done",
            client=client,
            slot=slot.id,
            **{"from": frm, "to": to},
            ok=ok,
            rolled_back=rolled_back,
            timings_s=timings,
        )
        slot.swap = None  # None means "no swap in progress" to every viewer
        self.batch.after_swap(slot.id)
        slot.last_swap = {
            "from": frm,
            "to": to,
            "ok": ok,
            "rolled_back": rolled_back,
            "timings_s": timings,
            "cause": None if ok else (failure or slot.cause),
            "finished_at": time.time(),
            "client": client,
        }
        self.state_changed()
        return {
            "state": slot.state,
            "ok": ok,
            "rolled_back": rolled_back,
            "timings_s": timings,
            "cause": None if ok else (failure if rolled_back else slot.cause),
        }

    def _reply(self, slot: Slot, args: dict) -> Any:
        if args.get("wait"):
            return _Wait(self, slot)
        return {"slot": slot.status(), "accepted": True}

    async def op_logs(self, args: dict, client: str | None) -> dict:
        n = int(_num_arg(args, "lines", 200))
        launch_id = args.get("launch_id")
        path: Path | None
        if launch_id:
            if not re.fullmatch(r"[A-Za-z0-9._-]+", str(launch_id)):
                raise OpError(f"bad launch id {launch_id!r}")
            path = self.server_log_path(str(launch_id))
        else:
            slot = self._slot(args)
            path = slot.log_path
            if path is None:
                logs = sorted(
                    Path(self.recorder.path, SERVERS_DIR).glob("*.log"),
                    key=lambda p: p.stat().st_mtime,
                )
                path = logs[-1] if logs else None
        if path is None or not Path(path).exists():
            raise OpError(
                "no server log yet in this session; start a profile first (`sgltui start PROFILE`)"
            )
        lines = await asyncio.to_thread(_tail_file, Path(path), n)
        return {"lines": self._redact_lines(lines), "path": str(path), "launch_id": Path(path).stem}

    async def op_timeline(self, args: dict, client: str | None) -> dict:
        if self.telemetry is None:
            return {"series": {}}
        series = self.telemetry.series(args.get("series"), args.get("since"))
        return (
            series if isinstance(series, dict) and "series" in series else {"series": series or {}}
        )

    async def op_shutdown(self, args: dict, client: str | None) -> dict:
        self.stop_servers_on_exit = bool(args.get("stop_servers", False))
        asyncio.get_running_loop().call_later(0.05, self.shutdown_requested.set)
        return {"stopping": True, "stop_servers": self.stop_servers_on_exit}

    # ---- bench runs and demo load (sgltui/agent/children.py) -----------------------------------

    async def op_bench_start(self, args: dict, client: str | None) -> dict:
        return self._child(lambda: self.children.bench_start(args.get("spec"), client))

    async def op_bench_progress(self, args: dict, client: str | None) -> dict:
        return self.children.bench_progress(args, client)

    async def op_bench_stop(self, args: dict, client: str | None) -> dict:
        try:
            return await self.children.bench_stop(args.get("run_id"))
        except ChildError as exc:
            raise OpError(str(exc)) from None

    async def op_bench_list(self, args: dict, client: str | None) -> list[dict]:
        return self.children.bench_list()

    async def op_demo_load(self, args: dict, client: str | None) -> dict:
        return await self.children.demo_load(bool(args.get("on", True)))

    # ---- batch jobs (sgltui/agent/jobs_host.py) ----------------------------------------------

    @staticmethod
    async def _job_op(fn: Callable, args: dict, client: str | None) -> Any:
        try:
            return await fn(args, client)
        except JobError as exc:
            raise OpError(str(exc)) from None

    @staticmethod
    def _child(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except ChildError as exc:
            raise OpError(str(exc)) from None


class _Wait:
    """A command reply deferred until the slot's job is over (the `wait` argument), computed
    outside the command lock so other clients are not held up."""

    def __init__(self, sup: Supervisor, slot: Slot) -> None:
        self.sup, self.slot = sup, slot

    async def wait(self) -> dict:
        job = self.sup.jobs.get(self.slot.id)
        result = None
        if job and job.task:
            try:
                result = await asyncio.shield(job.task)
            except asyncio.CancelledError:
                result = {"cancelled": True}
        return {"slot": self.slot.status(), "result": result or job and job.result}


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


def _drain_arg(args: dict) -> str:
    drain = args.get("drain", "wait")
    if drain not in ("wait", "force"):
        raise OpError(f"drain must be 'wait' or 'force', not {drain!r}")
    return drain


def _force_arg(args: dict) -> frozenset[str]:
    raw = args.get("force") or []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
        raise OpError("force must be a list of check names")
    unknown = [x for x in raw if x not in preflight.CHECKS]
    if unknown:
        raise OpError(
            f"unknown preflight check {unknown[0]!r}; checks: {', '.join(preflight.CHECKS)}"
        )
    return frozenset(raw)


def _num_arg(args: dict, name: str, default: float) -> float:
    raw = args.get(name, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise OpError(f"{name} must be a number, not {raw!r}") from None
    if value < 0:
        raise OpError(f"{name} must not be negative")
    return value


def _public_args(args: dict) -> dict:
    return {k: v for k, v in args.items() if k not in ("profiles_dirs",)}


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # one part of a status reply must not fail the whole reply
        log.exception("status: %s failed", getattr(fn, "__name__", fn))
        return None
