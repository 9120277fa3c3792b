"""Pools: host.toml's slots behind one endpoint, and the rolling swap.

A pool of one slot keeps the agent's front (agent/pools/front.py, bound on the pool's port: it holds
requests across that slot's swap). A pool of two or more gets SGLang's model gateway
(agent/pools/gateway.py) on the pool's port; this module keeps its workers in step with the slots:
a slot's server is a worker while it is ready and no swap of it is under way.

The rolling swap of a pool (`swap PROFILE --pool NAME`), one slot at a time:
preflight -> remove the worker from the gateway (DELETE /workers/{id}) -> wait until the
worker's own requests in flight reach 0 (its /v1/loads; smg's "draining" is a 5 s timer),
bounded, then force -> swap the slot (operations: stop, wait for GPU memory, launch, ready)
-> add the worker back (POST /workers) -> wait until the gateway says ready -> next slot.
A slot is taken out only while another worker is routable, so the pool never has zero. A slot
whose swap fails rolls back (the slot's own rollback), is added back, and the roll stops: the
pool serves mixed and its status says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import msgspec

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.pools import gateway as gw_mod
from sgltui.agent.pools import keys as pool_keys
from sgltui.agent.pools import reconcile
from sgltui.agent.pools.gateway import Gateway, GatewayError, stop_gateways
from sgltui.agent.pools.remote import RemotePools
from sgltui.agent.slot.server_url import slot_url
from sgltui.agent.slot.slot import READY, Slot
from sgltui.core import causes
from sgltui.core.placement import Placement, PoolPlace
from sgltui.core.tasks import spawn

if TYPE_CHECKING:
    from sgltui.agent.agent_calls import AgentCalls
    from sgltui.agent.context import AgentContext

log = logging.getLogger("sgltui.agent.pools")

WORKER_READY_S = 60.0  # the gateway sees a ready server within a health check or two
ROLL_DRAIN_S = 30.0  # a rolling swap waits this long for a worker's requests in flight
POLL_S = 1.0  # the gateway's view of its workers, for status


def slot_model(slot: Slot) -> str | None:
    """The model name a slot's server answers as (what smg routes by)."""
    server = getattr(slot.profile, "server", None) or {}
    name = server.get("served-model-name") or server.get("model-path") or server.get("model")
    return str(name) if name else None


