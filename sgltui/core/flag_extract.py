"""Read SGLang's own argument parser and describe every server flag as plain JSON.

This file runs *inside the interpreter that has SGLang*, which usually does not have sgltui
installed: it is executed by path (`python flag_extract.py OUT.json`), so it must stay a
stand-alone script that needs only the standard library and sglang. sgltui uses it twice:
tools/gen_flag_catalog.py writes the bundled catalog with it, and sgltui.core.flags runs it
against a profile's interpreter to get the catalog of the SGLang version that will really run.

No help text is copied: only the machine-readable facts (names, type, nargs, choices, default,
action kind) plus the replacement flag that SGLang itself names for deprecated flags.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

FORMAT = 1

# SGLang's own converters, by function name -> the catalog's type vocabulary.
_TYPE_NAMES = {
    "str": "str",
    "int": "int",
    "float": "float",
    "nullable_str": "str",
    "human_readable_int": "human_int",  # accepts 32768, 32k (=32000) and 32Ki (=32768)
    "loads": "json",
    "json_list_type": "json_list",
    "parse_cuda_graph_config_arg": "json",
    "parse_cuda_graph_backend_arg": "str",
}

# "(Deprecated, use --smg-grpc-mode)", "Deprecated. Use --image-processor-backend=pil instead."
# Only the named replacement flag is kept, never the sentence around it.
_DEPRECATED_USE = re.compile(r"deprecated[^.()]*?[.,:]?\s*use\s+'?(--[A-Za-z0-9{},_=<>-]+)", re.I)


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    enum_value = getattr(value, "value", None)
    if enum_value is not None and isinstance(enum_value, (str, int, float)):
        return enum_value
    return str(value)


def _choices(choices: Any) -> list[Any] | None:
    if choices is None:
        return None
    if isinstance(choices, (set, frozenset)):
        # Some of SGLang's choices are sets: sort them so the catalog is the same on every run.
        return sorted(list(_json_safe(list(choices))), key=str)
    return list(_json_safe(list(choices)))


# add_argument's `action=` names -> the catalog's action kinds (argparse's built-in names).
_ACTION_NAMES = {
    None: "store",
    "store": "store",
    "store_true": "store_true",
    "store_false": "store_false",
    "store_const": "store_const",
    "append_const": "store_const",
    "version": "store_const",
    "append": "append",
    "extend": "append",
    "count": "count",
}


def _action_kind(action: argparse.Action, requested: Any = None) -> str:
    """The kind of `action`, from the `action=` SGLang passed to add_argument (`requested`):
    one of argparse's names, or an Action class of SGLang's own (classified by what it
    consumes)."""
    if isinstance(requested, str) or requested is None:
        kind = _ACTION_NAMES.get(requested)
        if kind is not None:
            return kind
    if isinstance(action, argparse.BooleanOptionalAction):
        return "boolean_optional"
    if "StoreTrue" in type(action).__name__:
        return "store_true"
    if action.nargs == 0:
        return "store_const"
    return "store"


def _type_name(action: argparse.Action) -> str | None:
    if action.nargs == 0:
        return None
    t = action.type
    if t is None:
        return "str"
    name = getattr(t, "__name__", type(t).__name__)
    return _TYPE_NAMES.get(name, "str")


def describe_action(action: argparse.Action, requested: Any = None) -> dict[str, Any] | None:
    """The catalog entry of one flag; `requested` is the `action=` given to add_argument."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    if not longs or requested == "help":
        return None
    kind = _action_kind(action, requested)
    options = list(action.option_strings)
    name = longs[0][2:]
    spec: dict[str, Any] = {
        "options": options,
        "dest": action.dest,
        "action": kind,
        "type": _type_name(action),
        "nargs": action.nargs,
        "choices": _choices(action.choices),
        "default": _json_safe(action.default),
        "required": bool(action.required),
    }
    if kind == "store_const":
        spec["const"] = _json_safe(getattr(action, "const_value", action.const))
    # SGLang's own Deprecated*Action classes, or argparse's deprecated=True (Python 3.13+).
    deprecated = (
        "Deprecated" in type(action).__name__ or getattr(action, "deprecated", False) is True
    )
    replacement = getattr(action, "new_flag", None)
    match = _DEPRECATED_USE.search(action.help or "") if isinstance(action.help, str) else None
    if match:
        deprecated = True
        replacement = replacement or match.group(1)
    elif isinstance(action.help, str) and action.help.lstrip("( ").lower().startswith("deprecated"):
        deprecated = True
    if deprecated:
        spec["deprecated"] = True
        if replacement:
            spec["replacement"] = str(replacement)
    return {"name": name, **spec}


