"""Turn an existing SGLang launch command line into a profile (and TOML).

Accepted spellings: `python -m sglang.launch_server FLAGS`, `sglang serve [MODEL] FLAGS`,
`python -m sgltui.sim FLAGS`, or bare flags; leading `VAR=value` words (optionally after `env`)
become [env]. Flags are read with the catalog's nargs and type, values are kept exactly as
typed unless they are the canonical spelling of a number, so that the profile renders back to
the same command line (`sgltui profiles show --command` -> import -> an equal profile).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from sgltui.core.flags import Catalog, FlagSpec
from sgltui.core.profiles import LAUNCH_MODULES, Profile, ProfileError

_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")
# Interpreter options that take a separate value (python -X dev -m ...).
_PY_OPTS_WITH_VALUE = {"-X", "-W", "-Q"}


def split_command(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ProfileError(
            f"cannot split the command line: {exc}", fix="check the quotes"
        ) from None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _interpreter(program: str) -> str | None:
    """The `python` a profile should record: None when it is sgltui's own interpreter.

    A bare `python3` is resolved on the importing shell's PATH (the one the command was run
    from), since the agent that launches the profile later may have another PATH.
    """
    if "/" not in program:
        program = shutil.which(program) or program
    # A venv's bin/python is a symlink to the base interpreter, yet another environment (its
    # pyvenv.cfg sits next to it): only the same file in the same folder is sgltui's own.
    same_dir = os.path.dirname(os.path.abspath(program)) == os.path.dirname(
        os.path.abspath(sys.executable)
    )
    if program == sys.executable or (same_dir and _same_file(program, sys.executable)):
        return None
    return program


def _split_program(tokens: list[str]) -> tuple[str, str | None, list[str]]:
    """-> (launcher, python, flag tokens)."""
    if not tokens or tokens[0].startswith("-"):
        return "sglang", None, tokens
    prog, rest = tokens[0], tokens[1:]
    base = Path(prog).name
    if base == "sglang":
        if not rest or rest[0] != "serve":
            raise ProfileError(
                "only `sglang serve` starts a server",
                fix="import `sglang serve ...` or `python -m sglang.launch_server ...`",
            )
        rest = rest[1:]
        if rest and not rest[0].startswith("-"):  # sglang serve MODEL: positional model path
            rest = ["--model-path", rest[0], *rest[1:]]
        found = prog if "/" in prog else shutil.which(prog)
        python = None
        if found:
            sibling = Path(found).parent / "python"
            python = _interpreter(str(sibling)) if sibling.exists() else None
        return "sglang", python, rest
    if base.startswith("python"):
        i = 0
        while i < len(rest) and rest[i] != "-m":
            if not rest[i].startswith("-"):
                break
            i += 2 if rest[i] in _PY_OPTS_WITH_VALUE else 1
        if i + 1 < len(rest) and rest[i] == "-m":
            module = rest[i + 1]
            for launcher, mod in LAUNCH_MODULES.items():
                if module == mod:
                    return (
                        launcher,
                        (_interpreter(prog) if launcher == "sglang" else None),
                        rest[i + 2 :],
                    )
            raise ProfileError(
                f"`python -m {module}` is not an SGLang server",
                fix="import `python -m sglang.launch_server ...` or `sglang serve ...`",
            )
    raise ProfileError(
        f"not an SGLang launch command: {prog!r}",
        fix="give `python -m sglang.launch_server ...`, `sglang serve ...` or just the flags",
    )


def _convert(spec: FlagSpec, text: str) -> Any:
    """A value as typed -> the TOML value that renders back to exactly the same text."""
    if spec.type in ("int", "human_int", "float") and _INT.match(text):
        return int(text)
    if spec.type == "float":
        try:
            if str(float(text)) == text:
                return float(text)
        except ValueError:
            pass
        return text
    if spec.type in ("json", "json_list"):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if (
            isinstance(value, (dict, list))
            and "null" not in text
            and json.dumps(value, separators=(",", ":")) == text
        ):
            return value
    return text


def _lookup(catalog: Catalog, flag: str, sim: bool) -> tuple[str, FlagSpec]:
    """`--flag` as typed -> (key to write, spec). Unique prefixes are expanded, as argparse does."""
    name = flag[2:]
    spec = catalog.lookup(name, sim=sim)
    if spec is not None:
        return name, spec
    renamed = catalog.renamed(name)
    if renamed:
        new, why = renamed
        fix = f"use --{new}" if new else "remove it"
        raise ProfileError(f"{flag} is not accepted by SGLang {catalog.version} ({why})", fix=fix)
    matches = [s for s in catalog.prefix_matches(name) if sim or not s.sim_only]
    if len(matches) == 1:
        return matches[0].name, matches[0]
    if len(matches) > 1:
        names = ", ".join(f"--{s.name}" for s in matches[:6])
        raise ProfileError(
            f"{flag} is ambiguous (could be {names})", fix="write the full flag name"
        )
    near = catalog.nearest(name, sim=sim)
    fix = (
        f"did you mean {', '.join('--' + n for n in near)}?"
        if near
        else "check `sglang serve --help`"
    )
    raise ProfileError(f"unknown flag {flag} for SGLang {catalog.version}", fix=fix)


def parse_flags(tokens: Sequence[str], catalog: Catalog, sim: bool = False) -> dict[str, Any]:
    server: dict[str, Any] = {}
    i = 0
    tokens = list(tokens)
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--") or token == "--":
            raise ProfileError(
                f"unexpected argument {token!r}",
                fix="every SGLang setting is a --flag; quote values with spaces",
            )
        flag, eq, inline = token.partition("=")
        key, spec = _lookup(catalog, flag, sim)
        if not spec.takes_value:
            if eq:
                raise ProfileError(f"{flag} takes no value", fix=f"write just {flag}")
            if catalog.is_negation(key):
                key = key[3:]
                server[key] = False
            else:
                server[key] = True
            continue
        if eq:
            values = [inline]
        elif spec.nargs in ("+", "*"):
            values = []
            while i < len(tokens) and not tokens[i].startswith("--"):
                values.append(tokens[i])
                i += 1
        elif spec.nargs == "?":
            values = [tokens[i]] if i < len(tokens) and not tokens[i].startswith("--") else []
            i += len(values)
            if not values:
                server[key] = True
                continue
        else:
            count = spec.nargs if isinstance(spec.nargs, int) else 1
            values = tokens[i : i + count]
            i += count
            if len(values) < count:
                raise ProfileError(f"{flag} needs a value", fix=f"write {flag} VALUE")
        if spec.is_list and not eq:
            server[key] = [_convert(spec, v) for v in values]
        elif spec.is_list:
            server[key] = [_convert(spec, inline)]
        else:
            server[key] = _convert(spec, values[0])
    return server


def import_command(
    command: Sequence[str] | str, catalog: Catalog, name: str = "imported", description: str = ""
) -> Profile:
    tokens = split_command(command) if isinstance(command, str) else list(command)
    if len(tokens) == 1 and " " in tokens[0]:
        tokens = split_command(tokens[0])  # the whole command passed as one quoted word
    if tokens and tokens[0] == "env":
        tokens = tokens[1:]
    env: dict[str, str] = {}
    while tokens and (word := _ENV_WORD.match(tokens[0])):
        var, value = word.groups()
        env[var] = value
        tokens = tokens[1:]
    if not tokens:
        raise ProfileError("empty command line", fix="give the SGLang launch command after `--`")
    launcher, python, flag_tokens = _split_program(tokens)
    server = parse_flags(flag_tokens, catalog, sim=(launcher == "sim"))
    profile = Profile(
        name=name, description=description, launcher=launcher, python=python, server=server, env=env
    )
    if (
        launcher == "sglang"
        and tokens
        and Path(tokens[0]).name.startswith("python")
        and profile.serve_program() is not None
    ):
        # Keep the entry point as typed: "auto" would start this env's `sglang serve` instead
        # (`sglang serve` itself is what "auto" picks wherever that program exists).
        profile.entrypoint = "launch_server"
    return profile


def profile_to_toml(profile: Profile, flatten: bool = True) -> str:
    return tomli_w.dumps(profile.to_toml_dict(flatten=flatten))
