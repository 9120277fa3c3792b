"""SGLang's memory saver, simulated: release and resume of GPU memory by tag, pause and continue.

SGLang 0.5.23 (`--enable-memory-saver`, `--enable-weights-cpu-backup`, torch-memory-saver):
`POST /release_memory_occupation {"tags": [...]}` and `/resume_memory_occupation` answer
`200 null` whatever happened (without --enable-memory-saver nothing is released at all). Tags:
`weights` (the model's and the MTP draft's; copied to pinned host memory when
--enable-weights-cpu-backup is on), `kv_cache` (KV, mamba state and the draft's KV: discarded,
rebuilt on resume), `cuda_graph` (freed only with SGLANG_MEMORY_SAVER_CUDA_GRAPH=1). No tags:
all three. The CUDA context and untagged buffers stay on the GPU.

Nothing is forgiven that SGLang 0.5.23 and torch-memory-saver 0.0.10 do not forgive (the
scheduler's side, `scheduler_control`, holds the state a real scheduler holds):
- the release asserts the scheduler is fully idle (hicache write-through and load-back included:
  the paused loop never drains them) and dies on the assertion (nothing catches it);
- the release adds its tags to `offload_tags` and pauses each tag's region, in SGLang's order
  (kv_cache, weights, cuda_graph); a region already paused is torch-memory-saver's `exit(1)`
  ("Cannot pause allocation that is not active"), so a second release kills the server;
- the resume removes its tags from `offload_tags` first: a tag never released is a KeyError in
  the scheduler, which takes the server down;
- `--weight-cache-mode` other than off: a release of the weights raises in the scheduler;
- pinning the weights' backup past the simulated host's RAM (--sim-host-memory-gb, less what
  this server's hicache pool and the other simulators publishing beside it pin) is
  torch-memory-saver's failed cudaMallocHost: exit(1).

Timing: the first release of the weights pins the host backup (--sim-pin-s-per-gib, 0.5 s a GiB
at time scale 1, as measured on an H100 host); a later one (the backup kept by
TMS_RETAIN_CPU_BACKUP=1) still copies GPU -> host at --sim-pinned-bandwidth-gbs, and so does every
resume the other way; all scaled by --sim-time-scale. With --sim-bad-resume-draft the MTP draft
comes back wrong after a resume (accept length ~1.0, no error: SGLang PR #31674). Faults:
--sim-release-fails N makes the Nth release and every later one free nothing (200 null, the
server released all the same: it must be resumed); --sim-resume-fails N makes the Nth resume and
every later one die in torch-memory-saver (CUDA out of memory while mapping the memory back).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

log = logging.getLogger("sglang")

TAGS = ("kv_cache", "weights", "cuda_graph")
PAUSE_ORDER = ("kv_cache", "weights", "cuda_graph")  # SGLang's release, one region after another
RESUME_ORDER = ("cuda_graph", "weights", "kv_cache")  # and its resume
IDLE_ASSERTION = "release_memory_occupation should be called only when no ongoing request"
GIB = 1 << 30
_TMS_SOURCE = "/project/csrc/core.cpp"  # where torch-memory-saver's own messages say they come from


class TmsExit(Exception):
    """torch-memory-saver's `exit(1)`: its message on stderr, then the scheduler process ends
    without a traceback (C++ `exit`, nothing in Python catches it); the main process notices the
    dead child and takes the server down."""


class OffloadTagMissing(KeyError):
    """SGLang's resume `offload_tags.remove(tag)` of a tag that was never released."""


class SchedulerRuntimeError(RuntimeError):
    """A RuntimeError SGLang's scheduler raises here (its message is SGLang's); the rank dies."""


def tms_message(action: str, state: str, tag: str, line: int) -> str:
    """torch-memory-saver 0.0.10's line before its exit(1) (csrc/core.cpp)."""
    ptr = 139_900_000_000_000 + sum(map(ord, tag)) * 4096  # a plausible device address
    return (
        f"[torch_memory_saver.cpp] Cannot {action} allocation that is not {state}. tag={tag} "
        f"ptr={ptr} file={_TMS_SOURCE} func={action} line={line}"
    )


