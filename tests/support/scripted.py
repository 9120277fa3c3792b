"""A TuiSource that plays a script instead of talking to an agent.

Used by the snapshot tests (deterministic screens: fixed timestamps, no agent), by Pilot tests
of the app's wiring, and by bench/bench_tui_idle.py (all panes live at 1 Hz without the cost of
a real agent in the measurement). The STATUS/SAMPLE dicts it builds follow sgltui/protocol/.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

GIB = 2**30
MIB = 2**20
T0 = 1764690000.0  # fixed clock for deterministic screens
_TICK: dict[str, Any] = {"push": "tick"}  # ScriptedSource's live tick, in its queue (identity)

PROFILES = [
    {
        "name": "demo-no-mtp",
        "key": "1",
        "description": "plain decoding, many requests",
        "launcher": "sim",
    },
    {
        "name": "demo-mtp",
        "key": "2",
        "description": "NEXTN speculative decoding",
        "launcher": "sim",
    },
    {
        "name": "demo-mtp-hicache",
        "key": "3",
        "description": "MTP + hierarchical cache",
        "launcher": "sim",
    },
    {
        "name": "demo-no-mtp-hicache",
        "key": "4",
        "description": "plain + hierarchical cache",
        "launcher": "sim",
    },
]

CAPACITY = {
    "weights_gb": 54.2,
    "kv_pool_tokens": 412160,
    "kv_pool_gb": 24.1,
    "max_running_requests": 4,
    "requested_max_running_requests": 8,
    "mamba_state_slots": 12,
    "hicache_host_gb": None,
    "cuda_graph_bs": [1, 2, 4],
    "context_length": 131072,
    "draft_weights_gb": 1.6,
    "notes": ["Max running requests is reset to 4 for speculative decoding."],
}


def make_slot(profile: str = "demo-mtp", state: str = "ready", **extra: Any) -> dict[str, Any]:
    slot = {
        "id": "0",
        "profile": profile,
        "state": state,
        "phase": None,
        "progress": None,
        "eta_s": None,
        "host": "127.0.0.1",
        "port": 30000,
        "pid": 4242,
        "pids": [4242, 4243],
        "launch_id": f"20261202-154000-{profile}",
        "log_path": "/tmp/x.log",
        "started_at": T0 - 125,
        "ready_at": T0 - 100 if state == "ready" else None,
        "uptime_s": 125.0 if state == "ready" else None,
        "command": ["python", "-m", "sgltui.sim"],
        "command_hash": "abc123def456",
        "cause": None,
        "capacity": CAPACITY if state == "ready" else None,
        "swap": None,
        "api_key_set": False,
    }
    slot.update(extra)
    return slot


def make_engine(t: float = 0.0, running: int = 4) -> dict[str, Any]:
    return {
        "source": "metrics",
        "ts": T0 + t,
        "gen_throughput": round(180 + 60 * math.sin(t / 7.0), 2),
        "num_running_reqs": running,
        "num_queue_reqs": int(2 + 2 * math.sin(t / 5.0)),
        "token_usage": round(0.30 + 0.1 * math.sin(t / 11.0), 2),
        "accept_length": round(2.6 + 0.3 * math.sin(t / 3.0), 2),
        "max_running_requests": 4,
        "max_total_num_tokens": 412160,
        "cache_hit_rate": 0.4,
    }


def make_telemetry(
    t: float = 0.0,
    simulated: bool = True,
    server_gib: float = 80.0,
    engine: dict[str, Any] | None = None,
) -> dict[str, Any]:
    total = 143771 * MIB  # an H200 as nvidia-smi reports it
    server = int(server_gib * GIB)
    gpu = {
        "index": 0,
        "name": "NVIDIA H200 (simulated)" if simulated else "NVIDIA H200",
        "uuid": "GPU-0",
        "simulated": simulated,
        "total_bytes": total,
        "used_bytes": server + 2 * GIB,
        "free_bytes": total - server - 2 * GIB,
        "utilization_pct": 87.0,
        "power_w": 420.0,
        "temperature_c": 61.0,
        "pcie_rx_bytes_s": 0.0,
        "pcie_tx_bytes_s": 0.0,
        "server_bytes": {"0": server} if server else {},
        "breakdown_bytes": None,
    }
    host = {
        "ram_total_bytes": 128 * GIB,
        "ram_used_bytes": 40 * GIB,
        "ram_available_bytes": 88 * GIB,
        "swap_total_bytes": 0,
        "swap_used_bytes": 0,
        "cpu_pct": 12.0,
        "server_rss_bytes": {"0": 9 * GIB} if server else {},
        "server_cpu_pct": {"0": 100.0},
    }
    return {
        "ts": T0 + t,
        "gpus": [gpu],
        "gpu_source": {
            "kind": "sim" if simulated else "nvml",
            "message": "simulated GPU from the simulator",
        },
        "host": host,
        "engine": {"0": engine or make_engine(t)} if server else {},
    }


def make_status(
    slots: list[dict[str, Any]] | None = None, t: float = 0.0, **tel: Any
) -> dict[str, Any]:
    slots = slots if slots is not None else [make_slot()]
    running = any(s.get("state") in ("ready", "draining") for s in slots)
    return {
        "agent": {
            "pid": 4000,
            "version": "0.1.0",
            "started": T0 - 300,
            "state_dir": "/tmp/state",
            "session_dir": "/tmp/state/sessions/20261202-154000-host",
            "disk": {"ok": True, "error": None},
        },
        "slots": slots,
        "profiles": copy.deepcopy(PROFILES),
        "telemetry": make_telemetry(
            t, server_gib=80.0 if running else tel.pop("server_gib", 0.0), **tel
        ),
        "bench": None,
    }


def make_sample(t: float, running: int = 4) -> dict[str, Any]:
    tel = make_telemetry(t, engine=make_engine(t, running))
    return {"v": 1, "ts": T0 + t, "gpus": tel["gpus"], "host": tel["host"], "engine": tel["engine"]}


def slot_names(n: int) -> list[str]:
    """The names `sgltui host init` gives n slots: a, b, c..."""
    return [chr(ord("a") + i) for i in range(n)]


def make_host_telemetry(
    t: float = 0.0, slots: list[str] | None = None, server_gib: float = 80.0
) -> dict[str, Any]:
    """A host of one simulated H200 per slot, each slot's server on its own GPU."""
    slots = slots if slots is not None else slot_names(2)
    tel = make_telemetry(t, server_gib=server_gib)
    base = tel["gpus"][0]
    tel["gpus"] = [
        dict(
            base,
            index=i,
            uuid=f"GPU-{i}",
            server_bytes={sid: int((server_gib - 4 * i) * GIB)} if server_gib else {},
            used_bytes=int((server_gib - 4 * i + 2) * GIB),
        )
        for i, sid in enumerate(slots)
    ]
    tel["host"]["server_rss_bytes"] = {sid: 9 * GIB for sid in slots}
    tel["host"]["server_cpu_pct"] = {sid: 100.0 for sid in slots}
    tel["engine"] = (
        {sid: make_engine(t + 3 * i, running=4 - i % 3) for i, sid in enumerate(slots)}
        if server_gib
        else {}
    )
    return tel


