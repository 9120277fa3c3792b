"""The light line finder that gives tomllib's data its line numbers."""

from sgltui.core.profiles import key_lines


def test_lines_follow_tables_comments_dotted_and_quoted_keys():
    text = '''# comment = not a key
name = "x"
description = """multi
fake = 1
line"""
[server]
model-path = "m"   # trailing
  "quoted-key" = 1
env.DOTTED = "a"

[ env ]
CUDA_VISIBLE_DEVICES = "0"
'''
    lines = key_lines(text)
    assert lines[("name",)] == 2
    assert lines[("description",)] == 3
    assert ("fake",) not in lines, "keys inside multi-line strings are not keys"
    assert lines[("server",)] == 6
    assert lines[("server", "model-path")] == 7
    assert lines[("server", "quoted-key")] == 8
    assert lines[("server", "env", "DOTTED")] == 9
    assert lines[("env", "CUDA_VISIBLE_DEVICES")] == 12
