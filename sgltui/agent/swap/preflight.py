"""Checks a launch target must pass before anything running is stopped (issue 12).

A swap that stops a ready server and then finds the target cannot start costs the operator the
minutes of reloading the old model. Each check here answers in well under a second (the
interpreter probe is cached) and names its fix; a failed one refuses the command while the
running server is untouched. `--force NAME` skips a check the operator knows better about.

Checks, in order: flags (valid for the SGLang of the target interpreter), interpreter (exists and
can find the launcher's module), model (a local path exists; a hub id: is it in the hub cache),
port (free, or held by the server being replaced), gpu-memory (the target GPUs' memory once the
replaced server has released its own; leftover SGLang processes on them), host-memory (the
HiCache host pool within the host's available RAM, as SGLang refuses at start-up).

Blocking (subprocesses, NVML): run from a worker thread.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sgltui.agent import gpu
from sgltui.agent.slot import procs
from sgltui.core import host_pool, units

log = logging.getLogger("sgltui.agent.preflight")

CHECKS = ("flags", "interpreter", "model", "port", "gpu-memory", "host-memory")
SIM_HOST_MEMORY_GB = 512.0  # the simulator's default simulated host RAM (--sim-host-memory-gb)
SGLANG_INSTALL_FIX = (
    "install SGLang into it (`pip install 'sgltui[sglang]'`) or set `python` in the profile "
    "to an interpreter that has SGLang"
)

# Interpreter probe: find the launcher's module without importing SGLang (that takes seconds).
_PROBE = r"""
import importlib.util, json, os, sys
mod = sys.argv[1]
top, _, rest = mod.partition(".")
out = {"python": sys.version.split()[0], "found": False, "error": None}
try:
    spec = importlib.util.find_spec(top)
except (ImportError, ValueError) as exc:
    spec, out["error"] = None, f"{type(exc).__name__}: {exc}"
if spec is None:
    out["error"] = out["error"] or f"ModuleNotFoundError: No module named '{top}'"
elif rest:
    dirs = list(spec.submodule_search_locations or [])
    leaf = rest.replace(".", os.sep)
    out["found"] = any(os.path.exists(os.path.join(d, leaf + ".py")) or
                       os.path.isdir(os.path.join(d, leaf)) for d in dirs)
    if not out["found"]:
        out["error"] = f"ModuleNotFoundError: No module named '{mod}'"
else:
    out["found"] = True
