"""The envelopes (request, reply, push) and their encoding and decoding."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias, get_args

import msgspec
from msgspec import Struct

from sgltui import __version__
from sgltui.protocol.args import Args
from sgltui.protocol.base import MAX_CLIENT_NAME, PROTOCOL_VERSION, ProtocolError, StrEnum
from sgltui.protocol.ops import OPS

# ---- envelopes ---------------------------------------------------------------------------------

RequestId: TypeAlias = int | str | None


class Request(Struct, kw_only=True):
    op: str
    id: RequestId = None
    args: dict[str, Any] | None = None
    client: str | None = None


# What kind of refusal or failure an error is; a client acts on this, never on the message.
ErrorCode: TypeAlias = Literal[
    "busy",  # another command holds the slot or pool now: wait and ask again
    "pinned",  # a batch job pinned to the slot: confirm (`--yes`) to go ahead
    "already",  # it is so already (the slot runs that profile, it is stopped)
    "refused",  # a check refused it (preflight, the profile, the slot's state): the fix says what
    "not_found",  # no such profile, slot, pool, job, run or log
    "invalid",  # the request itself is wrong (unknown op, bad arguments, not JSON)
    "unavailable",  # the agent or a host cannot be reached, or what it needs is not up
    "internal",  # a bug in the agent: its log has the traceback
    "version",  # the client and the agent are of different versions
]
ERROR_CODES: Final[tuple[str, ...]] = get_args(ErrorCode)


class Error(Struct, kw_only=True, omit_defaults=True):
    """A refused or failed op: `code` for the program, `message` and `fix` for the person.

    `message` says what is wrong; `fix` what to do, in the CLI's words (a command to type);
    `fix_tui` the same in the TUI's (the key to press), where they differ: absent, `fix` reads
    right in both. Added without a protocol bump: omitted when unset, and a client that
    predates it ignores it (Structs skip unknown fields) and shows `fix`."""

    code: ErrorCode
    message: str
    fix: str | None = None
    fix_tui: str | None = None

    def line(self) -> str:
        """The one line a person reads: what is wrong; what to do."""
        return f"{self.message}; {self.fix}" if self.fix else self.message

    def tui_line(self) -> str:
        """The line the TUI shows: the remedy in its words (a key), else the CLI's."""
        fix = self.fix_tui or self.fix
        return f"{self.message}; {fix}" if fix else self.message


class Reply(Struct, kw_only=True, omit_defaults=True):
    id: RequestId
    ok: bool
    result: Any = None
    # An Error once a hello agreed; before that the bare line (a client of another version
    # reads it, and a refused hello is how it learns of the mismatch).
    error: Error | str | None = None


class Push(Struct, kw_only=True):
    push: Literal["event", "sample", "log", "logs"]
    data: Any


class LogLines(Struct, kw_only=True):
    slot: str
    launch_id: str | None = None
    lines: list[str] = []


_encoder = msgspec.json.Encoder(enc_hook=str)  # paths and the like go out as their text


def encode(msg: Reply | Push | Request | Mapping[str, Any]) -> bytes:
    """One message as one line (newline included)."""
    return _encoder.encode(msg) + b"\n"


def decode_request(raw: bytes) -> Request:
    """A request line -> Request (the op's arguments still a dict: see `parse_args`)."""
    try:
        req = msgspec.json.decode(raw, type=Request)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"bad request: {exc}") from None
    except RecursionError:  # the decoder's own depth guard: a 100k-deep document
        raise ProtocolError("bad request: JSON nested too deeply") from None
    except msgspec.DecodeError:
        raise ProtocolError(
            'bad request: one JSON object per line expected, like {"id": 1, "op": "status"}'
        ) from None
    if req.client is not None:
        req.client = req.client[:MAX_CLIENT_NAME]
    return req


def parse_args(op: str, args: Mapping[str, Any] | None) -> Args:
    """The op's arguments checked against its Struct; a ProtocolError names the first problem."""
    spec = OPS.get(op)
    if spec is None:
        raise ProtocolError(f"unknown op {op!r}; this agent knows: {', '.join(sorted(OPS))}")
    try:
        return msgspec.convert(args or {}, spec.args)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"bad arguments for {op}: {_explain(spec.args, exc)}") from None


def _explain(args_type: type[Args], exc: msgspec.ValidationError) -> str:
    """msgspec's "Expected `bool`, got `str` - at `$.on`" as "on: expected `bool`, got `str`",
    with the choices when the argument is one of a few words."""
    text = str(exc)
    msg, sep, where = text.rpartition(" - at `$.")
    if not sep:
        return text
    name = where.rstrip("`").split(".")[0].split("[")[0]
    hint = ""
    ftype = {f.name: f.type for f in msgspec.structs.fields(args_type)}.get(name)
    if isinstance(ftype, type) and issubclass(ftype, enum.Enum):
        hint = " (one of: " + ", ".join(str(m.value) for m in ftype) + ")"
    return f"{where.rstrip('`')}: {msg[:1].lower()}{msg[1:]}{hint}"


def args_dict(args: Args) -> dict[str, Any]:
    """Checked arguments as the dict the agent's handlers take (defaults filled in)."""
    out = {f: getattr(args, f) for f in args.__struct_fields__}
    return {
        k: (str(v) if isinstance(v, StrEnum) else v)
        for k, v in out.items()
        if v is not msgspec.UNSET
    }


def decode_message(raw: bytes) -> Reply | Push:
    """A line from the agent (client side)."""
    try:
        obj = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        raise ProtocolError("the agent sent a line that is not JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError("the agent sent a line that is not a JSON object")
    try:
        if "push" in obj:
            return msgspec.convert(obj, Push)
        return msgspec.convert(obj, Reply)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"the agent sent a malformed message: {exc}") from None


def version_mismatch(
    agent_version: str,
    agent_protocol: int,
    client_version: str = __version__,
    client_protocol: int = PROTOCOL_VERSION,
) -> str | None:
    """The one line a client and an agent of different versions get, or None when they match."""
    if agent_version == client_version and agent_protocol == client_protocol:
        return None
    return (
        f"the agent runs sgltui {agent_version or '(unknown)'} (protocol {agent_protocol}), "
        f"this is sgltui {client_version or '(unknown)'} (protocol {client_protocol}): "
        f"restart the agent with `sgltui agent stop` (its servers keep running), "
        f"then `sgltui agent start` (or `sgltui`) starts this version's, which re-adopts them"
    )
