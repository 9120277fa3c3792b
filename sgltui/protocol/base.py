"""Versions, the enums every part shares, and the protocol's one exception."""

from __future__ import annotations

import enum
import sys
from typing import Final

# Bumped whenever a message changes shape; a client and an agent of different protocol (or
# package) versions refuse to talk (see `version_mismatch`).
PROTOCOL_VERSION: Final = 4  # 3: a reply's error is an Error (code, message, fix); 4: "logs" pushes
# Schema version of recorded events (the "v" of each events.jsonl line).
EVENT_SCHEMA: Final = 1

MAX_CLIENT_NAME: Final = 120

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)


class SlotState(StrEnum):
    STOPPED = "stopped"
    LAUNCHING = "launching"
    READY = "ready"
    DRAINING = "draining"
    STOPPING = "stopping"
    FAILED = "failed"
    CRASHED = "crashed"


class CauseKind(StrEnum):
    """Why a server failed (sgltui/core/causes.py); `Cause.kind` holds one of these."""

    OOM = "oom"
    PORT = "port"
    FLAG = "flag"
    MODEL = "model"
    CUDA = "cuda"
    EXIT = "exit"
    HANG = "hang"
    SIGNAL = "signal"
    PREFLIGHT = "preflight"
    IMPORT = "import"  # SGLang (or a module it needs) missing from the server's interpreter


class Drain(StrEnum):
    WAIT = "wait"
    FORCE = "force"


class BenchState(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"


class JobState(StrEnum):
    """A batch job's state (agent/jobs/jobs_host.py): the first four are active."""

    CHECKING = "checking"
    WAITING = "waiting"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


class ProtocolError(Exception):
    """A message that does not follow the protocol: one line for the peer."""
