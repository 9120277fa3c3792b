"""`sgltui profiles list | show NAME [--command] | validate [PATHS...] | import [-o FILE] -- CMD
| migrate NAME|PATH [--to VERSION] [--write]`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sgltui.commands import CliError, Subparsers
from sgltui.core.flags import (
    PROBE_TIMEOUT_S,
    Catalog,
    load_bundled_catalog,
    load_live_catalog,
)
from sgltui.core.profile_import import import_command, profile_to_toml
from sgltui.core.profiles import (
    Profile,
    ProfileError,
    ProfileSet,
    display_path,
    get_profile,
    read_raw,
    scan_profiles,
    search_dirs,
)
from sgltui.core.safe_text import printable
from sgltui.core.validate import Issue, check_profile, check_profile_set

# A description longer than this is cut in the table (`show` and --json give all of it).
DESCRIPTION_WIDTH = 80


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "profiles",
        help="list, show, validate and import serving profiles",
        description="Serving profiles are TOML files whose [server] table holds SGLang's own flags. "
        "They are read from the profiles shipped with sgltui, ~/.config/sgltui/profiles and --profiles DIR.",
    )
    sub = p.add_subparsers(dest="profiles_command", metavar="ACTION")
    p.set_defaults(handler=_list)

    ls = sub.add_parser("list", help="list the profiles on the search path")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(handler=_list)

    show = sub.add_parser(
        "show",
        help="print a profile with inherited values resolved",
        description="Print NAME (a profile name or a .toml path) with `extends` resolved.",
    )
    show.add_argument("name", metavar="NAME", help="profile name or path to a .toml file")
    show.add_argument(
        "--command",
        action="store_true",
        help="print the command line the agent launches instead (secrets masked)",
    )
    show.set_defaults(handler=_show)

    val = sub.add_parser(
        "validate",
        help="check profiles against the flags of the SGLang that will run them",
        description="Check profiles (all on the search path, or the given names, files or "
        "directories) against the SGLang flag catalog of each profile's interpreter "
        "(read live when SGLang is importable there, else the one bundled with sgltui). "
        "A profile's `python` is run to read its SGLang version (at most 10 s each): "
        "validate a profile you did not write with --bundled.",
    )
    val.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="profile names, .toml files or directories (default: all)",
    )
    val.add_argument("--strict", action="store_true", help="fail on warnings too")
    val.add_argument(
        "--bundled", action="store_true", help="use the bundled catalog, do not ask any interpreter"
    )
    val.set_defaults(handler=_validate)

    imp = sub.add_parser(
        "import",
        help="turn an SGLang launch command line into a profile",
        description="Read an existing SGLang launch command line and write it as a profile.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  sgltui profiles import -o mtp.toml -- python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B \\\n"
        "      --speculative-algorithm NEXTN --max-running-requests 4\n"
        "  sgltui profiles import -- sglang serve Qwen/Qwen3.6-27B --port 30001\n"
        '  sgltui profiles import -o copy.toml -- "$(sgltui profiles show mtp --command)"',
    )
    imp.add_argument(
        "-o", "--output", metavar="FILE", help="write the TOML here (default: print it)"
    )
    imp.add_argument(
        "--name", help="profile name (default: the output file's name, else 'imported')"
    )
    imp.add_argument("--description", default="", help="profile description")
    imp.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    imp.add_argument(
        "--from",
        dest="from_url",
        metavar="URL",
        help="a running server (its resolved args, from /server_info) instead of a command line",
    )
    imp.add_argument("--api-key-file", metavar="FILE", help="with --from: the server's API key")
    imp.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="the launch command line, after --",
    )
    imp.set_defaults(handler=_import)

    mig = sub.add_parser(
        "migrate",
        help="rewrite deprecated and renamed SGLang flags into their successors",
        description="Print a diff of NAME (a profile name or a .toml path) with deprecated and "
        "renamed flags replaced by their successors (same meaning), comments and order kept, "
        "and check the result. --write saves it, keeping the old file as FILE.bak.",
    )
    mig.add_argument("name", metavar="NAME|PATH", help="profile name or path to a .toml file")
    mig.add_argument(
        "--to",
        metavar="VERSION",
        help="SGLang release to migrate to (default: the one the profile's interpreter has)",
    )
    mig.add_argument("--write", action="store_true", help="save the result (with a backup)")
    mig.set_defaults(handler=_migrate)

    exp = sub.add_parser(
        "export",
        help="a profile as manifests for another system: --ome (OME's runtime and service)",
        description="Print NAME as an OME ClusterServingRuntime + InferenceService (YAML), its "
        "provenance hash (the newest bench result of it) in an annotation.",
    )
    exp.add_argument("name", metavar="NAME", help="profile name or path to a .toml file")
    exp.add_argument("--ome", action="store_true", required=True, help="OME (ome.io/v1beta1)")
    exp.add_argument("--namespace", default="default", help="the InferenceService's namespace")
    exp.add_argument("--image", default=None, help="the SGLang image the runtime runs")
    exp.add_argument("-o", "--output", metavar="FILE", help="write here (default: print it)")
    exp.set_defaults(handler=_export)


# --- list / show ---------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    from sgltui.core import locations
    from sgltui.k8s import ome
    from sgltui.k8s.yaml_out import dump_all

    profile = _load_one(args.name, args)
    state = locations.state_dir(getattr(args, "state_dir", None))
    try:
        docs = ome.export(
            profile,
            ome.measured_hash(state, profile.name),
            namespace=args.namespace,
            image=args.image or ome.SGLANG_IMAGE,
        )
    except ome.ExportError as exc:
        raise CliError(str(exc)) from None
    text = dump_all(docs)
    if args.output:
        Path(args.output).expanduser().write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _extra_dirs(args: argparse.Namespace) -> list[Path]:
    """--profiles DIRs, each checked: a typo there would silently hide profiles."""
    dirs = [Path(d).expanduser() for d in (getattr(args, "profiles", None) or ())]
    for d in dirs:
        if not d.is_dir():
            raise CliError(
                f"--profiles {d}: no such directory; give a folder that holds profile .toml files"
            )
    return dirs


def _scan(args: argparse.Namespace) -> ProfileSet:
    return scan_profiles(_extra_dirs(args))


def _list(args: argparse.Namespace) -> int:
    found = _scan(args)
    rows: list[Profile] = []
    broken: list[str] = [str(e) for e in found.errors.values()]
    for name in found.names():
        try:
            rows.append(found.resolve(name))
        except ProfileError as exc:
            broken.append(str(exc))
    if getattr(args, "json", False):
        print(
            json.dumps(
                [
                    {
                        "name": p.name,
                        "key": p.key,
                        "launcher": p.launcher,
                        "extends": p.extends,
                        "description": p.description,
                        "path": str(p.source),
                        "command_hash": p.command_hash(),
                    }
                    for p in rows
                ]
                + [{"error": b} for b in broken],
                indent=1,
            )
        )
        return 0
    if not rows and not broken:
        dirs = ", ".join(str(d) for d in search_dirs(_extra_dirs(args)))
        print(f"no profiles found (searched {dirs})")
        return 0
    # Every cell is text from a file: escaped (no terminal control reaches the screen) and cut.
    width = max((len(p.name) for p in rows), default=4)
    print(f"{'KEY':3}  {'NAME':{width}}  {'LAUNCHER':8}  {'EXTENDS':14}  DESCRIPTION")
    for p in sorted(rows, key=lambda p: (p.launcher != "sglang", p.key or "~", p.name)):
        cells = (
            f"{printable(p.key or '-'):3}",
            f"{printable(p.name):{width}}",
            f"{p.launcher:8}",
            f"{printable(p.extends or '-', 40):14}",
            printable(p.description, DESCRIPTION_WIDTH),
        )
        print("  ".join(cells))
    for line in broken:
        print(f"sgltui: error: {printable(line)}", file=sys.stderr)
    return 0


def _load_one(name: str, args: argparse.Namespace) -> Profile:
    try:
        return get_profile(name, _extra_dirs(args))
    except ProfileError as exc:
        raise CliError(str(exc)) from None


def _show(args: argparse.Namespace) -> int:
    profile = _load_one(args.name, args)
    if args.command:
        # What the agent runs (API keys in its --config file), masked and escaped.
        from sgltui.agent.secret_config import secrets_dir
        from sgltui.core import locations
        from sgltui.core.launch_secrets import shown_command

        line, note = shown_command(profile, secrets_dir(locations.state_dir(args.state_dir)))
        print(line)
        if note:
            print(f"sgltui: note: {note}", file=sys.stderr)
        return 0
    chain = " -> ".join((profile.name,) + profile.parents)
    header = f"# {display_path(profile.source) if profile.source else profile.name}" + (
        f"  (inherits: {chain}; values below are resolved)" if profile.parents else ""
    )
    print(printable(header))
    print(profile_to_toml(profile, flatten=True), end="")
    return 0


# --- validate ------------------------------------------------------------------------------------


def _targets(args: argparse.Namespace) -> tuple[list[Profile], list[str]]:
    """The profiles to check and the load errors met on the way."""
    found = scan_profiles(_extra_dirs(args))
    profiles: list[Profile] = []
    errors: list[str] = []
    if not args.paths:
        errors.extend(str(e) for e in found.errors.values())
        names = found.names()
        for name in names:
            try:
                profiles.append(found.resolve(name))
            except ProfileError as exc:
                errors.append(str(exc))
        return profiles, errors
    for target in args.paths:
        path = Path(target).expanduser()
        files = (
            sorted(path.rglob("*.toml"))
            if path.is_dir()
            else [path]
            if (path.suffix == ".toml" or path.exists())
            else []
        )
        if path.is_dir() and not files:
            errors.append(f"{printable(target)}: no .toml profiles in this directory")
            continue
        try:
            if files:
                for file in files:
                    try:
                        profiles.append(found.resolve_raw(read_raw(file)))
                    except ProfileError as exc:
                        errors.append(str(exc))
            else:
                profiles.append(found.resolve(target))
        except ProfileError as exc:
            errors.append(str(exc))
    return profiles, errors


# How many profiles' interpreters are asked for their SGLang version at once (each is a Python
# start-up, CPU-bound): 754 profiles with their own `python` took 91 s one after the other.
PROBES_AT_ONCE = max(4, os.cpu_count() or 1)


def _interpreter(profile: Profile) -> str:
    """The interpreter a profile runs, as a key: spellings of one path are one probe (not
    realpath: each venv's python is a link to the same binary, with its own packages)."""
    return os.path.abspath(os.path.expanduser(profile.python)) if profile.python else sys.executable


def _catalogs(profiles: list[Profile], bundled: bool) -> dict[str, Catalog]:
    """Each interpreter's catalog, probed a few at once, each run of it bounded (flags.py's
    PROBE_TIMEOUT_S: a slow or hostile `python` costs 10 s, not the whole validate)."""
    if bundled:
        return {}
    wanted = sorted({_interpreter(p) for p in profiles if p.launcher != "sim"})
    timeout = PROBE_TIMEOUT_S
    with ThreadPoolExecutor(max_workers=PROBES_AT_ONCE) as pool:
        found = pool.map(lambda python: load_live_catalog(python, timeout=timeout), wanted)
        return dict(zip(wanted, found))


def _validate(args: argparse.Namespace) -> int:
    profiles, load_errors = _targets(args)
    catalogs = _catalogs(profiles, args.bundled)

    def catalog(profile: Profile) -> Catalog:
        if args.bundled or profile.launcher == "sim":
            return load_bundled_catalog()
        return catalogs[_interpreter(profile)]

    issues: list[Issue] = []
    used: dict[str, list[str]] = {}
    for profile in profiles:
        cat = catalog(profile)
        used.setdefault(cat.describe(), []).append(profile.name)
        issues.extend(check_profile(profile, cat))
    issues.extend(check_profile_set(profiles))
    for description, names in used.items():
        who = ", ".join(names) if len(names) <= 3 else f"{len(names)} profiles"
        print(f"catalog: {description}; used for {who}")
    for line in load_errors:
        print(line)
    for issue in issues:
        print(issue)
    # Flags checked against a bundled catalog are not a launch that works: say what preflight
    # will refuse (issue 12: "0 errors" although SGLang could not be imported there).
    missing: dict[str, list[str]] = {}
    for profile in profiles:
        note = getattr(catalog(profile), "note", "") or ""
        if profile.launcher == "sglang" and not args.bundled and "not importable" in note:
            missing.setdefault(note, []).append(profile.name)
    for note, names in missing.items():
        who = ", ".join(names) if len(names) <= 3 else f"{len(names)} profiles"
        print(
            f"note: {note}: `sgltui start` of {who} will be refused (preflight interpreter); "
            "install SGLang there (`pip install 'sgltui[sglang]'`) or set `python` in the profile"
        )
    # A `python` that did not answer in time: name its profiles (all of them: the slow one may
    # be a file someone else wrote).
    slow: dict[str, list[str]] = {}
    for profile in profiles:
        note = getattr(catalog(profile), "note", "") or ""
        if "did not answer within" in note:
            slow.setdefault(note, []).append(profile.name)
    for note, names in slow.items():
        print(
            f"note: slow interpreter of profile{'s' if len(names) > 1 else ''} "
            f"{', '.join(names)}: {note}; its flags were checked against the bundled catalog "
            "(a profile's `python` is run: check it, or validate with --bundled)"
        )
    errors = len(load_errors) + sum(i.is_error for i in issues)
    errors += _placement_notes(profiles)
    warnings = sum(not i.is_error for i in issues)
    print(
        f"{len(profiles)} profile{'s' if len(profiles) != 1 else ''} checked: "
        f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}"
    )
    if errors or (args.strict and warnings):
        return 1
    return 0