print(json.dumps(out))
"""

# Positive probe results per (interpreter, its mtime, module): installing SGLang later is seen
# at once because failures are never cached.
_interp_cache: dict[tuple[str, int, str, tuple[tuple[str, str], ...]], dict] = {}


@dataclass
class Check:
    name: str
    ok: bool
    message: str
    fix: str = ""
    skipped: bool = False  # --force named it

    def line(self) -> str:
        fix = f"; {self.fix}" if self.fix else ""
        return (
            f"preflight {self.name}: {self.message}{fix} (or skip this check: --force {self.name})"
        )

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Current:
    """The server the target replaces (nothing to replace: pids empty, port None)."""

    host: str | None = None
    port: int | None = None
    pids: frozenset[int] = frozenset()
    other_pids: frozenset[int] = frozenset()  # servers of the agent's other slots


def run(
    target: Any, current: Current, force: set[str] | frozenset[str] = frozenset()
) -> list[Check]:
    """Every check, in order (each one runs: the TUI shows them all)."""
    out = []
    for name, fn in (
        ("flags", _flags),
        ("interpreter", _interpreter),
        ("model", _model),
        ("port", _port),
        ("gpu-memory", _gpu_memory),
        ("host-memory", _host_memory),
    ):
        if name in force:
            out.append(Check(name, True, "skipped (--force)", skipped=True))
            continue
        try:
            out.append(fn(target, current))
        except (OSError, ValueError, TypeError, RuntimeError, ImportError) as exc:
            # A check that cannot run must not block a launch that may work: say so, pass.
            log.warning("preflight %s could not run: %s", name, exc)
            out.append(Check(name, True, f"not checked ({type(exc).__name__}: {exc})"))
    return out


def first_failure(checks: list[Check]) -> Check | None:
    return next((c for c in checks if not c.ok), None)


# ---- the checks ----------------------------------------------------------------------------------


def _flags(target: Any, current: Current) -> Check:
    from sgltui.core.validate import check_profile

    profile = getattr(target, "profile", target)
    errors = [i for i in check_profile(profile) if i.is_error]
    if not errors:
        return Check("flags", True, "valid for the target's SGLang")
    first = str(errors[0]).splitlines()[0]
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return Check(
        "flags", False, first + more, f"run `sgltui profiles validate {target.name}` for all"
    )


def _module_for(target: Any) -> str:
    from sgltui.core.profiles import LAUNCH_MODULES

    return LAUNCH_MODULES.get(target.launcher, LAUNCH_MODULES["sglang"])


def probe_interpreter(
    python: str, module: str, timeout: float = 10.0, env: Mapping[str, str] | None = None
) -> dict:
    """{"found": bool, "error": str | None, "python": version}; cached when found.

    `env` is the profile's [env] table: the server runs with it, so the probe does too (a
    PYTHONPATH to an SGLang source checkout is a common way to run one)."""
    try:
        mtime = os.stat(python).st_mtime_ns
    except OSError as exc:
        return {"found": False, "error": f"{python}: {exc.strerror}", "missing": True}
    extra = {k: str(v) for k, v in (env or {}).items()}
    key = (python, mtime, module, tuple(sorted(extra.items())))
    if key in _interp_cache:
        return _interp_cache[key]
    # Our own interpreter answers in-process, unless the profile changes where imports come from.
    imports_as_ours = not any(k.startswith("PYTHON") for k in extra)
    if imports_as_ours and os.path.realpath(python) == os.path.realpath(sys.executable):
        top = module.partition(".")[0]
        found = importlib.util.find_spec(top) is not None
        res = {
            "found": found,
            "error": None if found else f"ModuleNotFoundError: No module named '{top}'",
        }
        if found and "." in module:
            res = _run_probe(python, module, timeout, extra)
    else:
        res = _run_probe(python, module, timeout, extra)
    if res.get("found"):
        _interp_cache[key] = res
    return res


def _run_probe(python: str, module: str, timeout: float, extra: dict[str, str]) -> dict:
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE, module],
            env={**os.environ, **extra},
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return {"found": False, "error": f"{python} did not answer within {timeout:.0f}s"}
    except OSError as exc:
        return {"found": False, "error": f"cannot run {python}: {exc.strerror or exc}"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"found": False, "error": f"{python} failed: {tail[0][:200]}"}


def interpreter_check(target: Any) -> Check:
    """Whether the profile's interpreter can run its launcher (SGLang for a real profile): the
    profile list marks a profile that cannot (a host without SGLang), as a key press would
    find."""
    return _interpreter(target, Current())


def _interpreter(target: Any, current: Current) -> Check:
    argv = target.argv()
    python = os.path.expanduser(argv[0])
    if argv[1:2] == ["serve"]:  # `ENV/bin/sglang serve`: its interpreter is ENV/bin/python
        python = os.path.join(os.path.dirname(python), "python")
    module = _module_for(target)
    res = probe_interpreter(python, module, env=target.env)
    if res.get("missing"):
        return Check(
            "interpreter",
            False,
            f"{res['error']}",
            "set `python` in the profile to an existing interpreter",
        )
    if not res.get("found"):
        fix = SGLANG_INSTALL_FIX if module.startswith("sglang") else "reinstall sgltui"
        return Check("interpreter", False, f"{python} cannot import {module}: {res['error']}", fix)
    return Check("interpreter", True, f"{python} has {module}")


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~")) or os.path.exists(os.path.expanduser(path))


def hub_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def _model(target: Any, current: Current) -> Check:
    model = target.server.get("model-path") or target.server.get("model")
    if not model or not isinstance(model, str):
        return Check("model", True, "no model-path (the flags check reports it when required)")
    if _looks_local(model):
        path = Path(model).expanduser()
        if not path.exists():
            return Check(
                "model",
                False,
                f"model path {model} does not exist",
                "fix model-path in the profile (a local folder or a Hugging Face id)",
            )
        return Check("model", True, f"local model {model}")
    if target.launcher == "sim":
        return Check("model", True, f"{model} (simulated)")
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", model):
        return Check(
            "model",
            False,
            f"model-path {model!r} is neither a local folder nor a Hugging Face id",
            "fix model-path in the profile",
        )
    cached = (hub_cache_dir() / ("models--" + model.replace("/", "--"))).is_dir()
    where = (
        "in the local hub cache" if cached else "not in the local hub cache: the start downloads it"
    )
    return Check("model", True, f"hub id {model}, {where}")


def _port(target: Any, current: Current) -> Check:
    host, port = target.host, target.port
    if current.port == port and current.pids:
        return Check("port", True, f"port {port} is held by the server being replaced")
    if procs.port_free(host, port):
        return Check("port", True, f"port {port} is free")
    holder = procs.port_holder(port)
    return Check(
        "port",
        False,
        f"port {port} is already in use" + (f" by {holder}" if holder else ""),
        "stop what holds it or set `port` in the profile's [server]",
    )


def _visible(target: Any) -> str | None:
    return target.env.get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")


def _gpu_memory(target: Any, current: Current) -> Check:
    if target.launcher == "sim":
        return Check("gpu-memory", True, "simulated GPUs")
    visible = _visible(target)
    ours = set(current.pids) | set(current.other_pids)
    holders = gpu.sglang_on_gpus(visible, ours)
    if holders:
        return Check(
            "gpu-memory",
            False,
            f"leftover SGLang processes hold the target GPUs: {procs.describe(holders)}",
            f"end them (kill -9 {' '.join(map(str, holders))}) and start again",
        )
    need = host_pool.as_number(target.server.get("mem-fraction-static")) or 0.5
    problem = gpu.free_after_release(visible, need, set(current.pids))
    if problem:
        return Check("gpu-memory", False, problem[0], problem[1])
    return Check(
        "gpu-memory", True, f"{need:.0%} of each target GPU free once the old server is gone"
    )


def _host_memory(target: Any, current: Current) -> Check:
    fit = host_pool_fit(target, current.pids)
    if fit.pool is None:
        return Check("host-memory", True, fit.note)
    if fit.problem:
        fix = (
            "lower hicache-size (GB per rank) in the profile"
            if fit.pool.sized_by == "hicache-size"
            else "lower hicache-ratio, or set hicache-size (GB per rank), in the profile"
        )
        return Check(
            "host-memory",
            False,
            f"{fit.problem} ({fit.pool.how()}; {RESERVE_NOTE}): SGLang refuses to start with "
            "Not enough host memory available",
            fix,
        )
    return Check(
        "host-memory",
        True,
        f"HiCache host pool {units.gib(fit.pool.total_bytes)} fits in {fit.ram} ({fit.pool.how()})",
    )


RESERVE_NOTE = "10 GiB of RAM kept back"


@dataclass(frozen=True)
class HostPoolFit:
    """A profile's HiCache host pool against the RAM it would get (Profiles pane, preflight)."""

    pool: host_pool.HostPool | None  # None: no hicache, or its size cannot be told before start
    problem: str | None  # "host pool 240 GiB > 187 GiB free RAM", None when it fits
    ram: str  # what was measured: "host RAM" | "simulated host RAM"
    note: str = ""  # why there is no pool


