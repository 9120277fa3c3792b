"""One server's processes, as a slot runs them: spawn, the log relay's pipe, the process tree,
kill, reap, and what the tree still holds once it is gone.

The slot (agent/slot/slot.py) decides when: launch, stop, adopt, hand over; this class does the
process work and keeps the handles (the Popen, the ProcTree, the relay and its pipe). It knows
nothing of lifecycle states, events or profiles.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Literal

from sgltui import protocol
from sgltui.agent import gpu
from sgltui.agent.slot import procs
from sgltui.core import causes, files

# The slot's logger: these lines were the slot's and read the same in agent.log.
log = logging.getLogger("sgltui.agent.slot")

# Relays whose server left an orphan holding the pipe: reaped once they end (never zombies).
_orphan_relays: list[subprocess.Popen] = []


def _reap_relays() -> None:
    _orphan_relays[:] = [r for r in _orphan_relays if r.poll() is None]


def _zombie_returncode(pid: int) -> int | None:
    """Popen-style returncode of `pid` if it is a zombie (its wait status is in /proc/PID/stat
    until the parent reaps it: field 52, Linux >= 3.5); None when it runs or is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state is field 3
    if not fields or fields[0] != "Z" or len(fields) < 50:
        return None
    try:
        status = int(fields[-1])
    except ValueError:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else None


class LaunchError(Exception):
    """A pre-check refused the launch, or its program could not run; carries a cause for the
    slot state (core/causes.py)."""

    def __init__(self, cause: dict) -> None:
        super().__init__(causes.line(cause))
        self.cause = cause


def stop_outcome(
    kill: dict | None, report: protocol.StopReport
) -> tuple[Literal["SIGTERM", "SIGKILL"] | None, dict | None]:
    """Which signal ended the server (`kill`: ServerProcess.kill after terminate), and a cause
    when it took a SIGKILL with work running; notes the requests it cut in `report`."""
    kill = kill or {}
    if kill.get("signal") == "none":
        return None, None
    if kill.get("signal") != "SIGKILL":
        return "SIGTERM", None
    running = kill.get("requests")
    report.requests_at_sigkill = running
    after = kill.get("after_s", 0.0)
    if kill.get("leftovers_only"):
        # The server itself exited on SIGTERM; what it left behind is no failure of it.
        return "SIGKILL", None
    if running:
        summary = (
            f"SIGKILL after {after:.0f}s: it did not exit on SIGTERM and "
            f"{running} requests still running were cut"
        )
    else:
        summary = f"SIGKILL after {after:.0f}s: it did not exit on SIGTERM"
    fix = (
        "send no new requests during a stop (use the slot's front endpoint) or raise "
        "SGLTUI_STOP_GRACE_S; `sgltui stop` drains before stopping"
    )
    return "SIGKILL", causes._cause("signal", summary, [], fix, -signal.SIGKILL)


