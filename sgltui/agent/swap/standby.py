"""Standbys: profiles kept warm beside a slot's server, asleep; their lifecycle (add, remove,
list, re-adoption). The warm swap that wakes one is the swap coordinator's (agent/swap/coordinator.py).

No profile setting changes inside a running SGLang server, so a swap in seconds needs a second
server process per profile, asleep: launched with the memory saver (--enable-memory-saver
--enable-weights-cpu-backup, SGLANG_MEMORY_SAVER_CUDA_GRAPH=1), then paused and released (its
weights in pinned host RAM, its KV cache and graphs freed). A standby's server lives in a slot
object of its own (`Slot`, so launching, watching for its exit and stopping are the slot's),
hidden from status and with its own event bus: nothing that watches slots (restart policy,
fronts, pools, telemetry) ever sees a sleeper, so none can call it hung or relaunch it. It only
notices the sleeper's exit (the standby is then `lost`).

    standby add B:  hold the front -> drain A -> pause A -> release A -> launch B beside it (cold)
                    -> canary B (its accept length, the baseline) -> pause B -> release B
                    -> resume A -> continue A -> route            (any failure: A resumed)

A server that was launched without the memory saver cannot sleep: the add stops and relaunches
it with the memory saver (one more cold start, said).
A relaunch with the saver that fails relaunches the command that served before, and the add is
refused (its new sleeper stopped), saying why.
The sleepers are saved in agent-state.json with the slots ("SLOT~PROFILE") and re-adopted,
still asleep, by the next agent (agent/swap/coordinator.py settles one a swap or an add left awake).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.events import EventBus
from sgltui.agent.pools import worker as pool_worker
from sgltui.agent.slot import procs
from sgltui.agent.slot.running_command import Job, Wait
from sgltui.agent.slot.slot import READY, LaunchError, Slot, as_cause
from sgltui.agent.swap import sleeper, standby_room
from sgltui.agent.swap import standby_memory as mem
from sgltui.agent.swap.sleeper import WakeError, can_sleep, with_saver
from sgltui.core import causes

if TYPE_CHECKING:
    from sgltui.agent.hosts import StandbysHost
    from sgltui.agent.slot.resolved import Resolved

log = logging.getLogger("sgltui.agent.standby")

SEP = "~"  # agent-state.json keys a sleeper as SLOT~PROFILE


class _QuietHost:
    """A sleeper's slot host: the agent's, less everything that would make it visible (its own
    event bus, no log pushes or telemetry lines)."""

    def __init__(self, sup: StandbysHost) -> None:
        self.sup = sup
        self.bus = EventBus()
        self.config = sup.config
        self.state_dir = sup.state_dir

    def push_log(self, slot_id: str, launch_id: str, lines: list[str]) -> None:
        pass  # the log file has them; no viewer shows a sleeper's log live

    def server_log_path(self, launch_id: str) -> Any:
        return self.sup.server_log_path(launch_id)

    def learned(self, profile: str) -> dict[str, float] | None:
        return self.sup.learned(profile)

    def record_launch(self, profile: str, durations: dict[str, float]) -> None:
        self.sup.record_launch(profile, durations)

    def telemetry_line(self, slot_id: str, line: str) -> None:
        pass

    async def state_saved(self) -> None:
        await self.sup.state_saved()

    def add_secret(self, secret: str) -> None:
        self.sup.add_secret(secret)


@dataclass
class Standby:
    slot_id: str
    name: str
    server: Slot  # the hidden slot that holds the sleeping server
    state: str = "starting"  # starting | asleep (lost is read off the server)
    host_bytes: int = 0  # measured after its release (0: not yet)
    gpu_bytes: int = 0
    host_estimate: int = 0  # said before it was added (agent/swap/standby_memory.py)
    gpu_estimate: int = 0

    @property
    def key(self) -> str:
        return f"{self.slot_id}{SEP}{self.name}"

    @property
    def alive(self) -> bool:
        return self.server.state == READY and self.server.tree is not None

    async def measure(self) -> None:
        """What it holds asleep, measured (agent/swap/sleeper.py)."""
        self.gpu_bytes, self.host_bytes = await sleeper.held(self.server)
        if not self.host_estimate and self.server.profile is not None:
            said = await asyncio.to_thread(mem.pins_estimate, self.server.profile)
            self.host_estimate = said or 0
        self.gpu_estimate = self.gpu_estimate or mem.DEFAULT_REMAINDER

    def view(self, accept: float | None) -> protocol.StandbyView:
        state = self.state if self.server.state in (READY, "launching") else "lost"
        return protocol.StandbyView(
            profile=self.name,
            state=state,  # type: ignore[arg-type]
            host_bytes=self.host_bytes or self.host_estimate,
            gpu_bytes=self.gpu_bytes or self.gpu_estimate,
            host_estimate_bytes=self.host_estimate,
            gpu_estimate_bytes=self.gpu_estimate,
            measured=bool(self.host_bytes),
            port=self.server.port,
            pid=self.server.tree.pid if self.server.tree else None,
            accept_length=accept,
        )


class Standbys:
    """Every slot's standbys and the standby ops."""

    def __init__(self, sup: StandbysHost) -> None:
        self.sup = sup
        self.by_slot: dict[str, dict[str, Standby]] = {}
        self.accept: dict[str, float] = {}  # profile -> its draft's last measured accept length
        self.reserve = int(sup.agent_config.standby_reserve_gb * 1e9)

    # ---- views and records ----------------------------------------------------------------------
    def of(self, slot_id: str) -> dict[str, Standby]:
        return self.by_slot.setdefault(slot_id, {})

    def views(self, slot_id: str) -> list[protocol.StandbyView]:
        return [sb.view(self.accept.get(sb.name)) for sb in self.of(slot_id).values()]

    def warm(self, slot: Slot, name: str) -> Standby | None:
        sb = self.of(slot.id).get(name)
        return sb if sb is not None and sb.state == "asleep" and sb.alive else None

    def pids(self) -> set[int]:
        out: set[int] = set()
        for sbs in self.by_slot.values():
            for sb in sbs.values():
                if sb.server.tree is not None:
                    out |= set(sb.server.tree.seen)
        return out

    def records(self) -> dict[str, dict]:
        """agent-state.json entries of the sleepers (SLOT~PROFILE), to re-adopt them asleep."""
        out = {}
        for sbs in self.by_slot.values():
            for sb in sbs.values():
                rec = sb.server.record() if sb.state == "asleep" else None
                if rec:
                    rec["standby"] = {
                        "slot": sb.slot_id,
                        "host_bytes": sb.host_bytes,
                        "gpu_bytes": sb.gpu_bytes,
                        "estimate": [sb.host_estimate, sb.gpu_estimate],
                        "accept_length": self.accept.get(sb.name),
                    }
                    out[sb.key] = rec
        return out

    def adopt(self, key: str, record: dict, profile: Any) -> bool:
        """A sleeper an earlier agent left (agent-state.json): taken over, still asleep."""
        meta = record.get("standby") or {}
        slot_id, _, name = key.partition(SEP)
        if slot_id not in self.sup.slots or not name:
            return False
        server = Slot(key, _QuietHost(self.sup))
        if not server.adopt(record, profile):
            return False
        if "released" not in record:  # written before the steps were kept: it was asleep
            server.paused = server.released = True
        sb = Standby(
            slot_id,
            name,
            server,
            "asleep",
            int(meta.get("host_bytes") or 0),
            int(meta.get("gpu_bytes") or 0),
            *[int(v or 0) for v in (meta.get("estimate") or [0, 0])[:2]],
        )
        if meta.get("accept_length"):
            self.accept[name] = float(meta["accept_length"])
        self.of(slot_id)[name] = sb
        return True

    async def close(self, stop_servers: bool) -> None:
        for sbs in self.by_slot.values():
            for sb in sbs.values():
                if stop_servers and sb.server.tree is not None:
                    try:
                        await sb.server.stop("agent", drain="force")
                    except Exception:
                        log.exception("stopping standby %s", sb.key)
                await sb.server.close()

    # ---- ops ----------------------------------------------------------------------------------------
    def _slots(self, args: protocol.StandbyArgs) -> list[Slot]:
        if args.pool:
            pool = self.sup.pools.pool(str(args.pool))
            return [self.sup.slots[s] for s in pool.slots if s in self.sup.slots]
        return [self.sup.slot_for(args)]

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
        ops = self.sup.ops
        async with ops.lock(slot.id):
            ops.refuse_if_busy(slot, "standby add")
            if slot.external is not None:  # agent/slot/attach.py: not ours to put to sleep
                raise OpError(
                    f"slot {slot.id} watches a server sgltui did not start",
                    fix="`sgltui adopt` it or start a profile there before keeping another warm",
                    tui="start a profile there (s) before keeping another warm",
                )
            refused = standby_room.front_off(slot, self.sup.pools)
            if refused:
                raise OpError(f"standby add refused: {refused}")
            refused = pool_worker.refusal(self.sup.pools, slot, "standby add")
            if refused:
                raise OpError(refused, fix=pool_worker.REFUSAL_FIX, tui=pool_worker.REFUSAL_FIX_TUI)
            target = await asyncio.to_thread(self.sup.get_profile, args.profile, args)
            if target.name in self.of(slot.id):
                raise OpError(f"{target.name} is already kept warm on slot {slot.id}")
            if slot.profile_name == target.name and slot.state == READY:
                raise OpError(
                    f"slot {slot.id} serves {target.name} itself",
                    fix="keep another profile warm (`sgltui standby add OTHER`)",
                    tui="highlight another profile and press k",
                )
            target = ops.place(slot, target)
            port = await asyncio.to_thread(self._free_port, target.port)
            target = with_saver(target, port)
            fraction = await sleeper.mem_fraction_now(slot) if slot.state == READY else None
            problem = await asyncio.to_thread(standby_room.check, self, slot, target, fraction)
            if problem:
                raise OpError(problem)
            job = Job("standby", f"standby add {target.name}", client, time.time())
            started = ops.run(slot, job, self._out_of_pool(slot, self._add(slot, target, client)))
            if args.wait:
                return _WaitWithStandbys(slot, started, self)
            return ops.reply(slot, args, started)

    async def op_remove(self, args: protocol.StandbyArgs, client: str | None) -> Any:
        slots = self._slots(args)
        for slot in slots:
            sb = self.of(slot.id).get(args.profile)
            if sb is None:
                kept = ", ".join(self.of(slot.id)) or "none"
                raise OpError(
                    f"{args.profile} is not kept warm on slot {slot.id} (standbys: {kept})",
                    fix="see `sgltui standby list`",
                    tui="the Profiles pane marks the ones kept warm",
                )
            async with self.sup.ops.lock(slot.id):
                self.sup.ops.refuse_if_busy(slot, "standby remove")
                self.of(slot.id).pop(args.profile, None)
                if sb.server.tree is not None:
                    await sb.server.stop(client, drain="force")
                await sb.server.close()
                self.sup.bus.changed()
        mine = next(s for s in self.sup.status().slots if s.id == slots[0].id)
        return protocol.Accepted(slot=mine, accepted=True)

    # ---- checks ------------------------------------------------------------------------------------
    def _free_port(self, base: int) -> int:
        taken = {sb.server.port for sbs in self.by_slot.values() for sb in sbs.values()}
        taken |= {s.port for s in self.sup.slots.values()}
        for port in range(base + 1000, base + 1200):
            if port <= 65535 and port not in taken and procs.port_free("127.0.0.1", port):
                return port
        raise OpError(
            f"no free port near {base + 1000} for a standby", fix="free one and try again"
        )

    async def _out_of_pool(self, slot: Slot, work: Any) -> Any:
        """`work` on the slot with its worker out of its pool's gateway (agent/pools/worker.py)."""
        async with pool_worker.worker_out(self.sup.pools, slot):
            return await work

    def _hidden(self, slot: Slot, name: str) -> Slot:
        return Slot(f"{slot.id}{SEP}{name}", _QuietHost(self.sup))

    # ---- standby add --------------------------------------------------------------------------------
    async def _add(self, slot: Slot, target: Resolved, client: str | None) -> protocol.Outcome:
        ops = self.sup.ops
        t0 = time.monotonic()
        serving = slot.state == READY and slot.tree is not None
        frm = slot.profile_name
        sleeps = serving and can_sleep(slot)
        previous = slot.profile
        slot.begin_swap(frm, frm or target.name, time.time(), True, client)
        slot.swap_step(f"keeping {target.name} warm")
        sb = Standby(slot.id, target.name, self._hidden(slot, target.name))
        self.of(slot.id)[target.name] = sb
        self.sup.bus.changed()
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
                    good, accept, _ = await sleeper.canary(sb.server, self.accept.get(target.name))
                    if accept:
                        self.accept[target.name] = accept
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
                self.of(slot.id).pop(target.name, None)
                if sb.server.tree is not None:
                    await sb.server.stop(client, drain="force")
            self.sup.bus.changed()
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
            await asyncio.to_thread(srv.precheck, target, self.sup.our_pids())
        except LaunchError as exc:
            return exc.cause
        await srv.launch(target, client, self.sup.ops.launch_id(target.name))
        state = await srv.wait_settled()
        return None if state == READY else (srv.cause or {"summary": f"it ended {state}"})

    async def _back(
        self,
        slot: Slot,
        previous: Any,
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
                await self.sup.ops.launch(slot, with_saver(previous), client)
                if await slot.wait_settled() != READY:
                    # the memory saver did not start there: the command that served before
                    return await self._back_without_saver(slot, previous, client, standby)
        except WakeError:
            if not quiet:
                raise
            log.exception("slot %s: the serving server did not come back", slot.id)
        return None

    async def _back_without_saver(
        self, slot: Slot, previous: Any, client: str | None, standby: str
    ) -> dict:
        """`previous` failed to start with the memory saver: its own command again (the one it
        served with). The standby is refused either way: kept, it would hide that the slot's server
        cannot sleep until a warm swap had to stop that server cold."""
        why = slot.cause["summary"] if slot.cause else f"it ended {slot.state}"
        log.warning("slot %s: %s failed with the memory saver: %s", slot.id, previous.name, why)
        await self.sup.ops.launch(slot, previous, client)
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

    # ---- what a launch or a swap asks of them ----------------------------------------------
    def cold_target(self, slot: Slot, target: Resolved) -> Resolved:
        """A launch on a slot with standbys: able to sleep (the warm swap that later leaves it
        keeps it warm), and on a port of its own when a sleeper holds the profile's."""
        sb = self.of(slot.id).get(target.name)
        if sb is not None and not sb.alive:
            self.of(slot.id).pop(target.name)  # lost: the cold launch replaces it
        sleepers = self.of(slot.id)
        if not sleepers:
            return target
        held = {s.server.port for s in sleepers.values() if s.server.tree is not None}
        port = self._free_port(target.port) if target.port in held else None
        return with_saver(target, port)

    def drop(self, slot_id: str, name: str) -> Standby | None:
        """`name` no longer kept warm on the slot (its server is the caller's to stop/close)."""
        return self.of(slot_id).pop(name, None)

    async def keep_asleep(
        self, slot: Slot, name: str, handed: dict, host_bytes: int = 0
    ) -> Standby:
        """A server the slot handed over asleep (Slot.hand_over: a warm swap left it) kept as
        the standby of `name` from now on, measured."""
        srv = self._hidden(slot, name)
        srv.take_over(handed)
        sb = Standby(slot.id, name, srv, "asleep", host_bytes, 0)
        self.of(slot.id)[name] = sb
        await sb.measure()
        return sb


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


def pick_records(saved: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """agent-state.json's slot entries split into (slots, sleepers)."""
    slots = {k: v for k, v in saved.items() if SEP not in k}
    sleepers = {k: v for k, v in saved.items() if SEP in k}
    return slots, sleepers
