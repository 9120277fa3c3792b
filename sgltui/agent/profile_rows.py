"""The rows of the profile list (`profiles` op, STATUS): what each profile is, whether it is
valid, and whether its HiCache host pool fits in the host's RAM, before anyone presses its key.

Validation reads the flag catalog of the profile's SGLang and the host-pool size may need the
simulator's memory plan, NVML and the model's files: each profile's answer is kept until one of
its files (the profile, its parents) or its interpreter changes. Only the RAM it is compared
with is read at every refresh (it moves). Blocking: from a worker thread.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sgltui.agent.swap import preflight
from sgltui.core import host_pool, units
from sgltui.core.profiles import Profile
from sgltui.core.validate import check_profile

log = logging.getLogger("sgltui.agent.profile_rows")

Stamp = tuple[tuple[str, int, int], ...]


class _Known:
    """What one profile's files said the last time they were read."""

    def __init__(self, stamp: Stamp, problem: str | None, device_pool: float | None) -> None:
        self.stamp = stamp
        self.problem = problem
        self.device_pool = device_pool


class ProfileRows:
    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()
        self.validations = 0  # how many times a profile was validated (tests: the cache holds)

    def rows(
        self,
        profiles: Mapping[str, Profile],
        broken: Mapping[str, str],
        clashes: Mapping[str, list[str]],
        freed_pids: Iterable[int] = (),
    ) -> list[dict[str, Any]]:
        """One row per profile, by name; `broken` (name -> error) are the files that do not
        load, shown as invalid rows; `freed_pids`: the server a key press would replace."""
        freed = frozenset(freed_pids)
        out: list[dict[str, Any]] = []
        with self._lock:
            for p in profiles.values():
                out.append(self._row(p, clashes, freed))
            for name, error in broken.items():
                if name not in profiles:
                    out.append(
                        {"name": name, "valid": False, "problem": error.splitlines()[0][:300]}
                    )
            self._known = {k: v for k, v in self._known.items() if k in profiles}
        return sorted(out, key=lambda r: r["name"])

    def _row(
        self, p: Profile, clashes: Mapping[str, list[str]], freed: frozenset[int]
    ) -> dict[str, Any]:
        known = self._known.get(p.name)
        stamp = _stamp(p)
        if known is None or known.stamp != stamp:
            known = _Known(stamp, self._first_error(p), _device_pool(p))
            self._known[p.name] = known
        row: dict[str, Any] = {
            "name": p.name,
            "key": p.key,
            "description": p.description,
            "launcher": p.launcher,
            "port": _port(p),
            # Other profiles on the same hot-swap key: the key does nothing until fixed.
            "key_clash": [n for n in clashes.get(str(p.key), []) if n != p.name] if p.key else [],
            "valid": known.problem is None,
            "problem": known.problem or "",
        }
        row.update(_host_pool_fields(p, known.device_pool, freed))
        return row

    def _first_error(self, p: Profile) -> str | None:
        self.validations += 1
        try:
            errors = [i for i in check_profile(p) if i.is_error]
        except (OSError, ValueError) as exc:  # an unreadable catalog: say so, do not hide it
            return f"cannot validate: {exc}"
        if not errors:
            return _launcher_problem(p)
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return str(errors[0]).splitlines()[0] + more


def _launcher_problem(p: Profile) -> str | None:
    """A real profile on a host whose interpreter has no SGLang cannot start: its row says so
    (it read ✓ on such a host, as valid as the simulator's). Asked once per change of its
    files or its interpreter (the cache's stamp)."""
    if p.launcher == "sim":
        return None
    try:
        check = preflight.interpreter_check(p)
    except (OSError, ValueError) as exc:
        return f"interpreter not checked: {exc}"
    return None if check.ok else f"{check.message}; {check.fix}"


def _host_pool_fields(
    p: Profile, device_pool: float | None, freed: frozenset[int]
) -> dict[str, Any]:
    if not host_pool.enabled(p.server):
        return {}
    try:
        fit = preflight.host_pool_fit(p, freed, device_pool=device_pool)
    except (OSError, ValueError, RuntimeError) as exc:
        log.warning("profile %s: host pool not checked: %s", p.name, exc)
        return {}
    if fit.pool is None:
        return {"host_pool_note": fit.note}
    return {
        "host_pool_gib": round(fit.pool.total_bytes / units.GIB, 1),
        "host_pool_problem": fit.problem or "",
        "host_pool_how": fit.pool.how(),
    }


def _device_pool(p: Profile) -> float | None:
    """The device pool a --hicache-ratio profile's host pool follows (None: not needed or
    unknown); worked out once per change of its files."""
    if not (host_pool.enabled(p.server) and host_pool.sized_by_ratio(p.server)):
        return None
    try:
        return preflight.device_pool_of(p)
    except (OSError, ValueError, RuntimeError) as exc:
        log.warning("profile %s: device pool not worked out: %s", p.name, exc)
        return None


def _port(p: Profile) -> int | None:
    try:
        return p.port
    except (TypeError, ValueError):
        return None


def _stamp(p: Profile) -> Stamp:
    paths = {str(p.source)} if p.source else set()
    paths |= {str(where[0]) for where in p.origins.values() if where[0] is not None}
    if p.launcher != "sim":  # the catalog follows the SGLang its interpreter has
        paths.add(str(Path(p.python).expanduser()) if p.python else sys.executable)
    out = []
    for path in sorted(paths):
        try:
            st = Path(path).stat()
        except OSError:
            out.append((path, -1, -1))
            continue
        out.append((path, st.st_mtime_ns, st.st_size))
    return tuple(out)
