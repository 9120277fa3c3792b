"""Profiles: TOML files whose [server] table is SGLang's own flags, one to one.

Loading resolves `extends` (child values win; cycles are an error), remembers the file and line
where every value was written (tomllib reports none, so a light line scan supplies them; errors
can then point at the line the user must edit, even when it is in a parent profile), and renders
the command line: true -> bare flag, false/absent -> omitted, lists -> repeated values.
Flag checking against SGLang's catalog lives in validate.py; command-line import in
profile_import.py.
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from sgltui.core import locations
from sgltui.core.safe_text import printable

LAUNCHERS = ("sglang", "sim")
DEFAULT_PORT = 30000
DEFAULT_HOST = "127.0.0.1"
TOP_LEVEL_KEYS = (
    "name",
    "description",
    "key",
    "extends",
    "launcher",
    "python",
    "entrypoint",
    "aliases",
    "idle_s",
    "server",
    "env",
    "key-files",
)
# [key-files]: where a secret flag's value is read from at each launch (a file of the user's,
# one line), so that a profile keeps a reference to a key, never the key (issue 51: a server
# adopted with its keys is relaunched with them). launch_secrets.with_key_files reads them.
KEY_FILE_FLAGS = ("api-key", "admin-api-key", "ssl-keyfile-password")
_STRING_KEYS = ("name", "description", "key", "extends", "launcher", "python", "entrypoint")
# How launcher "sglang" starts the server: `sglang serve` (the program SGLang installs next to
# its interpreter, the recommended entry point) or `python -m sglang.launch_server`. "auto":
# serve where the interpreter's SGLang has the `sglang` program, else launch_server.
ENTRYPOINTS = ("auto", "serve", "launch_server")
# Program after the interpreter, per launcher.
LAUNCH_MODULES = {"sglang": "sglang.launch_server", "sim": "sgltui.sim"}

Where = tuple[Path | None, int | None]

# Names are shown in tables, used as file stems and typed on command lines: keep them short and
# plain. `extends` goes at most this deep (the shipped profiles use 2 levels); it is resolved with
# a loop, so a longer chain is a clean error, never a RecursionError.
MAX_NAME_LENGTH = 64
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
MAX_EXTENDS_DEPTH = 32
MAX_KEY_LENGTH = 16
MAX_PATH_LENGTH = 4096
# Arrays and tables inside a value go at most this deep. SGLang's JSON flags nest a level or two;
# tomllib parses nesting by recursion (500 nested arrays were a RecursionError and a traceback),
# and code downstream (JSON of the argv, redaction) recurses too.
MAX_NESTING = 16
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# How much of user-written text an error line echoes (a 5 MB key must not become a 5 MB error).
_SHOWN_PATH, _SHOWN_KEY, _SHOWN_TEXT = 300, 80, 600


class ProfileError(Exception):
    """One line: "path:line: key: problem; fix" (parts that are unknown are left out)."""

    def __init__(
        self,
        problem: str,
        path: Path | str | None = None,
        line: int | None = None,
        key: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.path = Path(path) if path is not None else None
        self.line = line
        self.key = key
        self.fix = fix
        super().__init__(format_location(self.path, line, key, problem, fix))


def format_location(
    path: Path | None, line: int | None, key: str | None, problem: str, fix: str | None
) -> str:
    # Every part may hold user-written text: control characters are shown escaped, and each
    # part is cut, so the line stays one short line whatever the file holds.
    where = ""
    if path is not None:
        shown = printable(display_path(path), _SHOWN_PATH)
        where = f"{shown}:{line}: " if line else f"{shown}: "
    problem = printable(problem, _SHOWN_TEXT)
    text = f"{where}{printable(key, _SHOWN_KEY)}: {problem}" if key else f"{where}{problem}"
    return f"{text}; {printable(fix, _SHOWN_TEXT)}" if fix else text


def display_path(path: Path) -> str:
    """Paths under the current directory are shown relative, others as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


# --- reading TOML with line numbers --------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*="""
)
_PART = re.compile(r"""\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*""")


