"""Issue 45 item 3: the product's own warm swap on a real GPU, through the agent and the CLI:
`standby add`, warm and cold `swap`s under streaming clients through the front, with the
project's fake SGLang (tools/gpucheck/fake_sglang: a child holding GIB on the GPU, memory-saver
routes that really copy the bytes to pinned host memory and back). Grown from
shared/tools/gpu_agent_warm_check.py, plus: what `standby list` says a sleeper pins against what
its process tree holds (resident host memory, NVML), and a HiCache round (a profile with
enable-hierarchical-cache kept warm and swapped to and back: the agent flushes before it pauses).

    tools/gpucheck/agent_warm_check.sh [--gib 40] [--toggles 3] [--clients 8]

Writes OUT/agent_warm.json and OUT/timeline.json. Exit 0 when every warm swap was kind=warm, no
client request failed, bytes verified, the sleeper's pins said within 10%, nothing left.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

GIB = 2**30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nvml(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.series: list[tuple[float, float]] = []
        self.stop_ev = threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.nv = pynvml
        except Exception as e:  # CPU dry run  # noqa: BLE001 (recorded, the check goes on)
            self.nv, self.why = None, repr(e)

    def used(self) -> float | None:
        return self.nv.nvmlDeviceGetMemoryInfo(self.h).used / GIB if self.nv else None

    def run(self) -> None:
        while not self.stop_ev.is_set():
            if self.nv:
                self.series.append((time.time(), round(self.used(), 2)))
            time.sleep(0.05)


class Clients(threading.Thread):
    """N streaming clients on the front, one request after another, counting what failed."""

    def __init__(self, url: str, model: str, n: int) -> None:
        super().__init__(daemon=True)
        self.url, self.model, self.n = url, model, n
        self.ok = self.failed = 0
        self.errors: list[str] = []
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()

    def one(self) -> None:
        import httpx

        with httpx.Client(timeout=120) as c:
            while not self.stop_ev.is_set():
                try:
                    body = {
                        "model": self.model,
                        "prompt": "hello " * 20,
                        "max_tokens": 64,
                        "stream": True,
                    }
                    done = False
                    with c.stream("POST", self.url + "/v1/completions", json=body) as r:
                        if r.status_code != 200:
                            raise RuntimeError(f"status {r.status_code}: {r.read()[:200]!r}")
                        for line in r.iter_lines():
                            if line.strip() == "data: [DONE]":
                                done = True
                    if not done:
                        raise RuntimeError("stream ended without [DONE]")
                    with self.lock:
                        self.ok += 1
                except Exception as e:  # noqa: BLE001 (recorded, the check goes on)
                    with self.lock:
                        self.failed += 1
                        if len(self.errors) < 20:
                            self.errors.append(f"{time.time():.2f} {e!r}"[:300])
                    time.sleep(0.2)

    def run(self) -> None:
        ts = [threading.Thread(target=self.one, daemon=True) for _ in range(self.n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


def leftovers() -> list[str]:
    """Processes of the check still running (the fake's holder, servers, the agent)."""
    import psutil

    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if p.info["pid"] != me and any(w in cmd for w in ("gpu_holder", "sglang", "sgltui")):
            found.append(f"{p.info['pid']} {cmd[:200]}")
    return found


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its children (pinned host pages are resident)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def sleeper_check(st: dict) -> list[dict]:
    """Each sleeper: what the agent says it pins (estimate and measured) against what its
    process tree holds resident now."""
    out = []
    for sb in (st.get("slots") or [{}])[0].get("standbys") or []:
        if sb.get("state") != "asleep" or not sb.get("pid"):
            continue
        held = tree_rss(int(sb["pid"]))
        said = sb.get("host_bytes") or 0
        out.append(
            {
                "profile": sb.get("profile"),
                "pid": sb.get("pid"),
                "held_rss_gib": held / GIB,
                "said_gib": said / GIB,
                "estimate_gib": (sb.get("host_estimate_bytes") or 0) / GIB,
                "gpu_said_gib": (sb.get("gpu_bytes") or 0) / GIB,
                "gpu_estimate_gib": (sb.get("gpu_estimate_bytes") or 0) / GIB,
                "measured": sb.get("measured"),
                "within_10pct": bool(held) and abs(said - held) <= 0.1 * held,
            }
        )
    return out


def main() -> int:
    out, proj = Path(sys.argv[1]), Path(sys.argv[2]).resolve()
    args = sys.argv[3:]
    gib = float(args[args.index("--gib") + 1]) if "--gib" in args else 30.0
    toggles = int(args[args.index("--toggles") + 1]) if "--toggles" in args else 3
    nclients = int(args[args.index("--clients") + 1]) if "--clients" in args else 8
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("AW_WORK") or "/tmp/aw")
    state, prof, home = work / "state", work / "profiles", work / "home"
    for d in (state, prof, home):
        d.mkdir(parents=True, exist_ok=True)
    front, port = free_port(), free_port()
    pp_base = os.environ.get("PYTHONPATH", "")
    os.environ.update(
        SGLTUI_STATE_DIR=str(state),
        HOME=str(home),
        SGLTUI_FRONT_PORT=str(front),
        SGLTUI_STOP_GRACE_S="5",
        PYTHONPATH=f"{proj}:{pp_base}",
    )
    fake = f"{proj}/tools/gpucheck/fake_sglang:{proj}:{pp_base}"
    for name, extra in (
        ("gpu-a", ""),
        ("gpu-b", ""),
        ("gpu-hc", "enable-hierarchical-cache = true\nhicache-ratio = 2\n"),
    ):
        (prof / f"{name}.toml").write_text(
            f'name = "{name}"\nlauncher = "sglang"\npython = "{sys.executable}"\n'
            f'[server]\nmodel-path = "meta-llama/Llama-3.1-8B-Instruct"\nport = {port}\n'
            f"enable-metrics = true\nenable-memory-saver = true\nenable-weights-cpu-backup = true\n"
            f'{extra}[env]\nGPU_HOLD_GIB = "{gib:g}"\nPYTHONPATH = "{fake}"\n'
        )
    r: dict = {"gib": gib, "toggles": toggles, "clients": nclients, "steps": []}
    nv = Nvml()
    r["baseline_gib"] = nv.used()
    nv.start()

    def sh(step: str, *a: str, timeout: float = 600) -> tuple[int, float, str]:
        t0 = time.time()
        try:
            p = subprocess.run(
                [sys.executable, "-m", "sgltui", "--profiles", str(prof), *a],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            rc, txt = p.returncode, (p.stdout + p.stderr)
        except subprocess.TimeoutExpired as e:
            rc, txt = 124, f"timeout {e}"
        dt = round(time.time() - t0, 3)
        r["steps"].append(
            {"step": step, "argv": list(a), "rc": rc, "s": dt, "t0": t0, "out": txt[-1200:]}
        )
        print(f"=== {step}: rc {rc} in {dt} s\n{txt[-600:]}", flush=True)
        return rc, dt, txt

    def status() -> dict:
        rc, _, txt = sh("status", "status", "--json", timeout=60)
        try:
            return json.loads(txt[txt.index("{") :])
        except Exception:  # noqa: BLE001 (recorded, the check goes on)
            return {}

    def holder(p: int) -> dict:
        import httpx

        try:
            return httpx.get(
                f"http://127.0.0.1:{p}/fake_sglang/holder?verify=1", timeout=120
            ).json()
        except Exception as e:  # noqa: BLE001 (recorded, the check goes on)
            return {"error": repr(e)}

    ok = True
    rc, r["start_s"], _ = sh("start gpu-a", "start", "gpu-a")
    ok &= rc == 0
    st = status()
    slot = (st.get("slots") or [{}])[0]
    r["slot_after_start"] = {k: slot.get(k) for k in ("id", "profile", "state", "port", "front")}
    model = "meta-llama/Llama-3.1-8B-Instruct"
    cl = Clients(f"http://127.0.0.1:{front}", model, nclients)
    cl.start()
    time.sleep(3)
    rc, r["standby_add_s"], _ = sh("standby add gpu-b", "standby", "add", "gpu-b")
    ok &= rc == 0
    sh("standby list", "standby", "list")
    r["standbys_after_add"] = (status().get("slots") or [{}])[0].get("standbys")
    r["sleeper_said_vs_held"] = sleeper_check(status())
    ok &= all(c.get("within_10pct") for c in r["sleeper_said_vs_held"]) and bool(
        r["sleeper_said_vs_held"]
    )
    r["warm"], r["cold"] = [], []
    target = "gpu-b"
    for i in range(toggles):
        rc, dt, _ = sh(f"warm swap {i} -> {target}", "swap", target, "--yes")
        s = (status().get("slots") or [{}])[0]
        ls = s.get("last_swap") or {}
        h = holder(s.get("port") or port)
        r["warm"].append(
            {
                "to": target,
                "rc": rc,
                "cli_s": dt,
                "kind": ls.get("kind"),
                "seconds": ls.get("seconds"),
                "timings": ls.get("timings_s"),
                "holder": {
                    k: h.get(k) for k in ("verified", "verify", "ok", "state", "error", "bytes_ok")
                }
                | {"raw": str(h)[:400]},
            }
        )
        ok &= rc == 0 and ls.get("kind") == "warm"
        target = "gpu-a" if target == "gpu-b" else "gpu-b"
    # HiCache round: a hicache profile kept warm, swapped to and back under the same clients
    # (the agent flushes its write-through before it pauses it)
    r["hicache"] = []
    rc, dt, _ = sh("standby add gpu-hc", "standby", "add", "gpu-hc")
    r["hicache"].append({"step": "standby add gpu-hc", "rc": rc, "s": dt})
    if rc == 0:
        back = (status().get("slots") or [{}])[0].get("profile") or "gpu-a"
        for target in ("gpu-hc", back):
            rc, dt, _ = sh(f"warm swap -> {target} (hicache round)", "swap", target, "--yes")
            ls = ((status().get("slots") or [{}])[0].get("last_swap")) or {}
            r["hicache"].append(
                {
                    "to": target,
                    "rc": rc,
                    "cli_s": dt,
                    "kind": ls.get("kind"),
                    "seconds": ls.get("seconds"),
                }
            )
            ok &= rc == 0 and ls.get("kind") == "warm"
        sh("standby remove gpu-hc", "standby", "remove", "gpu-hc")
    else:
        ok = False
    # cold: remove the standby, then the same toggles pay a cold start
    serving = (status().get("slots") or [{}])[0].get("profile")
    other = "gpu-a" if serving == "gpu-b" else "gpu-b"
    rc, r["standby_remove_s"], _ = sh("standby remove", "standby", "remove", other)
    target = other
    for i in range(max(2, toggles - 1)):
        rc, dt, _ = sh(f"cold swap {i} -> {target}", "swap", target, "--yes")
        s = (status().get("slots") or [{}])[0]
        ls = s.get("last_swap") or {}
        r["cold"].append(
            {
                "to": target,
                "rc": rc,
                "cli_s": dt,
                "kind": ls.get("kind"),
                "seconds": ls.get("seconds"),
                "timings": ls.get("timings_s"),
            }
        )
        target = "gpu-a" if target == "gpu-b" else "gpu-b"
    cl.stop_ev.set()
    cl.join(timeout=150)
    r["clients_result"] = {"ok": cl.ok, "failed": cl.failed, "errors": cl.errors}
    ok &= cl.failed == 0
    sh("agent stop", "agent", "stop", "--stop-servers", timeout=120)
    time.sleep(3)
    nv.stop_ev.set()
    r["end_gib"] = nv.used()
    left = "\n".join(leftovers())
    r["left"] = left
    ok &= not left.strip()
    warm_s = [w["seconds"] for w in r["warm"] if w["seconds"]]
    cold_s = [c["seconds"] for c in r["cold"] if c["seconds"]]
    r["summary"] = {
        "warm_s": warm_s,
        "cold_s": cold_s,
        "warm_cli_s": [w["cli_s"] for w in r["warm"]],
        "cold_cli_s": [c["cli_s"] for c in r["cold"]],
        "ratio_median": (sorted(warm_s)[len(warm_s) // 2] / sorted(cold_s)[len(cold_s) // 2])
        if warm_s and cold_s
        else None,
        "clients": r["clients_result"],
        "ok": ok,
    }
    (out / "agent_warm.json").write_text(json.dumps(r, indent=1))
    (out / "timeline.json").write_text(json.dumps(nv.series))
    print(json.dumps(r["summary"], indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
