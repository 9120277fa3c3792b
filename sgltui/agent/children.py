"""The agent's other children: bench runs and the demo load.

Each runs in its own session and process group, with its output in a file, so that stopping it
(SIGTERM, then SIGKILL of the whole group) also ends whatever it started, and so that it outlives
no agent: the supervisor stops them all at shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec

from sgltui import protocol
from sgltui.core.files import write_json_atomic

log = logging.getLogger("sgltui.agent.children")


class ChildError(Exception):
    """A refused request about a child (one line), and its code (protocol.ErrorCode)."""

    def __init__(self, message: str, code: protocol.ErrorCode = "refused") -> None:
        super().__init__(message)
        self.code: protocol.ErrorCode = code


def spawn_child(argv: list[str], log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as fh:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


class GroupLeader(Protocol):
    """A process leading its own group: a Popen, or a gateway an earlier agent started
    (gateway.Adopted, watched through psutil)."""

    pid: int

    def wait(self, timeout: float | None = None) -> int: ...


def stop_group(proc: GroupLeader, grace: float) -> None:
    """Blocking: SIGTERM the child's group, SIGKILL it after `grace`, reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # also whatever the child left in its group
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        log.warning("child %s did not exit after SIGKILL", proc.pid)


_NOT_PROGRESS = frozenset({"run_id", *protocol.EventBase.__struct_fields__})


def _put_back_of(path: str | None) -> dict | None:
    """The result file's `put_back` (bench/runner.py): what the sweep swapped the slot back to."""
    try:
        with open(path or "", encoding="utf-8") as fh:
            put = json.load(fh).get("put_back")
    except (OSError, ValueError, AttributeError):
        return None
    return put if isinstance(put, dict) else None


def bench_view(run: dict) -> protocol.BenchRun:
    """A run's record (its process and watcher left out) as bench_list, bench_stop and STATUS
    show it."""
    return msgspec.convert(
        {k: v for k, v in run.items() if k not in ("proc", "watch")}, protocol.BenchRun
    )


def _cut_runner(proc: subprocess.Popen) -> None:
    """Blocking: SIGUSR1 to the runner (it stops its point and saves), then its group's end."""
    try:
        os.kill(proc.pid, signal.SIGUSR1)
        proc.wait(timeout=5.0)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
        pass
    stop_group(proc, 1.0)  # whatever it left (a load generator), and the reap