def speculative_algorithms(help_text: str | None = None) -> list[str] | None:
    """Names --speculative-algorithm accepts (checked by SGLang at start-up, not by argparse):
    the enum's members, then the aliases among the builtins the flag's help lists ("Builtins:
    EAGLE, EAGLE3, NEXTN, ...") that SpeculativeAlgorithm.from_string accepts (NEXTN -> EAGLE)."""
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm as algorithm
    except (ImportError, AttributeError, RuntimeError, OSError):
        # Not installed, or an SGLang without this module (older), or its import failed on this
        # host (CUDA, torch): the bundled catalog's names apply then.
        return None
    names = [m for m in algorithm.__members__ if m not in ("NONE", "FROZEN_KV_MTP")]
    listed = _BUILTINS.search(help_text or "")
    aliases = set()
    for word in re.findall(r"[A-Za-z0-9_]+", listed.group(1)) if listed else []:
        name = word.upper()
        if name in algorithm.__members__:
            continue
        try:
            algorithm.from_string(name)
        except (ValueError, KeyError):  # not a name this release accepts
            continue
        aliases.add(name)
    return names + sorted(aliases)


# "Speculative algorithm. Builtins: EAGLE, EAGLE3, NEXTN, STANDALONE. Or any name registered ..."
_BUILTINS = re.compile(r"Builtins?:\s*([A-Za-z0-9_,\s]+)")


class RecordingParser(argparse.ArgumentParser):
    """An ArgumentParser that keeps every action SGLang adds, through public methods only
    (argparse lists its actions only in a private attribute): add_argument returns the action,
    on the parser and on its argument groups alike."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorded: list[argparse.Action] = []
        self.requested: dict[argparse.Action, Any] = {}  # action -> its add_argument(action=)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self._record(action, kwargs)
        return action

    def _record(self, action: argparse.Action, kwargs: dict[str, Any]) -> None:
        self.recorded.append(action)
        self.requested[action] = kwargs.get("action")

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self._recording(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, *args: Any, **kwargs: Any) -> Any:
        return self._recording(super().add_mutually_exclusive_group(*args, **kwargs))

    def _recording(self, group: Any) -> Any:
        add = group.add_argument

        def add_argument(*args: Any, **kwargs: Any) -> argparse.Action:
            action: argparse.Action = add(*args, **kwargs)
            self._record(action, kwargs)
            return action

        group.add_argument = add_argument
        return group


def extract() -> dict[str, Any]:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = RecordingParser(add_help=False)
    ServerArgs.add_cli_args(parser)
    flags: dict[str, Any] = {}
    for action in parser.recorded:
        described = describe_action(action, parser.requested[action])
        if described is not None:
            flags[described.pop("name")] = described
    values: dict[str, Any] = {}
    spec_help = next(
        (a.help for a in parser.recorded if "--speculative-algorithm" in a.option_strings), None
    )
    algos = speculative_algorithms(spec_help)
    if algos:
        values["speculative-algorithm"] = {"values": algos, "case_insensitive": True}
    return {
        "format": FORMAT,
        "sglang_version": getattr(sglang, "__version__", "unknown"),
        "flags": dict(sorted(flags.items())),
        "values": values,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: flag_extract.py OUT.json", file=sys.stderr)
        return 2
    catalog = extract()
    with open(argv[0], "w", encoding="utf-8") as fh:
        json.dump(catalog, fh, indent=1, sort_keys=False)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
