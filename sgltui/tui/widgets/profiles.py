"""Profiles and server state: the profile list (keys, what runs) and slot 0's details."""

from __future__ import annotations

import re
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from sgltui.tui import views

_SHIFTED = "!@#$%^&*("


def ordered(profiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Profiles with a key first, in key order (digits as numbers), then the rest by name:
    the list reads 1, 2, 3... as the keys do, whatever order the files were found in."""

    def rank(p: dict[str, Any]) -> tuple:
        key = str(p.get("key") or "")
        if not key:
            return (2, 0, "", str(p.get("name", "")))
        if key.isdigit():
            return (0, int(key), "", "")
        if key in _SHIFTED:  # ! @ # $ % (shift+1..5) in the order of their digits
            return (1, _SHIFTED.index(key), "", "")
        return (1, 99, key, str(p.get("name", "")))

    return sorted(profiles, key=rank)


def _shape(text: str) -> str:
    return re.sub(r"\S", "x", text)


class ProfilesPane(Vertical, can_focus=False):
    DEFAULT_CSS = """
    ProfilesPane OptionList { height: auto; max-height: 9; border: none; padding: 0; background: transparent; }
    ProfilesPane OptionList:focus { border: none; background-tint: transparent; }
    ProfilesPane #slot-details { height: auto; padding: 0 1; }
    """

    _details = ""
    _current: str | None = None

    def compose(self) -> ComposeResult:
        yield OptionList(id="profile-list")
        yield Static("", id="slot-details")

    def show(self, profiles: list[dict[str, Any]], slots: list[dict[str, Any]]) -> None:
        options = self.query_one("#profile-list", OptionList)
        highlighted = self.highlighted_profile()
        current = slots[0].get("profile") if slots else None
        if current != self._current:
            # The profile now in slot 0 changed (start, swap, another client): point at it.
            self._current = current
            highlighted = current
        prompts = [(p["name"], views.profile_option(p, slots)) for p in ordered(profiles)]
        # Rebuild only when the rows change: rebuilding resets the highlight and costs a layout.
        if [o.id for o in options.options] != [n for n, _ in prompts] or [
            str(o.prompt) for o in options.options
        ] != [t for _, t in prompts]:
            options.set_options([Option(text, id=name) for name, text in prompts])
        names = [n for n, _ in prompts]
        if highlighted in names and highlighted != self.highlighted_profile():
            options.highlighted = names.index(highlighted)
        elif self.highlighted_profile() is None and names:
            options.highlighted = 0
        slot = slots[0] if slots else None
        text = views.slot_details(slot)
        if text != self._details:  # an unchanged Static.update still costs a layout pass
            # A layout only when the text's shape changes (line lengths, word breaks, so its
            # wrapped height may): the uptime ticks every poll and needs a repaint only.
            relayout = _shape(text) != _shape(self._details) or not self._details
            self._details = text
            self.query_one("#slot-details", Static).update(text, layout=relayout)

    def highlighted_profile(self) -> str | None:
        options = self.query_one("#profile-list", OptionList)
        if options.highlighted is None or not options.options:
            return None
        return options.options[options.highlighted].id
