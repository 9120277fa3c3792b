"""What the agent's parts share: one object, made once by the supervisor (agent/supervisor.py)
and handed to each part, in place of the supervisor itself.

It holds what several parts read or publish to (the event bus, the slots, agent.toml's
settings, the state directory, the profiles, the session's recorder, telemetry, the redactor)
and the few lookups that need nothing more (a slot by its op's arguments, a profile by name).
What a part needs of one other part it is given as that part, typed, when the supervisor makes
it; an op it sends as a client would goes through agent/agent_calls.py's AgentCalls.

`recorder` and `telemetry` are set when the agent starts (the session opens, telemetry starts
or does not): every part reads them then, never when it is made.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from sgltui import protocol
from sgltui.agent.errors import OpError

if TYPE_CHECKING:
    from sgltui.agent.config import AgentConfig
    from sgltui.agent.events import EventBus
    from sgltui.agent.profile_catalog import ProfileCatalog
    from sgltui.agent.slot.resolved import Resolved
    from sgltui.agent.slot.slot import Slot
    from sgltui.agent.telemetry import Telemetry
    from sgltui.core.redact import Redactor
    from sgltui.session.writer import Recorder


@dataclasses.dataclass(eq=False)
class AgentContext:
    bus: EventBus  # the parts publish here; the supervisor subscribes the rest (agent/events.py)
    slots: dict[str, Slot]  # attach adds one (ext-PORT), an adopted record another
    config: AgentConfig  # agent.toml and SGLTUI_* overrides, read once (agent/config.py)
    state_dir: Path
    catalog: ProfileCatalog  # the profiles, resolved by name (agent/profile_catalog.py)
    redactor: Redactor  # secrets kept out of what clients are sent
    recorder: Recorder | None = None  # the session (session/writer.py): once the agent started
    telemetry: Telemetry | None = None  # None until it started, and when it could not

    @property
    def session(self) -> Recorder:
        """The session's recorder: set by the supervisor's start, before any op is served."""
        if self.recorder is None:
            raise RuntimeError("the agent's session is not open yet")
        return self.recorder

    def slot_for(self, args: protocol.Args) -> Slot:
        """The slot an op addresses: by name, or the only one when none is given."""
        sid = getattr(args, "slot", None)
        if sid is None:
            if len(self.slots) == 1:
                return next(iter(self.slots.values()))
            raise OpError(
                "this agent has several slots",
                "invalid",
                fix=f"name one with --slot: {', '.join(self.slots)}",
                tui="select one in the Slots pane",
            )
        if str(sid) not in self.slots:
            raise OpError(f"no slot {sid!r}", "not_found", fix=f"slots: {', '.join(self.slots)}")
        return self.slots[str(sid)]

    def get_profile(self, name: str | None, args: protocol.Args | None) -> Resolved:
        """Resolve once (blocking file reads: call from a worker thread)."""
        return self.catalog.get(name, args)

    def add_secret(self, secret: str) -> None:
        """Kept out of what clients are sent and of the session's files from now on."""
        self.redactor.add_secret(secret)
        self.session.add_secret(secret)

    def server_log_path(self, launch_id: str) -> Path:
        return Path(self.session.server_log_path(launch_id))
