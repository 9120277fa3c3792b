"""Issue 30's run: one slot per GPU of the host, in one pool, measured (not CI).

    python3 tools/gpucheck/pool_check.py OUT_DIR [--gpus N] [--simulated-gpus N] [--requests 3000]

--gpus N (default 2: issue 30's two-GPU host, whose two slots sit behind the real smg) is how
many GPUs host init must find; --gpus 1 is the one-GPU machine: one slot, its pool behind the
agent's front instead of smg, the same checks otherwise.

host init (N GPUs -> N slots and a pool), the fake SGLang on every slot (profile
gpu-a holds 8 GiB a slot), NVML attribution per slot and GPU, a rolling swap to gpu-b (16 GiB)
with a 0.1 s NVML timeline per GPU (release back to baseline before the next launch, and how
long it took), a job through the pool checked by `job verify`, the TUI's memory pane as an SVG
(every GPU shown, and on a real host none marked "(sim)").
Every figure goes to OUT_DIR/pool_check.json. --simulated-gpus N is the CPU dry run: the host
is the simulator's and the NVML parts record "skipped" instead of failing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

try:  # 3.11+; tomli before (pyproject's dependency)
    import tomllib
except ImportError:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def sh(results: dict, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """One `sgltui` call; its rc and the tail of its output go into the results."""
    try:
        p = subprocess.run(
            [sys.executable, "-m", "sgltui", "--profiles", os.environ["GC_PROFILES"], *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:  # recorded as rc 124, the next step still reports
        p = subprocess.CompletedProcess(args, 124, str(e.stdout or ""), f"timed out: {e}")
    results.setdefault("commands", []).append(
        {"step": name, "argv": list(args), "rc": p.returncode, "out": (p.stdout + p.stderr)[-1500:]}
    )
    print(f"=== {name}: rc {p.returncode}\n{(p.stdout + p.stderr)[-800:]}", flush=True)
    return p


class Nvml:
    """Per-GPU used memory and compute pids, or None everywhere where NVML is absent."""

    def __init__(self) -> None:
        self.nv, self.handles, self.why = None, [], ""
        try:
            import pynvml
        except ImportError as e:  # the CPU dry run without the package
            self.why = f"no pynvml: {e}"
            return
        try:
            pynvml.nvmlInit()
            self.handles = [
                pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
            ]
            self.nv = pynvml
        except pynvml.NVMLError as e:  # no driver: the CPU dry run
            self.why = f"{type(e).__name__}: {e}"

    def used(self) -> list[int]:
        return [self.nv.nvmlDeviceGetMemoryInfo(h).used for h in self.handles] if self.nv else []

    def procs(self) -> list[list[dict]]:
        if not self.nv:
            return []
        return [
            [
                {"pid": p.pid, "bytes": p.usedGpuMemory}
                for p in self.nv.nvmlDeviceGetComputeRunningProcesses(h)
            ]
            for h in self.handles
        ]


def status(state: Path) -> dict:
    from sgltui.client import call_sync

    return call_sync(state, "status", autostart=False, client_name="gpucheck")


def descendants(pid: int) -> set[int]:
    """pid and every process below it (the holder child is the slot server's child). psutil,
    not /proc/PID/task/PID/children: that file needs a kernel option a VM's kernel may lack."""
    import psutil

    try:
        return {pid} | {c.pid for c in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return {pid}


def attribution(st: dict, nv: Nvml) -> list[dict]:
    """Each slot: its GPUs from host.toml, and which GPU NVML shows its processes on."""
    procs = nv.procs()
    rows = []
    for s in st.get("slots") or []:
        pid = s.get("pid")
        tree = descendants(pid) if pid else set()
        seen = [
            {"gpu": i, "pid": p["pid"], "gib": round((p["bytes"] or 0) / GIB, 2)}
            for i, plist in enumerate(procs)
            for p in plist
            if p["pid"] in tree
        ]
        rows.append(
            {
                "slot": s.get("name") or s.get("id"),
                "gpus": s.get("gpus"),
                "pid": pid,
                "nvml": seen if nv.nv else "skipped: " + nv.why,
                "right_gpu": (all(x["gpu"] in (s.get("gpus") or []) for x in seen) and bool(seen))
                if nv.nv
                else None,
            }
        )
    return rows


def agent_view(st: dict, mine: list[dict]) -> dict:
    """sgltui's own GPU reading (the agent's NVML sampler, what the TUI's memory pane draws):
    per GPU its used memory and each slot's share, and whether each slot's share matches what
    this script found by walking the slot's process tree (`mine`, from attribution())."""
    tele = st.get("telemetry") or {}
    gpus = [
        {
            "gpu": g.get("index"),
            "name": g.get("name"),
            "simulated": g.get("simulated"),
            "used_gib": round((g.get("used_bytes") or 0) / GIB, 2),
            "total_gib": round((g.get("total_bytes") or 0) / GIB, 2),
            "slot_gib": {k: round(v / GIB, 2) for k, v in (g.get("server_bytes") or {}).items()},
            "processes": [
                {
                    "pid": p.get("pid"),
                    "gib": round((p.get("used_bytes") or 0) / GIB, 2),
                    "slot": p.get("slot"),
                    "match": p.get("match"),
                }
                for p in g.get("processes") or []
            ],
        }
        for g in tele.get("gpus") or []
    ]
    agree = []
    for row in mine:
        if not isinstance(row["nvml"], list):
            continue
        for gpu in {x["gpu"] for x in row["nvml"]}:
            found = sum(x["gib"] for x in row["nvml"] if x["gpu"] == gpu)
            shown = next(
                (g["slot_gib"].get(row["slot"], 0.0) for g in gpus if g["gpu"] == gpu), 0.0
            )
            agree.append(
                {"slot": row["slot"], "gpu": gpu, "tree_gib": found, "agent_gib": shown,
                 "ok": abs(found - shown) <= 0.5}
            )  # fmt: skip
    return {"source": tele.get("gpu_source"), "gpus": gpus, "agrees": agree}


def settle(state: Path, nv: Nvml, gib: float, timeout: float = 45.0) -> tuple[dict, list, float]:
    """Wait until NVML shows every slot's tree holding `gib` (the holder allocates after torch's
    import, seconds after the server is ready), then until the agent's own reading agrees (its
    sampler lags by a sample). Returns the status, the attribution and the seconds waited; on
    the CPU dry run, at once."""
    t0 = time.monotonic()
    while True:
        st = status(state)
        rows = attribution(st, nv)
        if not nv.nv:
            return st, rows, 0.0
        held = all(sum(x["gib"] for x in row["nvml"]) >= gib - 0.5 for row in rows)
        if held and all(x["ok"] for x in agent_view(st, rows)["agrees"]):
            return st, rows, round(time.monotonic() - t0, 2)
        if time.monotonic() - t0 > timeout:  # recorded as it is: the checks below then fail
            return st, rows, round(time.monotonic() - t0, 2)
        time.sleep(0.5)


def timeline_release(samples: list[tuple[float, list[int]]], base: list[int]) -> list[dict]:
    """Per GPU: from the first fall below the held level to back at baseline (+0.5 GiB), and
    whether that came before the next launch's rise (> baseline + 1 GiB)."""
    out = []
    for g in range(len(base)):
        series = [(t, u[g]) for t, u in samples]
        held = series[0][1] if series else 0  # the old profile's level when the swap began
        i_fall = next((i for i, (_, u) in enumerate(series) if u < held - GIB // 2), None)
        t_fall = series[i_fall][0] if i_fall is not None else None
        t_base = t_up = None
        if i_fall is not None:
            for t, u in series[i_fall:]:
                if t_base is None and u <= base[g] + GIB // 2:
                    t_base = t
                elif t_base is not None and u > base[g] + GIB:
                    t_up = t
                    break
        out.append(
            {
                "gpu": g,
                "baseline_gib": round(base[g] / GIB, 2),
                "held_gib": round(held / GIB, 2),
                "release_s": None
                if t_base is None or t_fall is None
                else round(t_base - t_fall, 2),
                "baseline_before_next_launch": t_base is not None
                and (t_up is None or t_base < t_up),
                "relaunch_after_base_s": None
                if t_up is None or t_base is None
                else round(t_up - t_base, 2),
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--simulated-gpus", type=int, default=0)
    ap.add_argument("--gpus", type=int, default=None, help="GPUs host init must find (default 2)")
    ap.add_argument("--requests", type=int, default=3000)
    a = ap.parse_args()
    gpus = a.gpus or a.simulated_gpus or 2
    if a.simulated_gpus and gpus != a.simulated_gpus:
        ap.error(f"--gpus {gpus} and --simulated-gpus {a.simulated_gpus} differ; give one")
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("GC_WORK") or "/tmp")
    state, prof, host = work / "state", work / "profiles", work / "host.toml"
    prof.mkdir(parents=True, exist_ok=True)
    os.environ.update(
        SGLTUI_STATE_DIR=str(state),
        SGLTUI_HOST_FILE=str(host),
        GC_PROFILES=str(prof),
        SGLTUI_STOP_GRACE_S="5",
        PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
    )
    r: dict = {"simulated_gpus": a.simulated_gpus, "gpus": gpus, "started": time.time()}
    nv = Nvml()
    r["nvml"] = {"gpus": len(nv.handles)} if nv.nv else {"skipped": nv.why}
    ok = True

    # 1. host init: N GPUs -> N slots and a pool.
    # A free pool port: host init's default (30080) may be taken on a shared machine.
    import socket

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        free = so.getsockname()[1]
    init = ["host", "init", "--file", str(host), "--force", "--pool-port", str(free)]
    if a.simulated_gpus:
        init += ["--simulated-gpus", str(a.simulated_gpus)]
    sh(r, "host init", *init)
    sh(r, "host show", "host", "show", "--file", str(host))
    cfg = tomllib.loads(host.read_text()) if host.exists() else {}
    slots, pools = cfg.get("slot") or [], cfg.get("pool") or []
    r["host"] = {"slots": slots, "pools": pools, "ok": len(slots) == gpus and len(pools) == 1}
    ok &= r["host"]["ok"]
    if not r["host"]["ok"]:
        return finish(r, a.out, False)
    pool = pools[0]["name"]

    # 2. two profiles of the fake SGLang (8 then 16 GiB a slot).
    # The profile's PYTHONPATH replaces the agent's, so it carries on the carried wheels' (/tmp/site).
    pp = f"{ROOT}/tools/gpucheck/fake_sglang:{os.environ['PYTHONPATH']}"
    for name, gib in (("gpu-a", 8), ("gpu-b", 16)):
        (prof / f"{name}.toml").write_text(
            f'name = "{name}"\nlauncher = "sglang"\npython = "{sys.executable}"\n'
            f'[server]\nmodel-path = "meta-llama/Llama-3.1-8B-Instruct"\nenable-metrics = true\n'
            f'[env]\nGPU_HOLD_GIB = "{gib}"\nPYTHONPATH = "{pp}"\n'
        )
    base = nv.used()
    r["baseline_gib"] = [round(b / GIB, 2) for b in base]
    t0 = time.monotonic()
    p = sh(r, "start --pool", "start", "gpu-a", "--pool", pool)
    r["start_s"] = round(time.monotonic() - t0, 2)
    ok &= p.returncode == 0
    if p.returncode:
        return finish(r, a.out, False, state)
    st, r["attribution_a"], r["settle_a_s"] = settle(state, nv, 8)
    r["agent_a"] = agent_view(st, r["attribution_a"])
    ok &= all(x["ok"] for x in r["agent_a"]["agrees"])
    r["used_gib_a"] = [round(u / GIB, 2) for u in nv.used()]
    r["pool_status_a"] = st.get("pools")
    ok &= all(x["right_gpu"] is not False for x in r["attribution_a"])

    # 3. TUI memory pane with every GPU.
    shot = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools/gpucheck/tui_shot.py"),
            str(state),
            str(prof),
            str(a.out / "tui-pool.svg"),
            "6",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    svg = a.out / "tui-pool.svg"
    text = svg.read_text().replace("&#160;", " ") if svg.exists() else ""
    shown = [f"GPU{i}" for i in range(gpus) if f"GPU{i}" in text]  # the pane's bar labels
    r["tui_svg"] = {
        "rc": shot.returncode,
        "gpus_shown": shown,
        # The pane marks a simulated GPU "(simulated)", or "(sim)" when narrow; none on a real host.
        "sim_marked": "(sim" in text,
        "out": (shot.stdout + shot.stderr)[-500:],
    }
    ok &= len(shown) == gpus and (bool(a.simulated_gpus) or not r["tui_svg"]["sim_marked"])

    # 4. rolling swap with a per-GPU NVML timeline.
    samples: list[tuple[float, list[int]]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), nv.used()))
            stop.wait(0.1)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.monotonic()
    p = sh(r, "swap --pool (rolling)", "swap", "gpu-b", "--pool", pool)
    r["swap_s"] = round(time.monotonic() - t0, 2)
    # The timeline runs on until the new profile's memory is held: its rise is the next launch.
    st, r["attribution_b"], r["settle_b_s"] = (
        settle(state, nv, 16) if p.returncode == 0 else ({}, [], 0.0)
    )
    stop.set()
    th.join()
    if p.returncode:
        return finish(r, a.out, False, state)
    r["release"] = timeline_release(samples, base) if nv.nv else "skipped: " + nv.why
    r["timeline_gib"] = [  # [seconds since the swap began, used GiB per GPU], every 0.1 s
        [round(t - t0, 2), [round(u / GIB, 2) for u in used]] for t, used in samples
    ]
    if nv.nv:
        ok &= all(g["baseline_before_next_launch"] for g in r["release"])
    r["agent_b"] = agent_view(st, r["attribution_b"])
    r["used_gib_b"] = [round(u / GIB, 2) for u in nv.used()]

    # 5. a job through the pool: every custom_id exactly once.
    inp, outp = work / "job.jsonl", work / "job.output.jsonl"
    with inp.open("w") as f:
        for i in range(a.requests):
            body = {"model": "default", "prompt": f"p{i}", "max_tokens": 16}
            f.write(
                json.dumps(
                    {"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}
                )
                + "\n"
            )
    t0 = time.monotonic()
    p = sh(
        r,
        "job run --pool",
        "job",
        "run",
        str(inp),
        "-o",
        str(outp),
        "--pool",
        pool,
        "--concurrency",
        "32",
        timeout=480,
    )
    r["job_s"] = round(time.monotonic() - t0, 2)
    v = sh(r, "job verify", "job", "verify", str(inp), str(outp))
    ids = (
        [json.loads(x)["custom_id"] for x in outp.read_text().splitlines()] if outp.exists() else []
    )
    r["job"] = {
        "requests": a.requests,
        "lines": len(ids),
        "distinct": len(set(ids)),
        "verify_rc": v.returncode,
        "exactly_once": len(ids) == len(set(ids)) == a.requests,
    }
    ok &= v.returncode == 0 and r["job"]["exactly_once"]
    return finish(r, a.out, ok, state)


def finish(r: dict, out: Path, ok: bool, state: Path | None = None) -> int:
    if state is not None:
        subprocess.run(
            [sys.executable, "-m", "sgltui", "agent", "stop", "--stop-servers"],
            capture_output=True,
            timeout=120,
        )
        sess = sorted((state / "sessions").glob("*")) if (state / "sessions").exists() else []
        if sess:
            ev = sess[-1] / "events.jsonl"
            r["swap_events"] = (
                [x for x in ev.read_text().splitlines() if '"swap.done"' in x or '"pool.' in x][
                    -20:
                ]
                if ev.exists()
                else []
            )
    r["ok"] = bool(ok)
    (out / "pool_check.json").write_text(json.dumps(r, indent=1, default=str))
    print(f"=== pool_check ok={ok} -> {out / 'pool_check.json'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
