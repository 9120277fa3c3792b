"""One-shot check of the NVML source on a real NVIDIA GPU (run on a GPU machine, not in CI).

Starts a stand-in "server" in its own session: a main process that holds no GPU memory and one
child ("TP rank", retitled like SGLang's schedulers) that allocates GPU memory with torch. Then
prints what NvmlSource reports: per-GPU totals and readings, every compute process on the GPU and
which slot its memory is attributed to, and what the full Telemetry object shows over a few
seconds. Finally stops the server's process group and shows the memory being released.

    python3 tools/nvml_check.py [--gib 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sgltui.agent.gpu.nvml import open_nvml  # noqa: E402
from sgltui.agent.slot.procs import server_tree  # noqa: E402
from sgltui.agent.telemetry import Telemetry  # noqa: E402

RANK = r"""
import ctypes, sys, time
# Retitle like SGLang's schedulers (comm is cut to 15 chars), so name matching has a name to match.
ctypes.CDLL(None).prctl(15, b"sglang::scheduler_TP0", 0, 0, 0)
import torch
x = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda:0")
x.fill_(1); torch.cuda.synchronize()
print("allocated", flush=True)
time.sleep(600)
"""

SERVER = r"""
import subprocess, sys, time
# argv[0] stays the interpreter's path: a virtualenv's python finds its packages through it.
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(rank.pid, flush=True)
rank.wait()
"""

GIB = 2**30


def show(reading, label: str) -> None:
    print(f"--- {label}: source={reading.kind} message={reading.message!r}")
    for g in reading.gpus:
        print(
            f"GPU {g['index']} {g['name']} uuid={g['uuid']} total={g['total_bytes'] / GIB:.2f} GiB "
            f"used={g['used_bytes'] / GIB:.2f} GiB free={g['free_bytes'] / GIB:.2f} GiB util={g['utilization_pct']}% "
            f"power={g['power_w']} W temp={g['temperature_c']} C pcie rx={g['pcie_rx_bytes_s']} tx={g['pcie_tx_bytes_s']} B/s"
        )
        print(f"  server_bytes={ {k: f'{v / GIB:.2f} GiB' for k, v in g['server_bytes'].items()} }")
        for p in g["processes"]:
            used = f"{p['used_bytes'] / GIB:.2f} GiB" if p["used_bytes"] is not None else "n/a"
            print(
                f"  process pid={p['pid']} used={used} slot={p['slot']} match={p['match']} nvml_name={p['name']}"
            )


async def telemetry_view(main_pid: int) -> None:
    samples = []
    t = Telemetry(samples.append, gpu_interval=0.5, host_interval=0.5, record_interval=1.0)
    t.attach("0", main_pid, "http://127.0.0.1:9", None)
    await t.start()
    await asyncio.sleep(3.0)
    await t.stop()
    snap = t.snapshot()
    print(f"--- Telemetry: gpu_source={snap['gpu_source']} samples recorded={len(samples)}")
    for g in snap["gpus"]:
        print(f"  GPU {g['index']}: server_bytes={g['server_bytes']}")
    print(
        f"  host server_rss_bytes={snap['host']['server_rss_bytes']} server_cpu_pct={snap['host']['server_cpu_pct']}"
    )
    names = t.series()["series"]
    print(f"  series: {len(names)}: {sorted(names)[:12]} ...")
    print(f"  gpu.0.server_bytes.0 points: {names.get('gpu.0.server_bytes.0', [])[-3:]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=8.0)
    args = ap.parse_args()
    src, msg = open_nvml()
    if src is None:
        print(f"NVML unavailable: {msg}")
        return 1
    show(src.sample({}), "before the server starts")
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, RANK, str(args.gib)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        rank_pid = int(server.stdout.readline())
        print(
            f"server main pid={server.pid} (no GPU memory), rank pid={rank_pid} (allocating {args.gib} GiB)"
        )
        deadline = time.time() + 120
        while time.time() < deadline and server.poll() is None:
            reading = src.sample({"0": server_tree(server.pid)})
            if any(g["server_bytes"].get("0", 0) >= args.gib * GIB for g in reading.gpus):
                break
            time.sleep(0.5)
        tree = server_tree(server.pid)
        print(f"server tree: {sorted(tree.pids)} names={tree.names}")
        show(reading, "server holding memory")
        asyncio.run(telemetry_view(server.pid))
        if shutil.which("nvidia-smi"):
            out = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            print("--- nvidia-smi --query-compute-apps:\n" + out.stdout.strip())
    finally:
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait(timeout=30)
    t0 = time.time()
    while time.time() - t0 < 30:
        reading = src.sample({"0": server_tree(server.pid)})
        if not any(g["processes"] for g in reading.gpus):
            break
        time.sleep(0.2)
    show(reading, f"after killpg ({time.time() - t0:.1f} s later)")
    src.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
