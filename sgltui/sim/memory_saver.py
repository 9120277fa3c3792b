"""SGLang's memory saver, simulated: release and resume of GPU memory by tag, pause and continue.

SGLang 0.5.23 (`--enable-memory-saver`, `--enable-weights-cpu-backup`, torch-memory-saver):
`POST /release_memory_occupation {"tags": [...]}` and `/resume_memory_occupation` answer
`200 null` whatever happened (without --enable-memory-saver nothing is released at all). Tags:
`weights` (the model's and the MTP draft's; copied to pinned host memory when
--enable-weights-cpu-backup is on), `kv_cache` (KV, mamba state and the draft's KV: discarded,
rebuilt on resume), `cuda_graph` (freed only with SGLANG_MEMORY_SAVER_CUDA_GRAPH=1). No tags:
all three. The CUDA context and untagged buffers stay on the GPU.

Here the weights move at the simulated host's pinned bandwidth (--sim-pinned-bandwidth-gbs,
H100 PCIe Gen5: ~54 GB/s) scaled by --sim-time-scale, so a 27B BF16 model resumes in about a
second at scale 1. A release asks the scheduler first, which dies on SGLang's assertion when
requests are running (nothing catches it: the server goes down). With --sim-bad-resume-draft the
MTP draft comes back wrong after a resume (accept length ~1.0, no error: SGLang PR #31674).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

log = logging.getLogger("sglang")

TAGS = ("kv_cache", "weights", "cuda_graph")
IDLE_ASSERTION = "release_memory_occupation should be called only when no ongoing request"


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
    """The main process's side: what is released, how long moving it takes, what it pins."""

    def __init__(self, server: Any) -> None:
        self.s = server  # sgltui.sim.server.SimServer
        args = server.args
        self.enabled = bool(getattr(args, "enable_memory_saver", False))
        self.cpu_backup = bool(getattr(args, "enable_weights_cpu_backup", False))
        self.graphs_freed = os.environ.get("SGLANG_MEMORY_SAVER_CUDA_GRAPH", "").lower() in (
            "1",
            "true",
        )
        self.bandwidth = max(1e6, float(getattr(args, "sim_pinned_bandwidth_gbs", 54.0)) * 1e9)
        self.bad_resume = bool(getattr(args, "sim_bad_resume_draft", False))
        self.release_fails = bool(getattr(args, "sim_release_fails", False))
        # TMS_RETAIN_CPU_BACKUP=1 (torch_memory_saver PR #86): the pinned copy of the weights is
        # kept after a resume, so the next release only unmaps (weights do not change).
        self.retain = os.environ.get("TMS_RETAIN_CPU_BACKUP", "").lower() in ("1", "true")
        self.backup_kept = False
        self.released: set[str] = set()
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
        """Seconds (wall) to move the weights one way at the pinned bandwidth."""
        if not self.cpu_backup:
            return 0.0
        return self.weights_bytes() / self.bandwidth * self.s.scale

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
        if not self.enabled or self.release_fails:
            return  # SGLang: the memory saver is a no-op adapter without the flag
        tags = list(tags or TAGS)
        async with self._lock:
            # The scheduler asserts it is idle; a busy one dies here (and the server with it).
            await self.s.the_engine.control(("release", tags))
            if "weights" in tags and "weights" not in self.released and not self.backup_kept:
                await asyncio.sleep(self.transfer_s())  # GPU -> pinned host copy
                self.backup_kept = self.retain and self.cpu_backup
            self.released |= set(tags)
            log.info(f"Release memory occupation done: tags={tags}")
            self._publish()

    async def resume(self, tags: list[str] | None) -> None:
        if not self.enabled:
            return
        tags = list(tags or TAGS)
        async with self._lock:
            if "weights" in tags and "weights" in self.released:
                await asyncio.sleep(self.transfer_s())
            bad = self.bad_resume or ("weights" in tags and not self.cpu_backup)
            await self.s.the_engine.control(("resume", tags, bad))
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


def scheduler_control(sched: Any, msg: tuple) -> Any:
    """The scheduler's side of a control message (runs in the scheduler process). Returns the
    reply; a release with requests running raises SGLang's AssertionError (the rank dies)."""
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
        if sched.running or sched.chunked or (sched.waiting and not sched.paused):
            raise AssertionError(IDLE_ASSERTION)
        return True
    if kind == "resume":
        _, tags, bad = msg
        if "weights" in tags:
            sched.bad_draft = bool(bad)
        return True
    return None
