"""`python -m sglang.launch_server FLAGS` stand-in (see __init__): one child holds GPU_HOLD_GIB of
real GPU memory with torch on the GPU CUDA_VISIBLE_DEVICES gives it (a slot's GPU), like a TP
rank, then the simulator serves with the same flags: SGLang's HTTP API as smg polls it
(/health, /v1/models owned_by sglang, /server_info, /model_info, /v1/loads, completions and chat,
streaming and not). Without torch or CUDA it says so and holds nothing (the CPU dry run).

The memory saver, as SGLang 0.5.23 has it (read from its http_server.py): with
--enable-memory-saver, `POST /release_memory_occupation` makes the holder copy its bytes to pinned
host memory (--enable-weights-cpu-backup; without it they are discarded and come back as garbage)
and free the GPU memory, and `POST /resume_memory_occupation` allocates again and copies them
back; without --enable-memory-saver both do nothing. Both answer 200 `null`, as SGLang does,
unless the holder itself failed (500, one line why). A second release, or a resume of memory not
released, ends the holder with torch-memory-saver's exit(1) and the server with it; the
simulator inside applies SGLang's own rules to the other tags (sgltui/sim/memory_saver.py). The
simulator's modelled copy times are off here (the holder's copies are the real ones). Generation requests wait while the server
is paused (`/pause_generation`, as SGLang's queue) and while the memory is not held (before the
holder holds it, and while released). `GET /fake_sglang/holder` (not
SGLang's; `?verify=1` checks every byte) gives the holder's state and timings. The launcher and
the holder talk over a socketpair, one JSON line each way (gpu_holder.py); the HTTP side calls it
from a thread, so the event loop keeps serving during a copy.
"""

import asyncio
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading

log = logging.getLogger("sglang")
GENERATION = ("/generate", "/v1/completions", "/v1/chat/completions")


class HolderGone(Exception):
    pass


class HolderLink:
    """The launcher's end of the socket: requests one at a time, replies in order; a reader
    thread keeps `state` current (the holder's "held" line comes unasked)."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        self.sock, self.wire = mine, mine.makefile("rwb")
        env = dict(os.environ, FAKE_SGLANG_CTL_FD=str(theirs.fileno()))
        self.proc = subprocess.Popen(  # same process group: the agent's stop must get it
            [sys.executable, os.path.join(os.path.dirname(__file__), "gpu_holder.py")],
            env=env,
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        self.state: dict = {"held": False, "released": False}
        self.gone = False
        self.replies: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, name="holder-link", daemon=True).start()

    def _read(self) -> None:
        for line in self.wire:
            msg = json.loads(line)
            self.state = msg
            if msg.get("event") == "failed":
                self._fail(f"the GPU holder failed: {msg.get('error')}")
            elif "reply" in msg:
                self.replies.put(msg)
        self.replies.put({"reply": "error", "error": "the GPU holder is gone"})
        rc = self.proc.wait()
        if rc < 0:  # a signal: the server's stop reached its whole process group
            self.gone = True
            log.info(f"fake_sglang: the GPU holder ended by signal {-rc}")
        else:
            self._fail(f"the GPU holder (pid {self.proc.pid}) exited with code {rc}")

    def _fail(self, why: str) -> None:
        # A scheduler rank that dies takes SGLang's server down with it (SIGQUIT to the main
        # process, which kills the whole tree); so does the holder.
        if self.gone:
            return
        self.gone = True
        log.error(f"Scheduler hit an exception: fake_sglang: {why}")
        os.kill(os.getpid(), signal.SIGQUIT)

    def serving(self) -> bool:
        return bool(self.state.get("held")) and not self.state.get("released")

    def call(self, op: str, **kw) -> dict:
        """One request to the holder, blocking (callers run it in a thread)."""
        with self.lock:
            if self.gone:
                raise HolderGone("the GPU holder is gone")
            self.wire.write(json.dumps({"op": op, **kw}).encode() + b"\n")
            self.wire.flush()
            reply = self.replies.get()
        if reply.get("reply") == "error":
            raise HolderGone(reply.get("error", "?"))
        return reply


def saver_middleware(link: HolderLink, api):
    from aiohttp import web

    saver = bool(getattr(api.args, "enable_memory_saver", False))
    backup = bool(getattr(api.args, "enable_weights_cpu_backup", False))

    async def tags(request) -> list:
        raw = await request.read()  # aiohttp keeps the body: the simulator's handler reads it too
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            body = {}
        got = body.get("tags") if isinstance(body, dict) else None
        return list(got) if got else ["kv_cache", "weights", "cuda_graph"]

    async def holder_op(op: str) -> web.Response | None:
        try:
            await asyncio.to_thread(link.call, op, backup=backup)
        except HolderGone as e:
            return web.json_response({"error": f"fake_sglang: {e}"}, status=500)
        return None

    @web.middleware
    async def middleware(request, handler):
        path = request.rel_url.path
        if request.method == "POST" and path in (
            "/release_memory_occupation",
            "/resume_memory_occupation",
        ):
            op = "release" if path.startswith("/release") else "resume"
            # The held block stands for the weights: other tags hold nothing here.
            if saver and "weights" in await tags(request):
                failed = await holder_op(op)
                if failed is not None:
                    return failed
            resp = await handler(request)  # the simulator's own, where it has one
            return web.json_response(None) if resp.status == 404 else resp
        if path == "/fake_sglang/holder":
            try:
                op = "verify" if request.query.get("verify") else "state"
                return web.json_response(await asyncio.to_thread(link.call, op))
            except HolderGone as e:
                return web.json_response({"error": f"fake_sglang: {e}"}, status=500)
        if path in GENERATION:
            # Held back, as in SGLang's paused queue: while paused, and while the memory is not
            # held (before the holder holds it, and released).
            while (api.s.paused or not link.serving()) and not link.gone:
                await asyncio.sleep(0.005)
        return await handler(request)

    return middleware


def install(link: HolderLink) -> None:
    """Adds the middleware to the simulator's app (innermost: its access log and auth apply)."""
    from sgltui.sim import http_api

    build = http_api.Api.app

    def app(api):
        a = build(api)
        a.middlewares.append(saver_middleware(link, api))
        return a

    http_api.Api.app = app


if __name__ == "__main__":
    install(HolderLink())
    sys.argv = [
        sys.argv[0],
        *sys.argv[1:],
        "--sim-time-scale",
        os.environ.get("SIM_TIME_SCALE", "0.05"),
        # The holder moves real bytes: the simulator adds no modelled pinning or copy time.
        "--sim-pin-s-per-gib",
        "0",
        "--sim-pinned-bandwidth-gbs",
        "1000000",
    ]
    from sgltui.sim.server import main

    sys.exit(main())
