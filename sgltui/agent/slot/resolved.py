"""A profile resolved once, when the agent accepts a command, and the index it is looked up in.

`Resolved` is what a slot runs: the profile as it was when the command was accepted (argv, env,
launcher, interpreter, key, a hash of its content, the files it came from). Rollback and
re-adoption use this value, not a fresh lookup by name, so deleting or editing a profile's file
after a launch cannot change what "go back to the previous server" means (issue 12).

`ProfileIndex` keeps the last scan of the profile folders and re-reads only the files a lookup
touches when they changed on disk: no full rescan on the swap path. It does blocking file I/O:
call it from a worker thread, never on the agent's event loop.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sgltui.agent.slot import procs
from sgltui.core import placement
from sgltui.core import profiles as core_profiles
from sgltui.core.launch_secrets import with_key_files
from sgltui.core.redact import is_secret_env


@dataclass(frozen=True)
class Resolved:
    """One immutable resolution of a profile. Duck-types the parts of core Profile a slot uses."""

    profile: core_profiles.Profile = field(repr=False, compare=False)
    name: str
    launcher: str
    interpreter: str
    key: str | None
    sources: tuple[str, ...]
    content_hash: str
    resolved_at: float

    @classmethod
    def of(cls, profile: core_profiles.Profile) -> Resolved:
        argv = profile.argv()
        sources = sorted({str(p) for p, _ in profile.origins.values() if p} | _own(profile))
        doc = profile.to_toml_dict()
        content = json.dumps({"doc": doc, "argv": argv}, sort_keys=True, default=str)
        return cls(
            profile=profile,
            name=profile.name,
            launcher=profile.launcher,
            interpreter=argv[0] if argv else sys.executable,
            key=profile.key,
            sources=tuple(sources),
            content_hash=hashlib.sha256(content.encode()).hexdigest()[:16],
            resolved_at=time.time(),
        )

    # What the slot reads (the same names as core Profile).
    @property
    def server(self) -> dict[str, Any]:
        return self.profile.server

    @property
    def env(self) -> dict[str, str]:
        return self.profile.env

    @property
    def host(self) -> str:
        return self.profile.host

    @property
    def port(self) -> int:
        return self.profile.port

    @property
    def api_key(self) -> str | None:
        return self.profile.api_key

    @property
    def python(self) -> str | None:
        return self.profile.python

    @property
    def source(self) -> Path | None:
        return self.profile.source

    def argv(self, server: dict[str, Any] | None = None) -> list[str]:
        # `server`: the flags less the secrets, which go in a --config file (launch_secrets.py)
        return self.profile.argv(server)

    def where(self, key: str) -> core_profiles.Where:
        return self.profile.where(key)

    def command_hash(self) -> str:
        return self.profile.command_hash()

    def placed(self, place: Any, exposure: Any = None) -> Resolved:
        """This resolution as it runs on a slot of host.toml (core/placement.py): the profile's
        port and CUDA_VISIBLE_DEVICES replaced by the slot's; on a slot served to another
        host's gateway (agent/pools/exposure.py), its host and api-key too. The content hash stays
        the profile's: a restart compares what the file says, not where it runs."""
        if place is None and exposure is None:
            return self
        server, env = dict(self.profile.server), dict(self.profile.env)
        if place is not None:
            server, env = placement.apply_to(server, env, place)
        if exposure is not None:  # the key travels like a profile's own: the 0600 --config
            server["host"], server["api-key"] = exposure.address, exposure.api_key
        return dataclasses.replace(
            self, profile=dataclasses.replace(self.profile, server=server, env=env)
        )

    def describe(self) -> dict[str, Any]:
        """For status and agent-state.json: no secrets (argv is not here; the slot redacts it)."""
        return {
            "name": self.name,
            "launcher": self.launcher,
            "interpreter": self.interpreter,
            "key": self.key,
            "sources": list(self.sources),
            "content_hash": self.content_hash,
            "resolved_at": self.resolved_at,
        }


SECRET_FLAGS = ("api-key", "admin-api-key")


def to_record(resolved: Any) -> dict | None:
    """What agent-state.json keeps of a resolved profile, to relaunch exactly it after an agent
    restart: the resolved document without its secrets (they are never written to disk)."""
    if not isinstance(resolved, Resolved):
        return None
    p = resolved.profile
    server = {k: v for k, v in p.server.items() if k not in SECRET_FLAGS}
    # [env] secrets (HF_TOKEN, *_KEY, *_SECRET: redact.is_secret_env) are kept by name only.
    env = {k: v for k, v in p.env.items() if not is_secret_env(k)}
    return {
        "name": p.name,
        "description": p.description,
        "key": p.key,
        "launcher": p.launcher,
        "python": p.python,
        "server": server,
        "env": env,
        "source": str(p.source) if p.source else None,
        "content_hash": resolved.content_hash,
        "had_secrets": [k for k in SECRET_FLAGS if k in p.server],
        "key_files": dict(p.key_files),  # where its keys are read from (paths, not keys)
        "secret_env": [k for k in p.env if k not in env],
    }


