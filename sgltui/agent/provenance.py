"""At ready (launched, adopted or attached) the agent keeps what the server runs (issue 38):
its /server_info with the GPU's name, driver and CUDA version, under a hash (core/provenance.py),
as a `server.provenance` event in the session. The report and bench results point at the hash.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent.slot import info_fetch
from sgltui.core import provenance

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext

log = logging.getLogger(__name__)
TRIES = 3  # /server_info round-trips to every scheduler; a busy start may time out once


class ProvenanceKeeper:
    """A subscriber of the agent's events: a slot's `ready` -> its provenance, once per launch."""

    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx  # its slots, its event bus, its telemetry
        self.latest: dict[str, dict[str, Any]] = {}  # slot -> its ready server's record
        self.by_launch: dict[str, str] = {}  # launch id -> hash (job segments carry it)
        self._tasks: set[asyncio.Task] = set()

    def on_event(self, event: protocol.EventBase, record: dict) -> None:
        if not (
            isinstance(event, protocol.SlotStateChanged)
            and event.state == protocol.SlotState.READY
            and event.slot
        ):
            return
        task = asyncio.get_running_loop().create_task(self._keep(event.slot, event.launch_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _keep(self, slot_id: str, launch_id: str | None) -> None:
        slot = self.ctx.slots.get(slot_id)
        if slot is None:
            return
        host = slot.server_host if slot.server_host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        url = f"http://{host}:{slot.port}"
        info = None
        for attempt in range(TRIES):
            info = await _fetch(url, slot.api_key)
            if info is not None or slot.launch_id != launch_id:
                break
            await asyncio.sleep(1.0 + attempt)
        if info is None or slot.launch_id != launch_id:
            return
        gpu = await asyncio.to_thread(self.gpu)
        rec = provenance.record(info, gpu)
        self.latest[slot_id] = rec
        self.by_launch[launch_id or ""] = rec["hash"]
        self.ctx.bus.publish(
            protocol.ServerProvenance(
                client=slot.client,
                slot=slot_id,
                launch_id=launch_id,
                hash=rec["hash"],
                version=rec.get("version"),
                model=rec.get("model"),
                args=rec["args"],
                decided=rec["decided"],
                gpu=rec["gpu"],
                launch_command=rec.get("launch_command"),
            )
        )

    def gpu(self) -> dict[str, Any]:
        """The GPU the figures come from: name from telemetry, driver and CUDA from NVML."""
        out: dict[str, Any] = {}
        tele = self.ctx.telemetry
        if tele is not None:
            try:
                snap = tele.snapshot()
                gpus = snap.get("gpus") or []
                if gpus:
                    out["name"], out["count"] = gpus[0].get("name"), len(gpus)
            except Exception:  # noqa: BLE001 - provenance without a GPU name still counts
                log.debug("no GPU for provenance", exc_info=True)
        out.update(gpu_versions())
        return out


async def _fetch(url: str, api_key: str | None) -> dict[str, Any] | None:
    try:  # bounded in time and size, coerced (agent/slot/info_fetch.py)
        return await info_fetch.fetch(url, api_key, deadline_s=15.0)
    except info_fetch.FetchError:
        return None


@functools.lru_cache(maxsize=1)
def gpu_versions() -> dict[str, Any]:
    """NVIDIA driver and CUDA versions (empty without NVML); they do not change under a run."""
    try:
        import pynvml

        from sgltui.agent.gpu import nvml
    except ImportError:
        return {}
    out: dict[str, Any] = {}
    with nvml.session() as ok:
        if not ok:
            return {}
        try:
            drv = pynvml.nvmlSystemGetDriverVersion()
            out["driver"] = drv.decode() if isinstance(drv, bytes) else str(drv)
            cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
            out["cuda"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except pynvml.NVMLError:
            pass
    return out
