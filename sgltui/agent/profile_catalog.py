"""The profiles the agent knows: its profile folders (and a command's extra ones), a name
resolved once per command, and the rows status lists, rescanned in a worker thread (at most one
at a time, at most every few seconds when status is read: a new or edited file shows up by
itself). Resolution and rescans read files: call them from a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.profile_rows import ProfileRows
from sgltui.agent.slot.resolved import ProfileIndex, Resolved

log = logging.getLogger("sgltui.agent")

RESCAN_S = 5.0  # a status read at least this long after the last rescan starts another


class ProfileCatalog:
    def __init__(self, dirs: list[Path], replaced_pids: Callable[[], frozenset[int]]) -> None:
        self.dirs = dirs
        self.index = ProfileIndex(self.dirs)
        self.rows: list[protocol.ProfileRow] = []  # the latest rescan's (status lists them)
        self._row_maker = ProfileRows()
        # the processes of the server a profile key replaces: their RAM counts as free
        self._replaced_pids = replaced_pids
        self._at = 0.0
        self._refresh: asyncio.Task | None = None

    def _extra_dirs(self, args: protocol.Args | None) -> list[Path]:
        extra = [Path(d).expanduser() for d in getattr(args, "profiles_dirs", None) or []]
        every = self.dirs + [d for d in extra if d not in self.dirs]
        return [d for d in every if d not in self.dirs]

    def get(self, name: str | None, args: protocol.Args | None) -> Resolved:
        """Resolve once (blocking file reads: call from a worker thread)."""
        from sgltui.core.profiles import ProfileError

        if not name or not isinstance(name, str):
            raise OpError(
                "a profile name is required",
                "invalid",
                fix="e.g. `sgltui start demo-mtp` (see `sgltui profiles list`)",
                tui="highlight one in the Profiles pane and press {key:server.start}",
            )
        try:
            return self.index.resolve(name, self._extra_dirs(args))
        except ProfileError as exc:
            raise OpError(str(exc).splitlines()[0] if str(exc) else f"bad profile {name}") from None

    def try_get(self, name: str | None) -> Resolved | None:
        if not name:
            return None
        try:
            return self.get(name, None)
        except OpError:
            return None

    def refresh(self, args: protocol.Args | None = None) -> list[protocol.ProfileRow]:
        """Rescan the profile folders (blocking: from a worker thread)."""
        try:
            self.index.rescan(self._extra_dirs(args))
            profs = self.index.profiles()
        except (OSError, ValueError) as exc:
            log.warning("cannot list profiles: %s", exc)
            return self.rows
        self._at = time.monotonic()
        from sgltui.core.validate import key_clashes

        rows = self._row_maker.rows(
            profs, self.index.broken(), key_clashes(profs.values()), self._replaced_pids()
        )
        self.rows = msgspec.convert(rows, list[protocol.ProfileRow])
        return self.rows

    def refresh_if_stale(self) -> None:
        """Rescan in a worker thread when the last is old, at most one at a time, never on the
        event loop."""
        if time.monotonic() - self._at <= RESCAN_S:
            return
        if self._refresh is not None and not self._refresh.done():
            return
        self._at = time.monotonic()
        self._refresh = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self.refresh), name="profiles-rescan"
        )