# --- import --------------------------------------------------------------------------------------


def _import(args: argparse.Namespace) -> int:
    if args.from_url:  # a running server: commands/attach.py
        from sgltui.commands.attach import import_from

        return import_from(args)
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CliError(
            "no command line given; write it after --, e.g. "
            "sgltui profiles import -o my.toml -- python -m sglang.launch_server --model-path ORG/MODEL",
            code=2,
        )
    out = Path(args.output).expanduser() if args.output else None
    if out is not None and out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it or choose another -o FILE")
    name = args.name or (out.stem if out else "imported")
    try:
        profile = import_command(
            cmd, load_bundled_catalog(), name=name, description=args.description
        )
    except ProfileError as exc:
        raise CliError(str(exc)) from None
    for note in _drop_masked(profile):
        print(f"sgltui: note: {note}", file=sys.stderr)
    from sgltui.commands.profile_out import write_imported

    return write_imported(profile, out, load_bundled_catalog())


def _drop_masked(profile: Profile) -> list[str]:
    """What `profiles show --command` put in place of secrets, taken out of an imported profile:
    sgltui's own --config file (the API keys' place at launch) and masked [env] values."""
    from sgltui.core.launch_secrets import CONFIG_FLAG, FILE_PREFIX
    from sgltui.core.redact import MASK

    notes = []
    config = profile.server.get(CONFIG_FLAG)
    if isinstance(config, str) and Path(config).name.startswith(FILE_PREFIX):
        del profile.server[CONFIG_FLAG]
        notes.append(
            "left out --config (sgltui's file for the API keys, which `profiles show --command` "
            'does not print): write api-key = "..." in [server] if the server needs one'
        )
    masked = [k for k, v in profile.env.items() if v == MASK]
    for key in masked:
        del profile.env[key]
    if masked:
        notes.append(f"left out {', '.join(masked)} (masked): write their values in [env]")
    return notes