def weight_cache_message(mode: str) -> str:
    return (
        "[weight_cache] release_memory_occupation of model weights is not supported while the "
        f"weight cache is active (--weight-cache-mode {mode}): the weights are shared with the "
        "daemon via CUDA IPC, so freeing them would corrupt the daemon's master copy and every "
        "co-attached engine. Restart with --weight-cache-mode off to use this operation."
    )


def fails_from(value: Any) -> int | None:
    """--sim-release-fails / --sim-resume-fails: the first call (1-based) that fails, or None.
    A bare flag (or a profile's `true`) is 1: every call fails."""
    if value is None or value is False:
        return None
    if value is True:
        return 1
    return max(1, int(value))


def parse_tags(body: Any) -> list[str] | None:
    """The tags of a release/resume body: None (all) when absent or empty; a list of str else.
    Raises ValueError with SGLang's own words for anything else."""
    if not isinstance(body, dict):
        return None
    tags = body.get("tags")
    if tags in (None, []):
        return None
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError("tags must be a list of strings")
    unknown = [t for t in tags if t not in TAGS]
    if unknown:
        raise ValueError(f"unknown memory tag {unknown[0]!r}; tags: {', '.join(TAGS)}")
    return list(tags)


class MemorySaver:
    """The main process's side: what is released, how long moving it takes, what it pins. The
    scheduler (`scheduler_control`) decides whether a release or resume is legal at all."""

    def __init__(self, server: Any) -> None:
        self.s = server  # sgltui.sim.server.SimServer
        args = server.args
        self.enabled = bool(getattr(args, "enable_memory_saver", False))
        self.cpu_backup = bool(getattr(args, "enable_weights_cpu_backup", False))
        self.graphs_freed = graphs_in_saver()
        self.bandwidth = max(1e6, float(getattr(args, "sim_pinned_bandwidth_gbs", 54.0)) * 1e9)
        self.host_limit = float(getattr(args, "sim_host_memory_gb", 512.0) or 512.0) * 1e9
        self.pin_s_per_gib = max(0.0, float(getattr(args, "sim_pin_s_per_gib", 0.5) or 0.0))
        self.bad_resume = bool(getattr(args, "sim_bad_resume_draft", False))
        self.release_fails_from = fails_from(getattr(args, "sim_release_fails", None))
        self.resume_fails_from = fails_from(getattr(args, "sim_resume_fails", None))
        self.release_calls = 0
        self.resume_calls = 0
        # TMS_RETAIN_CPU_BACKUP=1 (torch_memory_saver PR #86): the pinned copy of the weights is
        # kept after a resume, so a later release copies into it without pinning again.
        self.retain = os.environ.get("TMS_RETAIN_CPU_BACKUP", "").lower() in ("1", "true")
        self.backup_kept = False
        self.released: set[str] = set()  # what the GPU no longer holds (what is published)
        self._lock = asyncio.Lock()  # one release or resume at a time, as SGLang's communicator

    # ---- sizes --------------------------------------------------------------------------------
    def weights_bytes(self) -> float:
        p = self.s.plan
        return 0.0 if p is None else float(p.weights_bytes + p.draft_weights_bytes)

    def host_bytes(self) -> int:
        """Pinned host memory the CPU backup holds now (the released weights)."""
        if self.cpu_backup and ("weights" in self.released or self.backup_kept):
            return int(self.weights_bytes())
        return 0

    def transfer_s(self) -> float:
        """Seconds (wall) to copy the weights one way into an existing pinned buffer."""
        if not self.cpu_backup:
            return 0.0
        return self.weights_bytes() / self.bandwidth * self.s.scale

    def first_release_s(self) -> float:
        """Seconds (wall) of a release that must pin its backup first (cudaMallocHost of the
        whole backup, then the copy: 0.43-0.52 s a GiB measured on an H100 host)."""
        if not self.cpu_backup:
            return 0.0
        return self.weights_bytes() / GIB * self.pin_s_per_gib * self.s.scale

    def breakdown(self, parts: dict[str, int]) -> dict[str, int]:
        """The publisher's breakdown with what is released taken out."""
        if not self.released:
            return parts
        out = dict(parts)
        p = self.s.plan
        if "weights" in self.released:
            out["weights"] = 0
            if p is not None:
                out["draft"] = max(0, out.get("draft", 0) - int(p.draft_weights_bytes))
        if "kv_cache" in self.released:
            out["kv_cache"] = 0
            out["state"] = 0
            if p is not None:
                out["draft"] = max(0, out.get("draft", 0) - int(p.draft_kv_bytes))
        if "cuda_graph" in self.released and self.graphs_freed:
            out["cuda_graph"] = 0
        return out

    # ---- the endpoints' work -----------------------------------------------------------------------
    async def release(self, tags: list[str] | None) -> None:
        self.release_calls += 1
        failing = self.release_fails_from is not None and (
            self.release_calls >= self.release_fails_from
        )
        tags = list(tags or TAGS)
        async with self._lock:
            pins = self.enabled and self.cpu_backup and not failing and not self.backup_kept
            pins = pins and "weights" in tags and "weights" not in self.released
            no_room = self._pinned_bytes_short() if pins else 0
            # The scheduler asserts it is idle, records the tags and pauses their regions; it
            # dies (and the server with it) on whatever SGLang or torch-memory-saver would.
            await self.s.the_engine.control(("release", tags, failing, no_room))
            if not self.enabled or failing:
                return  # SGLang: a no-op adapter without the flag; the fault: nothing freed
            if "weights" in tags and "weights" not in self.released:
                # GPU -> pinned host copy, pinning the backup first unless a kept one is there.
                await asyncio.sleep(
                    self.transfer_s() if self.backup_kept else self.first_release_s()
                )
                self.backup_kept = self.retain and self.cpu_backup
            self.released |= set(tags)
            log.info(f"Release memory occupation done: tags={tags}")
            self._publish()

    def _pinned_bytes_short(self) -> int:
        """The backup's size when pinning it would pass the simulated host's RAM (what this
        server and the other simulators beside it pin already, plus the backup), else 0:
        cudaMallocHost fails and torch-memory-saver exits."""
        pub = self.s.publisher
        if pub is None:
            return 0
        plan = self.s.plan
        mine = 0 if plan is None else plan.hicache_host_bytes + plan.hicache_state_host_bytes
        need = self.weights_bytes()
        if pub.pinned_by_others() + mine + need <= self.host_limit:
            return 0
        return int(need)

    async def resume(self, tags: list[str] | None) -> None:
        self.resume_calls += 1
        failing = self.resume_fails_from is not None and (
            self.resume_calls >= self.resume_fails_from
        )
        tags = list(tags or TAGS)
        async with self._lock:
            bad = self.bad_resume or ("weights" in tags and not self.cpu_backup)
            # A tag never released, or a region that cannot be mapped again, ends the server here.
            await self.s.the_engine.control(("resume", tags, bad, failing))
            if not self.enabled:
                return
            if "weights" in tags and "weights" in self.released:
                await asyncio.sleep(self.transfer_s())  # pinned host -> GPU
            self.released -= set(tags)
            log.info(f"Resume memory occupation done: tags={tags}")
            self._publish()

    async def pause(self, mode: str) -> None:
        await self.s.the_engine.control(("pause", mode))
        self.s.paused = True
        self._publish()  # what the GPU holds before a release is read fresh, not a second old

    async def resume_generation(self) -> None:
        await self.s.the_engine.control(("continue",))
        self.s.paused = False

    def _publish(self) -> None:
        """What nvidia-smi shows changes now, not at the next once-a-second write."""
        pub = self.s.publisher
        if pub is not None and self.s.engine is not None:
            pub.write(self.s.the_engine.pids, self.s.the_engine.stats)


