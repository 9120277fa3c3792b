"""The load generator: closed-loop streaming requests at a fixed concurrency, in its own process.

`python -m sgltui.bench.loadgen --config-json J --records PATH` runs one point (one concurrency,
one repeat): an unmeasured warmup at the same concurrency, then the measured requests. It prints
JSON lines on stdout: {"type": "progress", ...} a few times a second, then one
{"type": "result", "metrics": {...}} or {"type": "error", "message": "one line"} (exit 2).
The API key comes from the environment (SGLTUI_BENCH_API_KEY), never from argv.

Client design (each choice keeps the client from being the bottleneck): httpx on the httpx-aiohttp transport with an explicit
connection limit equal to the concurrency, no read timeout, a 10 MB read buffer, uvloop and
orjson when installed, GC frozen during the run, SSE split from raw chunks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from sgltui.bench.apis import APIS, SSESplitter, StreamError, loads, make_reader, request_body
from sgltui.bench.metrics import clean_json, compute_metrics
from sgltui.bench.records import RecordWriter, read_records
from sgltui.bench.workload import Workload, WorkloadError, make_workload
from sgltui.core import config as env_config
from sgltui.core import stats

API_KEY_ENV = env_config.BENCH_API_KEY_ENV
perf = time.perf_counter


@dataclass
class LoadConfig:
    base_url: str
    concurrency: int
    api: str = "completions"
    requests: int | None = None  # measured requests (after warmup) ...
    duration: float | None = None  # ... or seconds of issuing new requests
    warmup: int | None = None  # default: one request per concurrent stream
    input_len: int = 256
    output_len: int = 128
    workload: str = "random"
    seed: int = 42
    model: str | None = None
    ignore_eos: bool = True
    flush_cache: bool = True
    progress_interval: float = 0.5
    transport: str = "httpx"  # "aiohttp": baseline for bench/bench_loadgen.py only
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadConfig:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        cfg = cls(**known)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"unknown api {self.api!r}; use one of {', '.join(APIS)}")
        if self.transport not in ("httpx", "aiohttp"):
            raise ValueError("transport must be httpx or aiohttp")
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if (self.requests is None) == (self.duration is None):
            raise ValueError("give exactly one of requests or duration")
        if self.requests is not None and self.requests < 1:
            raise ValueError("requests must be at least 1")
        if self.duration is not None and self.duration <= 0:
            raise ValueError("duration must be positive")


def client_session(limit: int) -> aiohttp.ClientSession:
    """The load generator's aiohttp session (also the transport of sgltui/jobs/).

    Explicit limits: aiohttp's and httpx's defaults (100) silently cap concurrency;
    `limit=0` means no cap, for callers that bound concurrency themselves.
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, limit_per_host=0, keepalive_timeout=60),
        read_bufsize=10 * 1024 * 1024,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
    )


def open_transport(limit: int) -> AiohttpTransport:
    """httpx's transport on the aiohttp session: what every request of the bench goes through."""
    return AiohttpTransport(client=client_session(limit))


NO_READ_TIMEOUT = {"timeout": httpx.Timeout(None, connect=10.0).as_dict()}


async def post_bytes(
    transport: AiohttpTransport, url: httpx.URL, body: bytes, headers: dict[str, str]
) -> tuple[int, bytes]:
    """One non-streamed POST straight on the transport (no client machinery, as _open_httpx):
    the status and the whole body."""
    request = httpx.Request("POST", url, content=body, headers=headers, extensions=NO_READ_TIMEOUT)
    resp = await transport.handle_async_request(request)
    try:
        return resp.status_code, await resp.aread()
    finally:
        await resp.aclose()


