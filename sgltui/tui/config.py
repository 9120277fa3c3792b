"""The TUI's settings file: ~/.config/sgltui/config.toml (or $SGLTUI_CONFIG_FILE).

```toml
theme = "sgltui-night"        # any built-in Textual theme or one from themes/*.toml
[keymap]                      # binding id -> key(s), e.g. "server.stop" = "ctrl+x"
"server.stop" = "ctrl+x"
[logs]
max_lines = 5000              # log tail kept in memory
[confirm]
stop = true                   # ask before stopping a server with no requests in flight
```

Validated strictly: a typo names the file, the key and the nearest valid name, in one line,
before the app opens (a silently ignored keymap entry is worse than an error).
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

from sgltui.core.locations import config_dir
from sgltui.tui.bindings import BINDING_IDS


class ConfigError(Exception):
    """One line: where, what, and how to fix it."""


@dataclass
class TuiConfig:
    theme: str | None = None
    keymap: dict[str, str] = field(default_factory=dict)
    log_max_lines: int = 5000
    confirm_stop: bool = True
    path: Path | None = None


_TOP = {"theme", "keymap", "logs", "confirm"}
_LOGS = {"max_lines"}
_CONFIRM = {"stop"}


def config_path() -> Path:
    env = os.environ.get("SGLTUI_CONFIG_FILE")
    return Path(env).expanduser() if env else config_dir() / "config.toml"


def load_config(path: Path | None = None) -> TuiConfig:
    """Read the config file; a missing file is the defaults, a bad one raises ConfigError."""
    path = path or config_path()
    if not path.exists():
        return TuiConfig(path=None)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid TOML ({exc}); fix the syntax or move the file away"
        ) from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read; fix it or move it away") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror}); check its permissions") from None
    cfg = TuiConfig(path=path)
    _check_keys(path, "", data, _TOP)
    if "theme" in data:
        if not isinstance(data["theme"], str) or not data["theme"]:
            raise ConfigError(
                f'{path}: theme: must be a theme name string, e.g. theme = "sgltui-night"'
            )
        cfg.theme = data["theme"]
    keymap = data.get("keymap", {})
    if not isinstance(keymap, dict):
        raise ConfigError(f'{path}: keymap: must be a table of binding id = "key"')
    _check_keys(path, "keymap.", keymap, BINDING_IDS)
    for bid, key in keymap.items():
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f'{path}: keymap.{bid}: must be a key name such as "ctrl+x" or "f5"')
        cfg.keymap[bid] = key.strip()
    logs = data.get("logs", {})
    _check_keys(path, "logs.", logs, _LOGS)
    if "max_lines" in logs:
        n = logs["max_lines"]
        if not isinstance(n, int) or isinstance(n, bool) or not 100 <= n <= 1_000_000:
            raise ConfigError(f"{path}: logs.max_lines: must be a whole number from 100 to 1000000")
        cfg.log_max_lines = n
    confirm = data.get("confirm", {})
    _check_keys(path, "confirm.", confirm, _CONFIRM)
    if "stop" in confirm:
        if not isinstance(confirm["stop"], bool):
            raise ConfigError(f"{path}: confirm.stop: must be true or false")
        cfg.confirm_stop = confirm["stop"]
    return cfg


def _check_keys(path: Path, prefix: str, table: Any, allowed: set[str] | frozenset[str]) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {prefix.rstrip('.')}: must be a table")
    for key in table:
        if key not in allowed:
            near = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = (
                f"did you mean {prefix}{near[0]}?"
                if near
                else f"valid: {', '.join(sorted(allowed))}"
            )
            raise ConfigError(f"{path}: unknown setting {prefix}{key}; {hint}")