def _split_key(text: str) -> list[str]:
    parts = []
    for piece in re.findall(r"""(?:"[^"]*"|'[^']*'|[^.]+)""", text):
        m = _PART.fullmatch(piece)
        if m:
            parts.append(next(g for g in m.groups() if g is not None))
    return parts


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """(table..., key) -> 1-based line of its assignment, for the plain TOML profiles use.

    Lines inside multi-line strings are skipped; dotted keys and [table] headers are followed.
    Inline tables and arrays of tables only get the line of their first key, which is enough
    to point a user at the right place.
    """
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_multiline: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if raw.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        header = _HEADER.match(raw)
        if header and not raw.lstrip().startswith("[["):
            table = tuple(_split_key(header.group(1)))
            lines.setdefault(table, number)
            continue
        m = _KEY.match(raw)
        if m:
            full = table + tuple(_split_key(m.group(1)))
            lines.setdefault(full, number)
            rest = raw[m.end() :]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_multiline = quote
    return lines


@dataclass
class RawProfile:
    """One file as written, before `extends` is resolved."""

    path: Path
    data: dict[str, Any]
    lines: dict[tuple[str, ...], int]

    @property
    def name(self) -> str:
        return self.data.get("name") or self.path.stem

    def line(self, *key: str) -> int | None:
        return self.lines.get(tuple(key))

    def error(
        self, problem: str, *key: str, fix: str | None = None, label: str | None = None
    ) -> ProfileError:
        return ProfileError(
            problem, self.path, self.line(*key), label or ".".join(key) or None, fix
        )


def read_raw(path: Path) -> RawProfile:
    """Parse one profile file and check its shape. Raises ProfileError with the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(
            "no such profile file", path, fix="check the path or run `sgltui profiles list`"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", path) from None
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise ProfileError(
            f"values nested too deeply to read (more than {MAX_NESTING} levels of arrays or tables)",
            path,
            fix="flatten the value",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line = (
            int(m.group(1)) if m else getattr(exc, "lineno", None)
        )  # newer tomllib also has .lineno
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message) if m else message
        col = f" (column {m.group(2)})" if m else ""
        raise ProfileError(
            f"invalid TOML: {message}{col}", path, line, fix="fix the TOML syntax on that line"
        ) from None
    raw = RawProfile(path, data, key_lines(text))
    _check_shape(raw)
    return raw


def _nesting(value: Any) -> int:
    """Levels of arrays and tables in `value` (a loop: a deep value cannot overflow the stack).
    Stops counting past MAX_NESTING, which is refused anyway."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, level)
        if level <= MAX_NESTING:
            stack.extend((child, level + 1) for child in children)
    return deepest


def _check_shape(raw: RawProfile) -> None:
    for key, value in raw.data.items():
        if key not in TOP_LEVEL_KEYS:
            near = difflib.get_close_matches(key, TOP_LEVEL_KEYS, n=1)
            if near:
                fix = f"did you mean `{near[0]}`?"
            else:
                fix = f"SGLang flags go under [server] (write `{key} = ...` there); top-level keys are {', '.join(TOP_LEVEL_KEYS)}"
            raise raw.error("unknown top-level key", key, fix=fix)
        if key in _STRING_KEYS and not isinstance(value, str):
            raise raw.error(
                f"must be a string, not {_toml_type(value)}",
                key,
                fix=f'quote it: {key} = "{value}"',
            )
    for table in ("server", "env"):
        if table in raw.data and not isinstance(raw.data[table], dict):
            raise raw.error(
                f"must be a table, not {_toml_type(raw.data[table])}",
                table,
                fix=f"write it as a [{table}] section",
            )
        for key, value in raw.data.get(table, {}).items():
            if _nesting(value) > MAX_NESTING:
                raise raw.error(
                    f"nested more than {MAX_NESTING} levels deep",
                    table,
                    key,
                    label=f"{table}.{key}",
                    fix="flatten the value",
                )
    launcher = raw.data.get("launcher", "sglang")
    if launcher not in LAUNCHERS:
        raise raw.error(
            f"unknown launcher {launcher!r}",
            "launcher",
            fix='use "sglang" (real SGLang) or "sim" (the built-in simulator)',
        )
    if raw.data.get("entrypoint", "auto") not in ENTRYPOINTS:
        raise raw.error(
            f"unknown entrypoint {raw.data['entrypoint']!r}",
            "entrypoint",
            fix='use "serve" (sglang serve), "launch_server" (python -m sglang.launch_server) '
            'or "auto"',
        )
    _check_key_files(raw)
    for env_key, value in raw.data.get("env", {}).items():
        if not isinstance(value, str):
            raise raw.error(
                f"environment values must be strings, not {_toml_type(value)}",
                "env",
                env_key,
                fix=f'quote it: {env_key} = "{_toml_scalar(value)}"',
            )
    _check_endpoint_keys(raw)
    if "key" in raw.data and not raw.data["key"]:
        raise raw.error(
            "empty hot-swap key", "key", fix='use one key such as "1", or remove the line'
        )
    _check_text(raw)


