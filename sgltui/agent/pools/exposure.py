"""Slots served to a gateway on another host (a fleet.toml [[pool]] that spans hosts).

Such a slot's server listens on the host's address (fleet.toml's per-host `address`, given by
the fleet side in the slot_expose op; never 0.0.0.0 unless that is what the user wrote) and
requires an API key that this agent generates. The key is kept in secrets/exposed.json (0600,
in the 0700 secrets folder) so that a restarted agent launches and re-adopts the slot with the
same key, and it reaches the server the way a profile's own api-key does: through the 0600
--config file, never argv. The agent knows nothing of ssh or of the other hosts: the fleet
side asks for the key (over its ssh bridge) and hands it to the gateway's agent.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from sgltui.core import launch_secrets
from sgltui.core.files import private_dir, write_json_atomic


@dataclass(frozen=True)
class Exposure:
    address: str
    api_key: str


class Exposures:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "secrets" / "exposed.json"
        self.by_slot: dict[str, Exposure] = {}
        with contextlib.suppress(
            OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError
        ):
            raw = json.loads(self.path.read_text())
            for slot, e in raw.items():
                self.by_slot[str(slot)] = Exposure(str(e["address"]), str(e["api_key"]))

    def get(self, slot: str) -> Exposure | None:
        return self.by_slot.get(slot)

    def set(self, slot: str, address: str | None) -> Exposure | None:
        """Expose `slot` on `address` (its key kept if it had one), or end it (None)."""
        if address is None:
            self.by_slot.pop(slot, None)
        else:
            old = self.by_slot.get(slot)
            key = old.api_key if old is not None else launch_secrets.new_key()
            if launch_secrets.secret_problem(key):  # kept from before new_key(): it led with "-"
                key = launch_secrets.new_key()
            self.by_slot[slot] = Exposure(address, key)
        private_dir(self.path.parent)
        write_json_atomic(  # 0600: core.files' default
            self.path,
            {s: {"address": e.address, "api_key": e.api_key} for s, e in self.by_slot.items()},
        )
        return self.by_slot.get(slot)
