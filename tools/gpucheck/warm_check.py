"""Issue 34 item 6: a warm swap against a cold one on a real GPU, measured (not CI).

    python3 tools/gpucheck/warm_check.py OUT_DIR [--gib 40] [--repeats 3] [--budget-s 2.5]

Two fake SGLang servers (tools/gpucheck/fake_sglang: a child holds GIB of GPU memory with torch,
the simulator serves the HTTP API; with --enable-memory-saver --enable-weights-cpu-backup its
release/resume really move the bytes to pinned host memory and back), driven over their HTTP
endpoints directly, as sgltui's agent would drive SGLang's (the agent's standby commands are not
used here, so this measures the servers' side and the GPU, not the agent):

- first start, then "standby add": pause + release A (its pinned copy is made once), NVML shows
  the memory back, cold start B, pause + release B, resume + continue A;
- warm swaps (--repeats, toggling A <-> B): from the keystroke, pause the serving one, release
  it, wait until NVML shows its memory back, resume the sleeper, continue it, and time until a
  one-token /generate answers; then every byte it holds is checked against what was written;
- cold swaps (--repeats): from the keystroke, SIGTERM the serving server's process group, wait
  for it to exit and for NVML to show the memory free, start a new server (no memory saver),
  and time until NVML shows its GIB held and a one-token /generate answers. This is the floor of
  a cold swap (a python + torch + CUDA process and an allocation): a real SGLang also loads its
  weights from disk and captures CUDA graphs, so a real cold swap is slower, not faster;
- a sampler records NVML's used memory (and per-process memory) every --sample-s throughout.

OUT_DIR gets warm_check.json (figures, checks, each swap's NVML window), warm_timeline.json (the
whole timeline with markers) and server logs' tails in warm_check.json. Without NVML (the CPU dry
run here) the holders keep their bytes in host memory (FAKE_SGLANG_CPU_HOLD=1, --gib defaults
to 0.25) and the NVML checks say "skipped". Exit 0 only when every check held.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tools" / "gpucheck" / "fake_sglang"
GIB = 2**30
MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # the simulator's; the holder stands for its weights
T0 = time.monotonic()


def now() -> float:
    return round(time.monotonic() - T0, 4)


def log(msg: str) -> None:
    print(f"[{now():8.3f}] {msg}", flush=True)


class Nvml:
    """GPU 0's used memory and per-process memory; `nv` is None where NVML is absent."""

    def __init__(self) -> None:
        self.nv, self.h, self.why, self.card = None, None, "", {}
        try:
            import pynvml

            pynvml.nvmlInit()
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.nv = pynvml
        except Exception as e:  # noqa: BLE001 - no package, no driver: the CPU dry run
            self.why = f"{type(e).__name__}: {e}"
            return

        def text(v):
            return v.decode() if isinstance(v, bytes) else str(v)

        mem = pynvml.nvmlDeviceGetMemoryInfo(self.h)
        self.card = {
            "name": text(pynvml.nvmlDeviceGetName(self.h)),
            "driver": text(pynvml.nvmlSystemGetDriverVersion()),
            "memory_total_gib": round(mem.total / GIB, 2),
            "gpus": pynvml.nvmlDeviceGetCount(),
        }
        try:
            gen = pynvml.nvmlDeviceGetCurrPcieLinkGeneration(self.h)
            width = pynvml.nvmlDeviceGetCurrPcieLinkWidth(self.h)
            self.card["pcie"] = f"Gen{gen} x{width} (current link)"
        except Exception as e:  # noqa: BLE001 - not every virtualised host reports it
            self.card["pcie"] = f"unknown ({type(e).__name__})"

    def used(self) -> int | None:
        return self.nv.nvmlDeviceGetMemoryInfo(self.h).used if self.nv else None

    def procs(self) -> dict[int, int]:
        if not self.nv:
            return {}
        try:
            got = self.nv.nvmlDeviceGetComputeRunningProcesses(self.h)
        except Exception:  # noqa: BLE001 - per-process memory is extra, used memory suffices
            return {}
        return {p.pid: int(p.usedGpuMemory or 0) for p in got}


