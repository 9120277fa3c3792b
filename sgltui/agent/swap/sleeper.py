"""A server that can sleep: launched with the memory saver, put to sleep, woken, and checked.

SGLang's memory saver (--enable-memory-saver --enable-weights-cpu-backup,
SGLANG_MEMORY_SAVER_CUDA_GRAPH=1) lets a running server pause (/pause_generation), release its
GPU memory (/release_memory_occupation: weights to pinned host RAM, KV cache and graphs freed),
and later resume it and continue. The standbys (agent/swap/standby.py) sequence these calls for a
standby add, the swap coordinator (agent/swap/coordinator.py) for a warm swap; this module holds the calls on one server (a `Slot`), the canary
that checks a woken one, and what a sleeper holds. It knows nothing of standbys or swaps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

from sgltui.agent.slot import http_probe
from sgltui.agent.slot.lifecycle import READY
from sgltui.agent.swap import standby_memory as mem
from sgltui.core import units

if TYPE_CHECKING:
    from sgltui.agent.slot.resolved import Resolved
    from sgltui.agent.slot.slot import Slot

SAVER_FLAGS = ("enable-memory-saver", "enable-weights-cpu-backup")
# Graphs freed with the rest; the pinned copy of the weights kept between sleeps (weights do
# not change: a release after the first only unmaps; torch_memory_saver PR #86).
SAVER_ENV = {"SGLANG_MEMORY_SAVER_CUDA_GRAPH": "1", "TMS_RETAIN_CPU_BACKUP": "1"}
CANARY_PROMPT = "The capital city of France is"
BAD_ACCEPT = 0.6  # a woken draft accepting under this share of its last known length is bad
MEMORY_BACK_S = 3.0  # how long the GPU source gets to show a release (NVML: ~0.13 s)
FLUSH_S = 30.0  # how long a hicache server gets to go idle before its pause (/flush_cache)
# A release's timeout from the bytes it moves (measured on an H100 host, PCIe Gen5): the first
# one pins the backup at 0.43-0.52 s/GiB; later ones copy at ~54 GB/s. Twice that, plus a base.
PIN_S_PER_GIB = 0.5
COPY_S_PER_GIB = 1.0 / 50.0
BASE_TIMEOUT_S = 30.0


class WakeError(Exception):
    """A step of a sleep or a wake did not happen (the server did not answer, or the GPU did
    not get its memory back)."""


def with_saver(target: Resolved, port: int | None = None) -> Resolved:
    """`target` launched so that it can sleep (and, given, on its own port). The content hash
    stays the profile's: the file did not change."""
    server, env = dict(target.profile.server), dict(target.profile.env)
    for flag in SAVER_FLAGS:
        server[flag] = True
    for k, v in SAVER_ENV.items():
        env.setdefault(k, v)
    if port is not None:
        server["port"] = port
    return dataclasses.replace(
        target, profile=dataclasses.replace(target.profile, server=server, env=env)
    )


def can_sleep(slot: Slot) -> bool:
    """Whether the slot's server was launched with the memory saver (its command says), and
    not on the weight cache (SGLang cannot release weights it shares with the daemon)."""
    server = slot.profile.server if slot.profile is not None else {}
    if server.get("weight-cache-mode") not in (None, "", "off"):
        return False
    return "--enable-memory-saver" in slot.command and "--enable-weights-cpu-backup" in (
        slot.command
    )


def admin_key(srv: Slot) -> str | None:
    """The key SGLang's admin routes take (pause, continue, release, resume, flush, abort:
    ADMIN_OPTIONAL): --admin-api-key when the server has one, else its --api-key."""
    server = srv.profile.server if srv.profile is not None else {}
    key = server.get("admin-api-key")
    return str(key) if key else srv.api_key


async def call(srv: Slot, path: str, body: Any, timeout: float = 120.0) -> Any:
    status, data = await http_probe.post(
        srv.server_host, srv.port, path, body, admin_key(srv), timeout=timeout
    )
    if status != 200:
        what = "did not answer" if status == 0 else f"answered HTTP {status}"
        raise WakeError(f"{srv.profile_name}: {path} {what}")
    return data