def host_pool_fit(
    target: Any, freed_pids: Iterable[int] = (), device_pool: float | None = None
) -> HostPoolFit:
    """`target` (a resolved target or a core Profile: `server`, `launcher`, `env`) against the
    host's available RAM, counting the memory of `freed_pids` (the server it replaces) as free.
    `device_pool`: what --hicache-ratio multiplies, when the caller knows it already.
    Blocking (NVML, model folder sizes, psutil): from a worker thread."""
    server = target.server
    if not host_pool.enabled(server):
        return HostPoolFit(None, None, "", "no HiCache host pool")
    sim = target.launcher == "sim"
    if device_pool is None and host_pool.sized_by_ratio(server):
        device_pool = device_pool_of(target)
    pool = host_pool.host_pool(server, device_pool)
    if pool is None:
        return HostPoolFit(
            None, None, "", "host pool sized by --hicache-ratio from the device pool at start-up"
        )
    if sim:
        # The simulator is one process: it checks each rank's pool against its simulated RAM,
        # as one SGLang rank checks the host's.
        ram_bytes = (
            host_pool.as_number(server.get("sim-host-memory-gb")) or SIM_HOST_MEMORY_GB
        ) * 1e9
        per_rank = host_pool.HostPool(
            pool.per_rank_bytes, 1, pool.sized_by, pool.ratio, pool.device_pool_bytes
        )
        problem = host_pool.shortfall(per_rank, ram_bytes, "simulated RAM")
        return HostPoolFit(pool, problem, "simulated host RAM")
    import psutil

    freed = 0
    for pid in freed_pids:
        try:
            freed += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    avail = psutil.virtual_memory().available + freed
    return HostPoolFit(pool, host_pool.shortfall(pool, avail), "host RAM")


