"""A short look at the machine before warm_check (not CI): versions, the card, and what pinned
host memory costs and moves, in 1 GiB pieces as the fake holder uses it.

    python3 tools/gpucheck/pinned_probe.py OUT_DIR [--gib 4]

Writes OUT_DIR/probe.json: torch/CUDA versions, the card, pinning time per GiB, pinned
host -> GPU and GPU -> pinned host in GB/s (1e9 bytes/s; each the best and median of 3), and
pageable host -> GPU once for contrast.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

GIB = 2**30


def timed(torch, fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--gib", type=int, default=4)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    r: dict = {"python": sys.version.split()[0]}
    t0 = time.perf_counter()
    import torch

    r["import_torch_s"] = round(time.perf_counter() - t0, 3)
    r["torch"] = torch.__version__
    r["cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        r["error"] = "no CUDA here"
        (a.out / "probe.json").write_text(json.dumps(r, indent=1))
        print(json.dumps(r, indent=1))
        return 1
    t0 = time.perf_counter()
    torch.empty(1, device="cuda")
    r["first_cuda_alloc_s"] = round(time.perf_counter() - t0, 3)
    prop = torch.cuda.get_device_properties(0)
    r["card"] = {"name": prop.name, "memory_gib": round(prop.total_memory / GIB, 2)}
    n = a.gib
    dev = torch.empty(n * GIB, dtype=torch.uint8, device="cuda")
    dev.fill_(7)
    t0 = time.perf_counter()
    pinned = [torch.empty(GIB, dtype=torch.uint8, pin_memory=True) for _ in range(n)]
    r["pin_s_per_gib"] = round((time.perf_counter() - t0) / n, 3)

    def h2d():
        for i, h in enumerate(pinned):
            dev[i * GIB : (i + 1) * GIB].copy_(h, non_blocking=True)

    def d2h():
        for i, h in enumerate(pinned):
            h.copy_(dev[i * GIB : (i + 1) * GIB], non_blocking=True)

    for name, fn in (("gpu_to_pinned", d2h), ("pinned_to_gpu", h2d)):
        gbps = [n * GIB / timed(torch, fn) / 1e9 for _ in range(3)]
        r[name + "_gbps"] = {
            "best": round(max(gbps), 2),
            "median": round(statistics.median(gbps), 2),
        }
    page = torch.empty(GIB, dtype=torch.uint8)
    page.fill_(3)
    r["pageable_to_gpu_gbps_1gib"] = round(
        GIB / timed(torch, lambda: dev[:GIB].copy_(page)) / 1e9, 2
    )
    r["ok"] = int(dev[:GIB].max()) == 3 and int(pinned[0].max()) == 7
    (a.out / "probe.json").write_text(json.dumps(r, indent=1))
    print(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
