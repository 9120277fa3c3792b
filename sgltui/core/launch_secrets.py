"""Secret flags (the API keys) reach the server through a --config file, never its argv.

A process's argv is readable by every user on the machine (`ps -eo args`, /proc/PID/cmdline).
SGLang's `prepare_server_args` reads `--config FILE.yaml` itself (server_args_config_parser.py:
the YAML's keys become flags placed before the command line's, so the command line still wins)
and keeps the merged flags in memory only; the simulator reads it the same way (sim/cli.py).
So a profile's secret flags are written to a YAML file of mode 0600 in a 0700 folder of the
state directory, the command line names only that file, and the agent removes the file as soon
as the server has read it (agent/secret_config.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shlex
import time
from pathlib import Path
from typing import Any

from sgltui.core.profiles import Profile, ProfileError
from sgltui.core.redact import MASK, Redactor
from sgltui.core.safe_text import printable

# SGLang 0.5.23's flags whose value is a secret (redact.py hides the same).
SECRET_FLAGS = ("api-key", "admin-api-key", "ssl-keyfile-password")
CONFIG_FLAG = "config"
FILE_PREFIX = "sglang-secrets-"
# SGLang accepts only .yaml/.yml config files.
FILE_SUFFIX = ".yaml"
# A file left by an agent that died before its server read it is swept after this long.
STALE_AFTER_S = 600.0


def _canonical(key: str) -> str:
    from sgltui.core.flags import load_bundled_catalog

    spec = load_bundled_catalog().lookup(key, sim=True)
    return spec.name if spec else key.lstrip("-")


def split_secrets(server: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """[server] -> (the flags for argv, {canonical secret flag: value}). A secret set to false or
    true is not a secret value (validation reports `true`), so it stays in argv as written."""
    public: dict[str, Any] = {}
    hidden: dict[str, str] = {}
    for key, value in server.items():
        name = _canonical(key)
        if name in SECRET_FLAGS and not isinstance(value, (bool, dict, list)) and value != "":
            hidden[name] = str(value)
        else:
            public[key] = value
    return public, hidden


def secret_problem(value: str) -> str | None:
    """Why `value` cannot be an API key, or None. A key travels in an HTTP header, so it is
    printable ASCII without spaces (and then it is also a plain YAML scalar)."""
    if not value:
        return "is empty"
    if not (value.isascii() and value.isprintable()) or " " in value:
        return "must be printable ASCII without spaces (it is sent in an HTTP header)"
    if value.startswith("-"):
        # SGLang's --config merge makes `api-key: "-x"` the argv words `--api-key -x`, and
        # argparse takes a word that starts with "-" for a flag: the server exits 2 at once
        # ("argument --api-key: expected one argument").
        return 'must not start with "-" (SGLang would read it as a flag and not start)'
    return None


def new_key(nbytes: int = 32) -> str:
    """A random API key SGLang takes: token_urlsafe's alphabet has "-", and a key starting with
    it cannot be passed (secret_problem); 1 in 64 did, and its launch exited 2."""
    while True:
        key = secrets.token_urlsafe(nbytes)
        if secret_problem(key) is None:
            return key


def config_text(hidden: dict[str, str]) -> str:
    # A JSON string of printable ASCII is a double-quoted YAML scalar with the same value.
    return "".join(f"{name}: {json.dumps(value)}\n" for name, value in hidden.items())


def write_config(folder: Path, hidden: dict[str, str]) -> Path:
    """A new 0600 YAML file in `folder` (made 0700) holding `hidden`. Created with O_EXCL and
    O_NOFOLLOW, so nothing planted under that name is followed or reused."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    path = folder / f"{FILE_PREFIX}{secrets.token_hex(8)}{FILE_SUFFIX}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, config_text(hidden).encode("ascii"))
    finally:
        os.close(fd)
    return path


def launch_command(profile: Profile, folder: Path) -> tuple[list[str], Path | None]:
    """(argv, the secrets file or None). Raises ProfileError for a key that cannot be passed."""
    public, hidden = split_secrets(profile.server)
    if not hidden:
        return profile.argv(), None
    for name, value in hidden.items():
        problem = secret_problem(value)
        if problem:
            path, line = profile.where(f"server.{name}")
            raise ProfileError(problem, path, line, name, "write another key")
    if any(_canonical(k) == CONFIG_FLAG for k in public):
        path, line = profile.where(f"server.{CONFIG_FLAG}")
        raise ProfileError(
            "sgltui passes the API key in its own --config file, and SGLang takes only one",
            path,
            line,
            CONFIG_FLAG,
            "put the flags of that YAML file in [server] instead",
        )
    argv = profile.argv(public)  # before the file exists: nothing is left if this raises
    config = write_config(folder, hidden)
    return [*argv, f"--{CONFIG_FLAG}", str(config)], config


def shown_command(profile: Profile, folder: Path) -> tuple[str, str | None]:
    """What the agent runs for `profile`, for people: (one shell line, a note or None).

    The line is launch_command's argv with the [env] assignments first: the API keys are not on
    it (they go in the --config file, whose name is new at each launch, so a placeholder stands
    for it), secret-looking [env] values and argv words are masked, and every word is escaped by
    printable() as `profiles list` escapes its cells (a value may hold terminal escapes). The
    note says what the --config file holds, masked."""
    public, hidden = split_secrets(profile.server)
    argv = profile.argv(public)
    if hidden:
        argv += [f"--{CONFIG_FLAG}", str(folder / f"{FILE_PREFIX}<random>{FILE_SUFFIX}")]
    redactor = Redactor()
    env = redactor.env(profile.env)
    words = [f"{k}={shlex.quote(str(v))}" for k, v in env.items()]
    words += [shlex.quote(str(w)) for w in redactor.argv(argv)]
    line = printable(" ".join(words))
    note = None
    if hidden:
        held = ", ".join(f"{name}: {MASK}" for name in hidden)
        note = (
            f"the --{CONFIG_FLAG} file holds {held} (written 0600 at each launch, removed once "
            "the server has read it; never on the command line)"
        )
    return line, note


def sweep(folder: Path, older_than_s: float = STALE_AFTER_S) -> int:
    """Remove secrets files older than `older_than_s` (left by an agent that died)."""
    removed = 0
    try:
        entries = list(folder.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}"))
    except OSError:
        return 0
    now = time.time()
    for path in entries:
        try:
            if now - path.lstat().st_mtime > older_than_s:
                path.unlink()
                removed += 1
        except OSError:
            continue  # gone already, or not ours to remove
    return removed


def read_key_file(path: str) -> str:
    """The key held in `path` (its one line), or ValueError saying why not in one line."""
    try:
        key = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    problem = secret_problem(key)
    if problem:
        raise ValueError(f"the key in {path} {problem}")
    return key


def with_key_files(profile: Profile) -> Profile:
    """`profile` with the keys its [key-files] name read into [server] (in memory only: the
    launch passes them in the 0600 --config file). Blocking reads; ProfileError when a file
    cannot give its key, since a launch without it would answer anyone."""
    if not profile.key_files:
        return profile
    server = dict(profile.server)
    for flag, path in profile.key_files.items():
        try:
            server[flag] = read_key_file(path)
        except ValueError as exc:
            where, line = profile.where(f"key-files.{flag}")
            raise ProfileError(
                str(exc),
                where,
                line,
                f"key-files.{flag}",
                fix=f"write the key in {path}, or remove the key-files line (then it runs without)",
            ) from None
    return dataclasses.replace(profile, server=server)