def device_pool_of(target: Any) -> float | None:
    """The device pool per rank (bytes) a start of `target` would size, worked out before it
    starts; None when it cannot be told."""
    if target.launcher == "sim":
        return _sim_device_pool(target.server)
    return _real_device_pool(target)


def _sim_device_pool(server: dict[str, Any]) -> float | None:
    from sgltui.core.profiles import render_flags
    from sgltui.sim.memory import device_pool_for

    return device_pool_for(render_flags(server))


def _real_device_pool(target: Any) -> float | None:
    """The device pool per rank of a real SGLang start, before it starts: the smallest target
    GPU's static share less the weights per rank. None when the GPU (no NVML) or the weights
    (the model is neither a local folder nor in the hub cache) are unknown."""
    from sgltui.sim.memory import default_mem_fraction, gpu_defaults

    server = target.server
    total = gpu.smallest_total_bytes(_visible(target))
    model = server.get("model-path") or server.get("model")
    weights = model_weights_bytes(model) if isinstance(model, str) else None
    if not total or not weights:
        return None
    tp = host_pool.ranks(server)
    mfs = host_pool.as_number(server.get("mem-fraction-static"))
    if mfs is None:  # SGLang's default for the GPU size (the simulator applies the same rule)
        chunk, graph_bs = gpu_defaults(total >> 20, tp)
        mfs = default_mem_fraction(total >> 20, chunk, graph_bs, tp)
    return host_pool.device_pool_estimate(total, mfs, weights / tp)


def model_weights_bytes(model: str) -> int | None:
    """The size of a model's weight files: a local folder, or the newest snapshot of a hub id in
    the local hub cache; None when neither holds any."""
    path = Path(model).expanduser()
    folders = [path] if path.is_dir() else []
    if not folders and re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        snapshots = hub_cache_dir() / ("models--" + model.replace("/", "--")) / "snapshots"
        if snapshots.is_dir():
            folders = sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    for folder in folders[:1]:
        for pattern in ("*.safetensors", "*.bin", "*.pt"):
            files = list(folder.glob(pattern))
            if files:
                return sum(f.stat().st_size for f in files)  # stat follows the hub's symlinks
    return None
