"""The agent's one configuration: `~/.config/sgltui/agent.toml`, then `SGLTUI_*` overrides.

Every setting, its default and its environment name are in docs/agent-config.md (a test holds
the two to each other). The agent reads this once, before it detaches: a bad value is one line
on the starting command's stderr naming the key and the fix, never a crash in agent.log.

    slots = ["0"]                 # SGLTUI_SLOTS=0,1   (host.toml's slots win when it exists)
    send_timeout_s = 10.0         # SGLTUI_SEND_TIMEOUT_S
    gpu_source = "auto"           # SGLTUI_GPU_SOURCE
    gpu_release = "auto"          # SGLTUI_GPU_RELEASE
    restart = "job"               # SGLTUI_RESTART (agent/slot/restart_policy.py)
    [slot]   hang_factor, hang_min_s, stop_grace_s, force_grace_s, release_timeout_s
    [front]  port (or "off"), host, hold_s, hold_max, retry_after_s   # SGLTUI_FRONT_<NAME>
    [jobs]   drain_s, via_front, stall_s, choose_watch_s                      # SGLTUI_JOB_<NAME>
    [metrics] port (opt-in), host                                         # SGLTUI_METRICS_<NAME>
    [endpoint] port (or "off"), host, queue_max, wait_s, lease_wait_s, collate_s, settle_s,
               idle_s, retry_after_s                                    # SGLTUI_ENDPOINT_<NAME>
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from sgltui.agent.endpoint.policy import EndpointConfig
from sgltui.agent.pools.front import FrontConfig
from sgltui.agent.slot.slot import SlotConfig
from sgltui.core.locations import config_dir

FILE_NAME = "agent.toml"
GPU_SOURCES = ("auto", "nvml", "sim", "none")
GPU_RELEASES = ("auto", "pid", "used-memory")
RESTARTS = ("job", "on-failure", "never")  # agent/slot/restart_policy.py
_SLOT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
DAY_S = 86_400.0  # no wait, timeout or grace of the agent's is longer than a day
# key -> (low, high), as profiles have them; a seconds key (*_s) not named: 0 to a day;
# another number: 0 to a million
RANGES: dict[str, tuple[float, float]] = {
    "hang_factor": (1.0, 100.0),
    "poll_s": (0.01, 10.0),
    "hold_max": (0, 1_000_000),
    "queue_max": (0, 1_000_000),
    "retry_after_s": (0, 3600),
    "send_timeout_s": (0.1, 3600.0),
}


class ConfigError(ValueError):
    """One line: which key (in which file or variable) is wrong and how to fix it."""


@dataclass
class JobsConfig:
    drain_s: float = 120.0  # a swap waits this long for a job's requests in flight
    via_front: bool = False  # jobs send through the slot's front instead of to the server
    stall_s: float = 60.0  # a job with no answer this long while it may send says "stalled"
    # a --choose job's rate this long >15% under the decision's projection says so (--replan)
    choose_watch_s: float = 300.0


@dataclass
class MetricsConfig:
    port: int | None = None  # opt-in: Prometheus metrics on this port (None: off)
    host: str = "127.0.0.1"  # loopback: whoever scrapes it runs here or tunnels in


@dataclass
class AgentConfig:
    slots: list[str] = field(default_factory=lambda: ["0"])
    send_timeout_s: float = 10.0  # a client that reads nothing this long is dropped
    gpu_source: str = "auto"
    gpu_release: str = "auto"
    restart: str = "job"  # a crashed server is relaunched: job | on-failure | never
    standby_reserve_gb: float = 16.0  # host RAM a standby must leave free (agent/swap/standby.py)
    slot: SlotConfig = field(default_factory=SlotConfig)
    front: FrontConfig = field(default_factory=FrontConfig)
    jobs: JobsConfig = field(default_factory=JobsConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)


# (table, key) -> the environment variable that overrides it.
ENV_NAMES: dict[tuple[str, str], str] = {
    ("", "slots"): "SGLTUI_SLOTS",
    ("", "send_timeout_s"): "SGLTUI_SEND_TIMEOUT_S",
    ("", "gpu_source"): "SGLTUI_GPU_SOURCE",
    ("", "gpu_release"): "SGLTUI_GPU_RELEASE",
    ("", "restart"): "SGLTUI_RESTART",
    ("", "standby_reserve_gb"): "SGLTUI_STANDBY_RESERVE_GB",
    **{("slot", f.name): f"SGLTUI_{f.name.upper()}" for f in dataclasses.fields(SlotConfig)},
    **{
        ("front", f.name): f"SGLTUI_FRONT_{f.name.upper()}" for f in dataclasses.fields(FrontConfig)
    },
    **{("jobs", f.name): f"SGLTUI_JOB_{f.name.upper()}" for f in dataclasses.fields(JobsConfig)},
    **{
        ("metrics", f.name): f"SGLTUI_METRICS_{f.name.upper()}"
        for f in dataclasses.fields(MetricsConfig)
    },
    **{
        ("endpoint", f.name): f"SGLTUI_ENDPOINT_{f.name.upper()}"
        for f in dataclasses.fields(EndpointConfig)
    },
}
ENV_NAMES.pop(("slot", "poll_s"))  # not a user's setting: how often the slot looks


def env_value(table: str, key: str, env: Mapping[str, str] | None = None) -> str:
    """The environment's override of one agent.toml setting as written ("" when unset): for a
    command that must leave a user's choice alone (`sgltui demo` and the endpoint's port)."""
    env = os.environ if env is None else env
    return env.get(ENV_NAMES[(table, key)], "").strip()


def default_path() -> Path:
    return config_dir() / FILE_NAME


def load(path: Path | None = None, env: Mapping[str, str] | None = None) -> AgentConfig:
    """agent.toml (absent: the defaults), then the environment's overrides. ConfigError on the
    first bad value."""
    target = path or default_path()
    env = os.environ if env is None else env
    try:
        doc = tomllib.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        doc = {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{target}: cannot read ({exc}); fix or remove it") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{target}: {exc}; fix the TOML or remove the file") from None
    except RecursionError:
        raise ConfigError(f"{target}: nested too deeply; fix the TOML or remove the file") from None
    return _build(doc, env, target)


def from_env(env: Mapping[str, str]) -> AgentConfig:
    """The defaults with only the environment's overrides (no agent.toml)."""
    return _build({}, env, default_path())


