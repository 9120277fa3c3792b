"""Theme colours for Rich text (the log panes render Rich Text, which cannot use $variables)."""

from __future__ import annotations

from textual.app import App


def level_style(app: App, level: str) -> str:
    """A Rich style for a log level, taken from the current theme so every theme works."""
    variables = app.theme_variables
    if level == "error":
        return f"bold {variables.get('error', 'red')}"
    if level == "warning":
        return variables.get("warning", "yellow")
    return ""


def search_style(app: App) -> str:
    variables = app.theme_variables
    return f"reverse {variables.get('accent', 'yellow')}"
