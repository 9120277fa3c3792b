"""A small YAML emitter for manifests: block mappings and sequences, strings double-quoted as
JSON writes them (a JSON string is a valid YAML double-quoted scalar), multi-line text as a
literal block. Enough for what the renderer builds (dicts, lists, str, int, float, bool, None);
no PyYAML dependency. Documents carry their comments (what a memory limit covers, and why)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _key(k: str) -> str:
    return k if _PLAIN_KEY.match(k) and k.lower() not in _RESERVED else json.dumps(k)


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    return json.dumps(str(v))


def _literal_ok(s: str) -> bool:
    """Text a literal block keeps byte for byte: ends with one newline, no tabs, no control
    characters, no trailing spaces, and a first line that does not start with a space."""
    if not s.endswith("\n") or s.endswith("\n\n") or s.startswith((" ", "\n")):
        return False
    return not any(c == "\t" or (ord(c) < 32 and c != "\n") for c in s) and all(
        line == line.rstrip() for line in s.splitlines()
    )


def _lines(v: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(v, dict):
        for k, item in v.items():
            head = f"{pad}{_key(str(k))}:"
            if isinstance(item, (dict, list)) and item:
                out.append(head)
                # a sequence under a key sits at the key's own indent (the common k8s style)
                out += _lines(item, indent if isinstance(item, list) else indent + 2)
            elif isinstance(item, str) and "\n" in item and _literal_ok(item):
                out.append(head + " |")
                out += [f"{pad}  {line}" if line else "" for line in item.splitlines()]
            else:
                out.append(f"{head} {_empty(item) if _is_empty(item) else _scalar(item)}")
        return out
    if isinstance(v, list):
        for item in v:
            if isinstance(item, (dict, list)) and item:
                inner = _lines(item, indent + 2)
                out.append(f"{pad}- {inner[0].lstrip()}")
                out += inner[1:]
            else:
                out.append(f"{pad}- {_empty(item) if _is_empty(item) else _scalar(item)}")
        return out
    return [pad + _scalar(v)]


def _is_empty(v: Any) -> bool:
    return isinstance(v, (dict, list)) and not v


def _empty(v: Any) -> str:
    return "{}" if isinstance(v, dict) else "[]"


def dump(obj: Any, comments: Iterable[str] = ()) -> str:
    """One document: its comment lines (`# ...`), then the object."""
    head = [f"# {c}".rstrip() for c in comments]
    return "\n".join(head + _lines(obj, 0)) + "\n"


def dump_all(docs: Iterable[tuple[list[str], Any]]) -> str:
    """A multi-document stream (`---` between documents)."""
    return "---\n".join(dump(obj, comments) for comments, obj in docs)
