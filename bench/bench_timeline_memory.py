"""Timeline memory over many samples: must stay flat once the rings are full.

Drives the real Telemetry object (no timers): each "sample" is one GPU reading (2 simulated
GPUs), one host reading, one batch log line, one engine reading and one SAMPLE for the recorder
(snapshot + JSON encoding, as the agent does), plus a `series()` read every 1000 samples. Memory
is traced with tracemalloc; the growth over the second half is compared with the first half,
which includes filling the rings (the baseline of this same run).

    python bench/bench_timeline_memory.py [--samples 100000] [--ring 3600]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sgltui.agent.gpu.reading import GpuReading, empty_gpu  # noqa: E402
from sgltui.agent.telemetry import Telemetry  # noqa: E402

GB = 1_000_000_000


def gpu_reading(rng: random.Random) -> GpuReading:
    gpus = []
    for i in range(2):
        g = empty_gpu(i, "NVIDIA H200 (simulated)", simulated=True)
        used = int(rng.uniform(80, 130) * GB)
        g.update(
            total_bytes=141 * GB,
            used_bytes=used,
            free_bytes=141 * GB - used,
            utilization_pct=rng.uniform(0, 100),
            power_w=rng.uniform(100, 700),
            temperature_c=rng.uniform(30, 80),
            pcie_rx_bytes_s=rng.uniform(0, 1e10),
            pcie_tx_bytes_s=rng.uniform(0, 1e10),
            server_bytes={"0": used - GB},
            breakdown_bytes={"weights": 55 * GB, "kv_cache": used - 56 * GB},
        )
        gpus.append(g)
    return GpuReading(
        "sim", "simulated GPUs published by 1 running simulator", gpus, {"0": 30 * GB}
    )


def host_reading(rng: random.Random) -> dict:
    return {
        "ram_total_bytes": 1000 * GB,
        "ram_used_bytes": int(rng.uniform(100, 200) * GB),
        "ram_available_bytes": int(rng.uniform(800, 900) * GB),
        "swap_total_bytes": 0,
        "swap_used_bytes": 0,
        "cpu_pct": rng.uniform(0, 100),
        "server_rss_bytes": {"0": 5 * GB},
        "server_cpu_pct": {"0": 100.0},
        "server_pinned_bytes": {"0": 30 * GB},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument(
        "--ring", type=int, default=3600, help="points per series (default 3600 = 1 h at 1 Hz)"
    )
    ap.add_argument(
        "--tracemalloc",
        action="store_true",
        help="trace every Python allocation (exact, ~3x slower); default: RSS and live block count",
    )
    args = ap.parse_args()
    if args.samples < 1000:
        print("--samples must be at least 1000", file=sys.stderr)
        return 2

    rng = random.Random(1)
    recorded = 0

    def on_sample(sample: dict) -> None:
        nonlocal recorded
        recorded += len(json.dumps(sample))  # what the recorder would write; not kept

    tel = Telemetry(on_sample, ring_capacity=args.ring)
    tel.attach("0", 1, "http://127.0.0.1:9", None)  # never started: no sockets, no timers
    half = args.samples // 2
    marks: dict[int, tuple[int, int, int]] = {}

    def measure() -> tuple[int, int, int]:
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] if args.tracemalloc else 0
        return traced, rss_bytes(), sys.getallocatedblocks()

    if args.tracemalloc:
        tracemalloc.start()
    base = measure()
    t0 = time.perf_counter()
    for n in range(1, args.samples + 1):
        ts = 1_700_000_000.0 + n
        tel.record_gpu(gpu_reading(rng), ts)
        tel.record_host(host_reading(rng), ts)
        tel.on_log_line(
            "0",
            f"[2026-10-01 12:00:43] Decode batch, #running-req: {rng.randint(0, 48)}, #token: 31488, "
            f"token usage: {rng.random():.2f}, accept len: 3.10, accept rate: 0.70, cuda graph: True, "
            f"gen throughput (token/s): {rng.uniform(100, 3000):.2f}, #queue-req: {rng.randint(0, 9)}",
        )
        e = tel._slots["0"].engine(tel._stale_after)
        tel.record_engine("0", e, ts)
        on_sample({"v": 1, **tel.snapshot()})
        if n % 1000 == 0:
            tel.series(["gpu.0.*"], since=ts - 60)
        if n in (half, args.samples):
            marks[n] = measure()
    elapsed = time.perf_counter() - t0
    if args.tracemalloc:
        tracemalloc.stop()

    series = len(tel.rings.names())
    print(
        f"samples: {args.samples}  series: {series}  ring: {args.ring} points  time: {elapsed:.1f} s "
        f"({elapsed / args.samples * 1e6:.0f} us/sample incl. snapshot+json)"
    )
    print(
        f"ring storage: {tel.rings.nbytes() / 1024:.0f} KiB (bound {series * args.ring * 16 / 1024:.0f} KiB)"
    )
    print("growth              first half (baseline: fills the rings)   second half (rings full)")
    names = ("traced (tracemalloc)", "RSS", "live Python blocks")
    flat = True
    for k, name in enumerate(names):
        if k == 0 and not args.tracemalloc:
            continue
        first = marks[half][k] - base[k]
        second = marks[args.samples][k] - marks[half][k]
        unit = 1 if k == 2 else 1024
        suffix = "" if k == 2 else " KiB"
        print(
            f"  {name:<20} {first / unit:>+14.1f}{suffix:<4}                      {second / unit:>+12.1f}{suffix}"
        )
        # Flat: the second half grows by under 2% of the first half's growth, or by a trivial amount
        # (RSS moves in pages and allocator arenas, so allow 256 KiB of noise there).
        noise = 1000 if k == 2 else 256 * 1024
        if second > max(0.02 * abs(first), noise):
            flat = False
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"memory flat: {'yes' if flat else 'NO'}")
    return 0 if flat else 1


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


if __name__ == "__main__":
    sys.exit(main())
