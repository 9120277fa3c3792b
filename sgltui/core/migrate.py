"""Rewrite a profile's deprecated and renamed SGLang flags into their successors, same meaning.

What moves where comes from the target release's own catalog: a deprecated flag carries the
replacement SGLang names for it (`--smg-grpc-mode`, `--image-processor-backend=pil`,
`--cuda-graph-backend-{decode,prefill}=disabled`), read here as flag assignments. Two cases
need more than a rename, and follow SGLang's own resolution code:

- `enable-dp-attention` with `dp-size N` becomes `attn-dp-size N` and dp-size goes back to 1
  (sglang/srt/arg_groups/parallel_hook.py, _handle_deprecated_dp_attention);
- `disable-cuda-graph` turns both phase backends off, but an explicit
  `cuda-graph-backend-<phase>` already in the profile wins (cuda_graph_hook.py: the per-phase
  selectors are applied after the legacy flag), so only the missing phases are written.

Aliases and old names the target lacks (`enable-hicache` on 0.5.22, sgltui's RENAMED table) are
renamed to the target's canonical spelling. A flag a release removed without a successor is
reported, never dropped: dropping it would change what the profile means.

The file is edited line by line, so comments, blank lines and the order of every other key
stay as written; new values are rendered with tomli-w. Only when [server] is written in a form
without one line per key (an inline table) is the whole file re-rendered, and the result says so.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

import tomli_w

from sgltui.core.flags import RENAMED, Catalog, FlagSpec, bundled_versions, load_bundled_catalog
from sgltui.core.profiles import RawProfile, key_lines

_ASSIGN = re.compile(r"^--([A-Za-z0-9{},_-]+)(?:=(.*))?$")
_BRACES = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Change:
    """One flag of the file replaced. `new` holds the keys written in its place (empty: removed),
    `drop` other keys of the file that the change resets (dp-size for enable-dp-attention)."""

    key: str
    new: dict[str, Any]
    why: str
    drop: tuple[str, ...] = ()

    def fix_text(self) -> str:
        """The one-line fix, as validate prints it."""
        if not self.new:
            return "remove this line"
        parts = [f"{k} = {_render_value(v)}" for k, v in self.new.items()]
        text = "write " + " and ".join(parts)
        if self.drop:
            text += f" and remove {' and '.join(self.drop)}"
        return text + " instead"


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    manual: list[tuple[str, str]] = field(default_factory=list)  # (key, what to do by hand)


def _render_value(value: Any) -> str:
    return tomli_w.dumps({"v": value}).strip()[len("v = ") :]


def _expand_braces(text: str) -> list[str]:
    """ "a-{x,y}=v" -> ["a-x=v", "a-y=v"] (the shell-style spelling SGLang's help uses)."""
    m = _BRACES.search(text)
    if not m:
        return [text]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out.extend(_expand_braces(text[: m.start()] + alt + text[m.end() :]))
    return out


def _convert(spec: FlagSpec, text: str) -> Any:
    if spec.type in ("int", "human_int"):
        try:
            return int(text)
        except ValueError:
            return text
    if spec.type == "float":
        try:
            return float(text)
        except ValueError:
            return text
    return text


def successors(replacement: str, target: Catalog) -> dict[str, Any] | None:
    """SGLang's replacement text -> {flag: value} in `target`, or None when it is not plain flag
    assignments the target knows (then the change is left to the user)."""
    out: dict[str, Any] = {}
    for word in replacement.split():
        for item in _expand_braces(word):
            m = _ASSIGN.match(item)
            if not m:
                return None
            spec = target.lookup(m.group(1))
            if spec is None:
                return None
            value = m.group(2)
            if value is None:
                if spec.takes_value:
                    return None
                out[spec.name] = True
            else:
                if not spec.takes_value:
                    return None
                out[spec.name] = _convert(spec, value)
    return out or None


def canonical_elsewhere(key: str, target: Catalog) -> str | None:
    """A spelling another bundled release knows (an alias, or a flag's old name) -> the target's
    name for the same flag."""
    renamed = RENAMED.get(key)
    if renamed and renamed[0] and (spec := target.lookup(renamed[0])):
        return spec.name
    for version in bundled_versions():
        other = load_bundled_catalog(version).lookup(key)
        if other is None:
            continue
        for option in other.options:
            spec = target.lookup(option)
            if spec is not None and spec.dest == other.dest:
                return spec.name
    return None


def plan_changes(server: dict[str, Any], target: Catalog, resolved: dict[str, Any]) -> Plan:
    """What to rewrite in `server` (one file's [server] table) for `target`. `resolved` is the
    whole profile's [server] (inherited values too), for the flags a change depends on."""
    plan = Plan()
    for key, value in server.items():
        spec = target.lookup(key)
        if spec is None:
            name = canonical_elsewhere(key, target)
            if name:
                plan.changes.append(Change(key, {name: value}, f"{target.label} spells it {name}"))
            elif any(load_bundled_catalog(v).lookup(key) for v in bundled_versions()):
                plan.manual.append(
                    (key, f"removed in {target.label} with no successor: decide, then remove it")
                )
            continue
        if not spec.deprecated or value is False:
            continue
        why = f"deprecated in {target.label}"
        if spec.name == "enable-dp-attention":
            dp_key = next(
                (k for k in resolved if target.lookup(k) is target.lookup("dp-size")), None
            )
            width = int(resolved.get(dp_key, 1)) if dp_key else 1
            attn_key = next(
                (k for k in resolved if target.lookup(k) is target.lookup("attn-dp-size")), None
            )
            if attn_key and int(resolved.get(attn_key) or 1) > 1:
                plan.changes.append(Change(key, {}, f"{why}; attn-dp-size already sets the layout"))
            elif width > 1:
                drop = (dp_key,) if dp_key and dp_key in server else ()
                new: dict[str, Any] = {"attn-dp-size": width}
                if dp_key and dp_key not in server:
                    new["dp-size"] = 1  # inherited from a parent: override it here
                plan.changes.append(Change(key, new, f"{why}: use --attn-dp-size <dp-size>", drop))
            else:
                plan.changes.append(Change(key, {}, f"{why}; without dp-size it does nothing"))
            continue
        new_flags = successors(spec.replacement, target) if spec.replacement else None
        if new_flags is None:
            hint = f"use {spec.replacement}" if spec.replacement else "remove it"
            plan.manual.append((key, f"{why}: {hint} (no automatic rewrite)"))
            continue
        if spec.name == "disable-cuda-graph":
            # An explicit per-phase backend already wins over the legacy flag: keep it.
            new_flags = {
                k: v
                for k, v in new_flags.items()
                if not any(target.lookup(r) is target.lookup(k) for r in resolved)
            }
        plan.changes.append(Change(key, new_flags, f"{why}: use {spec.replacement}"))
    return plan


# --- editing the file ----------------------------------------------------------------------------


def _value_extent(lines: list[str], start: int) -> int:
    """Index after the last line of the assignment that begins at lines[start]."""
    for end in range(start + 1, len(lines) + 1):
        try:
            tomllib.loads("\n".join(lines[start:end]))
            return end
        except tomllib.TOMLDecodeError:
            continue
    return start + 1


def _trailing_comment(line: str) -> str:
    """The `# ...` after a one-line assignment's value (found where the rest still parses)."""
    for m in re.finditer("#", line):
        try:
            tomllib.loads(line[: m.start()])
        except tomllib.TOMLDecodeError:
            continue
        return line[m.start() :].rstrip()
    return ""


@dataclass
class Migration:
    text: str  # the migrated file
    plan: Plan
    rerendered: bool = False  # True when the file could not be edited line by line


def apply(raw: RawProfile, original: str, plan: Plan) -> Migration:
    """The file text with `plan` applied."""
    if not plan.changes:
        return Migration(original, plan)
    lines = original.splitlines()
    where = key_lines(original)
    server = raw.data.get("server", {})
    targets = [c.key for c in plan.changes] + [d for c in plan.changes for d in c.drop]
    if any(("server", k) not in where for k in targets):
        return _rerender(raw, plan)
    replacements: dict[int, tuple[int, list[str]]] = {}
    for change in plan.changes:
        start = where[("server", change.key)] - 1
        end = _value_extent(lines, start)
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        comment = _trailing_comment(lines[start]) if end == start + 1 else ""
        new_lines = [
            indent + tomli_w.dumps({k: v}).strip()
            for k, v in change.new.items()
            if k == change.key or k not in server
        ]
        if comment and new_lines:
            new_lines[0] += "  " + comment
        elif comment:
            new_lines = [indent + comment]  # the note outlives the line it described
        replacements[start] = (end, new_lines)
        for dropped in change.drop:
            d = where[("server", dropped)] - 1
            replacements.setdefault(d, (_value_extent(lines, d), []))
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i in replacements:
            end, new_lines = replacements[i]
            out.extend(new_lines)
            i = end
        else:
            out.append(lines[i])
            i += 1
    return Migration("\n".join(out) + ("\n" if original.endswith("\n") else ""), plan)


def _rerender(raw: RawProfile, plan: Plan) -> Migration:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.data.items()}
    server = data.setdefault("server", {})
    for change in plan.changes:
        server.pop(change.key, None)
        for dropped in change.drop:
            server.pop(dropped, None)
        for k, v in change.new.items():
            server.setdefault(k, v)
    return Migration(tomli_w.dumps(data), plan, rerendered=True)


def change_for(key: str, value: Any, target: Catalog, resolved: dict[str, Any]) -> Change | None:
    """The rewrite of one flag (for validate's one-line fix), or None when there is none."""
    server = dict(resolved)
    server[key] = value
    plan = plan_changes(server, target, server)
    return next((c for c in plan.changes if c.key == key), None)