def graphs_in_saver() -> bool:
    """SGLANG_MEMORY_SAVER_CUDA_GRAPH=1: the graphs are allocated in the saver's cuda_graph
    region (else that tag has no region: pausing or resuming it touches nothing)."""
    return os.environ.get("SGLANG_MEMORY_SAVER_CUDA_GRAPH", "").lower() in ("1", "true")


def saver_regions(args: Any) -> set[str]:
    """The tags that have a torch-memory-saver region in this server."""
    if not getattr(args, "enable_memory_saver", False):
        return set()  # SGLang's no-op adapter: nothing is paused or resumed
    return {"kv_cache", "weights"} | ({"cuda_graph"} if graphs_in_saver() else set())


def scheduler_control(sched: Any, msg: tuple) -> Any:
    """The scheduler's side of a control message (runs in the scheduler process). Returns the
    reply; raises what kills a real scheduler (an AssertionError, OffloadTagMissing,
    SchedulerRuntimeError) or ends its process (TmsExit)."""
    kind = msg[0]
    if kind == "pause":
        sched.paused = True
        if msg[1] == "retract":
            sched.retract_running()  # back to the queue: they run again after continue
        elif msg[1] == "abort":
            sched.abort(None)
        return True
    if kind == "continue":
        sched.paused = False
        return True
    if kind == "release":
        _release(sched, msg[1], msg[3] if len(msg) > 3 else 0)
        return True
    if kind == "resume":
        _, tags, bad, failing = msg
        _resume(sched, tags, failing)
        if "weights" in tags:
            sched.bad_draft = bool(bad)
        return True
    return None


