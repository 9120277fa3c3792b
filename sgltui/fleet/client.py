"""One host's agent, reached over `ssh HOST sgltui agent bridge` (or `kubectl exec -i POD --
sgltui agent bridge` for a Kubernetes host: fleet/transport.py).

The ssh (or kubectl) process runs in its own process group (its children too: a ProxyCommand, a
ControlMaster) and is stopped and reaped by close(). Its stderr is kept (bounded) so that a
failure becomes one line naming the host and the fix (transport.explain).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any

from sgltui import __version__
from sgltui.client import STREAM_LIMIT, AgentClient, AgentError, VersionMismatch
from sgltui.fleet import transport
from sgltui.fleet.config import Fleet, Host

CONNECT_TIMEOUT_S = 30.0  # ssh's own ConnectTimeout is 10 s; the far agent may need starting


class HostError(Exception):
    """One line: the host, what is wrong, what to do."""


class HostClient:
    def __init__(self, fleet: Fleet, host: Host, client_name: str = "fleet") -> None:
        self.fleet, self.host = fleet, host
        self.agent = AgentClient(fleet.path.parent, client_name)
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        self._stderr_task: asyncio.Task | None = None
        self.on_exit: Callable[[], None] | None = None  # ssh went away (its stderr closed)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def connected(self) -> bool:
        return self.agent.connected and self.proc is not None and self.proc.returncode is None

    async def connect(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        unlisted = transport.not_listed(self.host)
        if unlisted:  # a selector that listed no pod: nothing to run
            raise HostError(unlisted)
        argv = transport.bridge_argv(self.fleet, self.host)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=STREAM_LIMIT,
            )
        except (FileNotFoundError, PermissionError):
            raise HostError(transport.cannot_run(self.fleet, self.host)) from None
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._stderr_task = asyncio.get_running_loop().create_task(self._read_stderr())
        try:
            await asyncio.wait_for(self.agent.attach(self.proc.stdout, self.proc.stdin), timeout)
        except VersionMismatch as exc:
            await self.close()
            raise HostError(self._mismatch(str(exc))) from None
        except (AgentError, asyncio.TimeoutError, ConnectionError, OSError) as exc:
            rc = await self._exit_code()
            await self.close()
            if rc is None and isinstance(exc, asyncio.TimeoutError):
                raise HostError(
                    f"host {self.host.name}: no answer within {timeout:.0f}s; retrying"
                ) from None
            raise HostError(transport.explain(self.host, rc, "\n".join(self._stderr))) from None

    def _mismatch(self, problem: str) -> str:
        what = problem.split(": restart", 1)[0]
        name = self.host.name
        return (
            f"host {name}: {what}; install sgltui {__version__} on {name} (or {name}'s version "
            f"here), then `sgltui --host {name} agent stop` so its next command starts it"
        )

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        with contextlib.suppress(ConnectionError, OSError, ValueError):
            async for line in self.proc.stderr:
                self._stderr.append(line.decode(errors="replace").rstrip())
        if self.on_exit is not None:
            self.on_exit()

    async def _exit_code(self, wait_s: float = 3.0) -> int | None:
        if self.proc is None:
            return None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), wait_s)
        if self._stderr_task is not None:  # the last lines ssh wrote before it exited
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        return self.proc.returncode

    def why_lost(self) -> str:
        """After the connection dropped: the line that says why."""
        rc = self.proc.returncode if self.proc is not None else None
        if rc is None:
            return f"host {self.host.name}: connection lost; retrying"
        return transport.explain(self.host, rc, "\n".join(self._stderr))

    async def call(self, op: str, **args: Any) -> Any:
        return await self.agent.call(op, **args)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.agent.close(), 2.0)
        proc, self.proc = self.proc, None
        if proc is not None:
            await stop_group(proc)
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task
            self._stderr_task = None


async def stop_group(proc: asyncio.subprocess.Process, grace_s: float = 2.0) -> None:
    """SIGTERM ssh's process group, SIGKILL it after `grace_s`, and reap ssh."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.returncode is not None:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), grace_s)
    if proc.returncode is None:
        await proc.wait()
