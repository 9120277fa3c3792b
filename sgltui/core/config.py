"""The `SGLTUI_*` environment settings that are not agent.toml's, read here and nowhere else.

agent.toml's overrides (SGLTUI_SLOTS, SGLTUI_FRONT_PORT, ...) are agent/config.py's, the TUI's
config file (SGLTUI_CONFIG_FILE) tui/config.py's, the fleet file (SGLTUI_FLEET)
fleet/config.py's. Every other read of an `SGLTUI_*` variable is a function of this module, so a
setting's name, default and meaning sit in one place and a module elsewhere cannot grow a
setting of its own unseen (tests/test_code_hygiene.py holds it). Setting one for a child
process's environment is not a read: a module names the constant from here and writes it.

Each read happens when its function is called, never at import: a test or a command that sets
the variable first is honoured.
"""

from __future__ import annotations

import os

STATE_DIR_ENV = "SGLTUI_STATE_DIR"  # the agent's state directory (core/locations.py)
SIM_GPU_DIR_ENV = "SGLTUI_SIM_GPU_DIR"  # where simulators publish their simulated GPU
HOST_FILE_ENV = "SGLTUI_HOST_FILE"  # another host.toml (`sgltui demo --gpus N` sets it)
SIM_HOST_ENV = "SGLTUI_SIMULATED_GPUS"  # the simulator's --simulated-gpus default
SIM_GPU_ENV = "SGLTUI_SIM_GPU"  # the simulator's --sim-gpu default
SESSION_LIMITS_ENV = "SGLTUI_SESSION_LIMITS"  # the session files' rotation (session/writer.py)
BENCH_API_KEY_ENV = "SGLTUI_BENCH_API_KEY"  # a --url bench's key: never argv, which ps shows
# The agent's GPU settings, which agent.toml also sets (the daemon writes its value here for
# the agent's own GPU service: agent/daemon.py).
GPU_SOURCE_ENV = "SGLTUI_GPU_SOURCE"  # auto | nvml | sim | none
GPU_RELEASE_ENV = "SGLTUI_GPU_RELEASE"  # auto | pid | used-memory
# The keeper (agent/keeper.py): 0 runs the agent without one; its restart backoff, in seconds.
KEEPER_ENV = "SGLTUI_KEEPER"
KEEPER_BACKOFF_FIRST_ENV = "SGLTUI_KEEPER_BACKOFF_FIRST_S"
KEEPER_BACKOFF_MAX_ENV = "SGLTUI_KEEPER_BACKOFF_MAX_S"
KEEPER_STABLE_ENV = "SGLTUI_KEEPER_STABLE_S"


def _value(name: str) -> str:
    return os.environ.get(name, "")


def state_dir() -> str:
    """$SGLTUI_STATE_DIR, "" when unset."""
    return _value(STATE_DIR_ENV)


def sim_gpu_dir() -> str:
    return _value(SIM_GPU_DIR_ENV)


def host_file() -> str:
    """$SGLTUI_HOST_FILE: another host.toml than the user's, "" for the user's."""
    return _value(HOST_FILE_ENV)


def sim_gpu() -> str:
    return _value(SIM_GPU_ENV)


def simulated_gpus() -> str:
    return _value(SIM_HOST_ENV)


def session_limits() -> str:
    """The session files' limits as written ("events=32M:8,..."), "" for the defaults."""
    return _value(SESSION_LIMITS_ENV).strip()


def bench_api_key() -> str | None:
    return os.environ.get(BENCH_API_KEY_ENV)


def gpu_source() -> str:
    return _value(GPU_SOURCE_ENV)


def gpu_release() -> str:
    return _value(GPU_RELEASE_ENV).strip()


def keeper_enabled() -> bool:
    """SGLTUI_KEEPER=0 runs the agent without a keeper (as before it existed)."""
    return os.environ.get(KEEPER_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def keeper_backoff_first_s() -> float:
    """The wait before the second start of a run of crashes (the first is at once)."""
    return float(os.environ.get(KEEPER_BACKOFF_FIRST_ENV, "1"))


def keeper_backoff_max_s() -> float:
    return float(os.environ.get(KEEPER_BACKOFF_MAX_ENV, "60"))


def keeper_stable_s() -> float:
    """How long an agent must run before its crashes count as a new run."""
    return float(os.environ.get(KEEPER_STABLE_ENV, "60"))
