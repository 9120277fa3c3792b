"""What produced a number: a server's `/server_info` (the flags as SGLang resolved them, its
version, the values it decided) with the GPU it ran on, under one short hash (issue 38).

A bench run, a job segment, a --choose decision or a report section that carries the hash can be
traced to exactly what ran. Also: the flags that differ from SGLang's defaults (`report`), the
flags in which two servers differ (`bench compare`), and a running server as a profile
(`profiles import --from URL`, `sgltui adopt`).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from typing import Any

from sgltui.core.flags import Catalog, FlagSpec, load_bundled_catalog, nearest_bundled_catalog
from sgltui.core.launch_secrets import SECRET_FLAGS
from sgltui.core.profile_import import parse_flags
from sgltui.core.profiles import Profile, ProfileError

# /server_info keys that are not server arguments (SGLang puts its scheduler figures beside them).
NOT_ARGS = frozenset(
    {
        "launch_command",
        "status",
        "max_total_num_tokens",
        "max_req_input_len",
        "hicache_object_layout",
        "kv_events",
        "startup_time",
        "internal_states",
        "version",
        "frontend",
    }
)
# What SGLang decides at start-up when the flag is left out: the values that matter for a figure.
DECIDED = (
    "mem_fraction_static",
    "max_running_requests",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "context_length",
    "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode",
    "page_size",
    "attention_backend",
    "sampling_backend",
)
# From internal_states[0] / the top level: the scheduler's own numbers.
STATE_KEYS = ("effective_max_running_requests_per_dp", "world_size")
TOP_KEYS = ("max_total_num_tokens", "max_req_input_len")
_SECRET_DESTS = frozenset(f.replace("-", "_") for f in SECRET_FLAGS)


def server_args(info: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved server arguments of a /server_info (secrets left out)."""
    return {
        k: v
        for k, v in info.items()
        if k not in NOT_ARGS and k not in _SECRET_DESTS and not k.startswith("sim_")
    }


def decided(info: Mapping[str, Any]) -> dict[str, Any]:
    """The values that shape capacity and speed, as the server has them."""
    out = {k: info[k] for k in DECIDED if info.get(k) is not None}
    out.update({k: info[k] for k in TOP_KEYS if info.get(k) is not None})
    states = info.get("internal_states") or []
    if states and isinstance(states[0], dict):
        out.update({k: states[0][k] for k in STATE_KEYS if states[0].get(k) is not None})
    return out


