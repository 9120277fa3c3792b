"""Where sgltui keeps things: shipped data, user config, agent state.

Shipped data (profiles/, themes/) sits inside the installed package (the wheel force-includes the
top-level folders as sgltui/profiles and sgltui/themes); in a source checkout or an editable
install it sits at the top of the repository. Both places are searched, package first.
"""

from __future__ import annotations

import os
from pathlib import Path

from sgltui.core import config as env_config

_PKG = Path(__file__).resolve().parent.parent


def shipped_dir(name: str) -> Path:
    """The shipped data folder `name` ("profiles" or "themes")."""
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    return _PKG / name


def config_dir() -> Path:
    """~/.config/sgltui (XDG_CONFIG_HOME honoured)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sgltui"


def state_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The agent's state directory: --state-dir, $SGLTUI_STATE_DIR, or ~/.local/state/sgltui."""
    if override:
        return Path(override).expanduser()
    env = env_config.state_dir()
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sgltui"


def sim_gpu_dir() -> Path:
    """Where running simulators publish their simulated GPU (one JSON file per simulator pid)."""
    env = env_config.sim_gpu_dir()
    if env:
        return Path(env)
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return Path(base) / f"sgltui-simgpu-{os.getuid()}"
