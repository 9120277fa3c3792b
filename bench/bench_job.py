#!/usr/bin/env python3
"""Batch job budgets (issue 13), measured in one run, not asserted.

Against the simulator at zero time scale:
1. the job runner's CPU per completion vs the bench load generator sending the same requests
   (same prompts, output length and concurrency; the runner asks for whole responses, the load
   generator streams them) - goal: runner within 1.25x;
2. the agent's RSS growth over a job run through the agent (the runner is its child) - goal
   under 100 MB;
3. resuming from a 200,000-line output (input check + torn-line repair + output scan) - goal
   under 5 s (always 200,000 lines unless --resume-lines says otherwise).
Against the simulator at a real time scale (1.0):
4. the job's output tok/s vs the load generator's at the same concurrency - goal within 3%.

    python bench/bench_job.py [--requests 200000] [--concurrency 64] [--output-len 16]

The default --requests is small for a 2-core machine; the size run is printed. Exit 0 whatever
the figures: they are the output.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_loadgen import free_port, run_sgltui, stop_server, wait_ready  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def start_sim(port: int, time_scale: float, running: int) -> subprocess.Popen:
    argv = [
        sys.executable, "-m", "sgltui.sim", "--model-path", MODEL, "--sim-gpu", "h200-141gb",
        "--sim-time-scale", str(time_scale), "--max-running-requests", str(running),
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=ENV
    )
    wait_ready(f"http://127.0.0.1:{port}", proc)
    return proc


def write_input(
    path: Path,
    n: int,
    output_len: int,
    input_len: int = 32,
    seed: int = 42,
    model: str = MODEL,
) -> None:
    """The load generator's own prompts (its random workload: same generator, lengths and
    seed) as a batch file."""
    from sgltui.bench.workload import make_workload

    wl = make_workload("random", input_len, output_len, seed)
    with open(path, "w") as fh:
        for i in range(n):
            body = {
                "model": model,
                "prompt": wl.item(i).prompt,
                "max_tokens": output_len,
                "temperature": 0.0,
                "ignore_eos": True,
            }
            line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}
            fh.write(json.dumps(line) + "\n")


def run_worker(url: str, inp: Path, out: Path, concurrency: int) -> dict:
    """The job runner by itself (the process the agent starts), until its done line."""
    spec = json.dumps({"input": str(inp), "output": str(out), "concurrency": concurrency})
    proc = subprocess.Popen(
        [sys.executable, "-m", "sgltui.jobs.worker", "--spec-json", spec],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
        start_new_session=True,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps({"op": "target", "url": url}) + "\n")
    proc.stdin.flush()
    done = None
    for line in proc.stdout:
        msg = json.loads(line)
        if msg["t"] == "error":
            raise SystemExit(f"runner: {msg['message']}")
        if msg["t"] == "done":
            done = msg
            break
    proc.stdin.close()
    proc.wait(timeout=30)
    if not done or done["state"] != "done":
        raise SystemExit(f"runner did not finish: {done}")
    return done


def agent_rss(inp: Path, out: Path, concurrency: int, tmp: Path) -> dict:
    """A job through a real agent; the agent's RSS sampled over the run."""
    import psutil

    from sgltui.client import AgentError, call_sync, spawn_agent

    state, profiles = tmp / "state", tmp / "profiles"
    profiles.mkdir()
    port = free_port()
    (profiles / "bj.toml").write_text(
        f'name = "bj"\nlauncher = "sim"\n[server]\nmodel-path = "{MODEL}"\nport = {port}\n'
        f'sim-time-scale = 0\nsim-gpu = "h200-141gb"\nmax-running-requests = 64\n'
    )
    os.environ["SGLTUI_STATE_DIR"] = str(state)
    spawn_agent(state, [profiles])
    pid = None
    try:
        for _ in range(200):
            try:
                pid = call_sync(state, "ping", autostart=False)["pid"]
                break
            except AgentError:  # not up yet
                time.sleep(0.1)
        call_sync(state, "start", autostart=False, profile="bj", wait=True)
        proc = psutil.Process(pid)
        rss0 = proc.memory_info().rss
        peak = rss0
        view = call_sync(
            state, "job_run", autostart=False, input=str(inp), output=str(out),
            concurrency=concurrency,
        )  # fmt: skip
        cpu0 = sum(proc.cpu_times()[:2])
        t0 = time.monotonic()
        while True:
            peak = max(peak, proc.memory_info().rss)
            v = call_sync(state, "job_status", autostart=False, job=view["id"])
            if v["state"] in ("done", "failed", "cancelled"):
                break
            time.sleep(0.5)
        wall = time.monotonic() - t0
        agent_cpu = sum(proc.cpu_times()[:2]) - cpu0
        rss1 = proc.memory_info().rss
        return {
            "state": v["state"],
            "answered": v["answered"],
            # decimal MB (1e6 bytes) on purpose: the budget above is stated in MB
            "rss_start_mb": rss0 / 1e6,
            "rss_end_mb": rss1 / 1e6,
            "rss_peak_growth_mb": (peak - rss0) / 1e6,
            "agent_cpu_share": agent_cpu / wall if wall else 0.0,
            "wall_s": wall,
        }
    finally:
        try:
            call_sync(state, "shutdown", autostart=False, stop_servers=True)
        except AgentError:  # teardown: killed below
            pass
        time.sleep(2)
        if pid and psutil.pid_exists(pid):
            os.kill(pid, signal.SIGKILL)