def hicache(srv: Slot) -> bool:
    server = srv.profile.server if srv.profile is not None else {}
    return bool(server.get("enable-hierarchical-cache"))


async def pause(srv: Slot, abort: bool = False) -> None:
    """Pause generation (once: a paused server is left as it is). `abort`: the requests it still
    runs fail fast (a drain that timed out), so that their clients retry on the server woken
    next, instead of waiting in this one's queue until it wakes, maybe never. A hicache server
    is flushed first: a write-through or load-back in flight never drains in a paused loop, and
    the release that follows would then kill it."""
    if srv.paused:
        return
    if abort:
        await call(srv, "/abort_request", {"abort_all": True}, timeout=30.0)
    if hicache(srv):
        status, _ = await http_probe.post(
            srv.server_host,
            srv.port,
            f"/flush_cache?timeout={FLUSH_S:g}",
            None,
            admin_key(srv),
            timeout=FLUSH_S + 10.0,
        )
        if status != 200:
            raise WakeError(
                f"{srv.profile_name}: its hierarchical cache did not go idle in {FLUSH_S:g} s "
                f"(/flush_cache answered {status or 'nothing'}); it was not paused, it serves on"
            )
    # Marked before the call: a pause that did not answer may still land, and a continue of a
    # server not paused is harmless (a resume is not: that one is kept by `released`).
    srv.paused = True
    await saved(srv)  # the next agent knows it is paused, even if killed during the call
    await call(srv, "/pause_generation", {"mode": "abort" if abort else "retract"})


async def sleep(srv: Slot, abort: bool = False) -> None:
    await pause(srv, abort)
    await release(srv)


def release_timeout(srv: Slot) -> float:
    """Seconds a release may take: the first one pins the whole backup (~0.5 s/GiB measured on
    an H100 host), every later one still copies GPU -> host (~1 s per 54 GB); a margin on top.
    Not a fixed 120 s: a 100+ GB model needs longer the first time."""
    size = mem.weights_bytes(srv.profile) if srv.profile is not None else None
    gib = (size or 0) / units.GIB
    per_gib = PIN_S_PER_GIB if not srv.pinned_once else COPY_S_PER_GIB
    return BASE_TIMEOUT_S + gib * per_gib * 2.0


async def release(srv: Slot, asleep_bytes: int = 0) -> float:
    """Release and wait for the GPU source to show it; the seconds until it did. Once: a
    released server is never released again (torch-memory-saver exits on a second pause).
    `asleep_bytes`: what it was measured to keep asleep before (a release queued behind a
    resume still in flight starts from what it held asleep: back to that is a release)."""
    if srv.released:
        return 0.0
    pids = set(srv.tree.seen) if srv.tree else set()
    before = await asyncio.to_thread(mem.held_bytes, pids)
    t0 = time.monotonic()
    timeout = await asyncio.to_thread(release_timeout, srv)
    # Marked (and saved) before the call: a release sent is one the server does, even if this
    # agent is killed before the answer; a resume queued after it pairs with it.
    srv.released = True
    await saved(srv)
    status, _ = await http_probe.post(
        srv.server_host,
        srv.port,
        "/release_memory_occupation",
        {},
        admin_key(srv),
        timeout=timeout,
    )
    if status == 0:  # no answer in time: it may still be releasing (so: released)
        raise WakeError(
            f"{srv.profile_name}: /release_memory_occupation did not answer in {timeout:.0f} s"
        )
    if status != 200:  # refused (auth, bad request): nothing was released
        srv.released = False
        await saved(srv)
        raise WakeError(f"{srv.profile_name}: /release_memory_occupation answered HTTP {status}")
    srv.pinned_once = True
    if not before:
        return time.monotonic() - t0  # no GPU source says what it holds: take its word
    deadline = time.monotonic() + MEMORY_BACK_S
    while True:
        now = await asyncio.to_thread(mem.held_bytes, pids)
        if now is not None and (
            now <= before * 0.5 or (asleep_bytes and now <= asleep_bytes * 1.1 + 256 * 2**20)
        ):
            return time.monotonic() - t0
        if time.monotonic() >= deadline:
            raise WakeError(
                f"{srv.profile_name} still holds {units.gib(now)} of GPU memory after its "
                f"release (was {units.gib(before)}): SGLang answers a release it did not do "
                "the same way; is it launched with --enable-memory-saver?"
            )
        await asyncio.sleep(0.05)


