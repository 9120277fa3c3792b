"""`sgltui replay`: the TUI on a recorded session, read-only, with a time cursor.

source.py  ReplaySource: the TuiSource protocol over session/replay.py, plus the cursor (seek, step,
           play at a speed) that turns movements into the pushes the agent sent at the time.
bar.py     TimeCursorBar: the widget that shows and moves the cursor.
app.py     ReplayApp / make_replay_app: the main app with the bar and its keys added.
run.py     run_replay: what `sgltui replay SESSION` calls.
"""

from sgltui.tui.replay.source import ReplaySource

__all__ = ["ReplaySource"]