class ServerProcess:
    """The process side of a slot: at most one server tree at a time."""

    def __init__(self, slot_id: str) -> None:
        self.slot_id = slot_id  # for the log lines only
        self.tree: procs.ProcTree | None = None
        self.popen: subprocess.Popen | None = None  # None: not our child (re-adopted, attached)
        self.live_pids: list[int] = []  # the tree's live pids at the watcher's last look
        self.log_path: Path | None = None
        self.pipe_closed = False
        # set by terminate when a SIGKILL was needed: {"signal", "after_s", "requests", ...}
        self.kill: dict | None = None
        self._relay: subprocess.Popen | None = None
        self._pipe: int | None = None  # read end of the relay's pipe (non-blocking)
        self._log_pos = 0
        self._partial = b""

    # ---- spawn ---------------------------------------------------------------------------------

    def spawn(self, command: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Blocking: start the server with its output on a pipe to a log relay
        (sgltui/agent/slot/logrelay.py): the agent reads phases from the relay, never from the disk,
        and the relay keeps the log file for whoever re-adopts the server. Without a relay the
        server writes the file. Raises LaunchError when the program cannot run."""
        assert self.log_path is not None
        read_end, write_end = os.pipe()
        try:
            try:
                self._relay = subprocess.Popen(
                    [sys.executable, "-m", "sgltui.agent.slot.logrelay", str(self.log_path)],
                    stdin=read_end,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # not in the server's group: it outlives its kill
                    close_fds=True,
                )
            except OSError as exc:
                log.warning("no log relay (%s); the server writes its log file itself", exc)
                self._relay = None
            if self._relay is not None:
                assert self._relay.stdout is not None
                self._pipe = self._relay.stdout.fileno()
                os.set_blocking(self._pipe, False)
                out: Any = write_end
            else:
                out = open(self.log_path, "ab")  # noqa: SIM115 - closed right after the spawn
            try:
                return subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                    umask=files.inherited_umask(),  # its caches are the user's own files
                )
            except OSError as exc:
                self.close_relay()
                raise LaunchError(
                    causes._cause(
                        "exit",
                        f"cannot run {command[0]}: {exc.strerror or exc}",
                        [],
                        "set `python` in the profile to an interpreter that has sglang installed",
                        None,
                    )
                ) from None
            finally:
                if out is not write_end:
                    out.close()
        finally:
            os.close(read_end)
            os.close(write_end)

    def track(self, popen: subprocess.Popen) -> None:
        """The spawned server is ours: its Popen (reaped when it ends) and its tree."""
        self.popen = popen
        self.tree = procs.ProcTree.of(popen.pid)
        self.live_pids = [popen.pid]

    def adopt(self, tree_record: dict) -> bool:
        """Watch a tree an earlier agent started (agent-state.json's record); False when its
        main process is gone. Not our child: its exit code is read from /proc."""
        tree = procs.ProcTree.from_json(tree_record)
        if not tree.main_alive():
            return False
        self.live_pids = tree.refresh()
        self.tree, self.popen = tree, None
        return True

    def watch_tree(self, tree: procs.ProcTree | None) -> None:
        """Follow a tree sgltui did not start (an attached server), or none (a remote one)."""
        self.tree, self.popen = tree, None
        self.live_pids = tree.refresh() if tree else []

    def hand_over(self) -> subprocess.Popen | None:
        """Let another slot's process take this tree over: stop reading the relay (it keeps
        writing the log file, as for a re-adoption) and forget the tree. -> the Popen."""
        popen = self.popen
        self.close_relay()
        self.forget()
        return popen

    def take_popen(self, popen: subprocess.Popen | None) -> None:
        """A handed-over server is still our child (reaped when it ends); its log is read from
        the file's end from here."""
        self.popen = popen
        if self.log_path is not None:
            try:
                self._log_pos, self._partial = self.log_path.stat().st_size, b""
            except OSError:
                pass

    def forget(self) -> None:
        self.tree, self.popen, self.live_pids = None, None, []

    # ---- output --------------------------------------------------------------------------------

    def reset_output(self) -> None:
        """A new launch (or watch): no relay, nothing half-read."""
        self.close_relay()
        self.pipe_closed = False
        self._partial = b""

    def rewind_log(self) -> None:
        """Read the log file from its start (a re-adopted server: rebuild phase and tail)."""
        self._log_pos = 0

    @property
    def relay_open(self) -> bool:
        return self._pipe is not None

    def close_relay(self, wait: float = 0.0) -> None:
        """Stop reading the relay; reap it (it ends by itself once the server's tree is gone)."""
        relay, self._relay, self._pipe = self._relay, None, None
        if relay is None:
            return
        if relay.stdout is not None:
            relay.stdout.close()
        try:
            relay.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            # Something of the server's tree still holds the pipe; the relay ends with it.
            # Reaped later by _reap_relays so it never lingers as a zombie.
            _orphan_relays.append(relay)
        _reap_relays()

    def read_new_lines(self) -> list[str]:
        """Complete lines the server printed since the last call: from the relay's pipe while
        there is one, else (a re-adopted server) from the log file."""
        if self._pipe is not None:
            data = self._read_pipe()
        else:
            data = self._read_file()
        if not data:
            return []
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        return [ln.decode("utf-8", "replace").rstrip("\r") for ln in lines]

    def take_partial(self, close: bool) -> list[str]:
        """The unterminated last line, once nothing more will complete it (`close`, or no
        relay left); [] otherwise."""
        if self._partial and (close or self._pipe is None):
            line = self._partial.decode("utf-8", "replace")
            self._partial = b""
            return [line]
        return []

    def _read_pipe(self) -> bytes:
        chunks, total = [], 0
        pipe = self._pipe
        assert pipe is not None, "read only while the relay's pipe is open"
        while total < 4 << 20:
            try:
                data = os.read(pipe, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:  # EOF: the relay is done (the server's tree closed its output)
                self.pipe_closed = True
                self.close_relay()
                break
            chunks.append(data)
            total += len(data)
        return b"".join(chunks)

    def _read_file(self) -> bytes:
        if not self.log_path:
            return b""
        try:
            with open(self.log_path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size < self._log_pos:
                    self._log_pos, self._partial = 0, b""  # the recorder rotated it (copy-truncate)
                fh.seek(self._log_pos)
                data = fh.read(4 << 20)
                self._log_pos = fh.tell()
        except OSError:
            return b""
        return data

    # ---- exit, reap, kill ----------------------------------------------------------------------

    def exit_code(self) -> tuple[bool, int | None]:
        """(exited, returncode) of the main process; for a re-adopted server (not our child) the
        code is read from /proc while it is a zombie, else None."""
        if self.popen is not None:
            rc = self.popen.poll()
            return rc is not None, rc
        if not self.tree:
            return True, None
        zombie_rc = _zombie_returncode(self.tree.pid)
        if zombie_rc is not None:
            return True, zombie_rc
        return not self.tree.main_alive(), None

    async def refresh(self) -> None:
        """Look at the tree again: its live pids for status."""
        if self.tree:
            # From the table the samplers read this second, else (older) in a worker thread.
            live = self.tree.refresh_shared()
            self.live_pids = (
                live if live is not None else await asyncio.to_thread(self.tree.refresh)
            )

    def reap(self) -> None:
        if self.popen is not None:
            try:
                self.popen.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass

    async def kill_all(self) -> None:
        """SIGKILL whatever of the tree is left (children may survive a crashed launcher,
        reparented to init, still holding VRAM)."""
        if self.tree:
            await asyncio.to_thread(self.tree.kill_all)

    def terminate(
        self,
        grace: float,
        loop: asyncio.AbstractEventLoop | None = None,
        busy: Callable[[], Coroutine[Any, Any, int]] | None = None,
    ) -> list[int]:
        """Blocking: SIGTERM the main process, SIGKILL everything after `grace`; live pids left.
        Records in self.kill whether a SIGKILL was needed and how many requests it cut (asked
        of the server with `busy` through `loop` just before the kill)."""
        tree = self.tree
        assert tree is not None
        t0 = time.monotonic()
        tree.refresh()
        if not tree.alive():
            self.kill = {"signal": "none"}  # it had already exited (crashed, failed)
            return []
        tree.signal_main(signal.SIGTERM)
        log.info(
            "slot %s: SIGTERM to %s (%d processes seen in its tree, refresh %.3fs)",
            self.slot_id,
            tree.pid,
            len(tree.seen),
            time.monotonic() - t0,
        )
        deadline = time.monotonic() + grace
        main_gone_at = None
        while time.monotonic() < deadline:
            if self.popen is not None:
                self.popen.poll()  # reap, so the main pid does not linger as a zombie
            if not tree.alive():
                return []
            if main_gone_at is None and not tree.main_alive():
                main_gone_at = time.monotonic()
            # SGLang's main process exits only after it has dealt with its children; whatever is
            # still around shortly after is a leftover (orphans keep VRAM), so stop waiting.
            if main_gone_at is not None and time.monotonic() - main_gone_at > 0.3:
                log.info(
                    "slot %s: main process gone after %.2fs; killing leftovers",
                    self.slot_id,
                    main_gone_at - t0,
                )
                break
            time.sleep(0.05)
        after = time.monotonic() - t0
        requests = None
        if main_gone_at is None and loop is not None and busy is not None:
            future = asyncio.run_coroutine_threadsafe(busy(), loop)
            try:  # the last word on what the kill cuts; bounded, never holds the kill up long
                requests = future.result(3.0)
            except (concurrent.futures.TimeoutError, RuntimeError, OSError):
                future.cancel()
        self.kill = {
            "signal": "SIGKILL",
            "after_s": round(after, 2),
            "requests": requests,
            "leftovers_only": main_gone_at is not None,
        }
        log.info(
            "slot %s: SIGKILL to process group %s after %.2fs (%s requests still running)",
            self.slot_id,
            tree.pgid,
            after,
            "?" if requests is None else requests,
        )
        for _ in range(250):  # 5 s of SIGKILL rounds: a process can be in uninterruptible sleep
            tree.kill_all()
            if self.popen is not None:
                self.popen.poll()
            left = tree.alive()
            if not left:
                log.info(
                    "slot %s: process tree gone after %.2fs", self.slot_id, time.monotonic() - t0
                )
                return []
            time.sleep(0.02)
        return tree.alive()

    async def wait_released(
        self,
        host: str,
        port: int,
        baseline: dict[int, int] | None,
        visible: str | None,
        simulated: bool,
        timeout: float,
    ) -> tuple[int, bool, str]:
        """Wait (bounded) until the tree's GPU memory is released and the port is free.
        -> (bytes still held, port free, how release was told: gpu.Release.method)."""
        pids = set(self.tree.seen) if self.tree else set()
        deadline = time.monotonic() + timeout
        while True:
            release = await asyncio.to_thread(gpu.release_state, pids, baseline, visible, simulated)
            port_ok = procs.port_free(host, port)
            if (not release.held_bytes and port_ok) or time.monotonic() >= deadline:
                if release.method == "used-memory":
                    log.info(
                        "slot %s: GPU release told by used memory against the launch baseline (%s)",
                        self.slot_id,
                        release.why,
                    )
                return release.held_bytes, port_ok, release.method
            await asyncio.sleep(0.2)