def _mark_cut(path: str, cut: dict[str, Any]) -> None:
    """The stopped run's file (its runner has exited: nothing else writes it) gets `cut`."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return  # it wrote nothing: the run's log says why
    if isinstance(data, dict):
        data["cut"] = cut
        write_json_atomic(Path(path), data, indent=1)


def _cut_of(path: str | None) -> dict | None:
    try:
        with open(path or "", encoding="utf-8") as fh:
            cut = json.load(fh).get("cut")
    except (OSError, ValueError, AttributeError):
        return None
    return cut if isinstance(cut, dict) else None


class Children:
    def __init__(
        self,
        publish: Callable[[protocol.EventBase], Any],
        socket_path: Path,
        state_dir: Path,
        session: Callable[[], Any],
    ) -> None:
        self.publish = publish
        self.socket_path = socket_path
        self.state_dir = state_dir
        self.session = session  # -> the recorder (its path and bench_path)
        self.bench_runs: dict[str, dict] = {}
        self.demo_proc: subprocess.Popen | None = None

    # ---- bench runs --------------------------------------------------------------------------

    def bench_start(self, spec: protocol.BenchSpec, client: str | None) -> protocol.BenchStarted:
        running = [r for r in self.bench_runs.values() if r["state"] == "running"]
        if running:
            raise ChildError(
                f"bench run {running[0]['run_id']} is still running; stop it first (`sgltui bench stop`)",
                "busy",
            )
        rec = self.session()
        run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 1000:03d}{len(self.bench_runs)}"
        path = Path(rec.bench_path(run_id))
        argv = [
            sys.executable,
            "-m",
            "sgltui.bench.runner",
            "--agent-socket",
            str(self.socket_path),
            "--session-dir",
            str(rec.path),
            "--run-id",
            run_id,
            "--spec-json",
            msgspec.json.encode(spec).decode(),
        ]
        proc = spawn_child(argv, path.with_suffix(".log"))
        run = {
            "run_id": run_id,
            "state": "running",
            "started": time.time(),
            "spec": spec,
            "client": client,
            "proc": proc,
            "progress": None,
            "path": str(path),
            "exit_code": None,
        }
        self.bench_runs[run_id] = run
        self.publish(
            protocol.BenchStart(
                client=client,
                run_id=run_id,
                spec=msgspec.to_builtins(spec),
                pid=proc.pid,
                path=str(path),
            )
        )
        run["watch"] = asyncio.get_running_loop().create_task(self._watch_bench(run))
        return protocol.BenchStarted(run_id=run_id)

    async def _watch_bench(self, run: dict) -> None:
        proc: subprocess.Popen = run["proc"]
        while proc.poll() is None:
            await asyncio.sleep(0.2)
        run["exit_code"] = proc.returncode
        if run["state"] == "running":
            run["state"] = "done" if proc.returncode == 0 else "failed"
        self.publish(
            protocol.BenchDone(
                client=run["client"],
                run_id=run["run_id"],
                path=run["path"],
                state=run["state"],
                exit_code=proc.returncode,
                put_back=await asyncio.to_thread(_put_back_of, run["path"]),
                cut=run.get("cut") or await asyncio.to_thread(_cut_of, run["path"]),
            )
        )

    def bench_progress(
        self, args: protocol.BenchProgressArgs, client: str | None
    ) -> protocol.Noted:
        run = self.bench_runs.get(args.run_id)
        # the event's envelope (time, client, slot) is the agent's, whatever the runner sent
        fields = {k: v for k, v in protocol.args_dict(args).items() if k not in _NOT_PROGRESS}
        if run is not None:
            run["progress"] = fields
        self.publish(protocol.BenchProgress(client=client, run_id=args.run_id, **fields))
        return protocol.Noted(ok=True)

    async def bench_stop(self, run_id: Any) -> protocol.BenchRun:
        run = self.bench_runs.get(str(run_id))
        if run is None:
            raise ChildError(f"no bench run {run_id!r}; see `sgltui bench list`", "not_found")
        if run["state"] == "running":
            run["state"] = "stopped"
            await asyncio.to_thread(
                stop_group, run["proc"], 5.0
            )  # the runner saves partial results
        return bench_view(run)

    def bench_on(self, slot_id: str, client: str | None) -> dict | None:
        """The running bench whose sweep uses `slot_id` (a `--url` run uses none), unless
        `client` is that run's own runner (its swaps are the sweep's)."""
        for run in self.bench_runs.values():
            spec = run["spec"]
            if run["state"] != "running" or spec.url or str(spec.slot) != str(slot_id):
                continue
            # the runner's client id: "bench:<its pid>:<its pid>@host" (agent/client.py)
            if (client or "").startswith(f"bench:{run['proc'].pid}:"):
                return None
            return run
        return None

    async def bench_cut(self, run: dict, cut: dict[str, Any]) -> None:
        """A swap that the user confirmed over a running bench: the runner stops at once
        (SIGUSR1: no swap back to what the slot served, the swap in hand is the user's), then
        its result file says which swap cut it (`cut`), as bench.done and STATUS do."""
        run["state"] = "stopped"
        run["cut"] = cut
        proc: subprocess.Popen = run["proc"]
        await asyncio.to_thread(_cut_runner, proc)
        await asyncio.to_thread(_mark_cut, run["path"], cut)

    def bench_list(self) -> list[protocol.BenchRun]:
        return [bench_view(r) for r in sorted(self.bench_runs.values(), key=lambda r: r["started"])]

    def latest_bench(self) -> protocol.BenchRun | None:
        latest = max(self.bench_runs.values(), key=lambda r: r["started"], default=None)
        return bench_view(latest) if latest else None

    # ---- demo load ----------------------------------------------------------------------------

    @property
    def demo_on(self) -> bool:
        return self.demo_proc is not None and self.demo_proc.poll() is None

    async def demo_load(self, on: bool) -> protocol.DemoLoadReply:
        if on and not self.demo_on:
            argv = [
                sys.executable,
                "-m",
                "sgltui.bench.demo_load",
                "--agent-socket",
                str(self.socket_path),
            ]
            self.demo_proc = spawn_child(argv, self.state_dir / "demo_load.log")
        elif not on and self.demo_proc is not None:
            await asyncio.to_thread(stop_group, self.demo_proc, 3.0)
            self.demo_proc = None
        return protocol.DemoLoadReply(on=self.demo_on)

    async def stop_all(self) -> None:
        for run in self.bench_runs.values():
            if run["proc"].poll() is None:
                run["state"] = "stopped"
                await asyncio.to_thread(stop_group, run["proc"], 3.0)
        if self.demo_proc is not None:
            await asyncio.to_thread(stop_group, self.demo_proc, 3.0)
            self.demo_proc = None
