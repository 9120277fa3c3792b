"""The screenshot key: the screen as an SVG that loads nothing from the web, written into the
session's screenshots folder (private, like the session) or a folder the user chose."""

from __future__ import annotations

import re
from pathlib import Path

from sgltui.core.files import private_dir, write_atomic

_FONT_URL = re.compile(r",\s*url\([^)]*\)\s*format\([^)]*\)")


def offline_svg(svg: str) -> str:
    """An exported screenshot that loads no font from the web: the @font-face rules keep
    only their local() sources, and the monospace fallbacks follow Fira Code."""
    svg = _FONT_URL.sub("", svg)
    return svg.replace(
        "font-family: Fira Code, monospace;",
        'font-family: "Fira Code", "DejaVu Sans Mono", Menlo, Consolas, monospace;',
    )


def save(folder: Path, name: str, svg: str, in_session: bool) -> str | None:
    """Write the screenshot; the one-line reason when it could not be (None: saved)."""
    try:
        # The session's folders are private; a folder the user chose keeps its own mode.
        if in_session:
            private_dir(folder)
        else:
            folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / name, svg)
    except OSError as exc:
        return f"screenshot not saved: {exc.strerror} ({folder})"
    return None