class FatalLoadError(Exception):
    """The run cannot go on (server unreachable, every request refused)."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class LoadGenerator:
    def __init__(
        self,
        cfg: LoadConfig,
        workload: Workload,
        api_key: str | None = None,
        on_progress: Callable[[dict], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.workload = workload
        self.url = cfg.base_url.rstrip("/") + APIS[cfg.api]
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.on_progress = on_progress
        self.in_flight = 0
        self.peak_in_flight = 0
        self.done = 0
        self.failed = 0
        self.out_tokens = 0
        self.phase = "warmup"
        self.total = 0
        self.consecutive_connect_errors = 0
        self.fatal: str | None = None
        self.origin = perf()
        self.itl = stats.LogHistogram()
        self.buckets = stats.TokenBuckets(self.origin)
        self.writer: RecordWriter | None = None
        self._session: aiohttp.ClientSession | None = None
        self._open = self._open_httpx
        self._transport: AiohttpTransport | None = None
        self._httpx_url = httpx.URL(self.url)
        self._httpx_ext = {"timeout": httpx.Timeout(None, connect=10.0).as_dict()}

    def _session_for_load(self) -> aiohttp.ClientSession:
        return client_session(self.cfg.concurrency)

    def _client(self) -> httpx.AsyncClient:
        c = self.cfg.concurrency
        self._transport = AiohttpTransport(client=self._session_for_load())
        return httpx.AsyncClient(
            transport=self._transport,
            timeout=httpx.Timeout(None, connect=10.0),
            limits=httpx.Limits(max_connections=c, max_keepalive_connections=c),
        )

    @contextlib.asynccontextmanager
    async def _open_httpx(self, client: httpx.AsyncClient, body: bytes):
        # httpx Request/Response straight on the transport: the client's per-request machinery
        # (URL merging, cookie jar, auth and redirect flows) cost ~0.3 ms a request and this
        # load needs none of it; the response stream is read as the transport delivers it.
        request = httpx.Request(
            "POST", self._httpx_url, content=body, headers=self.headers, extensions=self._httpx_ext
        )
        assert self._transport is not None, "the httpx client is made with its transport"
        resp = await self._transport.handle_async_request(request)
        stream = resp.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        try:
            yield resp.status_code, stream.__aiter__, resp.aread
        finally:
            await resp.aclose()

    @contextlib.asynccontextmanager
    async def _open_aiohttp(self, client: httpx.AsyncClient, body: bytes):
        # Baseline only (transport "aiohttp"): the same loop and bookkeeping on a bare aiohttp
        # session, so bench/bench_loadgen.py can price the httpx layer by itself.
        assert self._session is not None
        async with self._session.post(self.url, data=body, headers=self.headers) as resp:
            yield resp.status, resp.content.iter_any, resp.read

    async def _request(self, client: httpx.AsyncClient, i: int, measured: bool) -> None:
        cfg = self.cfg
        item = self.workload.item(i)
        body = request_body(cfg.api, item.prompt, item.output_len, cfg.model, cfg.ignore_eos)
        reader = make_reader(cfg.api)
        splitter = SSESplitter()
        itl, buckets = self.itl, self.buckets
        ttft: float | None = None
        t_last = 0.0
        chunks = 0
        error: str | None = None
        self.in_flight += 1
        if self.in_flight > self.peak_in_flight:
            self.peak_in_flight = self.in_flight
        t_send = perf()
        try:
            async with self._open(client, body) as (status, raw_chunks, read_body):
                if status != 200:
                    text = (
                        (await read_body())[:200]
                        .decode(errors="replace")
                        .strip()
                        .replace("\n", " ")
                    )
                    error = f"HTTP {status}: {text or 'no body'}"
                else:
                    done = False
                    async for raw in raw_chunks():
                        now = perf()
                        for data in splitter.feed(raw):
                            if data == b"[DONE]":
                                done = True
                                break
                            n = reader.feed(loads(data))
                            if n:
                                if ttft is None:
                                    ttft = now - t_send
                                else:
                                    # a chunk of n tokens: its gap split into n equal parts (as SGLang's ITL)
                                    itl.add((now - t_last) / n, n)
                                t_last = now
                                chunks += 1
                                if measured:
                                    buckets.add(now, n)
                        if done:
                            break
            self.consecutive_connect_errors = 0
        except StreamError as exc:
            error = str(exc)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            error = _one_line(exc)
            self.consecutive_connect_errors += 1
            if self.consecutive_connect_errors >= 2 * cfg.concurrency + 8 and self.done == 0:
                self.fatal = f"cannot connect to {cfg.base_url} ({error}); check the server is running and ready"
        except (httpx.HTTPError, aiohttp.ClientError, OSError, ValueError) as exc:
            error = _one_line(exc)
        finally:
            self.in_flight -= 1
        out, from_server = reader.output_tokens()
        if error is None and ttft is None:
            error = "stream ended without any content"
        if error is None and out != reader.counted and measured:
            # the server's count is the truth; chunk-based attribution is corrected at t_last
            buckets.add(t_last, out - reader.counted)
        ok = error is None
        if ok:
            self.done += 1
            self.out_tokens += out
        else:
            self.failed += 1
        if measured and self.writer is not None:
            self.writer.write(
                {
                    "i": i,
                    "t_send": t_send - self.origin,
                    "ttft": ttft if ok else None,
                    "e2e": (t_last - t_send) if ok else None,
                    "in": reader.prompt_tokens,
                    "out": out if ok else 0,
                    "cached": reader.cached_tokens,
                    "chunks": chunks,
                    "usage": "server" if from_server else "chunks",
                    "ok": ok,
                    "error": error,
                }
            )

    async def _phase(
        self,
        client: httpx.AsyncClient,
        start: int,
        count: int | None,
        deadline: float | None,
        measured: bool,
    ) -> None:
        next_i = start
        end = start + count if count is not None else None

        async def worker() -> None:
            nonlocal next_i
            while self.fatal is None:
                if end is not None and next_i >= end:
                    return
                if deadline is not None and perf() >= deadline:
                    return
                i = next_i
                next_i += 1
                await self._request(client, i, measured)

        n_workers = self.cfg.concurrency if end is None else min(self.cfg.concurrency, end - start)
        await asyncio.gather(*(worker() for _ in range(n_workers)))

    async def _progress_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.progress_interval)
            self._emit_progress()

    def _emit_progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(
                {
                    "type": "progress",
                    "phase": self.phase,
                    "done": self.done,
                    "failed": self.failed,
                    "total": self.total,
                    "in_flight": self.in_flight,
                    "out_tokens": self.out_tokens,
                    "elapsed": perf() - self.origin,
                }
            )

    async def _preflight(self, client: httpx.AsyncClient) -> None:
        """Fail fast when nothing listens, and learn the served model name for OpenAI requests."""
        try:
            resp = await client.get(
                self.cfg.base_url.rstrip("/") + "/v1/models",
                headers=self.headers,
                timeout=httpx.Timeout(30.0, connect=10.0),
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
            raise FatalLoadError(
                f"cannot connect to {self.cfg.base_url} ({_one_line(exc)}); "
                "check the server is running and the URL"
            ) from None
        except httpx.HTTPError:
            return  # the requests themselves will report what is wrong
        if self.cfg.model or self.cfg.api == "generate":
            return
        try:
            data = resp.json().get("data") or []
            if data:
                self.cfg.model = data[0].get("id")
        except (ValueError, AttributeError):
            pass

    async def _flush_cache(self, client: httpx.AsyncClient) -> bool:
        # Decide the prefix-cache state explicitly: start every point from an empty cache.
        try:
            resp = await client.post(
                self.cfg.base_url.rstrip("/") + "/flush_cache?timeout=30",
                headers=self.headers,
                timeout=httpx.Timeout(40.0, connect=10.0),
            )
            return resp.status_code == 200
        except httpx.HTTPError:
            return False

    async def run(self, records_path: Path) -> dict[str, Any]:
        cfg = self.cfg
        warmup = cfg.concurrency if cfg.warmup is None else cfg.warmup
        client = self._client()
        if cfg.transport == "aiohttp":
            self._session = self._session_for_load()
            self._open = self._open_aiohttp
        progress = asyncio.create_task(self._progress_loop())
        gc.collect()
        gc.freeze()  # GC pauses show up as ITL spikes
        try:
            await self._preflight(client)
            flushed = await self._flush_cache(client) if cfg.flush_cache else False
            self.total = warmup
            if warmup:
                await self._phase(client, 0, warmup, None, measured=False)
            if self.fatal:
                raise FatalLoadError(self.fatal)
            warm_failed, warm_tokens = self.failed, self.out_tokens
            self.phase, self.done, self.failed, self.out_tokens = "measure", 0, 0, 0
            self.peak_in_flight = 0
            self.total = cfg.requests or 0
            self.itl = stats.LogHistogram()
            self.writer = RecordWriter(records_path)
            t0 = perf()
            self.buckets = stats.TokenBuckets(t0)
            cpu0 = time.process_time()
            deadline = t0 + cfg.duration if cfg.duration else None
            await self._phase(client, warmup, cfg.requests, deadline, measured=True)
            cpu = time.process_time() - cpu0
            wall = perf() - t0
            if self.fatal:
                raise FatalLoadError(self.fatal)
        finally:
            progress.cancel()
            gc.unfreeze()
            if self.writer is not None:
                self.writer.close()
            await client.aclose()
            if self._session is not None:
                await self._session.close()
        self._emit_progress()
        self.buckets.origin -= self.origin  # records are relative to the origin
        metrics = compute_metrics(read_records(records_path), self.itl, self.buckets)
        out = metrics["total_output_tokens"]
        metrics.update(
            {
                "max_concurrency": cfg.concurrency,
                "warmup_requests": warmup,
                "warmup_failed": warm_failed,
                "warmup_output_tokens": warm_tokens,
                "cache_flushed": flushed,
                "api": cfg.api,
                "transport": cfg.transport,
                "model": cfg.model,
                "dataset_digest": self.workload.digest,
                "client_cpu_s": cpu,
                "client_wall_s": wall,
                "client_cpu_us_per_token": cpu / out * 1e6 if out else None,
                # above ~0.7 of a core the client, not the server, may set the pace
                "client_cpu_share": cpu / wall if wall > 0 else None,
                "client_peak_in_flight": self.peak_in_flight,
            }
        )
        return clean_json(metrics)


def _raise_fd_limit(needed: int) -> None:
    # one socket per concurrent stream; 2,048 streams exceed the common 1,024 soft limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + 256
    if soft < want:
        target = want if hard == resource.RLIM_INFINITY else min(hard, max(want, soft))
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def _install_uvloop() -> bool:
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def _watch_parent(ppid: int) -> None:
    # A thread, not a task: it must fire even while the event loop is saturated.
    import threading

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != ppid:
                os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


# Public names for the other load sender (sgltui/jobs/worker.py): the same process set-up.
raise_fd_limit = _raise_fd_limit
install_uvloop = _install_uvloop


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sgltui.bench.loadgen",
        description="Run one closed-loop load point and print JSON lines.",
    )
    p.add_argument("--config-json", required=True, help="LoadConfig as JSON")
    p.add_argument("--records", required=True, help="per-request JSONL output path")
    p.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="exit when the parent (the sweep runner) goes away, so no load is orphaned",
    )
    args = p.parse_args(argv)
    try:
        cfg = LoadConfig.from_dict(json.loads(args.config_json))
        workload = make_workload(cfg.workload, cfg.input_len, cfg.output_len, cfg.seed)
    except (ValueError, TypeError, WorkloadError) as exc:
        _emit({"type": "error", "message": str(exc)})
        return 2
    _raise_fd_limit(cfg.concurrency)
    uv = _install_uvloop()
    gen = LoadGenerator(cfg, workload, env_config.bench_api_key(), on_progress=_emit)
    if args.exit_with_parent:
        _watch_parent(os.getppid())
    try:
        metrics = asyncio.run(gen.run(Path(args.records)))
    except FatalLoadError as exc:
        _emit({"type": "error", "message": str(exc)})
        return 2
    except KeyboardInterrupt:
        return 130
    metrics["uvloop"] = uv
    _emit({"type": "result", "metrics": metrics})
    return 0


if __name__ == "__main__":
    sys.exit(main())
