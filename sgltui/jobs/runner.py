"""The job runner: sends a checked batch file through one server, writes each answer once.

Closed loop like the bench's load generator (one task per concurrent stream, the same httpx on
aiohttp transport and the same request path), with what a long job needs on top:
- concurrency changes live (`set_concurrency`): extra streams start, surplus ones end after
  their current request;
- `pause()` stops new sends and reports paused once nothing is in flight; `pause(force=True)`
  cancels what is in flight and sends it again after `resume()` (a swap's --force);
- `set_target(url)` points it at another server (after a swap) on a fresh connection pool;
- connection errors (refused, connect timeout, the server closing the connection: a server
  going away or not up yet, as in a swap) are retried without limit and never counted; 5xx,
  408/429, broken responses and SGLang aborts are retried MAX_RETRIES times with backoff; other
  4xx are final and go to the errors file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson

from sgltui.bench.loadgen import open_transport, post_bytes
from sgltui.core import retry
from sgltui.jobs import batchfile, warm_first
from sgltui.jobs.output import FLUSH_S, OutputLock, OutputWriter, disk_problem, scan

MAX_RETRIES = 8
BACKOFF_S = 0.5
BACKOFF_MAX_S = 30.0
CONNECT_BACKOFF_FIRST_S, CONNECT_BACKOFF_MAX_S = 0.1, 2.0
PROGRESS_S = 0.25  # a --choose trial batches two readings: a 3 s window gives its 6 batches
# ... and reads at 0.25 s of the server's time during a trial (jobs/choose.py reading_s): a
# simulator run faster than real time is read more often, never more than every MIN_PROGRESS_S
MIN_PROGRESS_S = 0.02

OK, FINAL, TRANSIENT, CONNECT = "ok", "final", "transient", "connect"
# smg's 404 while no worker serves the model (yet): "No worker available for model 'm'".
NO_WORKER_YET = b"No worker available for model"


@dataclass
class Counters:
    # done, failed and the token counts are of lines that reached the output file: what the
    # agent records per segment is then what a resume will find
    done: int = 0  # answered (200) by this run
    failed: int = 0  # final failures written to the errors file by this run
    out_tokens: int = 0
    in_tokens: int = 0
    retries: int = 0  # transient errors retried
    conn_errors: int = 0  # connection errors retried (not failures)
    requeued: int = 0  # in flight when a forced pause cancelled them


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _json_str(s: str | None) -> bytes:
    return orjson.dumps(s)


class Runner:
    def __init__(
        self,
        input_path: Path,
        output: Path,
        concurrency: int,
        emit: Callable[[dict], None],
        job_id: str = "job",
    ) -> None:
        self.input_path = input_path
        self.output = output
        self.concurrency = max(1, int(concurrency))
        self.emit = emit
        self.job_id = job_id
        self.c = Counters()
        self._unflushed = Counters()  # written to the buffer, not yet to the file
        self.total = 0
        self.resumed = 0
        self.in_flight = 0
        self.paused = False
        self.stopping: str | None = None  # "cancelled" | "stopped"
        self.url: str | None = None
        self.headers = {"Content-Type": "application/json"}
        self._go = asyncio.Event()  # set when sending may go on (not paused, a target known)
        self._transport: Any = None
        self._old_transports: list[Any] = []
        self._urls: dict[str, httpx.URL] = {}
        self._items: Iterator[batchfile.Item] | None = None
        self.warm: warm_first.Order | None = None  # where the prompts share prefixes
        self._workers: dict[int, asyncio.Task] = {}
        self._inflight: set[asyncio.Task] = set()
        self._writer: OutputWriter | None = None
        self._lock = OutputLock(output)
        self._seq = 0
        self._prefix = f"batch_req_{os.getpid():x}{int(time.time()):x}_".encode()
        self._all_done = asyncio.Event()
        self._active = 0
        self._cpu0: float | None = None
        self._t0: float | None = None
        self._exhausted = False
        self._paused_reported = False
        self.progress_s = PROGRESS_S  # set_cadence: the trial's readings
        # why the output cannot be written now ("disk full: ..."); nothing new is sent meanwhile
        self.disk_error: str | None = None

    # ---- control (from the agent) ---------------------------------------------------------------

    def set_target(self, url: str, api_key: str | None = None) -> None:
        url = url.rstrip("/")
        if self._transport is not None:
            self._old_transports.append(self._transport)  # closed once nothing is in flight
        # Always a fresh pool: after a swap the keep-alive connections (same URL or not) lead to
        # a server that is gone.
        self._transport = open_transport(0)
        self.url = url
        self._urls = {u: httpx.URL(url + u) for u in batchfile.URLS}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        else:
            self.headers.pop("Authorization", None)
        self._update_go()

    def pause(self, force: bool = False) -> None:
        self.paused = True
        self._paused_reported = False
        self._update_go()
        if force:
            for t in list(self._inflight):
                t.cancel()
        self._maybe_report_paused()

    def resume(self) -> None:
        self.paused = False
        self._update_go()

    def set_concurrency(self, n: int) -> None:
        self.concurrency = max(1, int(n))
        self._spawn_workers()

    def set_cadence(self, s: float | None) -> None:
        """Progress readings (and the output's flushes, which the readings count) every `s`
        seconds, within [MIN_PROGRESS_S, PROGRESS_S] (None: PROGRESS_S): a --choose trial on a
        simulator run faster than real time reads at the server's pace; a flush more often
        only loses less to a kill -9."""
        want = PROGRESS_S if s is None else float(s)
        self.progress_s = min(PROGRESS_S, max(MIN_PROGRESS_S, want))
        if self._writer is not None:
            self._writer.flush_s = min(FLUSH_S, self.progress_s)

    def set_launch(self, launch: str, most: int | None = None) -> None:
        """The server the job now sends to (the agent's launch id): a new one's prefix cache is
        empty, so the next items are warm-first (jobs/warm_first.py). The pass made at the job's
        start, before the agent said which server, is that server's. Reading ahead blocks this
        loop for a moment (parsing up to LOOKAHEAD lines); it comes with a swap, while paused.
        `most`: the most the pass sends first (its cache's warm-up, where a trial knows it)."""
        w = self.warm
        if w is None or launch == w.launch:
            return
        if w.launch is None and w.passes == 1:
            w.launch = launch
            w.trim(most)
            return
        w.cold(launch, most)
        self.emit({"t": "progress", **self.progress()})

    def stop(self, why: str = "stopped") -> None:
        """End the run: nothing new is sent, what is in flight is dropped (sent again on resume)."""
        if self.stopping is None:
            self.stopping = why
        self._go.set()  # wake waiting workers so they see `stopping`
        for t in list(self._inflight):
            t.cancel()

    def _update_go(self) -> None:
        if (not self.paused and self.url is not None and not self.disk_error) or self.stopping:
            self._go.set()
        else:
            self._go.clear()

    def _maybe_report_paused(self) -> None:
        if self.paused and self.in_flight == 0 and not self._paused_reported:
            self._paused_reported = True
            # What came back is written (and counted) first: a paused job's answered count
            # must not move after it said paused (it did, by up to a write batch, at the next
            # flush tick: test_pinned_job_makes_a_swap_ask_first saw 9 then 16 under load).
            if self._writer is not None:
                self._flush()
            self.emit({"t": "paused", **self.progress()})

    # ---- the run ------------------------------------------------------------------------------

    def progress(self) -> dict:
        c = self.c
        return {
            "total": self.total,
            "resumed": self.resumed,
            "done": c.done,
            "failed": c.failed,
            "out_tokens": c.out_tokens,
            "in_tokens": c.in_tokens,
            "retries": c.retries,
            "conn_errors": c.conn_errors,
            "requeued": c.requeued,
            "in_flight": self.in_flight,
            "paused": self.paused,
            "waiting": self.url is None,
            "concurrency": self.concurrency,
            "cpu_s": time.process_time(),
            # CPU of sending and writing only (not the input check or the resume scan)
            "cpu_run_s": time.process_time() - self._cpu0 if self._cpu0 is not None else 0.0,
            "run_s": time.monotonic() - self._t0 if self._t0 is not None else 0.0,
            "written": self._writer.written if self._writer else 0,
            "disk_error": self.disk_error,
            "warm_first": self.warm.report() if self.warm is not None else None,
        }

    def prepare(self, stamp: dict | None = None) -> dict:
        """Check the input whole (unless `stamp`, an earlier check, says the file is unchanged),
        take the output's lock, repair and read the output (blocking)."""
        checked = batchfile.unchanged(self.input_path, stamp) or batchfile.check(self.input_path)
        self.total = checked.total
        self._lock.acquire()
        done = scan(self.output)
        self.resumed = len(done.done)
        self._items = batchfile.items(self.input_path, skip=done.done)
        p = warm_first.plan(self.input_path)
        if p is not None:
            self._items = self.warm = warm_first.Order(self._items, p)
        return {
            "total": checked.total,
            "urls": checked.urls,
            "stamp": checked.stamp(),
            "resumed": self.resumed,
            "resumed_ok": done.ok,
            "resumed_failed": done.failed,
            "resumed_out_tokens": done.out_tokens,
            "repaired_bytes": done.repaired_bytes,
            "duplicates_found": done.duplicates,
            "warm_first": None if p is None else {"key_chars": p.key_chars, "distinct": p.distinct},
        }

    def release(self) -> None:
        """Give the output's lock back without running (after prepare() only)."""
        self._lock.release()

    async def run(self) -> str:
        assert self._items is not None, "prepare() first"
        self._writer = OutputWriter(self.output)
        self._writer.on_flush = self._commit
        self._writer.flush_s = min(FLUSH_S, self.progress_s)
        self._cpu0, self._t0 = time.process_time(), time.monotonic()
        if self.warm is not None and self.warm.passes == 0:
            self.warm.cold()  # the job's start: its server is said (set_launch) once known
        ticker = asyncio.get_running_loop().create_task(self._tick())
        try:
            self._spawn_workers()
            await self._all_done.wait()
            state = self.stopping or "done"
        finally:
            ticker.cancel()
            for t in self._workers.values():
                t.cancel()
            for t in self._workers.values():
                with contextlib.suppress(asyncio.CancelledError):
                    await t
            with contextlib.suppress(OSError):  # what the disk refuses is sent again next run
                self._writer.close()
            self._lock.release(remove=self._exhausted and not self.stopping)
            await self.close_transports()
        return state

    async def close_transports(self) -> None:
        for tr in self._old_transports + [self._transport]:
            if tr is not None:
                with contextlib.suppress(aiohttp.ClientError, OSError, RuntimeError):
                    await tr.aclose()
        self._old_transports.clear()
        self._transport = None

    async def _tick(self) -> None:
        last = 0.0
        while True:
            await asyncio.sleep(min(0.05, self.progress_s))
            if self._writer is not None and self._writer.due():
                self._flush()
            now = time.monotonic()
            if now - last >= self.progress_s:
                last = now
                self.emit({"t": "progress", **self.progress()})
            if self._old_transports and self.in_flight == 0:
                old, self._old_transports = self._old_transports, []
                for tr in old:
                    with contextlib.suppress(aiohttp.ClientError, OSError, RuntimeError):
                        await tr.aclose()

    def _flush(self) -> None:
        """Write what is held. A refused write stops the sending (answers would only pile up
        here) and says why at once; the next write that succeeds lets it go on by itself."""
        assert self._writer is not None
        try:
            self._writer.flush()
        except OSError as exc:
            problem = disk_problem(exc, self.output)
            if problem != self.disk_error:
                self.disk_error = problem
                self._update_go()
                self.emit({"t": "progress", **self.progress()})
            return
        if self.disk_error is not None:
            self.disk_error = None
            self._update_go()
            self.emit({"t": "progress", **self.progress()})

    def _add(self, line: bytes, failed: bool = False) -> None:
        assert self._writer is not None
        self._writer.add(line, failed)
        if self._writer.full() and self.disk_error is None:
            self._flush()

    def _spawn_workers(self) -> None:
        if self._items is None or self._writer is None:
            return
        loop = asyncio.get_running_loop()
        for wid in range(self.concurrency):
            t = self._workers.get(wid)
            if t is None or t.done():
                self._workers[wid] = loop.create_task(self._worker(wid))

    async def _worker(self, wid: int) -> None:
        self._active += 1
        try:
            while wid < self.concurrency and not self.stopping:
                item = next(self._items, None)  # type: ignore[arg-type]
                if item is None:
                    self._exhausted = True
                    break
                await self._handle(item)
        finally:
            self._active -= 1
            # a surplus stream ending (concurrency lowered) is not the end of the job
            if self._active == 0 and (self._exhausted or self.stopping):
                self._all_done.set()

    async def _handle(self, item: batchfile.Item) -> None:
        attempts = 0
        # Connection errors (a server going away, not up yet) are waited out without limit;
        # other retryable answers count towards MAX_RETRIES.
        connect = retry.Backoff(first=CONNECT_BACKOFF_FIRST_S, cap=CONNECT_BACKOFF_MAX_S)
        answer = retry.Backoff(first=BACKOFF_S, cap=BACKOFF_MAX_S)
        while True:
            await self._go.wait()
            if self.stopping:
                return  # not answered: the next run sends it again
            t = asyncio.get_running_loop().create_task(self._send(item))
            self._inflight.add(t)
            self.in_flight += 1
            try:
                await asyncio.wait((t,))
            finally:
                self._inflight.discard(t)
                self.in_flight -= 1
            # "paused" is reported only once what came back is in the write buffer: reported
            # before it (as it was, from the finally above), the last answer of the flight was
            # counted at the next flush tick, and a paused job's answered moved by one (CI saw
            # test_pinned_job_makes_a_swap_ask_first go from 15 to 16).
            if t.cancelled():
                self._maybe_report_paused()
                if self.stopping:
                    return
                self.c.requeued += 1
                continue
            kind, status, data, info = t.result()
            if kind == OK:
                self._write_ok(item, data, info)
            elif kind == FINAL:
                self._write_failed(item, status, data, info)
            self._maybe_report_paused()
            if kind in (OK, FINAL):
                return
            if kind == CONNECT:
                self.c.conn_errors += 1
                await asyncio.sleep(connect.failed())
                continue
            attempts += 1
            if attempts > MAX_RETRIES:
                self._write_failed(item, status, data, f"{info} (after {MAX_RETRIES} retries)")
                return
            self.c.retries += 1
            await asyncio.sleep(answer.failed())

    async def _send(self, item: batchfile.Item) -> tuple[str, int, Any, Any]:
        try:
            status, data = await post_bytes(
                self._transport, self._urls[item.url], item.body, self.headers
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, aiohttp.ClientConnectorError) as exc:
            return CONNECT, 0, None, _one_line(exc)
        except (httpx.HTTPError, aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            return TRANSIENT, 0, None, _one_line(exc)
        if status == 200:
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                return TRANSIENT, status, data, "the server's answer is not JSON"
            choices = obj.get("choices") or []
            if isinstance(obj, dict) and obj.get("error") and not choices:
                # A gateway whose worker died mid-answer can relay the cut as an error object
                # under HTTP 200 (smg's in-band stream_error): not an answer, send it again.
                return TRANSIENT, status, data, "an error in a 200 answer (a worker went away)"
            if any(ch.get("finish_reason") == "abort" for ch in choices if isinstance(ch, dict)):
                return TRANSIENT, status, data, "aborted by the server (abort or retract)"
            return OK, status, data, obj
        if status >= 500 or status in (408, 429):
            return TRANSIENT, status, data, f"HTTP {status}"
        if status == 404 and NO_WORKER_YET in bytes(data or b""):
            # SGLang's gateway (smg) between workers: restarted and re-registering them, or
            # every worker of a pool out at once. It ends by itself; the retries bound it.
            return TRANSIENT, status, data, "HTTP 404: the gateway has no worker for it yet"
        return FINAL, status, data, f"HTTP {status}"

    def _commit(self) -> None:
        c, p = self.c, self._unflushed
        c.done += p.done
        c.failed += p.failed
        c.out_tokens += p.out_tokens
        c.in_tokens += p.in_tokens
        self._unflushed = Counters()

    def _line_id(self) -> bytes:
        self._seq += 1
        return self._prefix + str(self._seq).encode()

    def _write_ok(self, item: batchfile.Item, data: bytes, obj: dict) -> None:
        usage = obj.get("usage") or {}
        p = self._unflushed
        p.done += 1
        if self.warm is not None:
            self.warm.written(item.custom_id)
        p.out_tokens += int(usage.get("completion_tokens") or 0)
        p.in_tokens += int(usage.get("prompt_tokens") or 0)
        if b"\n" in data:  # one response per line, whatever the server's formatting
            data = orjson.dumps(obj)
        self._add(
            b'{"id":"'
            + self._line_id()
            + b'","custom_id":'
            + _json_str(item.custom_id)
            + b',"response":{"status_code":200,"request_id":'
            + _json_str(str(obj.get("id") or ""))
            + b',"body":'
            + data
            + b'},"error":null}\n'
        )

    def _write_failed(self, item: batchfile.Item, status: int, data: Any, why: str) -> None:
        self._unflushed.failed += 1
        if self.warm is not None:
            self.warm.written(item.custom_id)
        response = None
        if status:
            try:
                body: Any = orjson.loads(data) if data else None
            except orjson.JSONDecodeError:
                body = (data or b"")[:2000].decode(errors="replace")
            response = {"status_code": status, "request_id": None, "body": body}
        line = {
            "id": self._line_id().decode(),
            "custom_id": item.custom_id,
            "response": response,
            "error": {"code": f"http_{status}" if status else "request_failed", "message": why},
        }
        self._add(orjson.dumps(line) + b"\n", failed=True)
