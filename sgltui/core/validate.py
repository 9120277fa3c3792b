"""Check a profile against the flag catalog of the SGLang that will run it.

Every finding names the file and line where the value was written (the parent's file for an
inherited value), the key, what is wrong and how to fix it. Errors are what SGLang itself would
reject (argparse or ServerArgs' start-up checks) -- found here in a second instead of
after minutes of model loading; warnings are accepted settings that do not do what they seem to.

Here: each flag on its own (name, type, value, range). Its parts: validate_findings.py (Issue and
the flags by canonical name), validate_combos.py (flags against each other), host_names.py.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
from collections.abc import Iterable
from typing import Any

from sgltui.core.flag_ranges import is_port_flag, range_for
from sgltui.core.flags import SIM_FLAGS, Catalog, FlagSpec, load_bundled_catalog, load_live_catalog
from sgltui.core.host_names import host_problem
from sgltui.core.launch_secrets import CONFIG_FLAG, SECRET_FLAGS, secret_problem
from sgltui.core.migrate import canonical_elsewhere, change_for
from sgltui.core.profiles import Profile
from sgltui.core.validate_combos import check_combinations
from sgltui.core.validate_findings import ERROR, Findings, Issue

__all__ = ["Issue", "catalog_for", "check_profile", "check_profile_set", "key_clashes"]

_INT_TEXT = re.compile(r"^[+-]?\d+$")
_SI = re.compile(r"^(\d+(?:\.\d+)?)(k|M|G|T)$")
_IEC = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti)$")
_LOOSE_SUFFIX = re.compile(r"^(\d+(?:\.\d+)?)\s*([A-Za-z]+)$")


def catalog_for(profile: Profile) -> Catalog:
    """The catalog of the SGLang that will run `profile`, picked by the version its interpreter
    has installed (package metadata, no import): that release's bundled catalog, else one read
    live, else the nearest bundled release (flags.load_live_catalog). The simulator follows the
    newest bundled release, so sim profiles use that."""
    if profile.launcher == "sim":
        return load_bundled_catalog()
    return load_live_catalog(profile.python)


class _Checker(Findings):
    """Each flag of one profile against the catalog: its name, its type, its value and range;
    then the checks across flags (validate_combos.py), the secrets and the host."""

    # -- checks ------------------------------------------------------------------------------
    def run(self) -> list[Issue]:
        for key, value in self.profile.server.items():
            self.check_flag(key, value)
        self.check_required()
        self.check_entrypoint()
        check_combinations(self)
        self.check_secrets()
        self.check_host()
        return self.issues

    def check_host(self) -> None:
        """`host` is where the server binds and where sgltui connects: an address, or a name
        this host resolves. Anything else ("$(id)") failed deep in the start with a gaierror."""
        host = self.get("host")
        if host is None or not isinstance(host, str):
            return  # absent (SGLang's default) or a type the flag check reports
        problem = host_problem(host)
        if problem:
            self.error(self.key("host"), problem, 'write an address such as host = "127.0.0.1"')

    def check_secrets(self) -> None:
        """API keys travel in a --config file sgltui writes (launch_secrets.py): they must be
        plain header text, and the profile cannot bring its own --config as well."""
        hidden = [n for n in SECRET_FLAGS if isinstance(self.get(n), (str, int, float))]
        for name in hidden:
            problem = secret_problem(str(self.get(name)))
            if problem:
                self.error(self.key(name), problem, "write another key")
        if hidden and self.get(CONFIG_FLAG) is not None:
            self.error(
                self.key(CONFIG_FLAG),
                f"cannot be combined with {self.key(hidden[0])}: sgltui passes API keys in its "
                "own --config file (never in the command line), and SGLang takes only one",
                "put the flags of that YAML file in [server] instead",
            )

    def check_flag(self, key: str, value: Any) -> None:
        if key.startswith("-"):
            # The catalog lookup would forgive the dashes; the rendered argv would not (----port).
            bare = key.lstrip("-") or "name"
            self.error(
                key,
                "write the flag name without leading dashes",
                f"write {bare} = {_toml_value(value)}",
            )
            return
        spec = self.catalog.lookup(key, sim=self.sim)
        if spec is None:
            self.unknown_flag(key, value)
            return
        if spec.name in self.specs:
            other = self.specs[spec.name][0]
            self.error(
                key,
                f"sets the same flag as `{other}` (--{spec.name})",
                f"keep only one of `{other}` and `{key}`",
            )
            return
        self.specs[spec.name] = (key, spec)
        if spec.deprecated and value is not False:
            change = change_for(key, value, self.catalog, self.profile.server)
            if change is not None:
                fix = f"{change.fix_text()} (`sgltui profiles migrate` rewrites it)"
            else:
                fix = f"use {spec.replacement}" if spec.replacement else "remove it"
            self.warn(
                key,
                f"deprecated in {self.catalog.label} (still accepted, with a warning)",
                fix,
            )
        if self.catalog.is_negation(key):
            if not isinstance(value, bool):
                self.error(key, "is an on/off flag", f"write {spec.name} = false instead")
            return
        self.check_value(key, spec, value)

    def unknown_flag(self, key: str, value: Any) -> None:
        shown = _toml_value(value)
        if key in SIM_FLAGS:
            self.error(
                key,
                "is a simulator flag; real SGLang rejects it",
                'set launcher = "sim" or remove this line',
            )
            return
        renamed = self.catalog.renamed(key)
        if renamed:
            new, why = renamed
            fix = f"write {new} = {shown}" if new else "remove this line"
            self.error(key, f"not accepted by {self.catalog.label}: {why}", fix)
            return
        other = canonical_elsewhere(key, self.catalog)
        if other:
            self.error(
                key,
                f"not accepted by {self.catalog.label}: another SGLang release's spelling of {other}",
                f"write {other} = {shown} (`sgltui profiles migrate` rewrites it)",
            )
            return
        dashed = key.replace("_", "-")
        if dashed != key and self.catalog.lookup(dashed, sim=self.sim):
            self.error(key, "SGLang flag names use dashes", f"write {dashed} = {shown}")
            return
        prefixed = self.catalog.prefix_matches(key)
        if len(prefixed) == 1:
            spec = prefixed[0]
            self.warn(
                key,
                f"abbreviation of --{spec.name}: accepted only while no other flag starts the same",
                f"write {spec.name} = {shown}",
            )
            self.specs.setdefault(spec.name, (key, spec))
            self.check_value(key, spec, value)
            return
        near = self.catalog.nearest(key, sim=self.sim)
        if len(prefixed) > 1:
            near = [s.name for s in prefixed[:4]]
            problem = f"ambiguous: {self.catalog.label} has no --{key}, and it could abbreviate several flags"
        else:
            problem = f"unknown flag for {self.catalog.label}"
        fix = (
            f"did you mean {', '.join(near)}?"
            if near
            else "see `python -m sglang.launch_server --help` for the flag names"
        )
        self.error(key, problem, fix)

    def check_value(self, key: str, spec: FlagSpec, value: Any) -> None:
        if value is False:
            return  # false = omitted, for every flag
        if not spec.takes_value:
            if not isinstance(value, bool):
                self.error(
                    key,
                    f"is an on/off flag, not {_describe(value)}",
                    f"write {key} = true (or false to leave it off)",
                )
            return
        if value is True:
            if spec.nargs == "?":
                return
            self.error(
                key,
                "needs a value (true only suits on/off flags)",
                f"write {key} = {_example(spec)}",
            )
            return
        if isinstance(value, list):
            if not spec.is_list and spec.type != "json_list":
                self.error(
                    key,
                    "takes one value, not a list",
                    f"write {key} = {_toml_value(value[0]) if value else _example(spec)}",
                )
                return
            if spec.type == "json_list":
                return
            if not value and spec.nargs == "+":
                self.error(
                    key,
                    "needs at least one value",
                    f"write {key} = [{_example(spec)}] or remove the line",
                )
                return
            for item in value:
                if self.check_scalar(key, spec, item) is False:
                    return
            return
        if isinstance(value, dict):
            if spec.type != "json":
                self.error(
                    key,
                    f"takes {_type_words(spec)}, not a table",
                    f"write {key} = {_example(spec)}",
                )
            return
        self.check_scalar(key, spec, value)

    def check_scalar(self, key: str, spec: FlagSpec, value: Any) -> bool:
        """False when an error was reported."""
        if (
            isinstance(value, (dict, list))
            or isinstance(value, (datetime.date, datetime.time))
            or isinstance(value, bool)
        ):
            self.error(
                key,
                f"takes {_type_words(spec)}, not {_describe(value)}",
                f"write {key} = {_example(spec)}",
            )
            return False
        text = str(value)
        kind = spec.type or "str"
        if isinstance(value, float) and not math.isfinite(value):
            # TOML has nan and inf literals; no SGLang flag means either.
            self.error(
                key, f"must be a finite number, not {text}", f"write {key} = {_example(spec)}"
            )
            return False
        if kind == "int" and not (isinstance(value, int) or _INT_TEXT.match(text)):
            m = _SI.match(text) or _IEC.match(text)
            if m:
                fix = f"write {key} = {_expand(text)}"
                self.error(
                    key, f"--{spec.name} takes a plain integer; SGLang rejects {text!r}", fix
                )
            else:
                self.error(
                    key,
                    f"takes an integer, not {_describe(value)}",
                    f"write {key} = {_example(spec)}",
                )
            return False
        if kind == "human_int" and not (isinstance(value, int) or _INT_TEXT.match(text)):
            if _SI.match(text):
                n = _expand(text)
                binary = _binary(text)
                si = _SI.match(text)
                assert si is not None  # _binary matched it
                self.warn(
                    key,
                    f"{text!r} means {n} to SGLang (k, M, G are powers of 1000), not {binary}",
                    f'write {key} = {binary} (or "{si.group(1)}{si.group(2).upper()}i"), or {n} to keep it',
                )
                return True
            if _IEC.match(text):
                return True
            loose = _LOOSE_SUFFIX.match(text)
            if loose:
                number, suffix = loose.groups()
                self.error(
                    key,
                    f"SGLang does not accept {text!r} (suffixes are case-sensitive: k M G T = 1000s, Ki Mi Gi Ti = 1024s)",
                    f'write {key} = "{number}Ki" for {number}x1024 or "{number}k" for {number}x1000',
                )
            else:
                self.error(
                    key,
                    f"takes an integer, not {_describe(value)}",
                    f'write {key} = 32768 or "32Ki"',
                )
            return False
        if kind == "float":
            try:
                number = float(text)
            except ValueError:
                self.error(
                    key,
                    f"takes a number, not {_describe(value)}",
                    f"write {key} = {_example(spec)}",
                )
                return False
            if not math.isfinite(number):
                self.error(
                    key,
                    f"must be a finite number, not {text.strip().lower()}",
                    f"write {key} = {_example(spec)}",
                )
                return False
        if kind in ("json", "json_list") and isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:
                self.error(
                    key,
                    "takes JSON, and this does not parse",
                    "write it as a TOML table/array, or valid JSON text",
                )
                return False
            if kind == "json_list" and not isinstance(parsed, list):
                self.error(key, "takes a JSON list", f"write {key} = [...]")
                return False
        if spec.choices is not None and text not in {str(c) for c in spec.choices}:
            self.bad_choice(key, text, [str(c) for c in spec.choices])
            return False
        known = self.catalog.values.get(spec.name)
        if known:  # a number is checked too: speculative-algorithm = 7 is no algorithm
            values = [str(v) for v in known.get("values", [])]
            folded = {v.upper() for v in values} if known.get("case_insensitive") else set(values)
            if (text.upper() if known.get("case_insensitive") else text) not in folded:
                self.bad_choice(key, text, values, at_startup=True)
                return False
        return self.check_range(key, spec, kind, text)

    def check_range(self, key: str, spec: FlagSpec, kind: str, text: str) -> bool:
        """Numbers the type accepts but SGLang (or the hardware) cannot use: tp-size = 0,
        mem-fraction-static = 7.0. Only for flags the given catalog types as numbers."""
        if kind not in ("int", "human_int", "float"):
            return True
        try:
            number: float = (
                _expand(text)
                if kind == "human_int"
                else (int(text) if kind == "int" else float(text))
            )
        except ValueError:
            return True  # its type error was reported above
        if kind == "int" and is_port_flag(spec.name):
            if not 0 < number < 65536:
                self.error(
                    key,
                    f"port {text} is out of range",
                    f"write {key} = a port between 1 and 65535",
                )
                return False
            return True
        limits = range_for(spec.name, kind)
        problem = limits.problem(number) if limits else None
        if problem:
            self.error(key, problem, f"write {key} = {_example(spec)}")
            return False
        return True

    def bad_choice(self, key: str, text: str, choices: list[str], at_startup: bool = False) -> None:
        if key.endswith("speculative-algorithm") and text.upper() == "MTP":
            self.error(
                key,
                '"MTP" is not a speculative algorithm name in SGLang',
                'for the MTP layers shipped in the checkpoint write speculative-algorithm = "NEXTN"',
            )
            return
        same_case = [c for c in choices if c.lower() == text.lower()]
        hint = f'did you mean "{same_case[0]}"? ' if same_case else ""
        when = " (SGLang fails at start-up)" if at_startup else ""
        self.error(
            key, f"invalid value {text!r}{when}", f"{hint}choose one of: {', '.join(choices)}"
        )

    def check_entrypoint(self) -> None:
        if self.sim or self.profile.entrypoint != "serve":
            return
        program = self.profile.serve_program()
        if program and not os.access(program, os.X_OK):
            path, line = self.profile.where("entrypoint")
            self.issues.append(
                Issue(
                    ERROR,
                    f"no `sglang` program at {program} (this SGLang has no `sglang serve`)",
                    "entrypoint",
                    path,
                    line,
                    'write entrypoint = "launch_server", or point python at an env with SGLang >= 0.5.22',
                )
            )

    def check_required(self) -> None:
        if self.get("model-path") is None and "model-path" in self.catalog.flags:
            path = self.profile.source
            self.issues.append(
                Issue(
                    ERROR,
                    "no model: SGLang requires --model-path",
                    "model-path",
                    path,
                    None,
                    'add model-path = "org/model" (a Hugging Face id or a local folder) to [server]',
                )
            )


def check_profile(profile: Profile, catalog: Catalog | None = None) -> list[Issue]:
    """Errors and warnings for one resolved profile."""
    issues = _Checker(profile, catalog or catalog_for(profile)).run()
    # File order, so a report reads top to bottom like the files it points into.
    return sorted(issues, key=lambda i: (str(i.path or ""), i.line or 0))


def key_clashes(profiles: Iterable[Profile]) -> dict[str, list[str]]:
    """Hot-swap keys given to more than one profile: key -> the profiles' names, sorted. A key
    belongs to one profile whatever its launcher: a press must never start a real SGLang server
    where the user meant the demo's simulator."""
    by_key: dict[str, list[str]] = {}
    for profile in profiles:
        if profile.key:
            by_key.setdefault(str(profile.key), []).append(profile.name)
    return {k: sorted(v) for k, v in by_key.items() if len(v) > 1}