def _check_key_files(raw: RawProfile) -> None:
    files = raw.data.get("key-files", {})
    if not isinstance(files, dict):
        raise raw.error(
            f"must be a table, not {_toml_type(files)}",
            "key-files",
            fix='write it as a [key-files] section: api-key = "/path/to/key"',
        )
    for flag, path in files.items():
        if flag not in KEY_FILE_FLAGS:
            raise raw.error(
                "is not a key sgltui reads from a file",
                "key-files",
                flag,
                label=f"key-files.{flag}",
                fix=f"one of {', '.join(KEY_FILE_FLAGS)}",
            )
        if not isinstance(path, str) or not path or "\0" in path or len(path) > MAX_PATH_LENGTH:
            raise raw.error(
                "must be the path of a file holding the key",
                "key-files",
                flag,
                label=f"key-files.{flag}",
                fix=f'write {flag} = "/path/to/file"',
            )
        if flag in raw.data.get("server", {}):
            raise raw.error(
                "is given twice: in [server] and in [key-files]",
                "key-files",
                flag,
                label=f"key-files.{flag}",
                fix="keep the [key-files] line (the key stays out of the profile)",
            )


def _check_endpoint_keys(raw: RawProfile) -> None:
    """`aliases` (more names the agent endpoint routes by) and `idle_s` (stopped after this
    long without a request): docs/profiles.md."""
    aliases = raw.data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise raw.error(
            "must be a list of strings", "aliases", fix='write it as aliases = ["fast", "chat"]'
        )
    for alias in aliases:
        problem = name_problem(alias) if alias else "it is empty"
        if problem:
            raise raw.error(
                f"alias {alias!r}: {problem}", "aliases", fix="use letters, digits, . _ and -"
            )
    if "idle_s" in raw.data:
        value = raw.data["idle_s"]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (0 <= value <= 30 * 86400)
        ):
            raise raw.error(
                "must be a number of seconds from 0 to 2592000",
                "idle_s",
                fix="e.g. idle_s = 600 (0: never put away)",
            )


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a profile name, or None when it can."""
    if len(name) > MAX_NAME_LENGTH:
        return f"longer than {MAX_NAME_LENGTH} characters"
    if not NAME_PATTERN.fullmatch(name):
        return (
            f"{printable(name, 40)!r} is not a profile name (letters, digits and . _ + -, "
            "starting with a letter or digit)"
        )
    return None


def _check_text(raw: RawProfile) -> None:
    """Names, keys and strings that would break a table, a command line or the environment."""
    data = raw.data
    if "name" in data:
        problem = name_problem(data["name"])
        if problem:
            raise raw.error(problem, "name", fix='use a short name such as "my-profile"')
    else:
        problem = name_problem(raw.path.stem)
        if problem:
            raise raw.error(
                f"the file name is not a profile name: {problem}",
                fix='set name = "my-profile" in the file, or rename the file',
            )
    key = data.get("key")
    if key is not None and (len(key) > MAX_KEY_LENGTH or not key.isprintable() or " " in key):
        raise raw.error(
            f"a hot-swap key is a few printable characters without spaces (at most {MAX_KEY_LENGTH})",
            "key",
            fix='use one key such as "1"',
        )
    parent = data.get("extends")
    if parent is not None:
        if parent.endswith(".toml"):
            bad = len(parent) > MAX_PATH_LENGTH or not parent.isprintable()
        else:
            bad = name_problem(parent) is not None
        if bad:
            raise raw.error(
                "must be a profile name or a .toml path",
                "extends",
                fix='write extends = "base" (a name from `sgltui profiles list`)',
            )
    for env_key, value in data.get("env", {}).items():
        if not ENV_NAME.fullmatch(env_key):
            raise raw.error(
                "is not an environment variable name",
                "env",
                env_key,
                label=f"env.{env_key}",
                fix="use letters, digits and _ (e.g. HF_HOME)",
            )
        if "\0" in value:
            raise raw.error(
                "holds a NUL character, which no environment can carry",
                "env",
                env_key,
                fix="remove the \\u0000",
            )
    python = data.get("python")
    if python is not None and ("\0" in python or len(python) > MAX_PATH_LENGTH):
        raise raw.error("is not a usable interpreter path", "python", fix="give a python path")
    for flag, value in data.get("server", {}).items():
        if any("\0" in text for text in _strings(flag, value)):
            raise raw.error(
                "holds a NUL character, which no command line can carry",
                "server",
                flag,
                fix="remove the \\u0000",
            )


def _strings(*values: Any) -> Iterable[str]:
    """Every string inside `values` (TOML tables and arrays included)."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _toml_type(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _toml_scalar(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


