"""config.toml (keymap, theme, logs) and themes/*.toml: strict, one-line errors."""

import pytest

from sgltui.core.locations import shipped_dir
from sgltui.tui.bindings import BINDING_IDS, key_for
from sgltui.tui.config import ConfigError, load_config
from sgltui.tui.themes import ThemeError, load_theme_file, load_themes, unknown_theme_message


def write(tmp_path, text, name="config.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_missing_config_is_defaults(tmp_path):
    cfg = load_config(tmp_path / "none.toml")
    assert cfg.keymap == {} and cfg.theme is None and cfg.log_max_lines == 5000


def test_keymap_and_settings(tmp_path):
    p = write(
        tmp_path,
        'theme = "sgltui-paper"\n[keymap]\n"server.stop" = "ctrl+x"\n[logs]\nmax_lines = 200\n'
        "[confirm]\nstop = false\n",
    )
    cfg = load_config(p)
    assert cfg.theme == "sgltui-paper" and cfg.keymap == {"server.stop": "ctrl+x"}
    assert cfg.log_max_lines == 200 and cfg.confirm_stop is False
    assert key_for("server.stop", cfg.keymap) == "ctrl+x" and key_for("server.start") == "s"


@pytest.mark.parametrize(
    "text, expect",
    [
        ('[keymap]\n"server.stp" = "x"\n', "did you mean keymap.server.stop?"),
        ('them = "x"\n', "did you mean theme?"),
        ("[logs]\nmax_lines = 5\n", "logs.max_lines: must be a whole number from 100"),
        ('[keymap]\n"server.stop" = ""\n', "keymap.server.stop: must be a key name"),
        ("theme = [1\n", "not valid TOML"),
    ],
)
def test_bad_config_is_one_line_with_a_fix(tmp_path, text, expect):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    msg = str(info.value)
    assert expect in msg and "\n" not in msg and str(p) in msg


def test_config_file_env_var(tmp_path, monkeypatch):
    p = write(tmp_path, 'theme = "nord"\n', "alt.toml")
    monkeypatch.setenv("SGLTUI_CONFIG_FILE", str(p))
    assert load_config().theme == "nord"


def test_binding_ids_unique():
    from sgltui.tui.bindings import ALL_KEYS

    assert len(BINDING_IDS) == len(ALL_KEYS)


def test_shipped_themes_load_and_include_a_light_one():
    themes, errors = load_themes([shipped_dir("themes")])
    assert errors == []
    assert {"sgltui-night", "sgltui-paper", "sgltui-contrast"} <= set(themes)
    assert themes["sgltui-paper"].dark is False and themes["sgltui-night"].dark is True


def test_bad_theme_files_are_reported_not_fatal(tmp_path):
    write(tmp_path, 'name = "ok"\n[colors]\nprimary = "#112233"\n', "ok.toml")
    write(tmp_path, 'name = "bad"\n[colors]\nprimary = "blurple-ish"\n', "bad.toml")
    write(
        tmp_path, 'name = "typo"\n[colors]\nprimary = "#000000"\nacent = "#ffffff"\n', "typo.toml"
    )
    themes, errors = load_themes([tmp_path])
    assert list(themes) == ["ok"]
    assert any("not a colour" in e for e in errors) and any(
        "did you mean 'accent'" in e for e in errors
    )
    with pytest.raises(ThemeError):
        load_theme_file(tmp_path / "bad.toml")


def test_unknown_theme_message_suggests():
    assert "did you mean 'sgltui-night'" in unknown_theme_message(
        "sgltui-nite", ["sgltui-night", "nord"]
    )