def resume_time(lines: int, tmp: Path) -> dict:
    """prepare() on an input of `lines` requests whose output holds them all but a torn last."""
    from sgltui.jobs.runner import Runner

    inp, out = tmp / "resume.jsonl", tmp / "resume.out.jsonl"
    write_input(inp, lines, 128)
    text = "x " * 300  # a ~600-byte completion, like a real 128-token answer
    with open(out, "w") as fh:
        for i in range(lines - 1):
            body = {
                "id": f"cmpl-{i}", "object": "text_completion", "model": MODEL,
                "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 32, "completion_tokens": 128, "total_tokens": 160},
            }  # fmt: skip
            # the runner's own line format around the server's body, as a resumed job finds it
            fh.write(
                f'{{"id":"batch_req_1_{i}","custom_id":"r{i}","response":{{"status_code":200,'
                f'"request_id":"cmpl-{i}","body":{json.dumps(body)}}},"error":null}}\n'
            )
        fh.write('{"id": "torn", "custom_id": "r' + str(lines - 1) + '", "resp')
    r = Runner(inp, out, 8, lambda m: None)
    t0 = time.perf_counter()
    info = r.prepare()  # a new agent's first runner: the input checked again, the output read
    full = time.perf_counter() - t0
    repaired = info["repaired_bytes"] > 0
    r.release()  # the bench only measures prepare()
    r = Runner(inp, out, 8, lambda m: None)
    t0, c0 = time.perf_counter(), time.process_time()
    info = r.prepare(info["stamp"])  # the usual resume: the input unchanged since its check
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    r.release()
    return {"seconds": secs, "cpu_seconds": cpu, "full_seconds": full, "resumed": info["resumed"],
            "repaired": repaired, "output_mb": out.stat().st_size / 1e6}  # fmt: skip


def loadgen_and_job(
    scale: float, running: int, inp: Path, out: Path, concurrency: int, n: int, out_len: int
) -> tuple[dict, dict]:
    """The load generator, then the job runner, on one fresh simulator: (load gen, job) figures."""
    port = free_port()
    sim = start_sim(port, scale, running)
    url = f"http://127.0.0.1:{port}"
    try:
        return run_sgltui(url, concurrency, n, out_len), run_worker(url, inp, out, concurrency)
    finally:
        stop_server(sim)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--requests", type=int, default=3000, help="requests per CPU/RSS run (issue: 200000)"
    )
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--output-len", type=int, default=16)
    p.add_argument("--resume-lines", type=int, default=200_000)
    p.add_argument("--rt-concurrency", type=int, default=32, help="the real-time-scale point")
    p.add_argument("--rt-requests", type=int, default=320)
    p.add_argument("--rt-output-len", type=int, default=64)
    p.add_argument("--skip", default="", help="comma list of parts to skip: cpu,rss,resume,rt")
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    n, c, L = args.requests, args.concurrency, args.output_len
    print(f"bench_job: {n:,} requests per run at concurrency {c}, output {L} tokens; "
          f"resume from {args.resume_lines:,} lines; real-time point {args.rt_requests} requests "
          f"at concurrency {args.rt_concurrency}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmpd:
        tmp = Path(tmpd)
        inp = tmp / "in.jsonl"
        write_input(inp, n, L)
        if "cpu" not in skip:
            lg, job = loadgen_and_job(0.0, 64, inp, tmp / "out-cpu.jsonl", c, n, L)
            lg_us = lg["client_cpu_s"] / lg["completed"] * 1e6
            job_us = job["cpu_run_s"] / job["done"] * 1e6
            print(f"1. CPU per completion: runner {job_us:,.0f} us ({job['done']:,} answered in "
                  f"{job['run_s']:.1f} s), load generator {lg_us:,.0f} us ({lg['completed']:,} in "
                  f"{lg['client_wall_s']:.1f} s): ratio {job_us / lg_us:.2f}x (goal <= 1.25x)")  # fmt: skip
        if "rss" not in skip:
            res = agent_rss(inp, tmp / "out-rss.jsonl", c, tmp)
            print(f"2. agent RSS over a {res['answered']:,}-request job: {res['rss_start_mb']:.0f} -> "
                  f"{res['rss_end_mb']:.0f} MB, peak growth {res['rss_peak_growth_mb']:.1f} MB "
                  f"(goal < 100 MB); agent CPU {res['agent_cpu_share']:.1%} of a core while the "
                  f"job ran ({res['state']} in {res['wall_s']:.1f} s)")  # fmt: skip
        if "resume" not in skip:
            res = resume_time(args.resume_lines, tmp)
            print(f"3. resume from {res['resumed']:,} lines ({res['output_mb']:.0f} MB, torn last "
                  f"line repaired: {res['repaired']}): {res['seconds']:.2f} s, {res['cpu_seconds']:.2f} s "
                  f"CPU (goal < 5 s); "
                  f"{res['full_seconds']:.2f} s with the input checked again")  # fmt: skip
        if "rt" not in skip:
            rc, rn, rl = args.rt_concurrency, args.rt_requests, args.rt_output_len
            rinp = tmp / "rt.jsonl"
            write_input(rinp, rn, rl)
            lg, job = loadgen_and_job(1.0, max(rc, 64), rinp, tmp / "out-rt.jsonl", rc, rn, rl)
            lg_tok = lg["output_throughput"]
            job_tok = job["out_tokens"] / job["run_s"]
            print(f"4. real time scale, concurrency {rc}: job {job_tok:,.0f} tok/s, load generator "
                  f"{lg_tok:,.0f} tok/s: job/bench {job_tok / lg_tok:.3f} (goal >= 0.97)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
