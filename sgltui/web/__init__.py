"""`sgltui web`: the TUI in a browser tab, through textual-serve, behind a token."""