class Pools:
    OPS = frozenset({"start", "stop", "restart", "swap", "preflight"})  # ops a pool takes

    def __init__(self, ctx: AgentContext, calls: AgentCalls, placement: Placement | None) -> None:
        self.ctx = ctx
        self.calls = calls  # a rolling swap is each slot's op, as sent
        self.places: dict[str, PoolPlace] = (
            {p.name: p for p in placement.pools} if placement else {}
        )
        self.gateways: dict[str, Gateway] = {}
        self.errors: dict[str, str] = {}
        self.rolls: dict[str, protocol.RollView] = {}
        self.out: set[str] = set()  # slots a roll took out of their gateway
        self.seen: dict[str, dict[str, str]] = {}  # pool -> url -> the gateway's word
        self.samples: dict[str, gw_mod.GatewaySample] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._poll: asyncio.Task[None] | None = None
        self._sync: asyncio.Task[None] | None = None
        self._sync_again = False
        # fleet.toml's pools that span hosts: a gateway here, workers anywhere
        self.remote = RemotePools(ctx)

    # --- which pool -------------------------------------------------------------------------

    def front_port(self, slot_id: str) -> tuple[str, int] | None | bool:
        """Where a slot's front binds: (host, port) of its pool of one; False for a slot of a
        pool of two or more (the gateway is the endpoint); None: the agent's default."""
        for p in self.places.values():
            if slot_id in p.slots:
                return (p.host, p.port) if len(p.slots) == 1 else False
        return None

    def pool(self, name: str) -> PoolPlace:
        if name in self.remote:
            # A pool of other hosts' servers: a job through it targets the pool; this agent's
            # first slot is only its reference slot (agent/jobs/target.py: it is sent to the
            # gateway and does not follow that slot).
            return PoolPlace(name, (next(iter(self.ctx.slots)),), 0)
        place = self.places.get(name)
        if place is None:
            raise _no_pool(name, list(self.places))
        return place

    def members(self, name: str) -> list[Slot]:
        return [self.ctx.slots[s] for s in self.pool(name).slots if s in self.ctx.slots]

    # --- the gateways -----------------------------------------------------------------------

    async def start(self) -> None:
        for name, place in self.places.items():
            if len(place.slots) < 2:
                continue
            gw = gw_mod.for_pool(place, self.ctx.state_dir, self.ctx.bus.publish)
            self.gateways[name] = gw
            # The gateway an earlier agent left (killed -9) serves on: taken over, not ended.
            if await gw.adopt():
                self.ctx.bus.publish(
                    protocol.GatewayStart(pool=name, pid=gw.pid, endpoint=gw.endpoint, adopted=True)
                )
            # Started once a slot is ready (in sync): then the model its "default" alias names
            # is known, and no restart for the alias opens a window of 404s.
            elif any(self.routable(s) for s in self.members(name)):
                await self._start_gateway(name)
            elif not gw_mod.smg_available():
                self.errors[name] = gw_mod.smg_missing()
        if self.gateways:
            self._poll = spawn(self._poll_loop(), "pools: gateway poll")
            self.sync()
        await self.remote.start()  # fleet.toml's pools whose gateway runs here

    async def _start_gateway(self, name: str) -> bool:
        gw = self.gateways[name]
        ready = [s for s in self.members(name) if self.routable(s)]
        if ready:
            gw.model = slot_model(ready[0])
            gw.api_key = pool_keys.wanted(ready, gw.api_key)
        try:
            await gw.start([slot_url(s) for s in ready])
        except GatewayError as exc:
            if self.errors.get(name) != str(exc):  # said once, not at every retry
                self.ctx.bus.publish(protocol.GatewayFailed(pool=name, error=str(exc)))
            self.errors[name] = str(exc)
            return False
        self.errors.pop(name, None)
        self.ctx.bus.publish(protocol.GatewayStart(pool=name, pid=gw.pid, endpoint=gw.endpoint))
        return True

    async def close(self) -> None:
        await stop_gateways(self._poll, self.gateways.values())
        await self.remote.close()

    async def remote_set(self, args: protocol.RemotePoolArgs) -> dict[str, Any]:
        if args.pool in self.places:
            raise OpError(
                f"pool {args.pool} is one of host.toml's",
                "invalid",
                fix="give the fleet.toml pool another name",
            )
        return await self.remote.set(args)

    def routable(self, slot: Slot) -> bool:
        return slot.state == READY and slot.swap is None and slot.id not in self.out

    def sync(self) -> None:
        """Slots changed: bring the gateways' workers in step (in a task; coalesced)."""
        if not self.gateways:
            return
        if self._sync is not None and not self._sync.done():
            self._sync_again = True
            return
        self._sync = spawn(self._sync_all(), "pools: gateway sync")

    async def _sync_all(self) -> None:
        while True:
            self._sync_again = False
            for name in self.gateways:
                try:
                    await self._sync_pool(name)
                except Exception:  # the next change or poll tries again
                    log.exception("pool %s: syncing the gateway's workers", name)
            if not self._sync_again:
                return

    async def _sync_pool(self, name: str) -> None:
        gw = self.gateways[name]
        async with self.lock(name):
            members = self.members(name)
            ready = [s for s in members if self.routable(s)]
            if gw.pid is None and gw.state != "restarting":
                if ready:
                    await self._start_gateway(name)  # the first ready slot (or a retry)
                return
            # The alias for "default" follows the pool's model (smg fixes it at start).
            model = slot_model(ready[0]) if ready else None
            key = pool_keys.wanted(ready, gw.api_key)
            if (
                model
                and (model != gw.model or key != gw.api_key)
                and name not in self.rolls_running()
            ):
                gw.model, gw.api_key = model, key
                gw.urls = [slot_url(s) for s in ready]
                await gw.stop()
                await self._start_gateway(name)
                return
            if key and key != gw.api_key:
                return  # a roll's keyed worker: the roll restarts the gateway with its key first
            # what smg routes, against what it must: the difference mended (agent/pools/reconcile.py)
            observed = await gw.workers()
            if observed is None:
                return  # not answering: its supervisor restarts it with gw.urls
            todo = reconcile.plan(gw, members, self.routable, self.out, observed, slot_url)
            await reconcile.apply(gw, todo, slot_url, self.ctx.bus.publish)

    def refuse_taking_out(self, slot_id: str, doing: str, forced: bool) -> None:
        """A command on one slot (stop, restart) that would leave a rolling pool with no routable
        worker is refused, unless forced: the roll never does that, a manual command must not
        either (503s for every client of the pool)."""
        if forced:
            return
        for name in self.rolls_running():
            members = self.members(name)
            if slot_id not in {m.id for m in members} or not self.routable(self.ctx.slots[slot_id]):
                continue
            if any(m.id != slot_id and self.routable(m) for m in members):
                continue
            held = ", ".join(sorted(self.out & {m.id for m in members})) or "another slot"
            raise OpError(
                f"slot {slot_id} is pool {name}'s only routable worker while its roll has slot "
                f"{held} out: {doing} now leaves the pool none (clients get 503)",
                fix=f"wait for the roll (sgltui status --pool {name}), or add --force",
                tui="wait for the roll (the Slots pane shows it)",
            )

    def rolls_running(self) -> set[str]:
        return {p for p, r in self.rolls.items() if r.state == "rolling"}

    def lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    def _smg_came(self) -> None:
        """A pool that said "smg is not installed" looks again (it may have been installed
        since, with this agent running): the error goes and the gateway starts when a slot is
        ready, no agent restart needed."""
        missing = [
            n for n, e in self.errors.items() if n in self.gateways and e.startswith(gw_mod.SMG)
        ]
        if missing and gw_mod.smg_available():
            for name in missing:
                self.errors.pop(name, None)
            self.sync()

    async def _poll_loop(self) -> None:
        last = time.monotonic()
        while True:
            if time.monotonic() - last >= reconcile.RECONCILE_S:
                last = time.monotonic()
                self.sync()  # compared with smg's word even when nothing changed here
            self._smg_came()
            for name, gw in self.gateways.items():
                if gw.pid is None:
                    continue
                ws = await gw.workers()
                if ws is not None:
                    self.seen[name] = {w.url: w.status for w in ws}
                with contextlib.suppress(Exception):
                    self.samples[name] = await gw.sample()
            await asyncio.sleep(POLL_S)

    # --- status -----------------------------------------------------------------------------

    def telemetry(self) -> dict[str, Any]:
        """The latest gateway metrics by pool, for the timeline (the session) and live viewers."""
        return {
            name: m
            for name, sample in self.samples.items()
            if (m := _metrics(sample)) is not None and self.gateways[name].pid is not None
        }

    def status(self) -> list[dict[str, Any]]:
        out = []
        for name, place in self.places.items():
            members = [self.ctx.slots[s] for s in place.slots if s in self.ctx.slots]
            gw = self.gateways.get(name)
            if gw is not None:
                gateway = {
                    "pid": gw.pid,
                    "state": gw.state if name not in self.errors else "failed",
                }
                seen = self.seen.get(name, {})
                workers = [
                    {
                        "slot": s.id,
                        "url": slot_url(s),
                        "gateway_status": seen.get(slot_url(s))
                        or ("removed" if s.id in self.out else None),
                    }
                    for s in members
                ]
            else:
                front = members[0].front if members else None
                gateway = {
                    "pid": None,
                    "state": "front" if front is not None and not front.error else "none",
                }
                workers = [
                    {"slot": s.id, "url": slot_url(s), "gateway_status": None} for s in members
                ]
            profiles = sorted({s.profile_name for s in members if s.profile_name})
            roll = self.rolls.get(name)
            note = None
            if len(profiles) > 1:
                note = "mixed: " + ", ".join(f"{s.id} runs {s.profile_name}" for s in members)
                if roll and roll.state == "stopped":
                    note += f" (roll stopped at slot {roll.slot}: {roll.error})"
            out.append(
                {
                    "name": name,
                    "endpoint": place.endpoint,
                    "slots": list(place.slots),
                    "gateway": gateway,
                    "workers": workers,
                    "profiles": profiles,
                    "roll": roll,
                    "note": note,
                    "error": self.errors.get(name),
                    "metrics": _metrics(self.samples.get(name)),
                }
            )
        return out + self.remote.status()

    # --- ops on a pool ----------------------------------------------------------------------

    async def op(
        self, op: str, args: PoolArgs, client: str | None
    ) -> protocol.Accepted | protocol.PreflightReply:
        """start / stop / restart of every slot of a pool (concurrently), or a rolling swap."""
        name = str(args.pool)
        if name in self.remote:
            raise OpError(
                f"pool {name} spans hosts (fleet.toml)",
                fix=f"`sgltui fleet pool {op} {name} ...` drives its slots on their hosts",
                tui="`sgltui fleet` drives its slots on their hosts",
            )
        members = self.members(name)
        if isinstance(args, protocol.SwapArgs):
            return await self.roll(name, args, client)
        if not isinstance(args, protocol.StartArgs | protocol.StopArgs | protocol.RestartArgs):
            results = [await self.calls.preflight(_on(args, s), client) for s in members]
            bad = next((r for r in results if not r.ok), None)
            return bad or results[0]
        if not isinstance(args, protocol.StopArgs):  # a start or restart
            # No gateway, no pool: refused before any slot starts (looked up now, not at the
            # agent's start: smg installed since is found).
            if name in self.gateways and not gw_mod.smg_available():
                raise OpError(f"pool {name}: {gw_mod.smg_missing()}", "unavailable")
            self._smg_came()
            # Preflight every slot first: a refusal leaves all of them as they were.
            for s in members:
                pre = await self.calls.preflight(_preflight(args, s), client)
                if not pre.ok:
                    raise OpError(f"slot {s.id}: {pre.error or 'preflight refused'}")
        tasks = [self.calls.call(_on(args, s, wait=True), client) for s in members]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        failed = [(s, r) for s, r in zip(members, results) if isinstance(r, Exception)]
        self.sync()
        if failed:
            line = "; ".join(f"slot {s.id}: {r}" for s, r in failed)
            raise OpError.of([r for _, r in failed], line)
        return self.reply(name)

    def reply(self, name: str, accepted: bool = False) -> protocol.Accepted:
        """A pool op's answer: `slot` is its first slot, `pool` holds every slot and the roll."""
        members = self.members(name)
        return protocol.Accepted(
            slot=members[0].status(),
            accepted=accepted,
            pool=protocol.PoolResult(
                pool=name, slots=[m.status() for m in members], roll=self.rolls.get(name)
            ),
        )

    async def roll(
        self, name: str, args: protocol.SwapArgs, client: str | None
    ) -> protocol.Accepted:
        if name in self.rolls_running():
            raise _rolling_already(name)
        members = self.members(name)
        gw = self.gateways.get(name)
        if gw is None:
            if name in self.errors:
                raise OpError(self.errors[name])
            # A pool of one: its slot's swap, held across by its front.
            await self.calls.swap(_on(args, members[0], wait=True), client)
            return self.reply(name)
        if name in self.errors and gw.pid is None:
            raise OpError(self.errors[name])
        profile = args.profile
        roll = protocol.RollView(state="rolling", profile=profile, started=time.time())
        self.rolls[name] = roll
        self.ctx.bus.publish(
            protocol.PoolRoll(client=client, pool=name, step="begin", profile=profile)
        )
        self.ctx.bus.changed()
        drain_s = ROLL_DRAIN_S
        try:
            for s in members:
                roll.slot = s.id
                if s.profile_name == profile and s.state == READY:
                    roll.done.append(s.id)
                    continue
                pre = await self.calls.preflight(_preflight(args, s), client)
                if not pre.ok:
                    raise _RollStop(s.id, pre.error or "preflight refused")
                url = slot_url(s)
                was_routable = self.routable(s)
                others = [o for o in members if o is not s and self.routable(o)]
                if was_routable and not others:
                    raise _RollStop(
                        s.id,
                        f"slot {s.id} is the pool's only routable worker: start another slot "
                        f"first, or swap it alone (--slot {s.id})",
                    )
                self.out.add(s.id)
                async with self.lock(name):
                    await gw.remove_worker(url)
                self.ctx.bus.publish(
                    protocol.PoolRoll(client=client, pool=name, step="removed", slot=s.id)
                )
                drained: bool = True
                left: int | None = 0
                if was_routable:
                    drained, left = await gw_mod.wait_in_flight_zero(url, drain_s, s.api_key)
                self.ctx.bus.publish(
                    protocol.PoolRoll(
                        client=client,
                        pool=name,
                        step="drained",
                        slot=s.id,
                        drained=drained,
                        left=left,
                    )
                )
                # A keyed profile: the gateway asks for its key before the slot serves it
                # (agent/pools/keys.py), whatever then routes the new worker.
                key = await asyncio.to_thread(pool_keys.key_of, self.ctx, profile, args)
                async with self.lock(name):
                    others = [o for o in members if o is not s and self.routable(o)]
                    await pool_keys.close_door_with(gw, key, others, self.ctx.bus.publish)
                drain = protocol.Drain.WAIT if drained else protocol.Drain.FORCE
                swap_args = _on(args, s, wait=True, drain=drain)
                error = None
                res = None
                try:
                    res = await self.calls.swap(swap_args, client)
                except OpError as exc:
                    error = str(exc)
                if s.profile_name != profile or s.state != READY:
                    error = error or _swap_failure(s, profile, res)
                # Back into the gateway whatever it runs now (the new profile, or the old one
                # after a rollback), once ready; where it runs now (a standby woken has a port
                # of its own: agent/swap/standby.py).
                self.out.discard(s.id)
                url = slot_url(s)
                if s.state == READY:
                    async with self.lock(name):
                        # a keyed worker: the gateway asks for its key first (agent/pools/keys.py)
                        others = [o for o in members if o is not s and self.routable(o)]
                        await pool_keys.close_door(gw, s, others, self.ctx.bus.publish)
                        await gw.add_worker(url, s.api_key)
                    if not await gw.wait_ready(url, WORKER_READY_S):
                        error = (
                            error
                            or f"the gateway did not see slot {s.id} ready within {WORKER_READY_S:.0f} s"
                        )
                if error:
                    raise _RollStop(s.id, error)
                roll.done.append(s.id)
                self.ctx.bus.publish(
                    protocol.PoolRoll(client=client, pool=name, step="done", slot=s.id)
                )
            # The roll's success is what the gateway reports, not the agent's own list.
            self.sync()
            lost = await self._unrouted(name, gw, WORKER_READY_S)
            if lost:
                raise _RollStop(lost[0], f"the gateway does not route slot {lost[0]} (ready)")
        except _RollStop as stop:
            roll.state, roll.slot, roll.error = "stopped", stop.slot, stop.why
            self.ctx.bus.publish(
                protocol.PoolRoll(
                    client=client, pool=name, step="stopped", slot=stop.slot, error=stop.why
                )
            )
            self.sync()
            self.ctx.bus.changed()
            raise OpError(
                f"pool {name}: the roll stopped at slot {stop.slot}: {stop.why}; {_serving(members)}"
            ) from None
        finally:
            self.out.difference_update(m.id for m in members)
        roll.state, roll.slot, roll.finished = "done", None, time.time()
        self.ctx.bus.publish(
            protocol.PoolRoll(
                client=client,
                pool=name,
                step="end",
                profile=profile,
                total_s=roll.finished - (roll.started or roll.finished),
            )
        )
        self.sync()  # the "default" alias follows the new model once the roll is over
        self.ctx.bus.changed()
        return self.reply(name)

    async def _unrouted(self, name: str, gw: Gateway, within: float) -> list[str]:
        """The pool's routable slots the gateway does not report ready, after waiting up to
        `within` seconds for them (the reconciler mends a lost one meanwhile)."""
        deadline = time.monotonic() + within
        while True:
            ws = await gw.workers()
            ready = {w.url for w in ws or [] if w.status == "ready"}
            lost = [s.id for s in self.members(name) if self.routable(s)]
            lost = [i for i in lost if slot_url(self.ctx.slots[i]) not in ready]
            if not lost or time.monotonic() >= deadline:
                return lost
            await asyncio.sleep(gw_mod.POLL_S)

    def serving_profiles(self, name: str) -> list[str]:
        """What the slots a job through pool `name` reaches now run (a job's segment)."""
        if name in self.remote:
            return self.remote.serving_profiles(name)
        if name not in self.places:
            return []
        return sorted(
            {s.profile_name for s in self.members(name) if self.routable(s) and s.profile_name}
        )

    def job_target(self, name: str) -> tuple[str | None, str | None, str]:
        """(url, api_key, why not) for a job sent through pool `name`."""
        if name in self.remote:
            return self.remote.job_target(name)
        place = self.places.get(name)
        if place is None:
            return None, None, f"pool {name} does not exist"
        members = self.members(name)
        gw = self.gateways.get(name)
        if gw is None:  # a pool of one: its front, or its server
            s = members[0]
            if s.state != READY:
                return None, None, f"waiting for slot {s.id} to be ready ({s.state})"
            return slot_url(s), s.api_key, ""
        if gw.pid is None:
            return None, None, self.errors.get(name) or f"pool {name}: the gateway is {gw.state}"
        if not any(self.routable(s) for s in members):
            return None, None, f"waiting for a slot of pool {name} to be ready"
        return gw.endpoint, gw.api_key, ""