# --- profiles ------------------------------------------------------------------------------------


@dataclass
class Profile:
    name: str
    description: str = ""
    key: str | None = None
    extends: str | None = None
    launcher: str = "sglang"
    python: str | None = None
    entrypoint: str = "auto"  # launcher "sglang" only: auto | serve | launch_server
    # More names the agent endpoint routes to this profile (agent/endpoint/endpoint.py); not inherited
    aliases: tuple[str, ...] = ()
    idle_s: float | None = None  # stopped after this long without a request (None: agent.toml)
    server: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # [key-files]: secret flag -> the file its value is read from at launch (KEY_FILE_FLAGS)
    key_files: dict[str, str] = field(default_factory=dict)
    source: Path | None = None
    # Where each value was written: "server.<flag>", "env.<VAR>", "launcher", ... -> (file, line).
    origins: dict[str, Where] = field(default_factory=dict, compare=False, repr=False)
    # The extends chain, nearest parent first.
    parents: tuple[str, ...] = field(default=(), compare=False)

    def where(self, key: str) -> Where:
        return self.origins.get(key, (self.source, None))

    def flag_argv(self) -> list[str]:
        return render_flags(self.server)

    def argv(self, server: dict[str, Any] | None = None) -> list[str]:
        """The launch command; `server` replaces the [server] flags (the agent passes them less
        the secrets, which travel in a --config file: see launch_secrets.py)."""
        flags = render_flags(self.server if server is None else server)
        if self.launcher == "sim":
            # The simulator is part of sgltui, so it runs in sgltui's own interpreter.
            return [sys.executable, "-m", LAUNCH_MODULES["sim"], *flags]
        python = os.path.expanduser(self.python) if self.python else sys.executable
        serve = self.serve_program()
        if serve is not None:
            return [serve, "serve", *flags]
        return [python, "-m", LAUNCH_MODULES["sglang"], *flags]

    def serve_program(self) -> str | None:
        """The `sglang` program this profile launches with `serve`, or None for launch_server.
        It is the one next to the profile's interpreter (same environment, same SGLang)."""
        if self.launcher != "sglang" or self.entrypoint == "launch_server":
            return None
        python = os.path.expanduser(self.python) if self.python else sys.executable
        program = Path(python).parent / "sglang"
        if program.is_file() and os.access(program, os.X_OK):
            return str(program)
        return str(program) if self.entrypoint == "serve" else None

    def command_line(self) -> str:
        """The shell command (env assignments first) that `sgltui profiles import` reads back."""
        env = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join(env + [shlex.join(self.argv())])

    def command_hash(self) -> str:
        return hashlib.sha256("\0".join(self.flag_argv()).encode()).hexdigest()[:12]

    @property
    def port(self) -> int:
        try:
            return int(self.server.get("port", DEFAULT_PORT))
        except (TypeError, ValueError):
            return DEFAULT_PORT

    @property
    def host(self) -> str:
        return str(self.server.get("host") or DEFAULT_HOST)

    @property
    def api_key(self) -> str | None:
        value = self.server.get("api-key")
        return (
            str(value)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and value != ""
            else None
        )

    def to_toml_dict(self, flatten: bool = True) -> dict[str, Any]:
        """The profile as a TOML document (resolved values; `extends` dropped when flattened)."""
        doc: dict[str, Any] = {"name": self.name}
        if self.description:
            doc["description"] = self.description
        if self.key:
            doc["key"] = self.key
        if self.extends and not flatten:
            doc["extends"] = self.extends
        doc["launcher"] = self.launcher
        if self.python:
            doc["python"] = self.python
        if self.entrypoint != "auto":
            doc["entrypoint"] = self.entrypoint
        if self.aliases:
            doc["aliases"] = list(self.aliases)
        if self.idle_s is not None:
            doc["idle_s"] = self.idle_s
        doc["server"] = dict(self.server)
        if self.env:
            doc["env"] = dict(self.env)
        if self.key_files:
            doc["key-files"] = dict(self.key_files)
        return doc


