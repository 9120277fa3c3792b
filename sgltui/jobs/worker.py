"""`python -m sgltui.jobs.worker --spec-json J`: one job's runner, as a child of the agent.

A process of its own so that the job's HTTP and JSON work never competes with the agent's
event loop (the agent only reads a progress line twice a second). Control arrives as JSON lines
on stdin, reports leave as JSON lines on stdout:

  in:  {"op": "target", "url": U, "api_key": K}  {"op": "pause", "force": B}  {"op": "resume"}
       {"op": "concurrency", "n": N}  {"op": "cadence", "s": S}
       {"op": "cancel"}  {"op": "stop"}
       {"op": "launch", "id": L, "most": N}: the server it sends to now (a new one: warm-first, jobs/warm_first.py)
  out: {"t": "checked", ...}  {"t": "progress", ...}  {"t": "paused", ...}
       {"t": "error", "message": M}  {"t": "done", "state": "done"|"cancelled"|"stopped", ...}

stdin's end means the agent is gone (exit, crash, kill -9): the runner stops sending, writes
what it holds, and exits; the next agent starts a new runner that resumes from the output file.
The API key comes on stdin, never in argv.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path

from sgltui.bench.loadgen import install_uvloop, raise_fd_limit
from sgltui.jobs.batchfile import InputError
from sgltui.jobs.output import OutputError
from sgltui.jobs.runner import Runner


class _Out:
    def __init__(self) -> None:
        self.broken = False
        self.on_broken: Callable[[], None] | None = None

    def __call__(self, obj: dict) -> None:
        if self.broken:
            return
        try:
            sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError):
            self.broken = True
            if self.on_broken:
                self.on_broken()


async def _control(runner: Runner, out: _Out) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        raw = await reader.readline()
        if not raw:
            runner.stop("stopped")  # the agent is gone
            return
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        op = msg.get("op")
        if op == "target":
            runner.set_target(str(msg["url"]), msg.get("api_key"))
        elif op == "launch":
            most = msg.get("most")
            runner.set_launch(str(msg["id"]), None if most is None else int(most))
        elif op == "pause":
            runner.pause(bool(msg.get("force")))
        elif op == "resume":
            runner.resume()
        elif op == "concurrency":
            runner.set_concurrency(int(msg["n"]))
        elif op == "cadence":
            runner.set_cadence(None if msg.get("s") is None else float(msg["s"]))
        elif op == "cancel":
            runner.stop("cancelled")
        elif op == "stop":
            runner.stop("stopped")


async def _main(spec: dict, out: _Out) -> int:
    runner = Runner(
        Path(spec["input"]),
        Path(spec["output"]),
        int(spec.get("concurrency") or 8),
        out,
        job_id=str(spec.get("id") or "job"),
    )
    out.on_broken = lambda: runner.stop("stopped")
    control = asyncio.get_running_loop().create_task(_control(runner, out))
    try:
        checked = await asyncio.to_thread(runner.prepare, spec.get("stamp"))
    except (InputError, OutputError, OSError) as exc:
        message = str(exc)
        if isinstance(exc, OSError):
            message = f"cannot use {spec['output']}: {exc.strerror or exc}; choose another -o"
        out({"t": "error", "message": message})
        control.cancel()
        await runner.close_transports()
        return 2
    out({"t": "checked", **checked})
    if runner.stopping:
        await runner.close_transports()
        out({"t": "done", "state": runner.stopping, **runner.progress()})
        return 0
    gc.collect()
    gc.freeze()  # the job's long-lived objects out of the collector's way (GC pauses are latency spikes)
    state = await runner.run()
    control.cancel()
    out({"t": "done", "state": state, **runner.progress()})
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sgltui.jobs.worker")
    p.add_argument("--spec-json", required=True)
    args = p.parse_args(argv)
    spec = json.loads(args.spec_json)
    raise_fd_limit(int(spec.get("max_concurrency") or 4096))
    install_uvloop()
    out = _Out()
    try:
        return asyncio.run(_main(spec, out))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
