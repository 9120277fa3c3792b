"""The main process's side of the engine (SGLang's TokenizerManager): child processes, the pipe
to scheduler rank 0, and one state object per in-flight request.

Messages on the pipe are small tuples; tokens come back one message per forward pass carrying
every request that advanced, so the cost per token stays low at --sim-time-scale 0.

The event loop never blocks on the pipe: messages to a scheduler go through an `_Outbox` whose
own thread does the (possibly blocking) writes, coalescing whatever queued up meanwhile into one
("batch", [...]) message, and the loop reads the scheduler's output only when the pipe is
readable, in bounded slices. With a synchronous send on the loop, a scheduler that is itself
blocked writing tokens back (a full pipe both ways, e.g. hundreds of streams arriving at
--sim-time-scale 0) deadlocked the two processes; the scheduler side also reads its inbound
pipe from a thread of its own (worker.py), so either side alone breaks the cycle.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from sgltui.sim.worker import detokenizer_main, scheduler_main

log = logging.getLogger("sglang")

_READ_SLICE_S = 0.02  # longest the event loop spends reading the pipe before serving HTTP again
_MAX_BATCH = 4096  # messages coalesced into one write


class _Outbox:
    """Messages to one child, written by a thread of their own: `put` never blocks, so the event
    loop keeps serving (and reading tokens) while the child is busy or its pipe is full. Order is
    kept; whatever queued up during a write goes out as one ("batch", [...]) message."""

    def __init__(self, conn, name: str):
        self.conn = conn
        self.closed = False
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, msg: tuple) -> None:
        if not self.closed:
            self._q.put(msg)

    def close(self, timeout: float = 1.0) -> None:
        """Send what is queued (up to `timeout`), then stop the thread."""
        self._q.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            msg = self._q.get()
            if msg is None:
                return
            batch = [msg]
            stop = False
            while len(batch) < _MAX_BATCH:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            try:
                self.conn.send(batch[0] if len(batch) == 1 else ("batch", batch))
            except (OSError, ValueError, EOFError):  # the child is gone (or the pipe closed)
                self.closed = True
                return
            if stop:
                return


@dataclass
class ReqState:
    rid: str
    streaming: bool
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    output_ids: list[int] = field(default_factory=list)
    finish: dict | None = None
    meta: dict = field(default_factory=dict)
    created: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None
    last_token_at: float | None = None
    itls: list[float] = field(default_factory=list)
    prompt_tokens: int = 0


class Engine:
    def __init__(self, cfg: dict, on_stats=None, on_request_done=None):
        self.cfg = cfg
        self.args = cfg["args"]
        self.tp = int(self.args.tp_size or 1)
        self.ctx = multiprocessing.get_context("spawn")
        self.procs: list = []
        self.conns: list = []
        self.outboxes: list[_Outbox] = []
        self.detok: multiprocessing.process.BaseProcess | None = None
        self.detok_conn: Connection | None = None
        self.reqs: dict[str, ReqState] = {}
        self.stats: dict = {}
        self.phase = "spawned"
        self.on_phase: Callable[[str], None] | None = None
        self.on_stats = on_stats
        self.on_request_done = on_request_done
        self.ready_info: dict | None = None
        self._ready = asyncio.Event()
        self._ranks_ready = 0
        self._flush_waiters: dict[int, asyncio.Future] = {}
        self._control_waiters: list[asyncio.Future] = []
        self._counter = itertools.count()
        self.child_exit: tuple[str, int, int] | None = None  # (name, pid, exit code)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Any output at all counts as a heartbeat for /health, as SGLang's last_receive_tstamp.
        self.last_output_at = 0.0
        self.last_output_wall = 0.0

    # ---- processes ------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = loop = asyncio.get_running_loop()
        for rank in range(self.tp):
            parent, child = self.ctx.Pipe()
            p = self.ctx.Process(
                target=scheduler_main,
                args=(child, self.cfg, rank),
                name=f"scheduler_{rank}",
                daemon=False,
            )
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
            self.outboxes.append(_Outbox(parent, f"sim-send-{rank}"))
            loop.add_reader(parent.fileno(), self._on_readable, rank)
        parent, child = self.ctx.Pipe()
        self.detok = detok = self.ctx.Process(
            target=detokenizer_main, args=(child,), name="detokenizer", daemon=False
        )
        detok.start()
        child.close()
        self.detok_conn = parent

    @property
    def pids(self) -> list[int]:
        out = [os.getpid()] + [p.pid for p in self.procs if p.pid]
        if self.detok is not None and self.detok.pid:
            out.append(self.detok.pid)
        return out

    def check_children(self) -> tuple[str, int, int] | None:
        """The first child that died on its own, as (name, pid, exit code)."""
        for p in self.procs + ([self.detok] if self.detok else []):
            if p.exitcode is not None:
                return p.name, p.pid, p.exitcode
        return None

    def kill_children(self) -> None:
        for p in self.procs + ([self.detok] if self.detok else []):
            if p.pid and p.exitcode is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs + ([self.detok] if self.detok else []):
            p.join(timeout=5)

    def shutdown_children(self, timeout: float = 15.0) -> list[int]:
        """ShutdownReq to every child, wait up to `timeout`; returns pids that had to be killed."""
        for box in self.outboxes:
            box.put(("shutdown",))  # behind anything still queued, from the one writer thread
        if self.detok_conn is not None:
            try:
                self.detok_conn.send(("shutdown",))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + timeout
        everyone = self.procs + ([self.detok] if self.detok else [])
        for p in everyone:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = [p.pid for p in everyone if p.exitcode is None]
        self.kill_children()
        return stuck

    # ---- pipe -------------------------------------------------------------------------------------
    def _on_readable(self, rank: int) -> None:
        """Read what the scheduler sent, for at most _READ_SLICE_S: a scheduler at time scale 0
        can produce output as fast as it is read, and the HTTP side must get its turns. What is
        left keeps the pipe readable, so the loop calls back on its next iteration."""
        conn = self.conns[rank]
        end = time.monotonic() + _READ_SLICE_S
        try:
            while conn.poll():
                self._dispatch(rank, conn.recv())
                if time.monotonic() >= end:
                    break
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(conn.fileno())

    def _dispatch(self, rank: int, msg) -> None:
        kind = msg[0]
        if kind == "out":
            now = time.monotonic()
            self.last_output_at = now
            self.last_output_wall = time.time()
            for rid, new, finish, meta in msg[1]:
                st = self.reqs.get(rid)
                if st is None:
                    continue
                if new:
                    if st.first_token_at is None:
                        st.first_token_at = now
                    elif st.last_token_at is not None:
                        gap = (now - st.last_token_at) / len(new)
                        st.itls.extend([gap] * len(new))
                    st.last_token_at = now
                    st.output_ids.extend(new)
                st.meta = meta
                if finish is not None:
                    st.finish = finish
                st.queue.put_nowait(1)
                if finish is not None:
                    self._finished(st)
        elif kind == "stats":
            self.stats = msg[1]
            if self.on_stats:
                self.on_stats(msg[1])
        elif kind == "phase":
            self.phase = msg[1]
            if self.on_phase:
                self.on_phase(msg[1])
        elif kind == "ready":
            self._ranks_ready += 1
            if rank == 0:
                self.ready_info = msg[1]
            if self._ranks_ready == self.tp:
                self._ready.set()
        elif kind == "control_result":
            if self._control_waiters:
                fut = self._control_waiters.pop(0)
                if not fut.done():
                    fut.set_result(msg[1])
        elif kind == "flush_result":
            fid, ok = msg[1]
            waiter = self._flush_waiters.pop(fid) if fid in self._flush_waiters else None
            if waiter is not None and not waiter.done():
                waiter.set_result(bool(ok))

    def _finished(self, st: ReqState) -> None:
        self.reqs.pop(st.rid, None)
        if self.on_request_done and not st.rid.startswith("HEALTH_CHECK"):
            self.on_request_done(st)

    async def wait_ready(self) -> dict:
        await self._ready.wait()
        return self.ready_info or {}

    # ---- requests -----------------------------------------------------------------------------------
    def new_rid(self) -> str:
        return uuid.uuid4().hex

    def submit(
        self, rid: str | None, input_ids: list[int], sampling: dict, streaming: bool
    ) -> ReqState:
        rid = rid or self.new_rid()
        if rid in self.reqs:
            rid = f"{rid}-{next(self._counter)}"
        st = ReqState(rid=rid, streaming=streaming, prompt_tokens=len(input_ids))
        self.reqs[rid] = st
        self.outboxes[0].put(
            (
                "add",
                {
                    "rid": rid,
                    "input_ids": input_ids,
                    "max_new_tokens": sampling.get("max_new_tokens"),
                    "ignore_eos": bool(sampling.get("ignore_eos", False)),
                    "stop": sampling.get("stop"),
                    "stop_token_ids": sampling.get("stop_token_ids"),
                },
            )
        )
        return st

    def abort(self, rid: str | None) -> None:
        self.outboxes[0].put(("abort", rid))

    async def flush_cache(self, timeout: float = 0.0) -> bool:
        """Flush once the scheduler is fully idle, waiting up to `timeout` seconds inside its
        loop (SGLang's flush wrapper); False when it was not idle in time."""
        fid = next(self._counter)
        fut = asyncio.get_running_loop().create_future()
        self._flush_waiters[fid] = fut
        self.outboxes[0].put(("flush", fid, timeout))
        return await fut

    async def control(self, msg: tuple):
        """A control message to scheduler rank 0 (sim/memory_saver.py), awaited until it answers;
        a rank that dies on it never does (the server goes down around the caller)."""
        fut = asyncio.get_running_loop().create_future()
        self._control_waiters.append(fut)
        self.outboxes[0].put(msg)
        return await fut

    @property
    def num_active(self) -> int:
        return sum(1 for r in self.reqs if not r.startswith("HEALTH_CHECK"))
