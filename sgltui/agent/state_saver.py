"""agent-state.json kept in step with the slots: saved soon after each change, debounced, in a
worker thread (an fsync per slot event held up the loop that serves clients and proxies
traffic); a command's reply waits for the save (`saved`), so an agent killed right after a
reply still re-adopts what it said. A disk that refuses the write keeps the last good file; the
save is retried every second and the outage said once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sgltui.agent.state import AgentState

log = logging.getLogger("sgltui.agent")

DEBOUNCE_S = 0.05  # slot events this close together are saved in one write


class StateSaver:
    def __init__(
        self,
        state: AgentState,
        records: Callable[[], dict[str, dict]],
        session_dir: Callable[[], str | None],
    ) -> None:
        self.state = state
        self._records = records  # what to re-adopt: the slots' and the sleepers' records
        self._session_dir = session_dir
        self.failing = False
        self._task: asyncio.Task | None = None
        self._now = asyncio.Event()  # skips the debounce: a command's reply waits
        self._wanted = False

    def later(self) -> None:
        """A slot changed: save soon (or now, where no loop runs: shutdown's last word)."""
        self._wanted = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.save()
            return
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._soon(), name="agent-state-save")

    async def saved(self) -> None:
        """Wait until what the slots are now is on disk (or its save failed)."""
        task = self._task
        if task is None or task.done() or self.failing:
            return  # a disk that refuses writes must not hold replies up: it is retried
        self._now.set()  # a reply waits on it: no debounce
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), 2.0)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _soon(self) -> None:
        while self._wanted:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._now.wait(), DEBOUNCE_S)
            self._now.clear()
            self._wanted = False
            saved = await asyncio.to_thread(self.save, self._records())
            if not saved:
                await asyncio.sleep(1.0)  # the disk refused: retry every second
                self._wanted = True

    def save(self, records: dict[str, dict] | None = None) -> bool:
        """Write agent-state.json (blocking). A failed save (full disk) keeps the last good
        file and is said once per outage."""
        records = self._records() if records is None else records
        try:
            self.state.save(self._session_dir(), records)
        except OSError as exc:
            if not self.failing:
                log.warning(
                    "cannot write %s (%s); keeping its last good copy, retrying every second",
                    self.state.path,
                    exc.strerror or exc,
                )
            self.failing = True
            return False
        if self.failing:
            log.info("%s written again", self.state.path)
        self.failing = False
        return True
