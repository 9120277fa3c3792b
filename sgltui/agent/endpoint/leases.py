"""Leases: profiles the agent endpoint must never evict (agent/endpoint/endpoint.py).

A running batch job holds one on the profile its slot serves, for as long as it runs (read off
the job records each time: nothing to forget). `sgltui lease PROFILE [--for 2h] [--slot S]`
holds one by hand, until it expires or `sgltui lease drop PROFILE`; those are kept in the state
dir (leases.json) so that an agent restarted keeps them. A request that would need to evict a
leased profile waits (bounded) or gets 503 with the holder named; an operator's own swap of a
slot whose profile is leased by hand asks first (`--yes`), as a pinned job's does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.jobs.records import ACTIVE as ACTIVE_JOBS
from sgltui.core.files import write_atomic

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext
    from sgltui.agent.jobs.jobs_host import JobsHost

log = logging.getLogger("sgltui.agent.leases")

FILE = "leases.json"


class Leases:
    def __init__(self, ctx: AgentContext, batch: JobsHost) -> None:
        self.ctx = ctx  # the slots, a profile resolved by name, the event bus
        self.batch = batch  # a running job holds a lease: read off its record
        self.path = ctx.state_dir / FILE
        self.hand: list[protocol.LeaseView] = self._load()

    def _load(self) -> list[protocol.LeaseView]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return [protocol.LeaseView(**x, kind="hand") for x in raw if isinstance(x, dict)]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, TypeError) as exc:
            log.warning("%s unreadable (%s): no lease by hand kept", self.path, exc)
            return []

    def _save(self) -> None:
        doc = [
            {"profile": x.profile, "holder": x.holder, "slot": x.slot, "until": x.until}
            for x in self.hand
        ]
        try:
            write_atomic(self.path, json.dumps(doc, indent=1) + "\n")
        except OSError as exc:
            log.warning("cannot save %s: %s", self.path, exc)

    # ---- what holds -----------------------------------------------------------------------------

    def views(self) -> list[protocol.LeaseView]:
        now = time.time()
        expired = [x for x in self.hand if x.until is not None and x.until <= now]
        if expired:
            self.hand = [x for x in self.hand if x not in expired]
            self._save()
        return [*self._job_leases(), *self.hand]

    def _job_leases(self) -> list[protocol.LeaseView]:
        out = []
        for rec in self.batch.jobs.values():
            if rec.state not in ACTIVE_JOBS or rec.user_paused:
                continue
            slot = self.ctx.slots.get(rec.slot)
            if slot is None or not slot.profile_name:
                continue
            name = rec.name or rec.id
            out.append(
                protocol.LeaseView(
                    profile=slot.profile_name,
                    holder=f"job {name} ({rec.id})",
                    kind="job",
                    slot=slot.id,
                )
            )
        return out

    def held(self) -> dict[str, str]:
        """Profile -> who holds its lease, for the endpoint's policy. A lease bound to a slot
        holds only while the profile serves there."""
        out: dict[str, str] = {}
        for x in self.views():
            if x.slot is not None:
                s = self.ctx.slots.get(x.slot)
                if s is None or s.profile_name != x.profile:
                    continue
            out.setdefault(x.profile, x.holder)
        return out

    def by_hand_on(self, slot_id: str) -> protocol.LeaseView | None:
        """A lease by hand on what the slot serves: the operator's swap of it asks first."""
        slot = self.ctx.slots.get(slot_id)
        if slot is None or not slot.profile_name:
            return None
        for x in self.views():
            if x.kind == "hand" and x.profile == slot.profile_name and x.slot in (None, slot_id):
                return x
        return None

    # ---- ops -------------------------------------------------------------------------------------

    async def op_add(self, args: protocol.LeaseArgs, client: str | None) -> protocol.LeaseView:
        if args.slot is not None and args.slot not in self.ctx.slots:
            raise OpError(
                f"no slot {args.slot!r}", "not_found", fix=f"slots: {', '.join(self.ctx.slots)}"
            )
        resolved = await asyncio.to_thread(self.ctx.get_profile, args.profile, args)
        until = time.time() + args.for_s if args.for_s else None
        lease = protocol.LeaseView(
            profile=resolved.name,
            holder=f"{client or 'agent'} by hand",
            kind="hand",
            slot=args.slot,
            until=until,
        )
        self.hand = [
            x for x in self.hand if not (x.profile == lease.profile and x.slot == lease.slot)
        ]
        self.hand.append(lease)
        self._save()
        self._said(
            "lease", resolved.name, f"lease on {resolved.name} held by {lease.holder}", client
        )
        return lease

    async def op_drop(
        self, args: protocol.LeaseArgs, client: str | None
    ) -> list[protocol.LeaseView]:
        dropped = [
            x
            for x in self.hand
            if x.profile == args.profile and (args.slot is None or x.slot == args.slot)
        ]
        if not dropped:
            jobs = [x for x in self._job_leases() if x.profile == args.profile]
            fix = (
                f"it is held by {jobs[0].holder}: it ends with the job"
                if jobs
                else "see `sgltui lease list`"
            )
            raise OpError(f"no lease by hand on {args.profile!r}", "not_found", fix=fix)
        self.hand = [x for x in self.hand if x not in dropped]
        self._save()
        self._said(
            "lease", args.profile, f"lease on {args.profile} dropped by {client or 'agent'}", client
        )
        return dropped

    async def op_list(self, args: protocol.Args, client: str | None) -> list[protocol.LeaseView]:
        return self.views()

    def _said(self, action: str, profile: str, text: str, client: str | None) -> None:
        self.ctx.bus.publish(
            protocol.EndpointEvent(client=client, action=action, profile=profile, text=text)
        )
        self.ctx.bus.changed()
