"""The CLI imports only the named command's module (cli.COMMAND_WORDS): the table must name
every top-level word the modules register, and each word's module must be the one that
registers it, or a command would parse with the wrong parser or not at all."""

from __future__ import annotations

import subprocess
import sys

from sgltui import cli


def test_the_table_names_every_command_with_its_module() -> None:
    assert cli.COMMAND_WORDS == cli.registered_words()


def test_the_command_word_skips_root_options_and_their_values() -> None:
    assert cli.command_word(["--state-dir", "status", "swap", "x"]) == "swap"
    assert cli.command_word(["--host", "gpu1", "status"]) == "status"
    assert cli.command_word(["--version"]) is None
    assert cli.command_word([]) is None


def test_a_command_does_not_load_the_agent_server_or_the_tui() -> None:
    heavy = "('sgltui.agent.slot.slot', 'sgltui.agent.supervisor', 'sgltui.tui', 'sgltui.web', "
    heavy += "'textual', 'aiohttp', 'httpx')"
    code = (
        "import sys; from sgltui import cli; cli.parser_for(['status', '--json']);"
        f"print(sorted(m for m in sys.modules if m.startswith({heavy})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