def from_record(
    rec: dict,
    fresh: Resolved | None,
    running_env: Callable[[], Mapping[str, str]] = lambda: {},
) -> Resolved | None:
    """The resolved profile an earlier agent ran. The file's current version when it has not
    changed (it carries the secrets); else the recorded document, with the API keys taken from
    the file when it still has them, and the [env] secrets from the environment the running
    server was started with (`running_env`, read only when needed: exactly what ran), else from
    the file."""
    if not isinstance(rec, dict) or not rec.get("name"):
        return fresh
    if fresh is not None and fresh.content_hash == rec.get("content_hash"):
        return fresh
    server = dict(rec.get("server") or {})
    for key in rec.get("had_secrets") or []:
        if fresh is not None and key in fresh.server:
            server[key] = fresh.server[key]
    env = {str(k): str(v) for k, v in (rec.get("env") or {}).items()}
    secret_env = [str(k) for k in rec.get("secret_env") or []]
    ran = running_env() if secret_env else {}
    for key in secret_env:
        if key in ran:
            env[key] = ran[key]
        elif fresh is not None and key in fresh.env:
            env[key] = fresh.env[key]
    try:
        profile = core_profiles.Profile(
            name=str(rec["name"]),
            description=str(rec.get("description") or ""),
            key=rec.get("key"),
            launcher=str(rec.get("launcher") or "sglang"),
            python=rec.get("python"),
            server=server,
            env=env,
            key_files={str(k): str(v) for k, v in (rec.get("key_files") or {}).items()},
            source=Path(rec["source"]) if rec.get("source") else None,
        )
        if any(k not in server for k in profile.key_files):  # not in the file now: read them
            profile = with_key_files(profile)
    except (TypeError, ValueError, core_profiles.ProfileError):
        return fresh
    return Resolved.of(profile)


def server_env(record: dict) -> dict[str, str]:
    """The environment the server of an agent-state.json slot record was started with (its
    main process, when it is still that process), or {}. Blocking (psutil)."""
    try:
        tree = procs.ProcTree.from_json(record["tree"])
        if not tree.main_alive():
            return {}
        return dict(psutil.Process(tree.pid).environ())
    except (KeyError, TypeError, ValueError, psutil.Error):
        return {}


def _own(profile: core_profiles.Profile) -> set[str]:
    return {str(profile.source)} if profile.source else set()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class ProfileIndex:
    """The profile folders' last scan, refreshed whole only when asked or when a name is new."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = list(dirs)
        self._lock = threading.Lock()
        self._set: core_profiles.ProfileSet | None = None
        self._stamps: dict[str, tuple[int, int] | None] = {}
        self._dirs_key: tuple[str, ...] = ()
        self.scanned_at = 0.0

    def rescan(self, extra: list[Path] | None = None) -> core_profiles.ProfileSet:
        dirs = self.dirs + [d for d in (extra or []) if d not in self.dirs]
        found = core_profiles.scan_profiles(dirs)
        stamps = {str(raw.path): _stamp(raw.path) for raw in found.raw.values()}
        with self._lock:
            self._set, self._stamps = found, stamps
            self._dirs_key = tuple(str(d) for d in dirs)
            self.scanned_at = time.monotonic()
        return found

    def profiles(self) -> dict[str, core_profiles.Profile]:
        found = self._set or self.rescan()
        out = {}
        for name in found.names():
            try:
                out[name] = found.resolve(name)
            except core_profiles.ProfileError:
                continue
        return out

    def broken(self) -> dict[str, str]:
        """Profiles of the last scan that do not load or resolve: name (file stem) -> the
        error's one line, so a list can show them as invalid instead of leaving them out."""
        found = self._set or self.rescan()
        out = {stem: str(found.errors[path]) for stem, path in found.failed_names.items()}
        for name in found.names():
            try:
                found.resolve(name)
            except core_profiles.ProfileError as exc:
                out[name] = str(exc)
        return out

    def resolve(self, name_or_path: str, extra: list[Path] | None = None) -> Resolved:
        """Resolve by name (or a .toml path). Raises core ProfileError with one line to show."""
        looks_like_path = name_or_path.endswith(".toml") or "/" in name_or_path
        dirs_key = tuple(
            str(d) for d in self.dirs + [d for d in (extra or []) if d not in self.dirs]
        )
        found = self._set
        if found is None or dirs_key != self._dirs_key:
            found = self.rescan(extra)
        if looks_like_path:
            raw = core_profiles.read_raw(Path(name_or_path).expanduser())
            return Resolved.of(with_key_files(found.resolve_raw(raw)))
        if name_or_path not in found.raw:
            found = self.rescan(extra)  # a file added since the last scan
            return Resolved.of(with_key_files(found.resolve(name_or_path)))
        profile = found.resolve(name_or_path)
        if self._refresh_changed(found, profile):
            profile = found.resolve(name_or_path)
        return Resolved.of(with_key_files(profile))  # the keys its [key-files] name, read now

    def _refresh_changed(
        self, found: core_profiles.ProfileSet, profile: core_profiles.Profile
    ) -> bool:
        """Re-read the files of `profile`'s chain that changed since the scan; True if any."""
        changed = False
        files = {str(p) for p, _ in profile.origins.values() if p} | _own(profile)
        for path in files:
            now = _stamp(Path(path))
            if now == self._stamps.get(path):
                continue
            changed = True
            if now is None:  # deleted: the next lookup rescans (a name may live elsewhere)
                self.rescan()
                return True
            try:
                raw = core_profiles.read_raw(Path(path))
            except core_profiles.ProfileError:
                self.rescan()
                return True
            with self._lock:
                found.raw[raw.name] = raw
                self._stamps[path] = now
        return changed


def env_interpreter(resolved: Resolved) -> str:
    """The interpreter the server will run in, expanded as the launch expands it."""
    return os.path.expanduser(resolved.interpreter)
