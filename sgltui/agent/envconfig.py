"""Numbers of the agent's settings read from its environment (`SGLTUI_<NAME>`): one reader for the
slots' timings and the fronts' limits, so a bad value is ignored the same way everywhere."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)


def override_numbers(cfg: Any, prefix: str, names: Iterable[str], env: Mapping[str, str]) -> None:
    """Set each attribute in `names` from `env[prefix + NAME]` when present, typed as the
    attribute's default (int or float); a value that is not a number is logged and ignored."""
    for name in names:
        key = prefix + name.upper()
        raw = env.get(key, "").strip()
        if not raw:
            continue
        kind = type(getattr(cfg, name))
        try:
            setattr(cfg, name, kind(raw))
        except ValueError:
            log.warning("ignoring %s=%r: not a number", key, raw)
