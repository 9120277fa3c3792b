"""An imported profile written out and checked: `profiles import -- CMD` (commands/profiles.py)
and `profiles import --from URL` (commands/attach.py) end the same way."""

from __future__ import annotations

import sys
from pathlib import Path

from sgltui.core.flags import Catalog
from sgltui.core.profile_import import profile_to_toml
from sgltui.core.profiles import Profile
from sgltui.core.validate import check_profile


def write_imported(profile: Profile, out: Path | None, catalog: Catalog | None) -> int:
    """`profile` to `out` (or stdout), then its check against `catalog`: the exit code."""
    text = profile_to_toml(profile)
    if out is None:
        print(text, end="")
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        profile.source = out
        print(f"wrote {out} (profile {profile.name}, {len(profile.server)} flags)", file=sys.stderr)
    issues = check_profile(profile, catalog)
    for issue in issues:
        print(f"sgltui: {issue}", file=sys.stderr)
    # Imported as written; SGLang would refuse it, so say so through the exit code too.
    return 1 if any(i.is_error for i in issues) else 0