def make_host_status(
    n: int = 2,
    profiles: list[str] | None = None,
    pool: str | None = "all",
    t: float = 0.0,
    **slot: Any,
) -> dict[str, Any]:
    """STATUS of a host of n slots (one GPU each), in a pool `pool` behind smg (None: no pool)."""
    names = slot_names(n)
    profiles = profiles or ["demo-mtp"] * n
    slots = [
        make_slot(
            profile=profiles[i],
            id=sid,
            gpus=[i],
            port=31000 + 10 * i,
            pid=5000 + 10 * i,
            pids=[5000 + 10 * i],
            launch_id=f"20261202-154000-{profiles[i]}-{sid}",
            **slot,
        )
        for i, sid in enumerate(names)
    ]
    st = make_status(slots, t)
    st["telemetry"] = make_host_telemetry(t, names)
    if pool is not None:
        st["pools"] = [
            {
                "name": pool,
                "endpoint": "http://127.0.0.1:30080",
                "slots": names,
                "gateway": {"pid": 4100, "state": "ready"},
                "workers": [
                    {
                        "slot": sid,
                        "url": f"http://127.0.0.1:{31000 + 10 * i}",
                        "gateway_status": "ready",
                    }
                    for i, sid in enumerate(names)
                ],
            }
        ]
    return st