async def wake(srv: Slot) -> None:
    """Resume (only what was released: SGLang's resume of a tag never released is a KeyError
    that ends the server) and continue (only what was paused)."""
    if srv.released:
        timeout = await asyncio.to_thread(release_timeout, srv)
        srv.released = False  # as a release: a resume sent is one the server does
        await saved(srv)
        status, _ = await http_probe.post(
            srv.server_host, srv.port, "/resume_memory_occupation", {}, admin_key(srv), timeout
        )
        if status not in (0, 200):  # refused: still released
            srv.released = True
            await saved(srv)
        if status != 200:
            what = "did not answer" if status == 0 else f"answered HTTP {status}"
            raise WakeError(f"{srv.profile_name}: /resume_memory_occupation {what}")
    if srv.paused:
        await call(srv, "/continue_generation", {"torch_empty_cache": True})
        srv.paused = False
        await saved(srv)


async def saved(srv: Slot) -> None:
    """agent-state.json says which steps the server is in now (an agent killed between two
    steps leaves the next one what it needs to undo them: agent/swap/coordinator.py settle)."""
    save = getattr(getattr(srv, "host", None), "state_saved", None)
    if save is not None:
        await save()


async def canary(srv: Slot, known: float | None) -> tuple[bool, float | None, str]:
    """One request to the woken server: it answers; an MTP draft's accept length is not far
    under its last known value `known` (SGLang PR #31674: a draft refilled wrongly accepts
    nothing, with no error). -> (good, accept length, why not)."""
    spec = bool((srv.profile.server if srv.profile else {}).get("speculative-algorithm"))
    body = {
        "text": CANARY_PROMPT,
        "sampling_params": {
            "max_new_tokens": 16 if spec else 1,
            "temperature": 0,
            "ignore_eos": True,
        },
    }
    status, data = await http_probe.post(
        srv.server_host, srv.port, "/generate", body, srv.api_key, timeout=60.0
    )
    if status != 200 or not isinstance(data, dict):
        return False, None, f"the canary request got HTTP {status}"
    accept = (data.get("meta_info") or {}).get("spec_accept_length")
    if not spec or not isinstance(accept, (int, float)):
        return True, None, ""
    if known and accept < max(1.2, known * BAD_ACCEPT):
        return (
            False,
            float(accept),
            f"its MTP draft came back wrong after the resume (accept length {accept:.2f}, "
            f"{known:.2f} before)",
        )
    return True, float(accept), ""


async def held(srv: Slot) -> tuple[int, int]:
    """What a sleeper holds, measured after its release: (GPU bytes its processes keep, NVML
    per process; host bytes: resident and pinned memory of its process tree). 0: unknown."""
    pids = set(srv.tree.seen) if srv.tree else set()
    gpu_bytes = await asyncio.to_thread(mem.held_bytes, pids)
    host = None
    if srv.tree is not None:
        host = await asyncio.to_thread(mem.measured_host_bytes, srv.tree.pid, pids)
    return int(gpu_bytes or 0), int(host or 0)


async def mem_fraction_now(srv: Slot) -> float | None:
    """The mem_fraction_static a running server reports (/server_info): SGLang's choice when
    the profile does not set one."""
    status, body = await http_probe.get(srv.server_host, srv.port, "/server_info", srv.api_key)
    if status != 200:
        return None
    try:
        value = json.loads(body).get("mem_fraction_static")
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and 0 < value < 1 else None


async def drain(slot: Slot, wait: bool, timeout: float = 30.0) -> bool:
    """Until the slot's server has no request in flight (its own count and its front's), or
    at once when not `wait`, or at `timeout`. Whether it emptied (False: its pause aborts what
    is left, so that those clients retry instead of waiting in a sleeper's queue)."""
    deadline = time.monotonic() + (timeout if wait else 0.0)
    while slot.state == READY:
        load = await http_probe.load(slot.server_host, slot.port, slot.api_key)
        front = slot.front.in_flight((slot.server_host, slot.port)) if slot.front else 0
        if not (load or 0) + front:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True
