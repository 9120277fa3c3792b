"""Session recording and replay costs, each against a baseline measured in the same run.

    python bench/bench_session.py [--samples 20000] [--events 20000]

Prints, per item, sgltui's figure, the baseline's and their ratio:
  event      Recorder.event (redaction + one O_APPEND write)  vs  json.dumps + os.write
  sample     Recorder.sample (a 1-GPU SAMPLE)                vs  json.dumps + os.write
  log line   Redactor.text on a typical SGLang batch line     vs  str.replace of one literal
  index      JsonlIndex of the timeline (time, memory)        vs  loading every sample as a dict
  seek       Replay.status_at + window(t) at random times     (no baseline: absolute ms)
Goals (memory flat over 24 h; recording must not slow the agent): event and sample
well under 100 us, index memory a small fraction of the all-dicts baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sgltui.core.redact import Redactor  # noqa: E402
from sgltui.session.jsonl import JsonlIndex, read_jsonl  # noqa: E402
from sgltui.session.replay import Replay  # noqa: E402
from sgltui.session.writer import Recorder  # noqa: E402

BATCH_LINE = (
    "[2026-12-02 15:40:41] Decode batch, #running-req: 4, #token: 8000, token usage: 0.30, "
    "accept len: 2.61, accept rate: 0.54, cuda graph: True, gen throughput (token/s): 181.20, #queue-req: 2"
)


def sample(ts: float) -> dict:
    return {
        "ts": ts,
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "uuid": "GPU-0",
                "simulated": False,
                "total_bytes": 141e9,
                "used_bytes": 80e9,
                "free_bytes": 61e9,
                "utilization_pct": 87.0,
                "power_w": 420.0,
                "temperature_c": 61.0,
                "pcie_rx_bytes_s": 0.0,
                "pcie_tx_bytes_s": 0.0,
                "server_bytes": {"0": 78e9},
                "breakdown_bytes": None,
            }
        ],
        "host": {
            "ram_total_bytes": 128e9,
            "ram_used_bytes": 40e9,
            "ram_available_bytes": 88e9,
            "swap_total_bytes": 0,
            "swap_used_bytes": 0,
            "cpu_pct": 12.0,
            "server_rss_bytes": {"0": 9e9},
            "server_cpu_pct": {"0": 100.0},
        },
        "engine": {
            "0": {
                "source": "metrics",
                "ts": ts,
                "gen_throughput": 181.2,
                "num_running_reqs": 4,
                "num_queue_reqs": 2,
                "token_usage": 0.3,
                "accept_length": 2.6,
                "max_running_requests": 4,
                "max_total_num_tokens": 412160,
                "cache_hit_rate": 0.4,
            }
        },
    }


def per_call_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - t0) / n * 1e6


def row(name: str, ours: float, base: float | None, unit: str) -> None:
    ratio = f"{ours / base:6.2f}x" if base else "      -"
    base_s = f"{base:10.1f}" if base is not None else "         -"
    print(f"{name:<28} {ours:10.1f} {base_s}  {ratio}  {unit}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--events", type=int, default=20000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sgltui-bench-session-"))
    try:
        rec = Recorder.create(tmp, session_dir=tmp / "s")
        rec.add_secret("sk-bench-0123456789")
        fd = os.open(tmp / "baseline.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        print(f"{'item':<28} {'sgltui':>10} {'baseline':>10}  {'ratio':>7}  unit")
        ev = {
            "state": "ready",
            "prev": "launching",
            "reason": "server ready",
            "profile": "mtp",
            "launch_id": "L1",
        }
        ours = per_call_us(lambda i: rec.event("slot.state", slot="0", **ev), args.events)
        base = per_call_us(
            lambda i: os.write(
                fd,
                (
                    json.dumps({"v": 1, "ts": time.time(), "type": "slot.state", **ev}) + "\n"
                ).encode(),
            ),
            args.events,
        )
        row("event", ours, base, "us/event")
        t0 = time.time() - args.samples
        ours = per_call_us(lambda i: rec.sample(sample(t0 + i)), args.samples)
        base = per_call_us(
            lambda i: os.write(fd, (json.dumps(sample(t0 + i)) + "\n").encode()), args.samples
        )
        row("sample", ours, base, "us/sample")
        red = Redactor(["sk-bench-0123456789"])
        ours = per_call_us(lambda i: red.text(BATCH_LINE), 50000)
        base = per_call_us(lambda i: BATCH_LINE.replace("sk-bench-0123456789", "***"), 50000)
        row("log line redaction", ours, base, "us/line")
        os.close(fd)
        rec.close()

        path = tmp / "s" / "timeline.jsonl"
        tracemalloc.start()
        t = time.perf_counter()
        idx = JsonlIndex(path)
        idx_s = time.perf_counter() - t
        idx_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        tracemalloc.start()
        t = time.perf_counter()
        records, _ = read_jsonl(path)
        all_s = time.perf_counter() - t
        all_mem = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del records
        idx_mem = len(idx) * (8 + 2 + 8)
        row(f"index {len(idx)} samples", idx_s * 1000, all_s * 1000, "ms to open")
        # decimal MB (1e6 bytes): a ratio of two figures, labelled as what they are
        row("index memory kept", idx_mem / 1e6, all_mem / 1e6, "MB")
        row("index memory peak", idx_peak / 1e6, all_mem / 1e6, "MB")
        idx.close()

        rp = Replay.open(tmp / "s")
        rnd = random.Random(1)
        ms = (
            per_call_us(
                lambda i: (
                    rp.status_at(rnd.uniform(rp.start, rp.end)),
                    rp.window(rnd.uniform(rp.start, rp.end)),
                ),
                50,
            )
            / 1000
        )
        row("seek (status + 5 min window)", ms, None, "ms/seek")
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