class Sampler(threading.Thread):
    """NVML every `interval` s: (t, used GiB, {pid: GiB}), with markers set by the steps."""

    def __init__(self, nvml: Nvml, interval: float) -> None:
        super().__init__(daemon=True, name="nvml-sampler")
        self.nvml, self.interval = nvml, interval
        self.samples: list[list] = []
        self.markers: list[list] = []
        self.stop = threading.Event()

    def mark(self, label: str) -> float:
        t = now()
        self.markers.append([t, label])
        return t

    def run(self) -> None:
        while not self.stop.is_set() and self.nvml.nv:
            used = self.nvml.used()
            procs = {str(k): round(v / GIB, 2) for k, v in self.nvml.procs().items()}
            self.samples.append([now(), round(used / GIB, 3), procs])
            self.stop.wait(self.interval)

    def window(self, t0: float, t1: float) -> list[list]:
        return [[s[0], s[1]] for s in self.samples if t0 - 0.2 <= s[0] <= t1 + 0.2]


def http(port: int, method: str, path: str, body=None, timeout: float = 300.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


class Server:
    """One fake SGLang server in its own process group, its log in the work folder."""

    def __init__(self, name: str, port: int, gib: float, saver: bool, work: Path, cpu_hold: bool):
        self.name, self.port, self.gib, self.saver = name, port, gib, saver
        self.logpath = work / f"{name}.log"
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", MODEL]
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        if saver:
            argv += ["--enable-memory-saver", "--enable-weights-cpu-backup"]
        env = dict(
            os.environ,
            PYTHONPATH=f"{FAKE}:{ROOT}:{os.environ.get('PYTHONPATH', '')}",
            GPU_HOLD_GIB=str(gib),
            SIM_TIME_SCALE="0",  # the simulator adds no modelled start-up: the holder is timed
            SGLANG_MEMORY_SAVER_CUDA_GRAPH="1",
            TMS_RETAIN_CPU_BACKUP="1",
        )
        if cpu_hold:
            env["FAKE_SGLANG_CPU_HOLD"] = "1"
        self.logf = open(self.logpath, "wb")  # noqa: SIM115 - closed in stop()
        self.started = now()
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self.logf, stderr=subprocess.STDOUT, start_new_session=True
        )

    def post(self, path: str, body=None, timeout: float = 300.0):
        return http(self.port, "POST", path, {} if body is None else body, timeout)

    def holder(self, verify: bool = False) -> dict:
        return http(self.port, "GET", "/fake_sglang/holder" + ("?verify=1" if verify else ""))

    def answer(self, deadline_s: float = 300.0) -> float:
        """Time (run clock) when a one-token /generate first answers; retries while refused."""
        end = time.monotonic() + deadline_s
        body = {"text": "ping", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.tail()}")
            try:
                self.post("/generate", body, timeout=max(1.0, end - time.monotonic()))
                return now()
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                if time.monotonic() > end:
                    raise RuntimeError(f"{self.name} did not answer: {e}; {self.tail()}") from e
                time.sleep(0.02)

    def stop(self, grace: float = 15.0) -> float:
        """SIGTERM to the group (as the agent stops a server), SIGKILL after `grace`; reaped."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        t = now()
        try:  # the holder is in the group too: make sure nothing of it outlives the server
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.logf.close()
        return t

    def tail(self, n: int = 1500) -> str:
        try:
            return self.logpath.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""


def meminfo() -> dict[str, float]:
    out = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            k, v = line.split(":", 1)
            if k in ("MemTotal", "MemAvailable"):
                out[k + "_gib"] = round(int(v.split()[0]) * 1024 / GIB, 2)
    except OSError:
        pass
    return out


def stats(xs: list[float]) -> dict:
    if not xs:
        return {}
    return {
        "n": len(xs),
        "median": round(statistics.median(xs), 3),
        "min": round(min(xs), 3),
        "max": round(max(xs), 3),
    }


class Check:
    def __init__(self, nvml: Nvml, sampler: Sampler, hold: int, args) -> None:
        self.nvml, self.sampler, self.hold, self.args = nvml, sampler, hold, args
        self.results: dict = {"checks": {}}
        self.cpu = False  # the holders keep their bytes in host memory (the CPU dry run)

    def check(self, name: str, ok: bool | None, detail="") -> None:
        self.results["checks"][name] = {
            "ok": "skipped" if ok is None else bool(ok),
            "detail": detail,
        }
        log(f"check {name}: {'skipped' if ok is None else ('ok' if ok else 'FAILED')} {detail}")

    def wait_used(self, below: int | None = None, above: int | None = None, limit=60.0):
        """Run-clock time when NVML's used memory first crosses the bound (None: no NVML)."""
        if not self.nvml.nv:
            return None
        end = time.monotonic() + limit
        while time.monotonic() < end:
            u = self.nvml.used()
            if (below is not None and u <= below) or (above is not None and u >= above):
                return now()
            time.sleep(0.005)
        raise RuntimeError(f"NVML used memory did not cross {below or above} in {limit}s")

    def start(self, name: str, port: int, saver: bool) -> tuple[Server, dict]:
        """Start one server; the figures of its cold start (NVML held, first answer)."""
        base = self.nvml.used()
        t0 = self.sampler.mark(f"start {name}")
        s = Server(name, port, self.args.gib, saver, self.args.work, self.cpu)
        held = None
        if base is not None:
            held = self.wait_used(above=base + int(0.95 * self.hold), limit=300)
        answered = s.answer()
        self.sampler.mark(f"{name} answers")
        fig = {"start_to_answer_s": round(answered - t0, 3), "t_answer": answered}
        if held is not None:
            fig["start_to_held_s"] = round(held - t0, 3)
        fig["holder"] = s.holder()
        return s, fig

    def release(self, s: Server) -> dict:
        """pause + release, then until NVML shows the memory back."""
        before = self.nvml.used()
        t0 = now()
        s.post("/pause_generation", {"mode": "retract"})
        t1 = now()
        s.post("/release_memory_occupation", {"tags": ["kv_cache", "weights", "cuda_graph"]})
        t2 = now()
        back = None
        if before is not None:
            back = self.wait_used(below=before - int(0.9 * self.hold))
        fig = {"pause_s": round(t1 - t0, 3), "release_http_s": round(t2 - t1, 3)}
        if back is not None:
            fig["release_to_nvml_back_s"] = round(back - t1, 3)
            fig["nvml_after_release_s"] = round(back - t2, 3)  # seen after the 200 came back
        fig["t_memory_back"] = back if back is not None else t2
        return fig

    def resume(self, s: Server) -> dict:
        t0 = now()
        s.post("/resume_memory_occupation", {"tags": ["kv_cache", "weights", "cuda_graph"]})
        t1 = now()
        s.post("/continue_generation", {"torch_empty_cache": True})
        t2 = now()
        answered = s.answer()
        return {
            "resume_http_s": round(t1 - t0, 3),
            "continue_s": round(t2 - t1, 3),
            "first_answer_s": round(answered - t2, 3),
            "t_answer": answered,
        }

    def window_summary(self, t0: float, t1: float, base_used: float | None) -> dict:
        w = self.sampler.window(t0, t1)
        if not w:
            return {"samples": 0}
        used = [u for _, u in w if t0 <= _ <= t1] or [w[0][1]]
        return {
            "samples": len(w),
            "peak_used_gib": max(used),
            "low_used_gib": min(used),
            "start_used_gib": base_used,
            "series": w,
        }