def _build(doc: dict[str, Any], env: Mapping[str, str], target: Path) -> AgentConfig:
    cfg = AgentConfig()
    parts: dict[str, Any] = {
        "": cfg,
        "slot": cfg.slot,
        "front": cfg.front,
        "jobs": cfg.jobs,
        "metrics": cfg.metrics,
        "endpoint": cfg.endpoint,
    }
    for key, value in doc.items():
        if isinstance(value, dict) and key in parts and key:
            for sub, v in value.items():
                _set(parts[key], key, sub, v, f"{target}: [{key}] {sub}")
        else:
            _set(cfg, "", key, value, f"{target}: {key}")
    for (table, key), name in ENV_NAMES.items():
        raw = env.get(name, "").strip()
        if raw:
            _set(parts[table], table, key, _from_env(table, key, raw), f"{name}={raw!r}")
    return cfg


def _from_env(table: str, key: str, raw: str) -> Any:
    """An environment value as the TOML value it stands for."""
    if (table, key) == ("", "slots"):
        return [x.strip() for x in raw.split(",") if x.strip()]
    if (
        table in ("front", "metrics", "endpoint")
        and key == "port"
        and raw.lower() in ("off", "0", "none", "no")
    ):
        return "off"
    if (table, key) == ("jobs", "via_front"):
        return raw.lower() in ("1", "true", "yes", "on")
    return raw


def _set(obj: Any, table: str, key: str, value: Any, where: str) -> None:
    names = {f.name: f for f in dataclasses.fields(obj)}
    if key not in names or (table, key) not in ENV_NAMES:
        known = ", ".join(k for (t, k) in ENV_NAMES if t == table)
        raise ConfigError(
            f"{where}: unknown setting; "
            + (
                f"[{table}] takes: {known}"
                if table
                else f"known: {known}, [slot], [front], [jobs], [metrics], [endpoint]"
            )
            + " (docs/agent-config.md)"
        )
    default = getattr(type(obj)(), key)
    try:
        setattr(obj, key, _coerce(table, key, value, default, where))
    except ConfigError as exc:
        fix = (
            f"unset {where.split('=')[0]} or give a valid value"
            if "=" in where
            else "fix or remove that line"
        )
        raise ConfigError(f"{exc}; {fix} (docs/agent-config.md)") from None


def _coerce(table: str, key: str, value: Any, default: Any, where: str) -> Any:
    if key == "slots":
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and _SLOT_NAME.match(v) for v in value)
            or len(set(value)) != len(value)
        ):
            raise ConfigError(
                f"{where}: expected a list of distinct slot names (letters, digits, - and _), "
                'e.g. ["0", "1"]'
            )
        return list(value)
    if key in ("gpu_source", "gpu_release", "restart"):
        choices = {"gpu_source": GPU_SOURCES, "gpu_release": GPU_RELEASES}.get(key, RESTARTS)
        if value not in choices:
            raise ConfigError(f"{where}: expected one of {', '.join(choices)}")
        return value
    if key == "port" and table in ("front", "metrics", "endpoint"):
        if value == "off":
            return None
        port = _number(value, int, where, 'a port number or "off"')
        if not 1 <= port <= 65535:
            raise ConfigError(f'{where}: expected a port number (1-65535) or "off"')
        return port
    if key == "host" and table in ("front", "metrics", "endpoint"):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f'{where}: expected an address, e.g. "127.0.0.1"')
        return value.strip()
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false")
        return value
    kind = int if isinstance(default, int) else float
    number = _number(value, kind, where, "a number")
    low, high = RANGES.get(key, (0, DAY_S if key.endswith("_s") else 1_000_000))
    if not math.isfinite(number) or not low <= number <= high:
        # nan passes every comparison and made each stop an immediate SIGKILL (issue 35 F6)
        raise ConfigError(f"{where}: expected a number from {low:g} to {high:g}")
    return number


def _number(value: Any, kind: type, where: str, what: str) -> Any:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected {what}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {what}") from None
