"""Who may call which endpoint: SGLang 0.5.23's API-key rules (srt/utils/auth.py), one to one;
the simulator answers by them, and so does each slot's front (agent/pools/front.py) before it relays.

- OPTIONS, and paths starting with /health, /ready or /metrics, are always open: SGLang keeps
  them open so that probes and Prometheus work without the secret (so /metrics answers without
  the key on real SGLang too; the simulator does the same rather than be stricter than it).
- A key is sent as `Authorization: Bearer K` (scheme case-insensitive) or as `x-api-key: K`
  (Anthropic style), compared in constant time.
- Normal endpoints need --api-key when it is set (never the admin key).
- Admin endpoints (ADMIN_OPTIONAL there) need --admin-api-key when it is set, else --api-key
  when that is set, else nothing.
- Force-admin endpoints (the HiCache storage-backend control) need --admin-api-key, and are
  refused with 403 when no admin key is configured at all.
"""

from __future__ import annotations

import secrets
from enum import Enum

OPEN_PREFIXES = ("/health", "/ready", "/metrics")
ADMIN_PATHS = (
    "/flush_cache",
    "/abort_request",
    "/start_profile",
    "/stop_profile",
    "/pause_generation",
    "/continue_generation",
    "/hicache",
    "/update_weights",
    "/set_internal_state",
    "/configure_logging",
    "/release_memory_occupation",
    "/resume_memory_occupation",
    "/load_lora_adapter",
    "/unload_lora_adapter",
)
FORCE_ADMIN_PATHS = ("/hicache/storage-backend",)


class Level(str, Enum):
    NORMAL = "normal"
    ADMIN_OPTIONAL = "admin_optional"
    ADMIN_FORCE = "admin_force"


def level_of(path: str) -> Level:
    if path.startswith(FORCE_ADMIN_PATHS):
        return Level.ADMIN_FORCE
    if path.startswith(ADMIN_PATHS):
        return Level.ADMIN_OPTIONAL
    return Level.NORMAL


def _token_ok(expected: str, authorization: str | None, x_api_key: str | None) -> bool:
    if authorization:
        parts = authorization.split(" ", 1)
        if (
            len(parts) == 2
            and parts[0].lower() == "bearer"
            and secrets.compare_digest(parts[1].encode(), expected.encode())
        ):
            return True
    if not x_api_key:
        return False
    return secrets.compare_digest(x_api_key.encode(), expected.encode())


def decide(
    method: str,
    path: str,
    authorization: str | None,
    x_api_key: str | None,
    api_key: str | None,
    admin_api_key: str | None,
) -> int | None:
    """None when the request may pass, else the status to refuse it with (401 or 403)."""
    if method == "OPTIONS" or path.startswith(OPEN_PREFIXES):
        return None
    level = level_of(path)
    if level is Level.ADMIN_FORCE:
        if not admin_api_key:
            return 403
        return None if _token_ok(admin_api_key, authorization, x_api_key) else 401
    if level is Level.ADMIN_OPTIONAL:
        need = admin_api_key or api_key
    else:
        need = api_key
    if need and not _token_ok(need, authorization, x_api_key):
        return 401
    return None
