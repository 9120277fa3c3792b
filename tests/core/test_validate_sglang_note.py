"""`profiles validate` says when the profile's interpreter has no SGLang (issue 12): its flags
were checked against a bundled catalog, but `start` will be refused by preflight."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_validate_notes_sglang_not_importable(tmp_path):
    (tmp_path / "real.toml").write_text(
        f'name = "nosg"\nlauncher = "sglang"\npython = "{sys.executable}"\n'
        '[server]\nmodel-path = "meta-llama/Llama-3.1-8B-Instruct"\n'
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sgltui",
            "--profiles",
            str(tmp_path),
            "profiles",
            "validate",
            "nosg",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        import sglang  # noqa: F401
    except ImportError:
        pass
    else:  # a dev box with SGLang in this interpreter: nothing to note
        assert "note:" not in r.stdout
        return
    assert r.returncode == 0, r.stdout + r.stderr
    note = [ln for ln in r.stdout.splitlines() if ln.startswith("note:")]
    assert len(note) == 1 and "not importable" in note[0] and "nosg" in note[0], r.stdout
    assert "pip install 'sgltui[sglang]'" in note[0]
