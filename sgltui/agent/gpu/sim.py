"""The GPU service's simulated backend: the GPUs running simulators publish (the format:
sgltui/sim/gpu_publish.py). The one place that reads those files.

Each simulator writes sim_gpu_dir()/<pid>.json about once a second; a file whose pid is dead is
stale and ignored. Several simulators of one GPU preset share "GPU i" the way real servers on
one host would, so their entries with the same index are merged (memory summed; the others show
as other processes). Simulators of another preset simulate another machine: once a managed
server runs, only the preset(s) of managed servers are shown, so a foreign simulator elsewhere
on the host does not add a phantom GPU. Every device is labelled simulated.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from sgltui.agent.gpu.reading import GpuReading, empty_gpu
from sgltui.agent.slot.procs import ProcTree
from sgltui.core.locations import sim_gpu_dir
from sgltui.core.pids import pid_alive


def read_publications(directory: Path | None = None) -> list[dict[str, Any]]:
    """The live simulators' publications, sorted by pid."""
    d = directory or sim_gpu_dir()
    pubs = []
    try:
        entries = list(d.glob("*.json"))
    except OSError:
        return []
    for path in entries:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue  # being replaced, or half-written by a foreign tool: next second will do
        if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
            continue
        pid = data.get("pid")
        if not isinstance(pid, int):
            continue
        if not pid_alive(pid):
            # Its simulator ended without removing it (kill -9): nobody else ever will.
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        pubs.append(data)
    pubs.sort(key=lambda p: p["pid"])
    return pubs


def held_by(pids: set[int], directory: Path | None = None) -> dict[int, int] | None:
    """Bytes the live simulators among `pids` hold on their GPUs, by simulator pid (a
    simulator's scheduler pids count as it); None when no simulator ever published here."""
    d = directory or sim_gpu_dir()
    if not d.is_dir():
        return None
    out: dict[int, int] = {}
    for pub in read_publications(d):
        pid = pub["pid"]
        owners = {pid} | {p for p in pub.get("pids") or [] if isinstance(p, int)}
        if owners & pids:
            used = sum(int(_num(e.get("used_bytes")) or 0) for e in _entries(pub))
            out[pid] = out.get(pid, 0) + used
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _entries(pub: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in pub["gpus"] if isinstance(e, dict) and isinstance(e.get("index"), int)]


def _preset(entry: dict[str, Any]) -> str:
    return str(entry.get("preset") or entry.get("name") or "gpu")


class SimGpuSource:
    kind = "sim"

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def close(self) -> None:
        pass

    def sample(self, trees: dict[str, ProcTree]) -> GpuReading:
        pubs = read_publications(self.directory)
        owners: list[tuple[dict[str, Any], str | None]] = []
        for pub in pubs:
            pids = {pub["pid"]} | {p for p in pub.get("pids") or [] if isinstance(p, int)}
            owners.append(
                (pub, next((s for s, t in trees.items() if pids & (t.pids | {t.root})), None))
            )
        managed = {_preset(e) for pub, slot in owners if slot is not None for e in _entries(pub)}
        merged: dict[tuple[str, int], dict[str, Any]] = {}
        pinned: dict[str, int] = {}
        for pub, slot in owners:
            if slot is not None and isinstance(pub.get("host_pinned_bytes"), int):
                pinned[slot] = pinned.get(slot, 0) + pub["host_pinned_bytes"]
            for entry in _entries(pub):
                if managed and _preset(entry) not in managed:
                    continue
                self._merge(merged, entry, pub, slot)
        # A simulated host of N GPUs: the ones no slot uses are shown too, idle, so the pane
        # shows the host as nvidia-smi would (each slot's share on its own GPUs).
        for pub, _slot in owners:
            host_gpus = pub.get("host_gpus")
            entries = _entries(pub)
            if not isinstance(host_gpus, int) or not entries or host_gpus > 64:
                continue
            if managed and _preset(entries[0]) not in managed:
                continue
            for idx in range(host_gpus):
                key = (_preset(entries[0]), idx)
                if key not in merged:
                    idle = dict(entries[0], index=idx, used_bytes=0, breakdown_bytes={})
                    for reading in ("utilization_pct", "pcie_rx_bytes_s", "pcie_tx_bytes_s"):
                        idle[reading] = 0.0
                    idle_gpu = pub.get("idle_gpu")
                    if isinstance(idle_gpu, dict):
                        idle.update(
                            {k: v for k, v in idle_gpu.items() if k in ("power_w", "temperature_c")}
                        )
                    self._merge(merged, idle, pub, None)
                    merged[key]["processes"] = []
        gpus = [merged[k] for k in sorted(merged, key=lambda k: (k[1], k[0]))]
        for g in gpus:
            if g["total_bytes"] is not None and g["used_bytes"] is not None:
                g["free_bytes"] = max(0, g["total_bytes"] - g["used_bytes"])
        n = len(pubs)
        msg = (
            f"simulated GPUs published by {n} running simulator{'s' if n != 1 else ''}" if n else ""
        )
        return GpuReading("sim", msg, gpus, pinned)

    @staticmethod
    def _merge(
        merged: dict[tuple[str, int], dict[str, Any]],
        e: dict[str, Any],
        pub: dict[str, Any],
        slot: str | None,
    ) -> None:
        idx = e["index"]
        name = str(e.get("name") or f"GPU {idx}")
        if "simulated" not in name.lower():
            name += " (simulated)"
        key = (_preset(e), idx)
        g = merged.get(key)
        used = _num(e.get("used_bytes"))
        if g is None:
            g = merged[key] = empty_gpu(idx, name, simulated=True)
            g["uuid"] = f"SIM-{e.get('preset') or 'gpu'}-{idx}"
            g["preset"] = e.get("preset")
            g["total_bytes"] = int(_num(e.get("total_bytes")) or 0)
            g["used_bytes"] = 0
            g["breakdown_bytes"] = {}
            for reading in (
                "utilization_pct",
                "power_w",
                "temperature_c",
                "pcie_rx_bytes_s",
                "pcie_tx_bytes_s",
            ):
                g[reading] = 0.0
        g["used_bytes"] += int(used or 0)
        for k, v in (e.get("breakdown_bytes") or {}).items():
            if _num(v) is not None:
                g["breakdown_bytes"][k] = g["breakdown_bytes"].get(k, 0) + int(v)
        # Two servers on one GPU: utilization and power add up (capped), temperature is the hottest.
        g["utilization_pct"] = min(
            100.0, g["utilization_pct"] + (_num(e.get("utilization_pct")) or 0.0)
        )
        g["power_w"] += _num(e.get("power_w")) or 0.0
        g["temperature_c"] = max(g["temperature_c"], _num(e.get("temperature_c")) or 0.0)
        g["pcie_rx_bytes_s"] += _num(e.get("pcie_rx_bytes_s")) or 0.0
        g["pcie_tx_bytes_s"] += _num(e.get("pcie_tx_bytes_s")) or 0.0
        g["processes"].append(
            {
                "pid": pub["pid"],
                "used_bytes": int(used or 0),
                "slot": slot,
                "match": "pid" if slot else None,
                "name": "sgltui.sim",
            }
        )
        if slot is not None:
            g["server_bytes"][slot] = g["server_bytes"].get(slot, 0) + int(used or 0)
