"""The secrets file sgltui writes is read by the real SGLang's own `prepare_server_args`
(`--config FILE.yaml`, server_args_config_parser.py): the API keys arrive, the command line still
wins, and a key of odd-but-legal characters survives the YAML round trip.

Needs an interpreter with SGLang, found as in test_real_sglang.py; skipped, saying so, without one.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from sgltui.core import launch_secrets
from sgltui.core.profiles import get_profile
from tests.core.helpers import write
from tests.core.test_real_sglang import PYTHON

KEY = "sk-A.b_c~d!#$%&*+/=?^`{|}'\"\\-9"

READ = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from sglang.srt.server_args import prepare_server_args
try:
    args = prepare_server_args(json.loads(sys.argv[1]))
except BaseException as exc:  # what SGLang raised, for the assertion message
    print("RESULT " + json.dumps({"error": repr(exc)}))
else:
    print("RESULT " + json.dumps({"api_key": args.api_key, "admin_api_key": args.admin_api_key,
                                   "port": args.port, "model_path": args.model_path}))
"""


@pytest.mark.skipif(
    PYTHON is None,
    reason="SGLang is not importable here (set SGLTUI_SGLANG_PYTHON or build "
    "/tmp/sglang-cpu-env with tools/sglang-cpu-env.sh)",
)
@pytest.mark.timeout(300)
def test_real_sglang_reads_the_keys_from_the_config_file(tmp_path):
    body = (
        'name = "k"\n[server]\nmodel-path = "org/m"\nport = 31234\n'
        f'api-key = {json.dumps(KEY)}\nadmin-api-key = "adm-1"\n'
    )
    profile = get_profile(str(write(tmp_path, "k.toml", body)))
    argv, config = launch_secrets.launch_command(profile, tmp_path / "secrets")
    assert KEY not in " ".join(argv)
    flags = argv[argv.index("-m") + 2 :]
    proc = subprocess.run(
        [PYTHON, "-c", READ, json.dumps(flags)], capture_output=True, text=True, timeout=280
    )
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, proc.stderr[-2000:]
    got = json.loads(line[len("RESULT ") :])
    assert got == {
        "api_key": KEY,
        "admin_api_key": "adm-1",
        "port": 31234,
        "model_path": "org/m",
    }, got