def check_profile_set(profiles: Iterable[Profile]) -> list[Issue]:
    """Problems between profiles: two profiles on the same hot-swap key (an error on each one
    after the first; the key does nothing in the TUI until it is fixed)."""
    issues: list[Issue] = []
    seen: dict[str, str] = {}
    for profile in profiles:
        if not profile.key:
            continue
        key = str(profile.key)
        if key in seen:
            path, line = profile.where("key")
            issues.append(
                Issue(
                    ERROR,
                    f'hot-swap key "{profile.key}" is also used by profile {seen[key]}',
                    "key",
                    path,
                    line,
                    "give each profile its own key (the key does nothing until then)",
                )
            )
        else:
            seen[key] = profile.name
    return issues


# --- helpers ------------------------------------------------------------------------------------


def _expand(text: str) -> int:
    m = _SI.match(text)
    if m:
        return int(float(m.group(1)) * 1000 ** ("kMGT".index(m.group(2)) + 1))
    m = _IEC.match(text)
    if m:
        return int(m.group(1)) * int(1024 ** ("KMGT".index(m.group(2)[0]) + 1))
    return int(text)


def _binary(text: str) -> int:
    m = _SI.match(text)
    assert m is not None, "called for SI-suffixed sizes only"
    return int(float(m.group(1)) * 1024 ** ("kMGT".index(m.group(2)) + 1))


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return str(value)


# A flag type's words in messages and an example value of it: (words, example).
_TYPE_HINTS = {
    "int": ("an integer", "1"),
    "human_int": ("an integer", "32768"),
    "float": ("a number", "0.5"),
    "json": ("JSON", "{...}"),
    "json_list": ("a JSON list", "[...]"),
}
_STR_HINT = ("a string", '"..."')


def _type_words(spec: FlagSpec) -> str:
    return _TYPE_HINTS.get(spec.type or "str", _STR_HINT)[0]


def _example(spec: FlagSpec) -> str:
    if spec.choices:
        return f'"{spec.choices[0]}"'
    if spec.default not in (None, "", [], False) and not isinstance(
        spec.default, (dict, list, bool)
    ):
        return _toml_value(spec.default)
    return _TYPE_HINTS.get(spec.type or "str", _STR_HINT)[1]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)
