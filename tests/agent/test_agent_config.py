"""agent.toml and the SGLTUI_* overrides (sgltui/agent/config.py): one reader, one line per bad
value, every key documented in docs/agent-config.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sgltui.agent import config
from sgltui.client import AgentError, spawn_agent

DOC = Path(__file__).resolve().parents[2] / "docs" / "agent-config.md"


def test_toml_then_environment():
    path = Path(config.default_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('slots = ["a", "b"]\n[slot]\nstop_grace_s = 60\n[front]\nport = "off"\n')
    cfg = config.load(env={"SGLTUI_STOP_GRACE_S": "7", "SGLTUI_JOB_VIA_FRONT": "1"})
    assert cfg.slots == ["a", "b"] and cfg.front.port is None
    assert cfg.slot.stop_grace_s == 7.0 and cfg.jobs.via_front is True
    assert config.load(env={}).slot.stop_grace_s == 60.0
    assert config.from_env({}).slot.stop_grace_s == 20.0  # the default, no file


@pytest.mark.parametrize(
    ("toml", "env", "says"),
    [
        ("[front]\nhold_s = 'x'\n", {}, "[front] hold_s: expected a number; fix or remove"),
        ("bogus = 1\n", {}, "bogus: unknown setting"),
        ("[slot]\nnope = 1\n", {}, "[slot] nope: unknown setting; [slot] takes: hang_factor"),
        ("slots = [1]\n", {}, "slots: expected a list of distinct slot names"),
        ("x = [\n", {}, "fix the TOML or remove the file"),
        ("", {"SGLTUI_FRONT_PORT": "99999"}, "SGLTUI_FRONT_PORT='99999': expected a port"),
        ("", {"SGLTUI_GPU_SOURCE": "cuda"}, "expected one of auto, nvml, sim, none; unset"),
        ("", {"SGLTUI_HANG_MIN_S": "-1"}, "SGLTUI_HANG_MIN_S='-1': expected a number from 0"),
        # issue 35 F6: nan passed every check (each stop became an immediate SIGKILL), and
        # inf and out-of-range values passed too
        ("[slot]\nstop_grace_s = nan\n", {}, "[slot] stop_grace_s: expected a number from 0"),
        ("[jobs]\ndrain_s = inf\n", {}, "[jobs] drain_s: expected a number from 0 to 86400"),
        ("[front]\nhold_max = 1e23\n", {}, "[front] hold_max: expected a number from 0"),
        ("", {"SGLTUI_STOP_GRACE_S": "nan"}, "SGLTUI_STOP_GRACE_S='nan': expected a number"),
        # issue 35 F3: 500 nested arrays, one line naming the file
        ("x = " + "[" * 500 + "]" * 500 + "\n", {}, "agent.toml: nested too deeply"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key_and_the_fix(toml, env, says):
    path = Path(config.default_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(toml)
    with pytest.raises(config.ConfigError) as exc:
        config.load(env=env)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_every_setting_is_documented_with_its_default_and_variable():
    text = DOC.read_text()
    defaults = config.AgentConfig()
    for (table, key), env_name in config.ENV_NAMES.items():
        name = f"[{table}] {key}" if table else key
        row = next((ln for ln in text.splitlines() if ln.startswith(f"| `{name}` |")), None)
        assert row is not None, f"{name} is not in {DOC.name}"
        assert f"`{env_name}`" in row, row
        value = getattr(getattr(defaults, table) if table else defaults, key)
        shown = re.search(r"\| `([^`]*)` \|", row[len(f"| `{name}` ") :])
        assert shown is not None and shown.group(1).replace('"', "") in (
            str(value),
            str(value).lower(),
            '["0"]'.replace('"', ""),
        ), (name, value, row)


def test_a_bad_agent_toml_stops_the_start_with_its_line(isolated_env):
    path = Path(config.default_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[front]\nhold_max = 'lots'\n")
    with pytest.raises(AgentError, match=r"did not start: .*\[front\] hold_max: expected a number"):
        spawn_agent(Path(isolated_env))
