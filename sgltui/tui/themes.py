"""Themes from themes/*.toml (shipped, then ~/.config/sgltui/themes), as Textual themes.

File format (all colours as #rrggbb; only `primary` is required):

```toml
name = "sgltui-night"
dark = true
[colors]
primary = "#5fafff"
secondary = "#87afaf"
accent = "#ffaf00"
warning = "#ffaf00"
error = "#ff5f5f"
success = "#5fd75f"
foreground = "#d0d0d0"
background = "#121212"
surface = "#1c1c1c"
panel = "#262626"
[variables]                # optional Textual theme variables, e.g. "footer-key-foreground"
```
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from textual.color import Color, ColorParseError
from textual.theme import Theme

from sgltui.core.locations import config_dir, shipped_dir

DEFAULT_THEME = "sgltui-night"
_COLOR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)


class ThemeError(Exception):
    """One line naming the theme file and what is wrong with it."""


def theme_dirs() -> list[Path]:
    return [shipped_dir("themes"), config_dir() / "themes"]


def load_theme_file(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ThemeError(f"{path}: cannot read theme ({exc}); fix the file or remove it") from None
    except RecursionError:
        raise ThemeError(f"{path}: nested too deeply to read; fix the file or remove it") from None
    unknown = set(data) - {"name", "dark", "colors", "variables"}
    if unknown:
        raise ThemeError(
            f"{path}: unknown key {sorted(unknown)[0]!r}; valid: name, dark, colors, variables"
        )
    colors = data.get("colors") or {}
    if "primary" not in colors:
        raise ThemeError(f'{path}: [colors] needs at least primary = "#rrggbb"')
    for key, value in colors.items():
        if key not in _COLOR_KEYS:
            near = difflib.get_close_matches(key, _COLOR_KEYS, n=1)
            raise ThemeError(
                f"{path}: unknown colour {key!r}" + (f"; did you mean {near[0]!r}?" if near else "")
            )
        try:
            Color.parse(value)
        except (ColorParseError, TypeError):
            raise ThemeError(
                f'{path}: colors.{key}: {value!r} is not a colour; use "#rrggbb"'
            ) from None
    variables = data.get("variables") or {}
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ThemeError(f"{path}: [variables] must map names to strings")
    return Theme(
        name=str(data.get("name") or path.stem),
        dark=bool(data.get("dark", True)),
        variables=dict(variables),
        **{k: colors[k] for k in _COLOR_KEYS if k in colors},
    )


def load_themes(dirs: list[Path] | None = None) -> tuple[dict[str, Theme], list[str]]:
    """(themes by name, one-line errors for files that could not be loaded).

    A broken user theme must not stop the app opening: it is reported and skipped.
    """
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for d in dirs if dirs is not None else theme_dirs():
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ThemeError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    return themes, errors


def unknown_theme_message(name: str, available: list[str]) -> str:
    near = difflib.get_close_matches(name, available, n=1)
    hint = f"did you mean {near[0]!r}?" if near else f"available: {', '.join(sorted(available))}"
    return f"unknown theme {name!r}; {hint}"
