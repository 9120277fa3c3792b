"""Loading profiles: TOML errors with lines, extends (and cycles), search path, argv rendering."""

from __future__ import annotations

import sys

import pytest

from sgltui.core.profiles import ProfileError, get_profile, load_profiles, read_raw, scan_profiles
from tests.core.helpers import line_of, write


def test_extends_merges_server_and_env_child_wins(tmp_path):
    write(
        tmp_path,
        "parent.toml",
        """
        name = "parent"
        key = "p"
        description = "the parent"
        python = "/opt/sglang/bin/python"
        [server]
        model-path = "org/m"
        port = 30001
        max-running-requests = 8
        [env]
        A = "1"
        B = "2"
    """,
    )
    child_path = write(
        tmp_path,
        "child.toml",
        """
        name = "child"
        extends = "parent"
        [server]
        max-running-requests = 4
        enable-metrics = true
        [env]
        B = "3"
    """,
    )
    child = get_profile("child", [tmp_path])
    assert child.server == {
        "model-path": "org/m",
        "port": 30001,
        "max-running-requests": 4,
        "enable-metrics": True,
    }
    assert list(child.server) == ["model-path", "port", "max-running-requests", "enable-metrics"], (
        "parent order kept"
    )
    assert child.env == {"A": "1", "B": "3"}
    assert child.python == "/opt/sglang/bin/python", "the interpreter is inherited"
    assert child.key is None and child.description == "", "key and description belong to one file"
    assert child.parents == ("parent",)
    assert child.port == 30001 and child.host == "127.0.0.1"
    # Each value remembers the file and line where it was written.
    assert child.where("server.max-running-requests") == (
        child_path,
        line_of(child_path, "max-running-requests"),
    )
    parent_path = tmp_path / "parent.toml"
    assert child.where("server.model-path") == (parent_path, line_of(parent_path, "model-path"))


def test_child_alias_replaces_inherited_spelling(tmp_path):
    write(tmp_path, "a.toml", '[server]\nmodel-path = "one"\n')
    write(tmp_path, "b.toml", 'extends = "a"\n[server]\nmodel = "two"\n')
    b = get_profile("b", [tmp_path])
    assert b.server == {"model": "two"}
    assert b.flag_argv() == ["--model", "two"]


@pytest.mark.parametrize(
    "files, start, cycle",
    [
        ({"a": "b", "b": "a"}, "a", "a -> b -> a"),
        ({"s": "s"}, "s", "s -> s"),
        ({"x": "y", "y": "z", "z": "y"}, "x", "y -> z -> y"),
    ],
)
def test_extends_cycles_are_errors_with_the_line(tmp_path, files, start, cycle):
    for name, parent in files.items():
        write(
            tmp_path,
            f"{name}.toml",
            f'name = "{name}"\nextends = "{parent}"\n[server]\nmodel-path = "m"\n',
        )
    with pytest.raises(ProfileError) as err:
        get_profile(start, [tmp_path])
    message = str(err.value)
    assert f"inheritance cycle {cycle}" in message
    assert ".toml:2: extends:" in message and "remove `extends`" in message
    assert "\n" not in message


def test_unknown_parent_suggests_names(tmp_path):
    write(tmp_path, "kid.toml", 'extends = "bsae"\n[server]\nmodel-path = "m"\n')
    with pytest.raises(
        ProfileError,
        match=r"kid.toml:1: extends: parent profile 'bsae' not found; did you mean base",
    ):
        get_profile("kid", [tmp_path])


def test_malformed_toml_reports_the_toml_error_and_line(tmp_path):
    path = write(tmp_path, "broken.toml", 'name = "broken"\n[server]\nport = = 3\n')
    with pytest.raises(ProfileError) as err:
        read_raw(path)
    assert str(err.value).startswith(f"{path}:3: invalid TOML: ")
    # A broken file does not hide the others, and asking for it by name gives its error.
    found = scan_profiles([tmp_path])
    assert str(path) in found.errors and "base" in load_profiles([tmp_path])
    with pytest.raises(ProfileError, match="invalid TOML"):
        get_profile("broken", [tmp_path])


