"""What the agent keeps on disk in the state dir besides the session: the servers to re-adopt
(agent-state.json) and how long each profile's start-up phases took (launch-history.json).

Both are written atomically (tmp + rename) so a kill -9 at any moment leaves the old or the new
file, never half of one. No secrets: an API key is re-read from the profile when needed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sgltui.core.files import write_json_atomic

log = logging.getLogger("sgltui.agent.state")

STATE_FILE = "agent-state.json"
HISTORY_FILE = "launch-history.json"
HISTORY_KEEP = 5  # launches per profile the ETA is learned from


def read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return default


class AgentState:
    """agent-state.json: {"v": 1, "session_dir": str, "slots": {slot_id: {...launch record...}}}."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / STATE_FILE
        self.recovered: str | None = None  # what was done about an unreadable file, said once

    def load(self) -> dict:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {"v": 1, "session_dir": None, "slots": {}}
        except (OSError, UnicodeDecodeError) as exc:
            return self._recover(f"cannot be read ({exc})")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            return self._recover(f"is not valid JSON ({type(exc).__name__})")
        if (
            not isinstance(data, dict)
            or data.get("v") != 1
            or not isinstance(data.get("slots", {}), dict)
            or not all(isinstance(r, dict) for r in data.get("slots", {}).values())
        ):
            return self._recover("is not an agent-state record")
        data.setdefault("slots", {})
        return data

    def _recover(self, why: str) -> dict:
        """Keep the bad file aside and find the servers it named by their processes
        (agent/slot/recover.py); say what was done."""
        from sgltui.agent.slot import recover

        aside = recover.set_aside(self.path)
        found = recover.find_servers(self.path.parent)
        names = ", ".join(
            f"slot {s} ({r.get('profile')}, pid {r['tree']['pid']})"
            for s, r in found["slots"].items()
        )
        self.recovered = (
            f"{self.path} {why}: kept aside as {aside.name if aside else 'is (could not move it)'}; "
            + (
                f"found this agent's servers by their log relays and re-adopts them: {names}"
                if names
                else "no running server of this agent was found"
            )
        )
        log.warning("%s", self.recovered)
        return found

    def save(self, session_dir: str | None, slots: dict[str, dict]) -> None:
        write_json_atomic(self.path, {"v": 1, "session_dir": session_dir, "slots": slots})


class LaunchHistory:
    """Phase durations of earlier successful launches, per profile, for progress and ETA."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / HISTORY_FILE

    def learned(self, profile: str) -> dict[str, float] | None:
        """Median duration of each phase over the kept launches of `profile`, or None."""
        runs = read_json(self.path, {}).get(profile) or []
        if not runs:
            return None
        phases: dict[str, list[float]] = {}
        for run in runs:
            for phase, secs in run.items():
                phases.setdefault(phase, []).append(float(secs))
        return {p: sorted(v)[len(v) // 2] for p, v in phases.items()}

    def record(self, profile: str, durations: dict[str, float]) -> None:
        data = read_json(self.path, {})
        if not isinstance(data, dict):
            data = {}
        runs = (data.get(profile) or [])[-(HISTORY_KEEP - 1) :]
        runs.append({p: round(s, 3) for p, s in durations.items()})
        data[profile] = runs
        write_json_atomic(self.path, data)