# --- migrate -------------------------------------------------------------------------------------


def _migrate(args: argparse.Namespace) -> int:
    from sgltui.commands.profiles_migrate import run_migrate

    return run_migrate(args, _load_one(args.name, args), _extra_dirs(args))


def _placement_notes(profiles: list[Profile]) -> int:
    """With a host.toml, each slot sets a server's port and GPUs: say which profiles' own
    settings are overridden, and which need more GPUs than every slot has. Returns the errors
    (a host.toml that does not parse is one)."""
    from sgltui.core import placement

    try:
        layout = placement.load()
    except placement.PlacementError as exc:
        print(exc)
        return 1
    if layout is None:
        return 0
    sizes = sorted({len(s.gpus) for s in layout.slots})
    for profile in profiles:
        notes = placement.overrides(profile.server, profile.env)
        if notes:
            print(f"note: {profile.name}: {'; '.join(notes)}")
        need = placement.gpus_needed(profile.server)
        if need not in sizes:
            have = ", ".join(str(n) for n in sizes)
            print(
                f"note: {profile.name}: needs {need} GPU{'s' if need != 1 else ''} per server but "
                f"the slots of {layout.where()} have {have}: preflight will refuse it there "
                f"(set tp-size, or sgltui host init --tp {need})"
            )
    return 0
