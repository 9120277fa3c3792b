"""Private folders and atomic whole-file writes: the one place sgltui writes a file at once.

Everything sgltui keeps about a user's servers (state dir, sessions, bench results, the
simulated GPU) is private to that user: folders 0700, files 0600. mkdir's and open's modes are
masked by the umask, so the mode is set explicitly after creating.

A whole-file write goes to a temporary file in the same folder and is renamed over the target:
a reader, or a kill -9 at any moment, sees the old file or the new one, never half of one. A
write that fails (a full disk) removes its temporary file and raises OSError; the old file is
untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

# The umask this process had before keep_private(); -1 (subprocess's "leave it") until then.
_inherited_umask = -1


def keep_private() -> None:
    """From now on this process, and the children it starts, create files 0600 and folders 0700.

    The agent calls it first thing: its log, pid and state files, the session, the log relay's
    server logs, bench results and the simulator's GPU file are then private however they are
    created (logging's rotation, a child's plain open()). A real SGLang server is started with
    inherited_umask() instead: the caches it fills under the user's home are the user's files."""
    global _inherited_umask
    old = os.umask(0o077)
    if _inherited_umask == -1:
        _inherited_umask = old


def inherited_umask() -> int:
    """The umask from before keep_private() (for subprocess.Popen(umask=...)), or -1."""
    return _inherited_umask


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Make `path` (and missing parents) a folder only its owner can read; return it."""
    folder = Path(path)
    folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if folder.stat().st_mode & 0o777 != PRIVATE_DIR:
        os.chmod(folder, PRIVATE_DIR)
    return folder


def make_private(path: str | os.PathLike[str]) -> None:
    """Set an existing file to 0600 (a file another process created with its umask)."""
    with contextlib.suppress(FileNotFoundError):
        if os.stat(path).st_mode & 0o777 != PRIVATE_FILE:
            os.chmod(path, PRIVATE_FILE)


def write_atomic(
    path: str | os.PathLike[str], data: str | bytes, *, mode: int = PRIVATE_FILE, fsync: bool = True
) -> None:
    """Replace `path` with `data` (str is written as UTF-8), the file ending with `mode`.

    fsync=False for files that are rewritten every second and worthless after a crash (the
    simulated GPU): the rename alone keeps readers from seeing half a file."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json_atomic(
    path: str | os.PathLike[str],
    obj: Any,
    *,
    indent: int | None = 1,
    mode: int = PRIVATE_FILE,
    fsync: bool = True,
) -> None:
    """write_atomic of `obj` as JSON (default=str: a Path or an exception never fails a write)."""
    text = json.dumps(obj, indent=indent, default=str)
    write_atomic(path, text + "\n", mode=mode, fsync=fsync)
