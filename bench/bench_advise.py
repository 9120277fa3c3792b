#!/usr/bin/env python3
"""`sgltui advise` and `job run --choose auto` budgets (issue 47), measured on the simulator in
one run, not asserted.

A seed-like host: a 96 GB GPU (rtx-pro-6000-96gb), 700 GB of host RAM, the Qwen3.6-27B-like
hybrid model with MTP 3/1/4 and max-running-requests 4, no proposal written anywhere.

(a) what `sgltui advise` proposes for it, best first;
(b) the wall of `job run --choose auto` (the trial over the serving profile and the proposals)
    vs the same job run wholly on the trial's winner from the start - goal: <= 1.03x; and the
    trial's share of the job's wall (start to decision) - goal: < 5%.

Time scale 0.1 with start-up 20x faster still, so the servers set the rates and a swap takes
seconds; `--accept-decay 0.08` (--sim-accept-decay) gives the seed's MTP figures (234 tok/s at
4 running). A real detached agent in a temporary state dir, stopped at the end.

    python bench/bench_advise.py [--requests 20000] [--output-len 64] [--accept-decay 0.08]

Exit 0 whatever the figures: they are the output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_job import write_input as write_batch  # noqa: E402
from bench_job_choose import _isolate, run_job, wait_job  # noqa: E402

MODEL = "Qwen/Qwen3.6-27B"
SEED_HOST = {"sim_gpu": "rtx-pro-6000-96gb", "sim_host_memory_gb": 700.0}
MTP = {
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "max_running_requests": 4,
    "context_length": 32768,
}


def sgltui(agent, *argv: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sgltui", "--profiles", str(agent.profiles_dir), *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3600)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--accept-decay", type=float, default=0.08)
    p.add_argument("--time-scale", type=float, default=0.1)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-advise-") as d:
        tmp = Path(d)
        _isolate(tmp)
        from tests.fixtures.agent import AgentHandle

        (tmp / "profiles").mkdir()
        agent = AgentHandle(tmp / "state", tmp / "profiles")
        agent.start()
        try:
            sim = {
                "model": MODEL,
                "time_scale": args.time_scale,
                "sim_slow_start": 0.05,
                "sim_accept_decay": args.accept_decay,
                **SEED_HOST,
            }
            serving = agent.write_profile("seed-mtp", **MTP, **sim)
            agent.call("start", profile=serving, wait=True)
            inp = tmp / "in.jsonl"
            write_batch(inp, args.requests, args.output_len, input_len=args.input_len, model=MODEL)

            r = sgltui(agent, "advise", "--json", "--prompt-tokens", str(args.input_len),
                       "--output-tokens", str(args.output_len))  # fmt: skip
            advice = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr}
            print(f"(a) sgltui advise on {serving} (MTP 3/1/4, max running 4, 700 GB RAM):")
            for i, prop in enumerate(advice.get("proposals") or [], 1):
                print(f"    {i}. {prop['name']} {prop['delta']}: {prop['figure']}")
            for note in advice.get("notes") or []:
                print(f"    note: {note}")

            t0 = time.monotonic()
            out = tmp / "auto.out.jsonl"
            r = sgltui(agent, "job", "run", str(inp), "-o", str(out), "--no-wait",
                       "--choose", "auto")  # fmt: skip
            if r.returncode != 0:
                raise SystemExit(f"job run --choose auto failed: {r.stderr}")
            jid = json.loads(sgltui(agent, "job", "status", "--json").stdout)["id"]
            final = wait_job(agent, jid, lambda v: v["state"] in ("done", "failed"), 7200)
            auto_wall = time.monotonic() - t0
            dec = final["decision"]
            winner = dec["winner"]
            evs = [e for e in agent.events("job.decision") if e.get("job") == jid]
            print(f"(b) {args.requests:,} requests ({args.input_len} in, {args.output_len} out)")
            print(f"    --choose auto: {auto_wall:7.1f} s, winner {winner}")
            for c in dec["candidates"]:
                print(
                    f"      {c['name']} {c.get('delta')}: {c['tok_s'] or 0:8.0f} tok/s "
                    f"[{c['ci_low'] or 0:.0f}, {c['ci_high'] or 0:.0f}] {c['requests']:5d} "
                    f"trial requests, swap {c['swap_s']} s ({c['reason']})"
                )
            trial_requests = sum(int(c["requests"] or 0) for c in dec["candidates"])
            print(f"    trial requests: {trial_requests:,} of {args.requests:,}")
            if evs and evs[0].get("ts"):
                trial_s = float(evs[0]["ts"]) - float(final["created"])
                print(
                    f"    trial (start to decision): {trial_s:.1f} s, {trial_s / auto_wall:.1%} "
                    "of the job's wall (budget < 5%)"
                )

            if agent.slot()["profile"] != winner:
                agent.call("swap", profile=winner, wait=True)
            best_wall, _best = run_job(agent, inp, tmp / "best.out.jsonl", None)
            print(f"    wholly on {winner} from the start: {best_wall:7.1f} s")
            print(f"    ratio --choose auto / best: {auto_wall / best_wall:.3f}x (budget <= 1.03x)")
        finally:
            from sgltui.client import AgentError

            try:
                agent.call("shutdown", stop_servers=True)
            except AgentError as exc:
                print(f"agent shutdown: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
