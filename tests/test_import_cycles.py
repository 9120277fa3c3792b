"""No import cycle among sgltui's modules, TYPE_CHECKING imports included (`ast` reads every
import, wherever it stands). A part of the agent is given the agent's context (agent/context.py)
and the parts it uses, never the Supervisor class."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "sgltui"


def modules(pkg: Path = PKG) -> dict[str, Path]:
    out = {}
    for f in pkg.rglob("*.py"):
        parts = list(f.relative_to(pkg.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    mods = modules(pkg)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        base = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = node.module or ""
                if node.level:
                    src = ".".join(base[: len(base) - node.level + 1] + ([src] if src else []))
                names = [f"{src}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                t = resolve(name) if name.startswith("sgltui") else None
                # a package's own __init__ seen from inside it is not an edge back
                if t and t != m and not (mods[t].name == "__init__.py" and m.startswith(t + ".")):
                    edges[m].add(t)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected groups of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, [sorted(c) for c in found]


def test_a_type_checking_import_back_is_a_cycle(tmp_path):
    """The agent's parts held the whole Supervisor under TYPE_CHECKING: that import counts."""
    pkg = tmp_path / "sgltui"
    (pkg / "agent").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "agent" / "__init__.py").write_text("")
    (pkg / "agent" / "supervisor.py").write_text("from sgltui.agent.operations import Operations\n")
    (pkg / "agent" / "operations.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from sgltui.agent.supervisor import Supervisor\n"
    )
    assert cycles(import_graph(pkg)) == [{"sgltui.agent.supervisor", "sgltui.agent.operations"}]


def test_the_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