def run(args) -> int:
    nvml = Nvml()
    cpu = args.fake_nvml or not nvml.nv  # the holders keep their bytes in host memory
    if cpu and args.gib is None:
        args.gib = 0.25
    args.gib = 40.0 if args.gib is None else args.gib
    hold = int(args.gib * GIB)
    sampler = Sampler(nvml, args.sample_s)
    sampler.start()
    c = Check(nvml, sampler, hold, args)
    c.cpu = cpu
    r = c.results
    r.update(
        {
            "what": "issue 34 item 6: warm (memory saver) vs cold swap of a fake SGLang holder",
            "driven_by": "the fake servers' HTTP endpoints directly (not sgltui's agent)",
            "gib": args.gib,
            "hold_bytes": hold,
            "repeats": args.repeats,
            "budget_s": args.budget_s,
            "sample_s": args.sample_s,
            "nvml": nvml.card or {"absent": nvml.why},
            "python": sys.version.split()[0],
            "holders_on": "host memory (CPU dry run)" if cpu else "the GPU",
            "host_memory_start": meminfo(),
        }
    )
    try:
        import torch

        r["torch"] = torch.__version__
    except ImportError:
        r["torch"] = None
    r["baseline_used_gib"] = round(nvml.used() / GIB, 3) if nvml.nv else None
    servers: list[Server] = []
    deadline = time.monotonic() + args.deadline_s
    try:
        # --- warm: first start, standby add, toggles -------------------------------------------
        a, fig = c.start("A", args.port, saver=True)
        servers.append(a)
        fig.pop("t_answer")
        r["first_start"] = fig
        log(f"A serving: {fig['start_to_answer_s']} s")
        t_add = sampler.mark("standby add B: release A")
        add = {"release_A": c.release(a)}
        b, add["start_B"] = c.start("B", args.port + 1, saver=True)
        add["start_B"].pop("t_answer")
        servers.append(b)
        add["release_B"] = c.release(b)
        add["resume_A"] = c.resume(a)
        add["total_s"] = round(add["resume_A"]["t_answer"] - t_add, 3)
        for step in ("release_A", "release_B", "resume_A"):
            add[step] = {k: v for k, v in add[step].items() if not k.startswith("t_")}
        add["holder_A"], add["holder_B"] = a.holder(), b.holder()
        r["standby_add"] = add
        r["host_memory_two_pinned"] = meminfo()
        log(f"standby add: {add['total_s']} s (A pinned in {add['holder_A'].get('pin_s')} s)")
        serving, sleeper = a, b
        warm: list[dict] = []
        for i in range(args.repeats):
            if time.monotonic() > deadline:
                r["warm_cut_short"] = f"after {i} swaps: --deadline-s"
                break
            base = round(nvml.used() / GIB, 3) if nvml.nv else None
            t0 = sampler.mark(f"warm {i + 1}: keystroke {serving.name} -> {sleeper.name}")
            rel = c.release(serving)
            sampler.mark(f"warm {i + 1}: {serving.name}'s memory back")
            res = c.resume(sleeper)
            sampler.mark(f"warm {i + 1}: {sleeper.name} answers")
            total = round(res["t_answer"] - t0, 3)
            got = sleeper.holder(verify=True)
            gone = serving.holder()
            row = {
                "from": serving.name,
                "to": sleeper.name,
                "keystroke_to_answer_s": total,
                **{k: v for k, v in rel.items() if not k.startswith("t_")},
                "memory_back_to_answer_s": round(res["t_answer"] - rel["t_memory_back"], 3),
                **{k: v for k, v in res.items() if not k.startswith("t_")},
                "released_copy_gbps": gone.get("release_copy_gbps"),
                "released_copy_s": gone.get("release_copy_s"),
                "resumed_copy_gbps": got.get("resume_copy_gbps"),
                "resumed_copy_s": got.get("resume_copy_s"),
                "resumed_alloc_s": got.get("resume_alloc_s"),
                "verify": got.get("verify"),
                "nvml": c.window_summary(t0, res["t_answer"], base),
            }
            warm.append(row)
            log(f"warm {i + 1} {serving.name}->{sleeper.name}: {total} s, verify {row['verify']}")
            serving, sleeper = sleeper, serving
        r["warm"] = warm
        for s in servers:  # the cold part starts from an empty GPU and no pinned copies
            s.stop()
        servers.clear()
        if nvml.nv:
            c.wait_used(below=int(r["baseline_used_gib"] * GIB) + GIB // 2, limit=60)
        r["host_memory_after_warm"] = meminfo()

        # --- cold: stop, memory free, start, held and answering --------------------------------
        cur, fig = c.start("C0", args.port + 2, saver=False)
        servers.append(cur)
        fig.pop("t_answer")
        r["cold_first_start"] = fig
        cold: list[dict] = []
        for i in range(args.repeats):
            if time.monotonic() > deadline:
                r["cold_cut_short"] = f"after {i} swaps: --deadline-s"
                break
            before = nvml.used()
            t0 = sampler.mark(f"cold {i + 1}: keystroke {cur.name} -> C{i + 1}")
            exited = cur.stop()
            servers.remove(cur)
            free = None
            if before is not None:
                free = c.wait_used(below=before - int(0.9 * hold))
            sampler.mark(f"cold {i + 1}: memory free")
            nxt, fig = c.start(f"C{i + 1}", args.port + 3 + (i % 2), saver=False)
            servers.append(nxt)
            t_end = fig.pop("t_answer")
            row = {
                "from": cur.name,
                "to": nxt.name,
                "stop_to_exit_s": round(exited - t0, 3),
                **fig,
            }
            if free is not None:
                row["exit_to_nvml_free_s"] = round(free - exited, 3)
            row["keystroke_to_answer_s"] = round(t_end - t0, 3)
            row["nvml"] = c.window_summary(t0, t_end, round(before / GIB, 3) if before else None)
            cold.append(row)
            log(f"cold {i + 1} {cur.name}->{nxt.name}: {row['keystroke_to_answer_s']} s")
            cur = nxt
        r["cold"] = cold
    except Exception as e:  # noqa: BLE001 - recorded; the checks below say what is missing
        r["error"] = f"{type(e).__name__}: {e}"
        log(f"ERROR {r['error']}")
    finally:
        for s in servers:
            s.stop()
        r["logs"] = {
            p.stem: p.read_bytes()[-1200:].decode(errors="replace")
            for p in sorted(args.work.glob("*.log"))
        }
    if nvml.nv:
        try:
            c.wait_used(below=int(r["baseline_used_gib"] * GIB) + GIB // 2, limit=30)
        except RuntimeError:
            pass
        time.sleep(0.3)
    sampler.stop.set()
    sampler.join(2)
    summarise(c, nvml, sampler)
    write(args.out, r, sampler)
    return 0 if all(v["ok"] in (True, "skipped") for v in r["checks"].values()) else 1


def summarise(c: Check, nvml: Nvml, sampler: Sampler) -> None:
    r, args = c.results, c.args
    warm, cold = r.get("warm", []), r.get("cold", [])
    w = [x["keystroke_to_answer_s"] for x in warm]
    k = [x["keystroke_to_answer_s"] for x in cold]
    gb = [x[key] for x in warm for key in ("released_copy_gbps",) if x.get(key)]
    gb_in = [x[key] for x in warm for key in ("resumed_copy_gbps",) if x.get(key)]
    add = r.get("standby_add", {})
    pin = [h.get("pin_s") for h in (add.get("holder_A", {}), add.get("holder_B", {}))]
    pin = [p for p in pin if p]
    summ = {
        "warm_s": stats(w),
        "cold_s": stats(k),
        "ratio_warm_over_cold_median": (
            round(statistics.median(w) / statistics.median(k), 3) if w and k else None
        ),
        "gpu_to_pinned_gbps": stats(gb),
        "pinned_to_gpu_gbps": stats(gb_in),
        "pin_s": pin,
        "pin_s_per_gib": round(statistics.mean(pin) / args.gib, 3) if pin else None,
        "standby_add_s": add.get("total_s"),
        "gb_here_means": "1e9 bytes/s (the issue's units); GiB = 2**30",
    }
    if warm and nvml.nv:
        summ["nvml_release_to_back_s"] = stats(
            [x["release_to_nvml_back_s"] for x in warm if "release_to_nvml_back_s" in x]
        )
        summ["nvml_peak_used_during_warm_gib"] = max(
            x["nvml"].get("peak_used_gib", 0) for x in warm
        )
    if cold and nvml.nv:
        summ["nvml_exit_to_free_s"] = stats(
            [x["exit_to_nvml_free_s"] for x in cold if "exit_to_nvml_free_s" in x]
        )
    r["summary"] = summ
    c.check("no error", "error" not in r, r.get("error", ""))
    c.check(f"{args.repeats} warm swaps", len(warm) == args.repeats, f"{len(warm)} ran")
    c.check(f"{args.repeats} cold swaps", len(cold) == args.repeats, f"{len(cold)} ran")
    c.check(
        "every resumed holder's bytes as written",
        bool(warm) and all(x["verify"] == "ok" for x in warm),
        [x["verify"] for x in warm],
    )
    on_gpu = bool(nvml.nv)
    real = on_gpu and not c.cpu
    c.check(
        f"warm swap serves within {args.budget_s} s of the keystroke (each)",
        (bool(w) and max(w) <= args.budget_s) if real else None,
        f"{w} s" if real else f"no GPU: {w} s on the CPU dry run",
    )
    if on_gpu and warm:
        # Never both holders on the GPU at once: the wait for NVML is what makes a swap safe
        # where two would not fit (2 x 40 GiB on an 80 GB card).
        base = r.get("baseline_used_gib") or 0.0
        peak = summ["nvml_peak_used_during_warm_gib"]
        c.check(
            "NVML never shows both holders during a warm swap",
            peak < base + 1.5 * args.gib + 4,
            f"peak {peak} GiB, baseline {base} GiB",
        )
    else:
        c.check("NVML never shows both holders during a warm swap", None, "no NVML")
    end_used = round(nvml.used() / GIB, 3) if on_gpu else None
    r["end_used_gib"] = end_used
    c.check(
        "GPU memory back to the baseline at the end",
        (end_used <= (r.get("baseline_used_gib") or 0) + 0.5) if on_gpu else None,
        f"{end_used} GiB" if on_gpu else "no NVML",
    )
    r["nvml_samples"] = len(sampler.samples)


def write(out: Path, r: dict, sampler: Sampler) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "warm_check.json").write_text(json.dumps(r, indent=1))
    (out / "warm_timeline.json").write_text(
        json.dumps({"markers": sampler.markers, "samples": sampler.samples})
    )
    s = r.get("summary", {})
    print(json.dumps({k: v for k, v in s.items() if k != "gb_here_means"}, indent=1))
    print(
        f"wrote {out / 'warm_check.json'} and warm_timeline.json ({len(sampler.samples)} samples)"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--gib", type=float, default=None, help="held per server (40; 0.25 with no GPU)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=2.5)
    p.add_argument("--sample-s", type=float, default=0.05)
    p.add_argument("--port", type=int, default=31200)
    p.add_argument("--deadline-s", type=float, default=420, help="no new swap after this long")
    p.add_argument(
        "--fake-nvml",
        action="store_true",
        help="CPU dry run: tools/gpucheck/fake_nvml's pynvml adds up the holders' bytes",
    )
    args = p.parse_args()
    if args.fake_nvml:
        sys.path.insert(0, str(ROOT / "tools" / "gpucheck" / "fake_nvml"))
        os.environ["FAKE_NVML_DIR"] = tempfile.mkdtemp(prefix="fake_nvml-")
    args.work = Path(os.environ.get("GC_WORK") or tempfile.mkdtemp(prefix="warm_check-"))
    args.work.mkdir(parents=True, exist_ok=True)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