@pytest.mark.parametrize(
    "text, message",
    [
        (
            'model-path = "m"\n',
            r":1: model-path: unknown top-level key; SGLang flags go under \[server\]",
        ),
        ('launcher = "docker"\n', r":1: launcher: unknown launcher 'docker'; use \"sglang\""),
        ("key = 3\n", r":1: key: must be a string, not an integer; quote it: key = \"3\""),
        (
            "[env]\nCUDA_VISIBLE_DEVICES = 0\n",
            r":2: env.CUDA_VISIBLE_DEVICES: environment values must be strings",
        ),
        ("server = 3\n", r":1: server: must be a table"),
        ('descripton = "x"\n', r"did you mean `description`"),
    ],
)
def test_shape_errors_name_line_key_and_fix(tmp_path, text, message):
    path = write(tmp_path, "p.toml", text)
    with pytest.raises(ProfileError, match=message):
        read_raw(path)


def test_argv_rendering_true_false_lists_and_negations(tmp_path):
    write(
        tmp_path,
        "r.toml",
        """
        name = "r"
        [server]
        model-path = "org/m"
        enable-metrics = true
        disable-radix-cache = false
        dllm-fdfo = false
        mem-fraction-static = 0.85
        uvicorn-access-log-exclude-prefixes = ["/metrics", "/health"]
        cuda-graph-bs-decode = [1, 2, 4]
        json-model-override-args = '{"a": 1}'
    """,
    )
    p = get_profile("r", [tmp_path])
    assert p.flag_argv() == [
        "--model-path",
        "org/m",
        "--enable-metrics",
        "--no-dllm-fdfo",  # false on SGLang's --X/--no-X flags is explicit, not omitted
        "--mem-fraction-static",
        "0.85",
        "--uvicorn-access-log-exclude-prefixes",
        "/metrics",
        "/health",
        "--cuda-graph-bs-decode",
        "1",
        "2",
        "4",
        "--json-model-override-args",
        '{"a": 1}',
    ]
    assert p.argv()[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert p.argv()[3:] == p.flag_argv()


def test_launchers_and_python(tmp_path):
    write(
        tmp_path,
        "s.toml",
        'launcher = "sim"\npython = "/nope/python"\n[server]\nmodel-path = "m"\nsim-time-scale = 0\n',
    )
    write(tmp_path, "g.toml", 'python = "/opt/py/bin/python"\n[server]\nmodel-path = "m"\n')
    sim = get_profile("s", [tmp_path])
    assert sim.argv() == [
        sys.executable,
        "-m",
        "sgltui.sim",
        "--model-path",
        "m",
        "--sim-time-scale",
        "0",
    ]
    assert get_profile("g", [tmp_path]).argv()[:3] == [
        "/opt/py/bin/python",
        "-m",
        "sglang.launch_server",
    ]


def test_command_hash_follows_the_flags(tmp_path):
    write(tmp_path, "a.toml", '[server]\nmodel-path = "m"\nport = 1\n')
    write(tmp_path, "b.toml", '[server]\nmodel-path = "m"\nport = 2\n')
    write(tmp_path, "c.toml", '[server]\nmodel-path = "m"\nport = 1\n[env]\nX = "y"\n')
    a, b, c = (get_profile(n, [tmp_path]) for n in "abc")
    assert len(a.command_hash()) == 12
    assert a.command_hash() != b.command_hash()
    assert a.command_hash() == c.command_hash()


def test_api_key_and_defaults(tmp_path):
    write(tmp_path, "k.toml", '[server]\nmodel-path = "m"\napi-key = "sekrit"\nhost = "0.0.0.0"\n')
    k = get_profile("k", [tmp_path])
    assert (k.api_key, k.host, k.port) == ("sekrit", "0.0.0.0", 30000)


def test_search_path_later_directories_override(tmp_path, monkeypatch):
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    write(
        config / "sgltui" / "profiles",
        "base.toml",
        'name = "base"\ndescription = "mine"\n[server]\nmodel-path = "m"\n',
    )
    profiles = load_profiles()
    assert profiles["base"].description == "mine"
    assert profiles["mtp"].server["model-path"] == "m", (
        "shipped children now extend the user's base"
    )
    extra = tmp_path / "extra"
    write(extra, "base.toml", 'name = "base"\ndescription = "extra"\n[server]\nmodel-path = "e"\n')
    assert load_profiles([extra])["base"].description == "extra"


def test_get_profile_by_path_and_unknown_name(tmp_path):
    path = write(tmp_path / "elsewhere", "mine.toml", 'extends = "mtp"\n[server]\nport = 31000\n')
    p = get_profile(str(path))
    assert p.name == "mine" and p.port == 31000 and p.server["speculative-algorithm"] == "NEXTN"
    with pytest.raises(ProfileError, match=r"no profile named 'mpt'; did you mean mtp"):
        get_profile("mpt")
    with pytest.raises(ProfileError, match=r"no such profile file"):
        get_profile(str(tmp_path / "missing.toml"))