def make_host_sample(t: float, slots: list[str]) -> dict[str, Any]:
    tel = make_host_telemetry(t, slots)
    return {"v": 1, "ts": T0 + t, "gpus": tel["gpus"], "host": tel["host"], "engine": tel["engine"]}


LOG_LINES = [
    "[2026-12-02 15:40:01] server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B', ...)",
    "[2026-12-02 15:40:03] Load weight begin. avail mem=139.20 GB",
    "[2026-12-02 15:40:12] Load weight end. elapsed=9.10 s, type=Qwen3ForCausalLM, avail mem=85.00 GB, mem usage=54.20 GB.",
    "[2026-12-02 15:40:13] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412160, K size: 12.05 GB, V size: 12.05 GB",
    "[2026-12-02 15:40:13] Max running requests is reset to 4 for speculative decoding.",
    "[2026-12-02 15:40:20] The server is fired up and ready to roll!",
    "[2026-12-02 15:40:41] Decode batch, #running-req: 4, #token: 8000, token usage: 0.30, accept len: 2.61, "
    "accept rate: 0.54, cuda graph: True, gen throughput (token/s): 181.20, #queue-req: 2",
]


class ScriptedSource:
    """Plays `script` (a list of pushes, or (delay_s, push) pairs), then optionally generates
    a sample, a log line and an event every `live_interval` seconds for ever.

    `call` records each op in `calls` and answers as the agent would (replies that
    protocol.decode_reply reads); `on_call(op, args, source)` may change `status` and `feed`
    pushes, and returns the reply, or None for the scripted one.
    """

    read_only = False
    read_only_label = "READ-ONLY"

    def __init__(
        self,
        status: dict[str, Any],
        script: list[Any] | None = None,
        *,
        live_interval: float | None = None,
        logs: list[str] | None = None,
        on_call: Callable[[str, dict[str, Any], ScriptedSource], Any] | None = None,
        status_follows_samples: bool = False,
        logs_per_tick: bool = False,
        samples: Iterable[dict[str, Any]] = (),
    ) -> None:
        self.status = status
        self.script = list(script or [])
        self.live_interval = live_interval
        self.logs = list(logs if logs is not None else LOG_LINES)
        self.on_call = on_call
        # As the agent's: a STATUS read after a sample holds that sample's telemetry.
        self.status_follows_samples = status_follows_samples
        # As the agent's with subscribe logs="tick" (agent/logbatch.py): the live loop's log
        # lines, fed or its own, go out as one "logs" push just before each sample.
        self.logs_per_tick = logs_per_tick
        # The live ticks' samples, made beforehand (then made at each tick): a sample built
        # in the measured process is the agent's work, not the TUI's (bench_tui_idle.py).
        self._samples = iter(samples)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.connects = 0
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def connect(self) -> None:
        self.connects += 1

    async def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self.status)

    def feed(self, push: dict[str, Any]) -> None:
        self._queue.put_nowait(push)

    async def pushes(self) -> AsyncIterator[dict[str, Any]]:
        for item in self.script:
            if isinstance(item, tuple):
                await asyncio.sleep(item[0])
                item = item[1]
            if self.status_follows_samples and item.get("push") == "sample":
                tel = self.status.setdefault("telemetry", {})
                tel.update({k: v for k, v in item["data"].items() if k != "v"})
            yield item
        loop = asyncio.get_running_loop()
        interval = self.live_interval or 0.0
        due = loop.time() + interval
        timer: asyncio.TimerHandle | None = None

        def tick() -> None:
            # The tick is a timer of the loop's putting a mark in the queue: pushes fed
            # meanwhile do not delay the next sample, which comes every live_interval (a wait
            # restarted on each fed push made the bench's "1 Hz" samples ~0.5 Hz), and no
            # task is made per wait (asyncio.wait_for's, in the measured process).
            nonlocal due, timer
            self._queue.put_nowait(_TICK)
            due += interval
            timer = loop.call_at(due, tick)

        if self.live_interval is not None:
            timer = loop.call_at(due, tick)
        try:
            async for push in self._live(interval):
                yield push
        finally:
            if timer is not None:
                timer.cancel()

    async def _live(self, interval: float) -> AsyncIterator[dict[str, Any]]:
        """Pushes fed, and at each tick a sample and a log line (see pushes)."""
        t = 0.0
        held: list[dict[str, Any]] = []  # log lines waiting for the tick (logs_per_tick)
        while True:
            push = await self._queue.get()
            if push is not _TICK:
                if self.logs_per_tick and push.get("push") == "log":
                    held.append(push["data"])
                else:
                    yield push
                continue
            t += interval
            ids = [str(s.get("id")) for s in self.status.get("slots") or []]
            sample = next(self._samples, None)
            if sample is None:
                sample = make_host_sample(t, ids) if len(ids) > 1 else make_sample(t)
            own = {
                "push": "log",
                "data": {
                    "slot": ids[int(t) % len(ids)] if ids else "0",
                    "launch_id": "x",
                    "lines": [
                        f"[2026-12-02 15:41:{int(t) % 60:02d}] Decode batch, #running-req: 4, token usage: 0.31, "
                        f"gen throughput (token/s): {180 + t % 7:.2f}, #queue-req: 1"
                    ],
                },
            }
            if self.logs_per_tick:
                held, batch = [], [*held, own["data"]]
                yield {"push": "logs", "data": batch}
                yield {"push": "sample", "data": sample}
            else:
                yield {"push": "sample", "data": sample}
                yield own

    async def call(self, op: str, **args: Any) -> Any:
        self.calls.append((op, args))
        if op == "status":
            return copy.deepcopy(self.status)
        if self.on_call is not None:
            reply = self.on_call(op, args, self)
            if reply is not None:
                return reply
        return self.reply(op, args)

    def reply(self, op: str, args: dict[str, Any]) -> Any:
        """The agent's reply to `op` when the script says nothing else: accepted, with no
        history, bench runs or batch jobs."""
        slots = self.status.get("slots") or []
        # None named: the first slot (the agent takes its only one, or lists them).
        sid = str(args.get("slot") or (slots[0].get("id") if slots else ""))
        slot = next((s for s in slots if s.get("id") == sid), None)
        if op in ("start", "stop", "restart", "swap"):
            return {"slot": copy.deepcopy(slot or make_slot(state="stopped")), "accepted": True}
        if op == "logs":
            # No launch named: the first log push names the one its lines come from.
            return {"lines": list(self.logs), "path": "/tmp/x.log", "launch_id": ""}
        if op == "profiles":
            return copy.deepcopy(self.status.get("profiles") or [])
        if op == "preflight":
            return {"profile": str(args.get("profile", "")), "ok": True, "checks": []}
        if op == "timeline":
            return {"series": {}}
        if op == "bench_list":
            return []
        if op == "job_list":
            return copy.deepcopy(self.status.get("jobs") or [])
        if op == "job_status":
            jobs = self.status.get("jobs") or []
            return copy.deepcopy(next((j for j in jobs if j.get("id") == args.get("job")), {}))
        if op == "bench_start":
            return {"run_id": f"scripted-{len(self.calls)}"}
        if op == "bench_stop":
            return {"run_id": str(args.get("run_id", "")), "state": "stopped", "started": T0}
        if op == "demo_load":
            return {"on": bool(args.get("on"))}
        if op == "ping":
            return {"pong": True, "pid": 4000, "version": "0.1.0"}
        return {}

    async def close(self) -> None:
        pass