def _swap_failure(s: Slot, profile: Any, res: Any) -> str:
    """Why a member's swap did not leave it on `profile`: the swap's own cause (an OOM, a bad
    flag), and what the slot runs now (rolled back), not just its state."""
    result = res.result if isinstance(res, protocol.Accepted) else None
    now = f"slot {s.id} runs {s.profile_name} ({s.state})"
    if result is None:
        return now
    why = causes.line(msgspec.structs.asdict(result.cause)) if result.cause else result.error
    if not why:
        return now
    back = f"; rolled back: {now}" if result.rolled_back else f"; {now}"
    return f"{profile} failed on slot {s.id}: {why}{back}"


def _serving(members: list[Slot]) -> str:
    """What the pool serves after a stopped roll: mixed only when it is."""
    profiles = {m.profile_name for m in members}
    if len(profiles) == 1:
        return f"the pool serves {profiles.pop()} on every slot"
    return f"the pool serves mixed ({', '.join(f'{m.id}={m.profile_name}' for m in members)})"


class _RollStop(Exception):
    def __init__(self, slot: str, why: str) -> None:
        super().__init__(why)
        self.slot = slot
        self.why = why


# What a pool op takes: the op's own arguments, `pool` set (protocol.OPS).
PoolArgs: TypeAlias = (
    protocol.PreflightArgs | protocol.StartArgs | protocol.StopArgs | protocol.RestartArgs
)