def _scalar_arg(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        # TOML dates and times inside a table or array are written as ISO text, as alone.
        return json.dumps(value, separators=(",", ":"), default=_iso)
    if isinstance(value, (datetime.date, datetime.time)):  # TOML dates and times
        return value.isoformat()
    return str(value)


def _iso(value: Any) -> str:
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def render_flags(server: dict[str, Any]) -> list[str]:
    """[server] -> SGLang argv. true -> bare flag; false -> omitted (or --no-X for SGLang's
    --X/--no-X flags, whose default may be on); list -> --flag v1 v2 (SGLang's nargs lists)."""
    out: list[str] = []
    for key, value in server.items():
        if value is False:
            negation = _negation(key)
            if negation:
                out.append(negation)
            continue
        if value is True:
            out.append(f"--{key}")
        elif isinstance(value, list):
            out.append(f"--{key}")
            out.extend(_scalar_arg(v) for v in value)
        else:
            out.extend((f"--{key}", _scalar_arg(value)))
    return out


def _negation(key: str) -> str | None:
    from sgltui.core.flags import load_bundled_catalog

    spec = load_bundled_catalog().lookup(key)
    if spec is None or spec.action != "boolean_optional":
        return None
    return f"--no-{key}" if f"--no-{key}" in spec.options else f"--no-{spec.name}"


def _canonical(key: str) -> str:
    from sgltui.core.flags import load_bundled_catalog

    spec = load_bundled_catalog().lookup(key, sim=True)
    return spec.name if spec else key


# --- the set of profiles on the search path -----------------------------------------------------


def search_dirs(extra_dirs: Sequence[Path | str] = ()) -> list[Path]:
    """Shipped profiles, then ~/.config/sgltui/profiles, then --profiles DIRs (later wins)."""
    return [
        locations.shipped_dir("profiles"),
        locations.config_dir() / "profiles",
        *(Path(d).expanduser() for d in extra_dirs),
    ]


@dataclass
class ProfileSet:
    raw: dict[str, RawProfile] = field(default_factory=dict)
    errors: dict[str, ProfileError] = field(
        default_factory=dict
    )  # file path -> why it was not loaded
    failed_names: dict[str, str] = field(
        default_factory=dict
    )  # profile name (file stem) -> file path
    # (search directory, profile name) -> the file that gave the name there first.
    _given: dict[tuple[str, str], Path] = field(default_factory=dict, repr=False)
    # id(raw) -> (the raws of its chain, itself first; its resolution): a child resolves on its
    # parent's resolution instead of walking and merging the whole chain again (1,000 profiles
    # in chains of 32 listed in 4.7 s). An entry counts only while every raw of its chain is
    # still the one loaded under its name (ProfileIndex replaces the raw of a re-read file).
    _resolved: dict[int, tuple[tuple[RawProfile, ...], Profile]] = field(
        default_factory=dict, repr=False
    )

    def add_file(self, path: Path, folder: Path | None = None) -> None:
        """Add one file. A later folder overrides an earlier one's profile of the same name (that
        is how a user's folder replaces a shipped profile); two files of one folder that give
        the same name are an error on the second, which is not loaded."""
        try:
            raw = read_raw(path)
        except ProfileError as exc:
            self.errors[str(path)] = exc
            self.failed_names[path.stem] = str(path)
            return
        if folder is not None:
            first = self._given.setdefault((str(folder), raw.name), raw.path)
            if first != raw.path:
                self.errors[str(path)] = raw.error(
                    f"profile name {raw.name!r} is also given by {display_path(first)}",
                    "name",
                    fix="give each profile file its own name",
                )
                return
        self.raw[raw.name] = raw
        self.failed_names.pop(raw.name, None)

    def names(self) -> list[str]:
        return sorted(self.raw)

    def resolve(self, name: str) -> Profile:
        raw = self.raw.get(name)
        if raw is None:
            if name in self.failed_names:
                raise self.errors[self.failed_names[name]]
            raise unknown_profile(name, self.names())
        return self.resolve_raw(raw)

    def resolve_raw(self, raw: RawProfile) -> Profile:
        """`raw` with its `extends` chain merged in (a loop: a deep chain cannot overflow)."""
        chain = [raw]  # child first
        seen = [raw.name]
        base: Profile | None = None  # the resolution the chain stops at, when one is known
        links: tuple[RawProfile, ...] = ()  # and the raws of its chain
        while True:
            child = chain[-1]
            parent_name = child.data.get("extends")
            if not parent_name:
                break
            known = self._known(parent_name)
            if known is not None:
                # Resolved already: no cycle and within the depth through it; the whole chain
                # must still be within the depth.
                if len(chain) + len(known[1].parents) > MAX_EXTENDS_DEPTH:
                    raise raw.error(
                        f"`extends` goes more than {MAX_EXTENDS_DEPTH} levels deep",
                        "extends",
                        fix="extend a profile nearer the base (or flatten it: "
                        "`sgltui profiles show NAME` prints it resolved)",
                    )
                links, base = known
                break
            if parent_name in seen:
                cycle = " -> ".join(seen[seen.index(parent_name) :] + [parent_name])
                raise child.error(
                    f"inheritance cycle {cycle}",
                    "extends",
                    fix="remove `extends` from one of these profiles",
                )
            if len(chain) > MAX_EXTENDS_DEPTH:
                raise raw.error(
                    f"`extends` goes more than {MAX_EXTENDS_DEPTH} levels deep",
                    "extends",
                    fix="extend a profile nearer the base (or flatten it: "
                    "`sgltui profiles show NAME` prints it resolved)",
                )
            chain.append(self._find_parent(child, parent_name))
            seen.append(chain[-1].name)
        profile = base
        for link in reversed(chain):
            profile = _merge(link, profile)
            links = (link, *links)
            self._resolved[id(link)] = (links, profile)
        assert profile is not None, "a chain holds at least the profile itself"
        return profile

    def _known(self, parent_name: str) -> tuple[tuple[RawProfile, ...], Profile] | None:
        """The parent's chain and resolution when it was resolved from the raws loaded now."""
        if parent_name.endswith(".toml"):
            return None  # read from its path each time (it may be outside the search path)
        parent = self.raw.get(parent_name)
        hit = self._resolved.get(id(parent)) if parent is not None else None
        if hit is None or hit[0][0] is not parent:
            return None
        # A chain through a .toml path, or a raw replaced since, does not count.
        return hit if all(self.raw.get(r.name) is r for r in hit[0]) else None

    def _find_parent(self, raw: RawProfile, parent_name: str) -> RawProfile:
        if parent_name.endswith(".toml"):
            candidate = (raw.path.parent / parent_name).resolve()
            if candidate.exists():
                return read_raw(candidate)
        found = self.raw.get(parent_name)
        if found is not None:
            return found
        if parent_name in self.failed_names:
            raise self.errors[self.failed_names[parent_name]]
        near = difflib.get_close_matches(parent_name, self.names(), n=3)
        fix = (
            f"did you mean {', '.join(near)}?"
            if near
            else "run `sgltui profiles list` for the names"
        )
        raise raw.error(f"parent profile {parent_name!r} not found", "extends", fix=fix)


def unknown_profile(name: str, names: Iterable[str]) -> ProfileError:
    names = list(names)
    near = difflib.get_close_matches(name, names, n=3)
    fix = (
        f"did you mean {', '.join(near)}?"
        if near
        else f"known profiles: {', '.join(names) or 'none'}"
    )
    return ProfileError(f"no profile named {name!r}", fix=fix)


def _merge(raw: RawProfile, parent: Profile | None) -> Profile:
    data = raw.data
    server: dict[str, Any] = dict(parent.server) if parent else {}
    env: dict[str, str] = dict(parent.env) if parent else {}
    origins: dict[str, Where] = dict(parent.origins) if parent else {}
    inherited = set(server)
    for key, value in data.get("server", {}).items():
        # A child may spell an inherited flag differently (model vs model-path): it replaces it.
        # (Two spellings in one file are left for validation to report.)
        canon = _canonical(key)
        for old in [k for k in server if k != key and k in inherited and _canonical(k) == canon]:
            del server[old]
            origins.pop(f"server.{old}", None)
        server[key] = value
        origins[f"server.{key}"] = (raw.path, raw.line("server", key))
    for key, value in data.get("env", {}).items():
        env[key] = value
        origins[f"env.{key}"] = (raw.path, raw.line("env", key))
    key_files: dict[str, str] = dict(parent.key_files) if parent else {}
    for key, value in data.get("key-files", {}).items():
        key_files[key] = value
        origins[f"key-files.{key}"] = (raw.path, raw.line("key-files", key))
    for key in (
        "launcher",
        "python",
        "entrypoint",
        "extends",
        "key",
        "description",
        "name",
        "aliases",
        "idle_s",
    ):
        if key in data:
            origins[key] = (raw.path, raw.line(key))
    return Profile(
        name=raw.name,
        # Name, key and description belong to one file; launcher and interpreter are inherited.
        description=data.get("description", ""),
        key=data.get("key"),
        extends=data.get("extends"),
        launcher=data.get("launcher", parent.launcher if parent else "sglang"),
        python=data.get("python", parent.python if parent else None),
        entrypoint=data.get("entrypoint", parent.entrypoint if parent else "auto"),
        aliases=tuple(data.get("aliases", ())),
        idle_s=float(data["idle_s"]) if "idle_s" in data else (parent.idle_s if parent else None),
        server=server,
        env=env,
        key_files=key_files,
        source=raw.path,
        origins=origins,
        parents=((parent.name,) + parent.parents) if parent else (),
    )


def scan_profiles(extra_dirs: Sequence[Path | str] = ()) -> ProfileSet:
    """Every profile file on the search path (broken files are kept in .errors, not raised)."""
    found = ProfileSet()
    for directory in search_dirs(extra_dirs):
        if not directory.is_dir():
            continue
        for path in sorted(directory.rglob("*.toml")):
            found.add_file(path, directory)
    return found


def load_profiles(extra_dirs: Sequence[Path | str] = ()) -> dict[str, Profile]:
    """All profiles that load and resolve, by name. Broken ones are left out (see scan_profiles)."""
    found = scan_profiles(extra_dirs)
    profiles: dict[str, Profile] = {}
    for name in found.names():
        try:
            profiles[name] = found.resolve(name)
        except ProfileError:
            continue
    return profiles


def get_profile(name_or_path: str, extra_dirs: Sequence[Path | str] = ()) -> Profile:
    """A profile by name, or by the path of a .toml file (its `extends` may name any profile)."""
    found = scan_profiles(extra_dirs)
    looks_like_path = name_or_path.endswith(".toml") or "/" in name_or_path
    if looks_like_path:
        return found.resolve_raw(read_raw(Path(name_or_path).expanduser()))
    return found.resolve(name_or_path)
