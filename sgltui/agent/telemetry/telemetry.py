"""The agent's one timeline: GPU, host and engine samplers feeding bounded ring buffers.

Samplers run on their own cadence (GPU and host 1 Hz by default, engine polls at `engine_interval`
plus whatever batch lines the server prints); the latest readings form `snapshot()` (STATUS
.telemetry), the rings serve `series()` (the `timeline` op), and every `record_interval` the
latest readings go to `on_sample` as one SAMPLE (the agent records it to timeline.jsonl and pushes
it to subscribers). Blocking work (NVML, psutil, /proc, sim files) runs in two single-thread
executors, one for the GPU and one for the host, so a wedged driver stalls neither the agent's
event loop nor the host readings.

Series names (values are floats; None where a reading is unsupported or missing):
  gpu.<i>.{used_bytes,utilization_pct,power_w,temperature_c,pcie_rx_bytes_s,pcie_tx_bytes_s}
  gpu.<i>.server_bytes.<slot>
  host.{ram_used_bytes,ram_available_bytes,swap_used_bytes,cpu_pct}
  host.{server_rss_bytes,server_cpu_pct,server_pinned_bytes}.<slot>
  engine.<slot>.{gen_throughput,num_running_reqs,num_queue_reqs,token_usage,accept_length,cache_hit_rate}
`series()` takes exact names or globs ("gpu.0.*", "engine.0.*").
`SGLTUI_GPU_SOURCE=auto|nvml|sim|none` (or the gpu_source argument) forces the GPU source.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from sgltui.agent.gpu import GpuReading, GpuService
from sgltui.agent.slot.procs import SHARED_AGE_S, ProcTree
from sgltui.agent.telemetry.engine import SlotWatch
from sgltui.agent.telemetry.host import HostSampler
from sgltui.core.ring import RingSet

log = logging.getLogger(__name__)

GPU_SERIES = (
    "used_bytes",
    "utilization_pct",
    "power_w",
    "temperature_c",
    "pcie_rx_bytes_s",
    "pcie_tx_bytes_s",
)
HOST_SERIES = ("ram_used_bytes", "ram_available_bytes", "swap_used_bytes", "cpu_pct")
HOST_SLOT_SERIES = ("server_rss_bytes", "server_cpu_pct", "server_pinned_bytes")
# An idle server (nothing running or queued at the last poll, no batch line in its log since)
# is polled this often instead of every engine_interval: its figures do not move until a
# request comes, and a request's batch lines make the next tick poll it.
IDLE_POLL_S = 3.0

ENGINE_SERIES = (
    "gen_throughput",
    "num_running_reqs",
    "num_queue_reqs",
    "token_usage",
    "accept_length",
    "cache_hit_rate",
)


class _TreeCache:
    """Process trees shared by the GPU and host threads (one /proc walk per slot per ~interval).
    A slot's tree lives as long as its server's pid, so it remembers every process it saw."""

    def __init__(self, max_age: float = SHARED_AGE_S) -> None:
        self.max_age = max_age
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, int, ProcTree]] = {}

    def trees(self, slots: dict[str, int]) -> dict[str, ProcTree]:
        now = time.monotonic()
        out: dict[str, ProcTree] = {}
        with self._lock:
            for slot, pid in slots.items():
                hit = self._cache.get(slot)
                if hit is None or hit[1] != pid:
                    hit = (now, pid, ProcTree.around(pid).scan())
                elif now - hit[0] > self.max_age:
                    hit = (now, pid, hit[2].scan())
                self._cache[slot] = hit
                out[slot] = hit[2]
            for slot in list(self._cache):
                if slot not in slots:
                    del self._cache[slot]
        return out


class Telemetry:
    def __init__(
        self,
        on_sample: Callable[[dict], None],
        gpu_interval: float = 1.0,
        host_interval: float = 1.0,
        record_interval: float = 1.0,
        *,
        engine_interval: float = 1.0,
        ring_capacity: int = 3600,
        gpu_source: str | None = None,
        on_capacity: Callable[[str, dict], None] | None = None,
        http_timeout: float = 3.0,
        on_answer: Callable[[str], None] | None = None,
    ) -> None:
        self.on_sample = on_sample
        self.on_capacity = on_capacity
        # A slot's server answered an engine poll (any status): its liveness needs no probe.
        self.on_answer = on_answer
        self.gpu_interval = gpu_interval
        self.host_interval = host_interval
        self.record_interval = record_interval
        self.engine_interval = engine_interval
        self.http_timeout = http_timeout
        self.rings = RingSet(capacity=ring_capacity)
        self._gpus = GpuService(gpu_source)
        self._host_sampler: HostSampler | None = None
        self._trees = _TreeCache()
        self._slots: dict[str, SlotWatch] = {}
        self._cards: dict[
            str, dict
        ] = {}  # last card per slot, kept after detach until the next attach
        self._detached: set[str] = set()  # slots whose server is gone: their late output is ignored
        self._gpu: GpuReading = GpuReading("none", "first GPU reading pending")
        self._host: dict[str, Any] | None = None
        self._tasks: list[asyncio.Task] = []
        self._client: httpx.AsyncClient | None = None
        self._gpu_exec: ThreadPoolExecutor | None = None
        self._host_exec: ThreadPoolExecutor | None = None
        self._running = False

    # -- life -----------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._gpu_exec = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sgltui-gpu")
        self._host_exec = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sgltui-host")
        self._client = httpx.AsyncClient(timeout=self.http_timeout, trust_env=False)
        self._tasks = [
            asyncio.create_task(
                self._every(self.gpu_interval, self._sample_gpu), name="telemetry-gpu"
            ),
            asyncio.create_task(
                self._every(self.host_interval, self._sample_host), name="telemetry-host"
            ),
            asyncio.create_task(
                self._every(self.record_interval, self._record, first_delay=True),
                name="telemetry-record",
            ),
            asyncio.create_task(
                self._every(self.engine_interval, self._engine_tick), name="telemetry-engine"
            ),
        ]

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        tasks = self._tasks
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []
        for watch in self._slots.values():
            watch.close()
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        loop = asyncio.get_running_loop()
        if self._gpu_exec is not None:
            try:
                await asyncio.wait_for(loop.run_in_executor(self._gpu_exec, self._gpus.close), 5.0)
            except (asyncio.TimeoutError, RuntimeError):
                pass
            self._gpu_exec.shutdown(wait=False, cancel_futures=True)
        if self._host_exec is not None:
            self._host_exec.shutdown(wait=False, cancel_futures=True)
        self._gpu_exec = self._host_exec = None

    async def _every(
        self, interval: float, fn: Callable[[], Any], first_delay: bool = False
    ) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + (interval if first_delay else 0.0)
        while True:
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:  # a sampler bug must not end the timeline; it shows in the agent log
                log.exception("telemetry sampler %s failed", getattr(fn, "__name__", fn))
            next_at += interval
            if (
                next_at < loop.time()
            ):  # fell behind (slow driver): skip missed ticks, keep the phase
                missed = int((loop.time() - next_at) / interval) + 1
                next_at += missed * interval

    # -- slots ----------------------------------------------------------------------------------
    def attach(
        self, slot_id: str, pid: int, base_url: str, api_key: str | None, tp_size: int = 1
    ) -> None:
        """Watch a (newly launched) server; a previous launch in the same slot is forgotten."""
        old = self._slots.get(slot_id)
        # Lines may arrive before attach (held on a pid -1 placeholder): keep them for this launch.
        keep_log = old is not None and old.pid in (pid, -1)
        self.detach(slot_id, keep_card=False)
        watch = SlotWatch(slot_id, pid, base_url, api_key, tp_size)
        if keep_log and old is not None:
            watch.log, watch.capacity = old.log, old.capacity
        self._slots[slot_id] = watch
        self._detached.discard(slot_id)

    def detach(self, slot_id: str, keep_card: bool = True) -> None:
        watch = self._slots.pop(slot_id, None)
        self._detached.add(slot_id)
        if watch is not None:
            watch.close()
        if watch is not None and keep_card:
            card = watch.capacity.card()
            if card is not None:
                self._cards[slot_id] = card
        if not keep_card:
            self._cards.pop(slot_id, None)

    def on_log_line(self, slot_id: str, line: str) -> None:
        """A line of the server's output (the agent tails the log). Cheap for uninteresting lines."""
        watch = self._slots.get(slot_id)
        if watch is None:
            if slot_id in self._detached:
                return  # the last lines of a stopped server: its card was kept at detach
            # Output can precede attach (the agent tails from spawn): hold it on a placeholder.
            watch = self._slots[slot_id] = SlotWatch(slot_id, -1, "", None)
        if watch.log.feed(line, time.time()):
            watch.log_seq += 1
            return
        had_summary = watch.capacity.summary_seen
        if (
            watch.capacity.feed_line(line) is not None
            and watch.capacity.summary_seen
            and not had_summary
        ):
            self._capacity_changed(watch)

    def _capacity_changed(self, watch: SlotWatch) -> None:
        card = watch.capacity.card()
        if card is None or self.on_capacity is None:
            return
        try:
            self.on_capacity(watch.slot_id, card)
        except Exception:
            log.exception("on_capacity callback failed")

    async def _engine_tick(self) -> None:
        """Every slot's engine poll, on one shared tick (concurrent requests, one timestamp
        phase for all): a task and a timer per slot cost more than the polls of idle servers."""
        watches = [w for w in self._slots.values() if w.pid > 0 and w.base_url]
        if watches:
            await asyncio.gather(*(self._engine_poll(w) for w in watches))

    async def _engine_poll(self, watch: SlotWatch) -> None:
        assert self._client is not None
        try:
            if watch.poll_due(time.monotonic(), IDLE_POLL_S):
                answered = watch.answered_at
                await watch.poll(time.time(), self.http_timeout)
                if (
                    watch.answered_at != answered
                    and self.on_answer is not None
                    and self._slots.get(watch.slot_id) is watch
                ):
                    self.on_answer(watch.slot_id)
            if await watch.fetch_server_info() and self._slots.get(watch.slot_id) is watch:
                self._capacity_changed(watch)
            if self._slots.get(watch.slot_id) is not watch:
                watch.close()  # (its poll may have opened a connection after the detach)
                return  # detached (stopped, relaunched) while its poll was out
            if watch.news():  # only new data goes on the timeline
                e = watch.engine(self._stale_after)
                if e is not None:
                    self.record_engine(watch.slot_id, e, time.time())
        except Exception:  # one server's bad answer must not end the others' polls
            log.exception("engine poll of slot %s failed", watch.slot_id)

    def record_engine(self, slot_id: str, engine: dict[str, Any], ts: float) -> None:
        for key in ENGINE_SERIES:
            self.rings.append(f"engine.{slot_id}.{key}", ts, _num(engine.get(key)))

    @property
    def _stale_after(self) -> float:
        return max(3.0 * self.engine_interval, 5.0)

    def _slot_pids(self) -> dict[str, int]:
        return {s: w.pid for s, w in self._slots.items() if w.pid > 0}

    # -- samplers -------------------------------------------------------------------------------
    async def _sample_gpu(self) -> None:
        slots = self._slot_pids()
        loop = asyncio.get_running_loop()
        reading = await loop.run_in_executor(
            self._gpu_exec, lambda: self._gpus.sample(self._trees.trees(slots))
        )
        self.record_gpu(reading, time.time())

    def record_gpu(self, reading: GpuReading, ts: float) -> None:
        """Make `reading` the latest GPU state and put it on the timeline."""
        self._gpu = reading
        for g in reading.gpus:
            for key in GPU_SERIES:
                self.rings.append(f"gpu.{g['index']}.{key}", ts, _num(g.get(key)))
            for slot, b in (g.get("server_bytes") or {}).items():
                self.rings.append(f"gpu.{g['index']}.server_bytes.{slot}", ts, _num(b))

    async def _sample_host(self) -> None:
        slots = self._slot_pids()
        loop = asyncio.get_running_loop()

        def work() -> dict[str, Any]:
            if self._host_sampler is None:
                self._host_sampler = HostSampler()
            return self._host_sampler.sample(self._trees.trees(slots), self._gpu.host_pinned_bytes)

        self.record_host(await loop.run_in_executor(self._host_exec, work), time.time())

    def record_host(self, host: dict[str, Any], ts: float) -> None:
        """Make `host` the latest host state and put it on the timeline."""
        self._host = host
        for key in HOST_SERIES:
            self.rings.append(f"host.{key}", ts, _num(host.get(key)))
        for key in HOST_SLOT_SERIES:
            for slot, v in (host.get(key) or {}).items():
                self.rings.append(f"host.{key}.{slot}", ts, _num(v))

    async def _record(self) -> None:
        if self._host is None and not self._gpu.gpus:
            return  # nothing sampled yet
        sample = {"v": 1, **self.snapshot()}
        try:
            self.on_sample(sample)
        except Exception:
            log.exception("on_sample callback failed")

    # -- reads ----------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """STATUS.telemetry: the latest readings of every source."""
        engine = {}
        for slot, watch in self._slots.items():
            e = watch.engine(self._stale_after)
            if e is not None:
                engine[slot] = e
        return {
            "ts": time.time(),
            "gpus": self._gpu.gpus,
            "gpu_source": {"kind": self._gpu.kind, "message": self._gpu.message},
            "host": self._host,
            "engine": engine,
        }

    def capacity(self, slot_id: str) -> dict | None:
        watch = self._slots.get(slot_id)
        if watch is not None:
            card = watch.capacity.card()
            if card is not None:
                return card
        return self._cards.get(slot_id)

    def series(self, names: Iterable[str] | str | None = None, since: float | None = None) -> dict:
        """The `timeline` op: {"series": {name: [[ts, value], ...]}}; names may be globs ("gpu.0.*")."""
        if isinstance(names, str):
            names = [names]
        all_names = self.rings.names()
        if names is None:
            chosen = all_names
        else:
            pats = list(names)
            chosen = [
                n for n in all_names if any(n == p or fnmatch.fnmatchcase(n, p) for p in pats)
            ]
        out = {}
        for n in chosen:
            ring = self.rings.get(n)
            if ring is not None:
                out[n] = ring.items(since)
        return {"series": out}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