def _release(sched: Any, tags: list[str], pin_short: int = 0) -> None:
    mode = str(getattr(sched.args, "weight_cache_mode", None) or "off")
    if "weights" in tags and mode != "off":
        raise SchedulerRuntimeError(weight_cache_message(mode))
    if sched.running or sched.chunked or (sched.waiting and not sched.paused):
        raise AssertionError(IDLE_ASSERTION)
    if sched.hicache_in_flight():
        raise AssertionError(IDLE_ASSERTION)  # write-through / load-back the paused loop keeps
    regions = saver_regions(sched.args)
    sched.offload_tags.update(tags)
    for tag in PAUSE_ORDER:
        if tag not in tags:
            continue
        if tag in regions:
            if tag in sched.tms_paused:
                raise TmsExit(tms_message("pause", "active", tag, 241))
            if tag == "weights" and pin_short:
                raise TmsExit(  # cudaMallocHost of the backup (csrc/cpu_backup.h)
                    f"[torch_memory_saver.cpp] CUDA error: out of memory (cudaMallocHost of "
                    f"{pin_short} bytes) file=/project/csrc/cpu_backup.h func=pause line=57"
                )
            sched.tms_paused.add(tag)
        if tag == "kv_cache":
            sched.cache.clear()  # SGLang flushes the radix cache with the KV it releases


def _resume(sched: Any, tags: list[str], failing: bool) -> None:
    for tag in tags:
        if tag not in sched.offload_tags:
            raise OffloadTagMissing(tag)
        sched.offload_tags.remove(tag)
    regions = saver_regions(sched.args)
    for tag in RESUME_ORDER:
        if tag not in tags or tag not in regions:
            continue
        if tag not in sched.tms_paused:
            raise TmsExit(tms_message("resume", "paused", tag, 312))
        if failing:
            raise TmsExit(
                "[torch_memory_saver.cpp] CUresult error: 2 (out of memory) "
                f"file={_TMS_SOURCE} func=resume line=330 (cuMemCreate, tag={tag})"
            )
        sched.tms_paused.discard(tag)
