"""Every key of the app, with a stable id so users can remap it (config.toml [keymap]).

Kept as data in one place: the app's BINDINGS, the help screen, the config validator and the
command palette all read this table, so a key cannot exist in one and be missing in another.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgltui.tui.panes import PANES


@dataclass(frozen=True)
class Key:
    id: str
    key: str
    action: str
    description: str
    tooltip: str
    show: bool = True


# Each pane's focus key is its row of panes.py's table (in the table's order).
FOCUS_KEYS: tuple[Key, ...] = tuple(
    Key(f"focus.{p.name}", p.key, f"focus_pane('{p.name}')", p.label, p.tooltip, show=False)
    for p in PANES
    if p.key
)

KEYS: tuple[Key, ...] = (
    Key("server.start", "s", "start", "Start", "Start the highlighted profile in the current slot"),
    Key(
        "server.stop",
        "x",
        "stop",
        "Stop",
        "Stop the current slot's server (asks how when requests are running)",
    ),
    Key(
        "server.restart",
        "r",
        "restart",
        "Restart",
        "Restart the current slot's server with its profile re-read",
    ),
    Key(
        "server.keep_warm",
        "k",
        "keep_warm",
        "Keep warm",
        "Keep the highlighted profile warm beside the slot's server: a swap to it takes seconds",
        show=False,
    ),
    Key("bench.start", "b", "bench", "Bench", "Run a benchmark of the current profile"),
    Key(
        "server.attach",
        "A",
        "attach_found",
        "Attach",
        "Attach a server you started yourself (a dimmed 'not managed' row)",
        show=False,
    ),
    Key("bench.stop", "B", "bench_stop", "Stop bench", "Stop the running benchmark", show=False),
    Key(
        "advice.accept",
        "P",
        "accept_advice",
        "Accept proposal",
        "Write the Insight pane's proposed profile, then swap to it or keep it warm",
        show=False,
    ),
    Key(
        "demo.load",
        "D",
        "toggle_demo_load",
        "Demo load",
        "Turn the demo's background load on or off",
        show=False,
    ),
    Key(
        "logs.filter", "slash", "filter_logs", "Filter", "Show only log lines containing some text"
    ),
    Key(
        "logs.search",
        "ctrl+f",
        "search_logs",
        "Search",
        "Highlight and jump to text in the log",
        show=False,
    ),
    Key(
        "logs.next",
        "n",
        "search_next",
        "Older match",
        "Jump to the next search match toward older lines",
        show=False,
    ),
    Key(
        "logs.prev",
        "N",
        "search_prev",
        "Newer match",
        "Jump to the next search match toward newer lines",
        show=False,
    ),
    Key(
        "logs.level",
        "e",
        "cycle_log_level",
        "Warn/err",
        "Cycle the log level shown: all, warnings+errors, errors",
        show=False,
    ),
    Key("logs.wrap", "w", "toggle_wrap", "Wrap", "Wrap long log lines, or crop them", show=False),
    Key(
        "logs.fold",
        "z",
        "toggle_noise",
        "Access/batch lines",
        "Show or hide the per-request access lines and per-batch lines",
        show=False,
    ),
    Key(
        "logs.follow",
        "G",
        "follow_logs",
        "Follow",
        "Jump to the end of the log and follow it",
        show=False,
    ),
    *FOCUS_KEYS,
    Key(
        "app.screenshot",
        "S",
        "screenshot_to_session",
        "Screenshot",
        "Save an SVG screenshot into the session directory",
        show=False,
    ),
    Key("app.help", "h,f1,question_mark", "help", "Help", "Show all keys"),
    Key("app.quit", "q", "quit_app", "Quit", "Quit the TUI; servers keep running"),
)

# Profiles are swapped to by their own `key` (profile TOML). Digits 1-9 are bound here so the
# footer and keymap know them; a profile with another key is caught in App.on_key.
PROFILE_KEYS: tuple[Key, ...] = tuple(
    Key(
        f"profile.key{d}",
        str(d),
        f"profile_key('{d}')",
        f"Profile {d}",
        f"Swap to the profile whose key is {d}",
        show=False,
    )
    for d in range(1, 10)
)

ALL_KEYS: tuple[Key, ...] = KEYS + PROFILE_KEYS
BINDING_IDS: frozenset[str] = frozenset(k.id for k in ALL_KEYS)


def key_for(binding_id: str, keymap: dict[str, str] | None = None) -> str:
    """The key currently bound to `binding_id` (after the user's keymap)."""
    if keymap and binding_id in keymap:
        return keymap[binding_id]
    for k in ALL_KEYS:
        if k.id == binding_id:
            return k.key
    raise KeyError(binding_id)
