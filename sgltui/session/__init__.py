"""The session directory: its format (layout.py), its writer (writer.py, the agent's recorder)
and its readers (reader.py, jsonl.py). May import core and protocol only."""
