"""The agent's client, for every front end (CLI, TUI, web, bench, fleet): socket paths, connect
(starting an agent on demand), typed calls, typed errors, and the bridge's end that `ssh HOST
sgltui agent bridge` runs. It imports the protocol and the standard library only, so a command
that talks to the agent starts without loading the agent (aiohttp, the slots, the fronts)."""

from sgltui.client.connection import (
    READ_ONLY_OPS,
    START_TIMEOUT_S,
    STREAM_LIMIT,
    AgentClient,
    call_sync,
    client_id,
    decode_reply,
    spawn_agent,
)
from sgltui.client.errors import (
    AgentError,
    Already,
    Busy,
    ConnectionLost,
    Internal,
    Invalid,
    NotFound,
    Pinned,
    Refused,
    Unavailable,
    VersionMismatch,
    from_reply,
)
from sgltui.client.paths import paths

__all__ = [
    "READ_ONLY_OPS",
    "START_TIMEOUT_S",
    "STREAM_LIMIT",
    "AgentClient",
    "AgentError",
    "Already",
    "Busy",
    "ConnectionLost",
    "Internal",
    "Invalid",
    "NotFound",
    "Pinned",
    "Refused",
    "Unavailable",
    "VersionMismatch",
    "call_sync",
    "client_id",
    "decode_reply",
    "from_reply",
    "paths",
    "spawn_agent",
]
