"""The agent's side of one batch job's runner child (sgltui/jobs/worker.py): start it, write it
control lines, end it.

Why a child process: the runner's HTTP and JSON work (thousands of completions a second against
a fast server) would otherwise share the agent's event loop with every viewer; the agent reads
two progress lines a second per job and writes a few control lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from sgltui.jobs import choose

if TYPE_CHECKING:
    from sgltui.agent.jobs.records import JobRecord
    from sgltui.agent.jobs.site_interface import JobsSite

MAX_CONCURRENCY = 4096


class Runner:
    """One runner child and what it last said."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.progress: dict = {}
        self.checked: dict | None = None
        self.checked_ev = asyncio.Event()
        self.paused_ev = asyncio.Event()
        self.error: str | None = None
        self.final: dict | None = None
        self.url: str | None = None
        self.launch: str | None = None  # the server's launch id said to it (warm-first)
        self.sent_paused: bool | None = None
        self.concurrency: int | None = None
        self.cadence: float | None = None  # the progress readings' pace sent (None: its own)
        self.reader: asyncio.Task | None = None

    def set_cadence(self, s: float | None) -> None:
        """How often the runner reads the job's progress (None: its own pace); said to it once
        per change (a --choose trial reads at the server's pace, jobs/choose.py reading_s)."""
        if s != self.cadence:
            self.cadence = s
            self.send({"op": "cadence", "s": s})

    def set_launch(self, launch: str, most: int | None) -> None:
        """The server the job sends to now, said to the runner once per launch (its warm-first
        pass, jobs/warm_first.py, at most `most` requests)."""
        if launch != self.launch:
            self.launch = launch
            self.send({"op": "launch", "id": launch, "most": most})

    def send(self, msg: dict) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return
        with contextlib.suppress(ConnectionError, RuntimeError, OSError):
            stdin.write(json.dumps(msg).encode() + b"\n")

    async def reap(self, timeout: float) -> None:
        """Wait for it to exit; SIGKILL its group after `timeout`."""
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 5.0)


def say_launch(site: JobsSite, rec: JobRecord, r: Runner) -> None:
    """Tell the runner of a new server (a launch id it was not told): its prefix cache is empty,
    so the runner's warm-first pass comes first on it (jobs/warm_first.py), bounded by the
    trial's cache warm-up for its profile where there is one. Not for a pool job (several
    servers, each its own cache)."""
    slot = site.slot(rec.slot)
    if slot is None or rec.pool or slot.launch_id is None or slot.launch_id == r.launch:
        return
    r.set_launch(slot.launch_id, choose.prime_most(rec.choose, slot.profile_name))


async def start_runner(rec: JobRecord, log_path: Path) -> Runner:
    """A runner child for the job `rec` (its stderr in `log_path`), in its own process group."""
    spec = {
        "id": rec.id,
        "input": rec.input,
        "output": rec.output,
        "concurrency": rec.concurrency,
        "max_concurrency": MAX_CONCURRENCY,
        "stamp": rec.stamp,  # the input's earlier check: unchanged -> not re-read
    }
    with open(log_path, "ab") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sgltui.jobs.worker",
            "--spec-json",
            json.dumps(spec),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            start_new_session=True,  # its own group: stopped as a whole, never by a ^C
            limit=1 << 20,
        )
    r = Runner(proc)
    r.concurrency = rec.concurrency
    return r


async def read_lines(r: Runner) -> AsyncIterator[dict]:
    """The runner's messages (one JSON object a line), until its output ends."""
    assert r.proc.stdout is not None
    while True:
        raw = await r.proc.stdout.readline()
        if not raw:
            break
        try:
            yield json.loads(raw)
        except ValueError:
            continue