A = TypeVar("A", bound=protocol.SlotArgs)


def _on(args: A, slot: Slot, **changes: Any) -> A:
    """The pool op's arguments for one of its slots (the same op, that slot, no pool)."""
    return msgspec.structs.replace(args, slot=slot.id, pool=None, **changes)


def _preflight(args: protocol.LaunchArgs, slot: Slot) -> protocol.PreflightArgs:
    """What a launch on `slot` is checked with first (a restart: the slot's own profile)."""
    profile = args.profile if isinstance(args, protocol.PreflightArgs) else ""
    return protocol.PreflightArgs(
        slot=slot.id, profile=profile, force=args.force, profiles_dirs=args.profiles_dirs
    )


def _metrics(sample: gw_mod.GatewaySample | None) -> dict[str, Any] | None:
    if sample is None:
        return None
    return {
        "restarts": sample.restarts,
        "retries_total": sample.retries_total,
        "errors_total": sample.errors_total,
        "workers": [
            {"url": w.url, "active": w.requests_active, "cb": w.cb_state, "healthy": w.healthy}
            for w in sample.workers
        ],
    }


def _no_pool(name: str, pools: list[str]) -> OpError:
    return OpError(
        f"no pool {name!r}",
        "not_found",
        fix=f"pools: {', '.join(pools) or 'none'} (host.toml; sgltui host show)",
    )


def _rolling_already(name: str) -> OpError:
    return OpError(
        f"pool {name} is rolling already",
        "busy",
        fix=f"wait for it (sgltui status --pool {name})",
        tui="wait for it (the Slots pane shows it)",
    )
