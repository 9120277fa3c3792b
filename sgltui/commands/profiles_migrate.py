"""`sgltui profiles migrate NAME|PATH [--to VERSION] [--write]`: the diff, its check, the save."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from sgltui.commands import CliError
from sgltui.core.files import write_atomic
from sgltui.core.flags import (
    Catalog,
    bundled_versions,
    load_bundled_catalog,
    nearest_bundled_catalog,
)
from sgltui.core.migrate import Migration, apply, plan_changes
from sgltui.core.profiles import (
    Profile,
    ProfileError,
    RawProfile,
    display_path,
    key_lines,
    scan_profiles,
)
from sgltui.core.validate import catalog_for, check_profile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def target_catalog(profile: Profile, version: str | None) -> Catalog:
    if version is None:
        return catalog_for(profile)
    if version in bundled_versions():
        return load_bundled_catalog(version)
    if not version[:1].isdigit():
        raise CliError(
            f"--to {version}: not an SGLang version; give one such as {bundled_versions()[-1]}",
            code=2,
        )
    return nearest_bundled_catalog(version)


def backup_path(path: Path) -> Path:
    """FILE.bak, or FILE.bak.N when an earlier backup is already there (none is overwritten)."""
    candidate = path.with_name(path.name + ".bak")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak.{n}")
        n += 1
    return candidate


def run_migrate(args: argparse.Namespace, profile: Profile, extra_dirs: list[Path]) -> int:
    path = profile.source
    if path is None:
        raise CliError(f"profile {profile.name} has no file to migrate")
    original = path.read_text(encoding="utf-8")
    raw = RawProfile(path, tomllib.loads(original), key_lines(original))
    target = target_catalog(profile, args.to)
    plan = plan_changes(raw.data.get("server", {}), target, profile.server)
    migration = apply(raw, original, plan)
    print(f"catalog: {target.describe()}", file=sys.stderr)
    for change in plan.changes:
        print(f"{display_path(path)}: {change.key}: {change.why}", file=sys.stderr)
    for key, what in plan.manual:
        print(f"{display_path(path)}: {key}: {what}", file=sys.stderr)
    inherited = [
        k
        for k in profile.server
        if k not in raw.data.get("server", {})
        and plan_changes({k: profile.server[k]}, target, profile.server).changes
    ]
    for key in inherited:
        src, _line = profile.where(f"server.{key}")
        print(
            f"{display_path(src) if src else '?'}: {key}: inherited; migrate that profile too",
            file=sys.stderr,
        )
    if migration.rerendered:
        print(
            f"{display_path(path)}: [server] is not one key per line, so the file is re-rendered "
            "(comments are not kept)",
            file=sys.stderr,
        )
    if migration.text == original:
        print(f"{display_path(path)}: nothing to migrate for {target.label}", file=sys.stderr)
        return 1 if plan.manual else 0
    sys.stdout.writelines(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            migration.text.splitlines(keepends=True),
            fromfile=f"{display_path(path)}",
            tofile=f"{display_path(path)} (for {target.label})",
        )
    )
    errors = _check(migration, path, target, extra_dirs)
    if errors:
        print(
            f"{display_path(path)}: the migrated profile does not validate; nothing written",
            file=sys.stderr,
        )
        return 1
    if args.write:
        backup = backup_path(path)
        backup.write_text(original, encoding="utf-8")
        # The user's own file: it keeps the mode it had.
        write_atomic(path, migration.text, mode=path.stat().st_mode & 0o777)
        print(
            f"wrote {display_path(path)} (the old file is {display_path(backup)})", file=sys.stderr
        )
    else:
        print("(not written: pass --write to save it, with a backup)", file=sys.stderr)
    return 1 if plan.manual else 0


def _check(migration: Migration, path: Path, target: Catalog, extra_dirs: list[Path]) -> int:
    """Errors of the migrated text, checked as if it were the file; warnings are printed too."""
    try:
        data = tomllib.loads(migration.text)
    except tomllib.TOMLDecodeError as exc:  # a bug in the rewrite: never save it
        print(f"{display_path(path)}: migrated text is not TOML: {exc}", file=sys.stderr)
        return 1
    raw = RawProfile(path, data, key_lines(migration.text))
    try:
        profile = scan_profiles(extra_dirs).resolve_raw(raw)
    except ProfileError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    issues = check_profile(profile, target)
    for issue in issues:
        print(f"after migration: {issue}", file=sys.stderr)
    errors = sum(i.is_error for i in issues)
    warnings = len(issues) - errors
    print(
        f"after migration: {errors} error{'s' * (errors != 1)}, "
        f"{warnings} warning{'s' * (warnings != 1)} for {target.label}",
        file=sys.stderr,
    )
    return errors
