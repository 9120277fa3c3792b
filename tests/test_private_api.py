"""sgltui uses argparse's and SGLang's public API only (Textual's is checked by
tests/tui/test_public_api.py): no `from argparse import _X`, no `argparse._X` or `sglang..._X`
attribute (read, annotation or getattr string), and no underscore attribute that argparse's own
classes have (`parser._actions`, `group._group_actions`) on any object."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WATCHED = ("argparse", "sglang")


def argparse_private_names() -> set[str]:
    classes = [
        argparse.ArgumentParser,
        argparse.Action,
        argparse.Namespace,
        argparse.HelpFormatter,
        type(argparse.ArgumentParser().add_subparsers()),
        type(argparse.ArgumentParser().add_argument_group("g")),
    ]
    names: set[str] = set()
    for cls in classes:
        for klass in cls.__mro__:
            if klass.__module__ == "argparse":
                names.update(vars(klass))
    names.update(vars(argparse.ArgumentParser()))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def watched(module: str) -> bool:
    return module.split(".")[0] in WATCHED


def findings(path: Path, tree: ast.AST, argparse_names: set[str]) -> list[str]:
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    aliases: set[str] = set()  # local names bound to an argparse/sglang module or name
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if watched(alias.name):
                    aliases.add(alias.asname or alias.name.split(".")[0])
                    if any(private(part) for part in alias.name.split(".")):
                        bad.append(f"{where}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and watched(node.module):
            if any(private(part) for part in node.module.split(".")):
                bad.append(f"{where}:{node.lineno} from {node.module}")
            for alias in node.names:
                aliases.add(alias.asname or alias.name)
                if private(alias.name):
                    bad.append(f"{where}:{node.lineno} from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                bad.append(f"{where}:{node.lineno} {base.id}...{node.attr}")
            elif node.attr in argparse_names:
                bad.append(f"{where}:{node.lineno} .{node.attr} (argparse's)")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and private(node.args[1].value)
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in aliases
        ):
            bad.append(f"{where}:{node.lineno} {node.func.id}({node.args[0].id}, ...)")
    return bad


def test_no_private_argparse_or_sglang_use():
    names = argparse_private_names()
    bad: list[str] = []
    for folder in ("sgltui", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            bad += findings(path, ast.parse(path.read_text(encoding="utf-8")), names)
    assert not bad, bad


def test_the_check_can_fail(tmp_path):
    src = (
        "import argparse\n"
        "from sglang.srt.speculative import spec_registry\n"
        "def f(sub: argparse._SubParsersAction, p):\n"
        "    getattr(spec_registry, '_RESERVED_ALIASES', ())\n"
        "    return p._actions\n"
    )
    bad = findings(tmp_path / "x.py", ast.parse(src), argparse_private_names())
    assert len(bad) == 3, bad