def record(info: Mapping[str, Any], gpu: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{hash, version, model, args, decided, gpu, launch_command}: what a result carries.

    The hash is the server's: its version, resolved args and decided values, so that a bench
    run (which asks the server itself) and the agent (which adds the GPU) name it alike; the
    GPU's name, driver and CUDA version are kept beside it."""
    args = server_args(info)
    body = {"version": info.get("version"), "args": args, "decided": decided(info)}
    text = json.dumps(body, sort_keys=True, default=str)
    keys = ("name", "driver", "cuda", "count")
    return {
        "hash": hashlib.sha256(text.encode()).hexdigest()[:12],
        "model": args.get("served_model_name") or args.get("model_path"),
        "launch_command": _redacted_command(info.get("launch_command")),
        "gpu": {k: gpu[k] for k in keys if gpu.get(k) is not None} if gpu else {},
        **body,
    }


def flag_diff_lines(infos: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """For each server (by name) after the first: the flags in which it differs from the first
    ('--flag: x vs y'), as resolved; the version too when it differs."""
    named = [(n, i) for n, i in infos.items() if i]
    out: list[str] = []
    if len(named) < 2:
        return out
    (first, a), rest = named[0], named[1:]
    for name, b in rest:
        diffs = [d for d in differ(server_args(a), server_args(b)) if d[0] not in _VOLATILE]
        head = f"{first} vs {name}:"
        if a.get("version") != b.get("version"):
            out.append(f"{head} SGLang {a.get('version')} vs {b.get('version')}")
        if not diffs:
            out.append(f"{head} the same resolved flags")
            continue
        out.append(f"{head} {len(diffs)} flag(s) differ")
        for key, x, y in diffs:
            out.append(f"  --{key.replace('_', '-')}: {x!r} vs {y!r}")
    return out


# Args that differ between any two launches and say nothing about what ran.
_VOLATILE = frozenset({"port", "random_seed", "sim_time_scale", "api_key"})


def _redacted_command(command: Any) -> str | None:
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    out, hide = [], False
    for w in words:
        flag = w.split("=", 1)[0].lstrip("-")
        if hide:
            out.append("***")
            hide = False
        elif flag in SECRET_FLAGS and w.startswith("--"):
            if "=" in w:
                out.append(f"{w.split('=', 1)[0]}=***")
            else:
                out.append(w)
                hide = True
        else:
            out.append(w)
    return shlex.join(out)


def catalog_of(version: str | None) -> Catalog:
    """The bundled catalog of the version a server reports (the nearest one, said so)."""
    if not version:
        return load_bundled_catalog()
    return nearest_bundled_catalog(str(version))


def _specs_by_dest(catalog: Catalog) -> dict[str, FlagSpec]:
    return {spec.dest: spec for spec in catalog.flags.values()}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return bool(float(a) == float(b))
    return bool(a == b)


def non_default(args: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
    """Flags (by name) whose resolved value differs from a default the catalog states. Values
    SGLang decides (catalog default None) are not here: `decided` has them."""
    out: dict[str, Any] = {}
    for dest, spec in _specs_by_dest(catalog).items():
        if dest not in args or spec.default is None or dest in _SECRET_DESTS:
            continue
        value = args[dest]
        if value is None or _same(value, spec.default):
            continue
        out[spec.name] = value
    return out


def differ(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, a's value, b's value) for each argument in which two servers differ."""
    keys = sorted(set(a) | set(b))
    return [(k, a.get(k), b.get(k)) for k in keys if not _same(a.get(k), b.get(k))]


def _typed_flags(info: Mapping[str, Any], catalog: Catalog, sim: bool) -> set[str]:
    """The flags the launch command typed (canonical names), or none if it cannot be read."""
    command = info.get("launch_command")
    if not isinstance(command, str):
        return set()
    try:
        words = shlex.split(command)
    except ValueError:
        return set()
    start = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    flags, skip = [], False
    for w in words[start:]:
        if skip:
            skip = False
            continue
        if w == "--config":  # its flags are in the resolved args (a secret may be among them)
            skip = True
            continue
        flags.append(w)
    try:
        typed = parse_flags(flags, catalog, sim=sim)
    except ProfileError:
        return set()
    return {k for k in typed if k.replace("-", "_") not in _SECRET_DESTS}


def _as_flag_value(spec: FlagSpec, value: Any) -> Any:
    if isinstance(value, (dict, list)) and spec.type == "json":
        return json.dumps(value, separators=(",", ":"))
    return value


def profile_from_info(
    info: Mapping[str, Any],
    name: str,
    launcher: str = "sglang",
    python: str | None = None,
    description: str = "",
    cmdline: list[str] | None = None,
) -> tuple[Profile, Catalog]:
    """A profile that launches what this server runs: the flags its command typed and every
    flag that differs from SGLang's default, with the values as the server resolved them; the
    values SGLang decided by itself are left to it (a launch decides them the same way on the
    same GPU). Secrets are left out; the model path is kept."""
    catalog = catalog_of(info.get("version"))
    args = server_args(info)
    if not args.get("model_path"):
        raise ProfileError(
            "the server's /server_info has no model_path",
            fix="import its command line instead: `sgltui profiles import -- CMD`",
        )
    by_dest = _specs_by_dest(catalog)
    keep = _typed_flags(info, catalog, launcher == "sim") | set(non_default(args, catalog))
    keep.add("model-path")
    server: dict[str, Any] = {}
    for dest, spec in by_dest.items():
        if spec.name not in keep or dest not in args or args[dest] is None:
            continue
        value = args[dest]
        if spec.action == "store_true" and value is not True:
            continue
        if spec.action == "store_false":
            if value is not False:
                continue
            value = True  # the flag given (its dest holds False)
        server[spec.name] = _as_flag_value(spec, value)
    if launcher == "sim" and cmdline:  # the simulator's own flags are not in /server_info
        server.update(_sim_flags(cmdline))
    profile = Profile(
        name=name,
        description=description or f"imported from a running server ({info.get('version')})",
        launcher=launcher,
        python=python,
        server=server,
    )
    return profile, catalog


def _sim_flags(cmdline: list[str]) -> dict[str, Any]:
    """The --sim-* flags of a simulator's command line (its speed, its failures to play)."""
    from sgltui.core.profile_import import import_command

    try:
        sim = import_command(cmdline, load_bundled_catalog())
    except ProfileError:
        return {}
    return {k: v for k, v in sim.server.items() if k.startswith("sim-")}


def summary(rec: Mapping[str, Any], catalog: Catalog | None = None) -> dict[str, Any]:
    """The part a report section shows: the hash, version, GPU, the flags given or off their
    default (as resolved), and the values SGLang decided (those no flag set)."""
    catalog = catalog or catalog_of(rec.get("version"))
    args = rec.get("args") or {}
    typed = _typed_flags({"launch_command": rec.get("launch_command")}, catalog, sim=False)
    flags = non_default(args, catalog)
    for dest, spec in _specs_by_dest(catalog).items():
        if spec.name in typed and args.get(dest) is not None:
            flags[spec.name] = args[dest]
    given = set(flags) | typed
    return {
        "hash": rec.get("hash"),
        "version": rec.get("version"),
        "model": rec.get("model"),
        "gpu": rec.get("gpu") or {},
        "flags": flags,
        "decided": {
            k: v for k, v in (rec.get("decided") or {}).items() if k.replace("_", "-") not in given
        },
    }
