"""The agent's parts reach each other through what the supervisor hands them (agent/context.py's
AgentContext and the parts each uses, typed), never through the supervisor itself: no `self.sup`,
and no module of Protocols standing for the supervisor (agent/hosts.py, gone with the swap path's
last reach into it). No part declares a method of its owner as a `raise NotImplementedError` stub (a mixin
reaching into the class it is mixed into): it is given the collaborator instead."""

from __future__ import annotations

import ast
from pathlib import Path

AGENT = Path(__file__).resolve().parents[1] / "sgltui" / "agent"
# modules still allowed to reach the supervisor: none (the swap path was the last)
SWAP_PATH: set[str] = set()


def _trees() -> dict[str, ast.Module]:
    return {
        str(f.relative_to(AGENT)): ast.parse(f.read_text(encoding="utf-8"))
        for f in sorted(AGENT.rglob("*.py"))
    }


def test_only_the_swap_path_reaches_the_supervisor():
    reaching = sorted(
        name
        for name, tree in _trees().items()
        if name not in SWAP_PATH
        and any(
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
            and n.attr in ("sup", "_sup")
            for n in ast.walk(tree)
        )
    )
    assert not reaching, f"these reach the supervisor (self.sup); hand them the context: {reaching}"


def test_only_the_swap_path_imports_hosts():
    importing = sorted(
        name
        for name, tree in _trees().items()
        if name not in SWAP_PATH
        and any(
            isinstance(n, ast.ImportFrom) and n.module == "sgltui.agent.hosts"
            for n in ast.walk(tree)
        )
    )
    assert not importing, f"agent/hosts.py is gone; hand these the parts they use: {importing}"


def _is_stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # its docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    exc = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def test_no_part_declares_its_owners_method_as_a_stub():
    stubs = sorted(
        f"{name}: {n.name}"
        for name, tree in _trees().items()
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_stub(n)
    )
    assert not stubs, f"give the part the collaborator instead of a stub: {stubs}"
