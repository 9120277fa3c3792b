"""The agent's side of launch_secrets.py: build the argv and remove the secrets file once read.

SGLang (and the simulator) read `--config FILE` once, in their first second of argument parsing.
The file's access time moves when that read happens (Linux updates atime on the first read after
a write, even under relatime), so the file is removed then. Where atime does not move (noatime
mounts) it is removed when the launch leaves the launching state (ready, failed or stopped): by
then the server has read it or will never need it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sgltui.core import launch_secrets

if TYPE_CHECKING:
    from sgltui.core import profiles as core_profiles

log = logging.getLogger(__name__)

POLL_S = 0.05
SECRETS_DIR = "secrets"
_watchers: set[asyncio.Task] = set()  # referenced, so a watcher is never garbage-collected


def secrets_dir(state_dir: Path) -> Path:
    return Path(state_dir) / SECRETS_DIR


def launch_argv(
    profile: core_profiles.Profile, state_dir: Path, launched: Callable[[], bool]
) -> list[str]:
    """The argv that starts `profile`, its secrets moved into a --config file; the file is removed
    once the server has read it or once `launched()` is true (the launch is over). Must be called
    in the agent's event loop. Raises ProfileError for a key that cannot be passed."""
    folder = secrets_dir(state_dir)
    launch_secrets.sweep(folder)
    argv, path = launch_secrets.launch_command(profile, folder)
    if path is not None:
        task = asyncio.get_running_loop().create_task(
            remove_when_read(path, launched), name=f"secrets-{path.name}"
        )
        _watchers.add(task)
        task.add_done_callback(_watchers.discard)
    return argv


async def remove_when_read(path: Path, launched: Callable[[], bool], poll_s: float = POLL_S) -> str:
    """Remove `path` once it was read (atime moved) or `launched()`; -> why it was removed."""
    try:
        first = os.stat(path).st_atime_ns
    except FileNotFoundError:
        return "gone"
    why = "gone"
    try:
        while True:
            await asyncio.sleep(poll_s)
            try:
                read = os.stat(path).st_atime_ns != first
            except FileNotFoundError:
                return "gone"
            if read:
                why = "read"
                break
            if launched():
                why = "launch over"
                break
    finally:
        # Also on cancellation (agent shutdown): the file never outlives its watcher.
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    log.debug("removed %s (%s)", path.name, why)
    return why
