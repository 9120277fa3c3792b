"""OpenAI Batch input files: checked whole before anything is sent, then streamed line by line.

A line is `{"custom_id": str, "method": "POST", "url": "/v1/chat/completions" | "/v1/completions",
"body": {...}}`. Both passes read the file one line at a time, so memory does not grow with the
file's size (only the set of custom_ids does, which the duplicate check needs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from sgltui.core.safe_text import printable

URLS = ("/v1/chat/completions", "/v1/completions")


class InputError(Exception):
    """The input file is not a valid batch file: one line naming the file and line."""


@dataclass
class Checked:
    total: int  # requests in the file
    size: int  # bytes and modification time: a resumed job re-checks only a changed file
    mtime_ns: int
    urls: dict[str, int]

    def stamp(self) -> dict:
        return {
            "total": self.total,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "urls": self.urls,
        }


def unchanged(path: Path, stamp: dict | None) -> Checked | None:
    """The earlier check of `path` if the file has not changed since (same size and mtime)."""
    if not isinstance(stamp, dict):
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_size != stamp.get("size") or st.st_mtime_ns != stamp.get("mtime_ns"):
        return None
    return Checked(
        total=int(stamp["total"]), size=st.st_size, mtime_ns=st.st_mtime_ns,
        urls=dict(stamp.get("urls") or {}),
    )  # fmt: skip


@dataclass
class Item:
    custom_id: str
    url: str
    body: bytes  # the request body as sent: the line's body with stream off


def _fail(path: Path, lineno: int, what: str) -> InputError:
    return InputError(f"{path}:{lineno}: {what}; nothing was sent (fix the line and run again)")


def _json_type(value: object) -> str:
    """The JSON name of `value`'s type, as the file's author wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _shown(value: object) -> str:
    """A short, printable echo of a wrong value (the line may be megabytes)."""
    return printable(orjson.dumps(value).decode(), 40)


def _parse(path: Path, lineno: int, raw: bytes) -> tuple[str, str, dict]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _fail(path, lineno, f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _fail(path, lineno, "a JSON object with custom_id, method, url and body expected")
    # Say what is wrong with what is there: a number is not "missing" (issue 29 F10).
    if "custom_id" not in obj:
        raise _fail(path, lineno, "custom_id missing (a non-empty string is required)")
    cid = obj["custom_id"]
    if not isinstance(cid, str):
        quote = f'; quote it: "custom_id": "{cid}"' if _json_type(cid) == "a number" else ""
        raise _fail(
            path,
            lineno,
            f"custom_id must be a string, not {_json_type(cid)} ({_shown(cid)}){quote}",
        )
    if not cid:
        raise _fail(path, lineno, "custom_id is empty (a non-empty string is required)")
    method = obj.get("method", "POST")
    if method != "POST":
        raise _fail(path, lineno, f"method must be POST, not {method!r}")
    url = obj.get("url")
    if url not in URLS:
        raise _fail(path, lineno, f"url {url!r} is not supported; use one of {', '.join(URLS)}")
    if "body" not in obj:
        raise _fail(path, lineno, "body missing (the request's JSON object)")
    body = obj["body"]
    if not isinstance(body, dict):
        raise _fail(
            path,
            lineno,
            f"body must be an object (the request's JSON), not {_json_type(body)} ({_shown(body)})",
        )
    return cid, url, body


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}; check the path") from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():  # blank lines (a trailing newline, say) are not requests
                yield lineno, raw


def check(path: Path) -> Checked:
    """Validate every line; raise InputError at the first bad one."""
    seen: dict[str, int] = {}
    urls: dict[str, int] = {}
    total = 0
    st = path.stat() if path.exists() else None
    for lineno, raw in _lines(path):
        cid, url, _ = _parse(path, lineno, raw)
        first = seen.setdefault(cid, lineno)
        if first != lineno:
            raise _fail(path, lineno, f"duplicate custom_id {cid!r} (first on line {first})")
        urls[url] = urls.get(url, 0) + 1
        total += 1
    if total == 0:
        raise InputError(f"{path}: no requests in the file; nothing was sent")
    assert st is not None
    return Checked(total=total, size=st.st_size, mtime_ns=st.st_mtime_ns, urls=urls)


def items(path: Path, skip: set[str] | frozenset[str] = frozenset()) -> Iterator[Item]:
    """The requests in file order, without those whose custom_id is in `skip`."""
    for lineno, raw in _lines(path):
        cid, url, body = _parse(path, lineno, raw)
        if cid in skip:
            continue
        # A batch output line holds a whole response: never ask for a stream.
        if body.get("stream"):
            body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        yield Item(cid, url, orjson.dumps(body))


def custom_ids(path: Path) -> Iterator[str]:
    for lineno, raw in _lines(path):
        yield _parse(path, lineno, raw)[0]
