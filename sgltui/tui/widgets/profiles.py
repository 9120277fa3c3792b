"""Profiles and server state: the profile list (keys, what runs) and the current slot's details
(the only slot, or the one selected in the slots view)."""

from __future__ import annotations

import re

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from sgltui import protocol
from sgltui.tui import views

_SHIFTED = "!@#$%^&*("


def ordered(profiles: list[protocol.ProfileRow]) -> list[protocol.ProfileRow]:
    """Profiles with a key first, in key order (digits as numbers), then the rest by name:
    the list reads 1, 2, 3... as the keys do, whatever order the files were found in."""

    def rank(p: protocol.ProfileRow) -> tuple:
        key = str(p.key or "")
        if not key:
            return (2, 0, "", p.name)
        if key.isdigit():
            return (0, int(key), "", "")
        if key in _SHIFTED:  # ! @ # $ % (shift+1..5) in the order of their digits
            return (1, _SHIFTED.index(key), "", "")
        return (1, 99, key, p.name)

    return sorted(profiles, key=rank)


def _shape(text: str) -> str:
    return re.sub(r"\S", "x", text)


class ProfileList(OptionList):
    """The profile rows, one line each (cut with an ellipsis at the pane's width); the mouse
    over a row shows the whole of it (description, launcher, problems) as a tooltip."""

    tooltips: dict[str, str] = {}

    def on_mouse_move(self, event: events.MouseMove) -> None:
        index = event.style.meta.get("option")
        option = (
            self.options[index] if isinstance(index, int) and index < len(self.options) else None
        )
        text = self.tooltips.get(option.id or "") if option is not None else None
        self.tooltip = Content(text) if text else None


class ProfilesPane(Vertical, can_focus=False):
    # More profiles than rows (9, or 5 on a short screen): a one-column scrollbar, as k9s and
    # lazygit draw it; Textual's default two columns show as a "▄▄" block beside the rows.
    DEFAULT_CSS = """
    ProfilesPane OptionList {
        height: auto; max-height: 9; border: none; padding: 0; background: transparent;
        text-wrap: nowrap; text-overflow: ellipsis;
        overflow-x: hidden; scrollbar-size-vertical: 1;
    }
    ProfilesPane OptionList:focus { border: none; background-tint: transparent; }
    ProfilesPane #profile-detail { height: auto; max-height: 3; padding: 0 1; display: none; }
    ProfilesPane #slot-details { height: auto; padding: 0 1; }
    """

    _details = ""
    _detail = ""
    _current: str | None = None
    _rows: dict[str, protocol.ProfileRow] = {}

    def compose(self) -> ComposeResult:
        yield ProfileList(id="profile-list")
        yield Static("", id="profile-detail")
        yield Static("", id="slot-details")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        """The highlighted profile's problem (first error, host pool), shown only when it has one."""
        text = views.profile_detail(self._rows.get(self.highlighted_profile() or ""))
        if text == self._detail:
            return
        self._detail = text
        detail = self.query_one("#profile-detail", Static)
        detail.update(text)
        detail.display = bool(text)

    def show(
        self,
        profiles: list[protocol.ProfileRow],
        slots: list[protocol.SlotStatus],
        slot: protocol.SlotStatus | None,
    ) -> None:
        """The rows, each marked with the state of the slots that run it, and `slot`'s details
        (the slot the keys act on)."""
        options = self.query_one("#profile-list", ProfileList)
        highlighted = self.highlighted_profile()
        current = slot.profile if slot else None
        if current != self._current:
            # The profile now in the slot changed (start, swap, another client): point at it.
            self._current = current
            highlighted = current
        rows = ordered(profiles)
        self._rows = {p.name: p for p in rows}
        options.tooltips = {p.name: views.profile_tooltip(p) for p in rows}
        prompts = [(p.name, views.profile_option(p, slots)) for p in rows]
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
        self._show_detail()
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
