"""Whether a profile's server can sleep at all, asked before a standby is added (blocking: a
worker thread). SGLang 0.5.23 and torch-memory-saver 0.0.10 fail late and hard otherwise:

- `--weight-cache-mode` other than off: the release raises in the scheduler (the server dies);
- `torch_memory_saver` missing from the server's interpreter: the launch fails; before 0.0.10
  it ignores TMS_RETAIN_CPU_BACKUP (every release pins the backup again);
- `PYTORCH_CUDA_ALLOC_CONF` with `expandable_segments:True`: torch-memory-saver raises at init.

The simulator needs no torch-memory-saver: only the profile's own settings are checked there.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

MIN_TMS = (0, 0, 10)
PROBE = (
    "import importlib.util, importlib.metadata as m\n"
    "if importlib.util.find_spec('torch_memory_saver') is None: print('missing')\n"
    "else: print(m.version('torch_memory_saver'))\n"
)


def weight_cache_problem(name: str, server: dict[str, Any]) -> str | None:
    mode = server.get("weight-cache-mode")
    if mode in (None, "", "off"):
        return None
    return (
        f"{name} runs with --weight-cache-mode {mode}: SGLang cannot release weights it shares "
        'with the weight cache daemon (the server dies); set weight-cache-mode = "off" in the '
        "profile to keep it warm"
    )


def alloc_conf_problem(name: str, env: dict[str, str]) -> str | None:
    conf = env.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    parts = {p.strip().replace(" ", "").lower() for p in str(conf).split(",")}
    if "expandable_segments:true" not in parts:
        return None
    return (
        f"{name} runs with PYTORCH_CUDA_ALLOC_CONF={conf}: torch-memory-saver refuses "
        "expandable_segments:True; remove it from the profile's [env] (or the agent's "
        "environment) to keep it warm"
    )


def _version(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def tms_problem(name: str, python: str, env: dict[str, str]) -> str | None:
    """torch_memory_saver importable in `python` (with the profile's [env]), >= 0.0.10."""
    fix = f"install it there: `{python} -m pip install 'torch_memory_saver>=0.0.10'`"
    try:
        proc = subprocess.run(
            [python, "-c", PROBE],
            env={**os.environ, **{k: str(v) for k, v in env.items()}},
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{name}: cannot ask {python} for torch_memory_saver ({exc}); {fix}"
    found = (proc.stdout.strip().splitlines() or ["missing"])[-1]
    if proc.returncode != 0 or found == "missing":
        return f"{name} cannot sleep: {python} has no torch_memory_saver; {fix}"
    if _version(found) < MIN_TMS:
        return (
            f"{name} cannot sleep well: {python} has torch_memory_saver {found}, which ignores "
            f"TMS_RETAIN_CPU_BACKUP (from 0.0.10); {fix}"
        )
    return None


def python_of(target: Any) -> str:
    """The server's interpreter, as the launch runs it (`ENV/bin/sglang serve`: ENV's python)."""
    argv = target.argv()
    python = os.path.expanduser(argv[0])
    if argv[1:2] == ["serve"]:
        python = os.path.join(os.path.dirname(python), "python")
    return python


def problem(target: Any) -> str | None:
    """Why `target` cannot be kept asleep, or None."""
    name = target.name
    found = weight_cache_problem(name, target.server) or alloc_conf_problem(name, target.env)
    if found or target.launcher == "sim":
        return found
    return tms_problem(name, python_of(target), target.env)
